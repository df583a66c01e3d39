//! The SSE/AVX floating-point environment (MXCSR): flushing denormals for a stretch of code.
//!
//! Every x86-64 CPU has MXCSR, so this needs no feature check. It is per thread, and each
//! scope restores the value it found, also when the code inside panics, so that no other
//! kernel a worker thread runs later sees the flags.

use std::arch::asm;

/// MXCSR's flush-to-zero bit: results that would be denormal are +-0.
const FTZ: u32 = 1 << 15;
/// MXCSR's denormals-are-zero bit: denormal inputs are read as +-0.
const DAZ: u32 = 1 << 6;

fn read() -> u32 {
    let mut v = 0u32;
    // SAFETY: `stmxcsr` stores the 4-byte register to the given, valid and writable address.
    unsafe { asm!("stmxcsr [{}]", in(reg) &mut v as *mut u32, options(nostack, preserves_flags)) };
    v
}

fn write(v: u32) {
    // SAFETY: `ldmxcsr` loads from a valid address; `v` is a value read from MXCSR with only
    // the FTZ and DAZ bits changed, both defined on every x86-64 CPU with SSE2 (DAZ from the
    // later Pentium 4s on, and every x86-64 CPU has it), so no reserved bit is set.
    unsafe {
        asm!("ldmxcsr [{}]", in(reg) &v as *const u32, options(nostack, readonly, preserves_flags))
    };
}

/// Restores the MXCSR it was made with when dropped.
struct Restore(u32);

impl Drop for Restore {
    fn drop(&mut self) {
        write(self.0);
    }
}

/// Runs `f` with FTZ and DAZ set on the calling thread, then restores the thread's MXCSR.
pub(crate) fn flushing_denormals<R>(f: impl FnOnce() -> R) -> R {
    let saved = read();
    let _restore = Restore(saved);
    write(saved | FTZ | DAZ);
    f()
}

/// Whether the calling thread's MXCSR flushes denormals (tests).
#[cfg(test)]
pub(crate) fn flushing() -> bool {
    read() & (FTZ | DAZ) != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hint::black_box;

    /// Half the smallest normal f32: a denormal unless the thread flushes results.
    fn half_min_normal() -> f32 {
        black_box(f32::MIN_POSITIVE) * black_box(0.5)
    }

    #[test]
    fn the_scope_flushes_and_restores() {
        assert!(!flushing(), "a thread starts without FTZ/DAZ");
        assert!(half_min_normal() > 0.0);
        let inside = flushing_denormals(|| (flushing(), half_min_normal()));
        assert_eq!(inside, (true, 0.0), "FTZ makes the denormal result a zero");
        assert!(!flushing());
        assert!(
            half_min_normal() > 0.0,
            "the denormal is computed again after the scope"
        );
    }

    #[test]
    fn a_panic_inside_restores_too() {
        let r = std::panic::catch_unwind(|| flushing_denormals(|| panic!("inside")));
        assert!(r.is_err());
        assert!(!flushing());
        assert!(half_min_normal() > 0.0);
    }
}
