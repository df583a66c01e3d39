//! Denormals, flushed where a kernel makes them by design.
//!
//! The Gated DeltaNet scan multiplies by decays `exp(γ_r − γ_s)` of cumulative log-decays, which
//! reach below f32's normal range (2⁻¹²⁶ ≈ 1.2e-38) on strongly decaying heads; on x86 cores
//! every operation with a denormal input or result then takes a microcode assist (a scan of
//! such heads ran 9× slower, docs/performance.md). Such values are at most 2⁻¹²⁶ in
//! magnitude, far below any tolerance a model's answer is held to, so the scan runs with them
//! flushed to zero. AArch64 cores handle denormals at full speed, and there the scan computes
//! them as IEEE 754 defines.

/// Runs `f` on the calling thread with denormal inputs and results treated as zero where
/// the architecture's flags allow it (x86-64: MXCSR's DAZ and FTZ), the thread's floating-point
/// environment restored afterwards.
pub(crate) fn flushing_denormals<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        crate::x86::float_env::flushing_denormals(f)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        f()
    }
}
