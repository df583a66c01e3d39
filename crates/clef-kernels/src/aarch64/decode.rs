//! Arm weight decoders (twins: `crate::decode`).
//!
//! f16 → f32 is one `FCVTL`/`FCVTL2` pair per 8 values, base Armv8 Advanced SIMD (every
//! AArch64 CPU): exact for every finite value and subnormal, infinities kept, and NaNs keep
//! their payload with the quiet bit set, as the `half` crate's conversion (the twin) does —
//! the portable loop converts one value at a time in software. (bf16 → f32 is a shift, which
//! the compiler already vectorizes from the portable loop.)

use std::arch::aarch64::*;
use std::arch::asm;

/// # Safety
/// NEON must be available (it is on every AArch64 CPU this crate targets).
#[target_feature(enable = "neon")]
pub(crate) unsafe fn f16_neon(src: &[u8], dst: &mut [f32]) {
    let n = dst.len().min(src.len() / 2);
    let mut i = 0;
    while i + 8 <= n {
        let h = vld1q_u8(src.as_ptr().add(2 * i));
        let (lo, hi): (float32x4_t, float32x4_t);
        asm!(
            "fcvtl {lo:v}.4s, {h:v}.4h",
            "fcvtl2 {hi:v}.4s, {h:v}.8h",
            h = in(vreg) h,
            lo = out(vreg) lo,
            hi = out(vreg) hi,
            options(pure, nomem, nostack, preserves_flags)
        );
        vst1q_f32(dst.as_mut_ptr().add(i), lo);
        vst1q_f32(dst.as_mut_ptr().add(i + 4), hi);
        i += 8;
    }
    crate::decode::f16_scalar(&src[2 * i..], &mut dst[i..n]);
}
