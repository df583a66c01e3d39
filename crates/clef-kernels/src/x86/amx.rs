//! Intel AMX: the operating system's permission, the tile configuration, and every AMX
//! instruction the crate executes, each as one `asm!` (stable Rust has no AMX intrinsics).
//!
//! The kernels use palette 1 in one of three shapes ([`configure`], [`configure_for`]): tiles
//! 0-3 (the outputs) 16 rows × 64 bytes, tiles 4-5 (the weights) 16 rows × `K` bytes and tiles
//! 6-7 (the activations) `K/4` rows × 64 bytes, for `K` = 64 (the largest shape, 16 × 16
//! outputs over 64 int8 or 32 bf16 columns per instruction: the bf16 tile and the integer
//! tile's 64-column groups) or 32 (the integer tile's groups for ggml's block types, whose
//! scales cover 32 values: a product per group ends where its scale does; their 16-column
//! groups run on the VNNI tile, `amx_tiles::int8::MIN_GROUP`). The tile registers are named in
//! the instruction text (`tmm0`..`tmm7` cannot be allocated by the compiler), so each wrapper
//! takes them as const generics; the compiler knows nothing of the tile state, which is sound
//! because nothing but this module's callers touches it, and a thread's tiles survive context
//! switches once the process holds the permission.

use std::arch::asm;
use std::cell::Cell;

/// Rows of every configured tile.
pub(crate) const ROWS: usize = 16;
/// Bytes per row of every configured tile.
pub(crate) const ROW_BYTES: usize = 64;

/// The 64-byte operand of `ldtilecfg` (palette 1).
#[repr(C, align(64))]
struct TileConfig {
    palette: u8,
    start_row: u8,
    reserved: [u8; 14],
    colsb: [u16; 16],
    rows: [u8; 16],
}

/// The shape for products over `k` bytes of each operand row per instruction (see the module
/// docs).
const fn config(k: usize) -> TileConfig {
    let mut colsb = [0u16; 16];
    let mut rows = [0u8; 16];
    let mut t = 0;
    while t < 8 {
        (colsb[t], rows[t]) = match t {
            0..=3 => (ROW_BYTES as u16, ROWS as u8),
            4 | 5 => (k as u16, ROWS as u8),
            _ => (ROW_BYTES as u16, (k / 4) as u8),
        };
        t += 1;
    }
    TileConfig {
        palette: 1,
        start_row: 0,
        reserved: [0; 14],
        colsb,
        rows,
    }
}

const CONFIG: TileConfig = config(ROW_BYTES);
const CONFIG_32: TileConfig = config(32);

/// Asks the operating system for the tile-data state (Linux: `arch_prctl(ARCH_REQ_XCOMP_PERM,
/// XFEATURE_XTILEDATA)`, once per process, valid for every thread). Without it the first tile
/// instruction faults: a kernel older than 5.16, or a hypervisor or seccomp policy that refuses
/// it, leaves AMX off with the returned reason.
pub(crate) fn request_permission() -> Result<(), String> {
    #[cfg(target_os = "linux")]
    {
        const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
        const XFEATURE_XTILEDATA: libc::c_long = 18;
        // SAFETY: arch_prctl with these arguments only changes the process's permitted
        // extended state; it reads and writes no memory of ours.
        let r = unsafe {
            libc::syscall(
                libc::SYS_arch_prctl,
                ARCH_REQ_XCOMP_PERM,
                XFEATURE_XTILEDATA,
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(format!(
                "the kernel refused the AMX tile state (arch_prctl(ARCH_REQ_XCOMP_PERM): {})",
                std::io::Error::last_os_error()
            ))
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err("AMX is used on Linux only (no tile-state permission request for this OS)".into())
    }
}

thread_local! {
    /// The `K` of the shape this thread's tiles hold (0: none yet).
    static CONFIGURED: Cell<usize> = const { Cell::new(0) };
}

/// Loads the 64-byte shape into this thread's tile configuration unless it holds it already
/// (`ldtilecfg` also zeroes every tile, so it is not repeated per call).
///
/// # Safety
/// The CPU must have AMX-TILE and the process the permission ([`request_permission`]).
#[inline]
pub(crate) unsafe fn configure() {
    configure_for(ROW_BYTES)
}

/// [`configure`] for operand rows of `k` bytes (64 or 32): tiles 4-5 16 × `k` bytes, tiles
/// 6-7 `k/4` × 64 bytes. A model runs one shape (its weights' groups), so the configuration
/// changes only between models.
///
/// # Safety
/// As [`configure`]; `k` is 64 or 32.
#[inline]
pub(crate) unsafe fn configure_for(k: usize) {
    if CONFIGURED.get() != k {
        let cfg: &TileConfig = match k {
            ROW_BYTES => &CONFIG,
            32 => &CONFIG_32,
            _ => panic!("no AMX tile shape for rows of {k} bytes"),
        };
        asm!("ldtilecfg [{}]", in(reg) cfg as *const TileConfig, options(nostack, preserves_flags));
        CONFIGURED.set(k);
    }
}

/// `tileloadd tmmT, [ptr + stride·i]`: the configured rows and bytes of tile `T` (16 × 64
/// but for the operand tiles of a narrower shape, [`configure_for`]).
///
/// # Safety
/// A configuration has been loaded on this thread; `ptr + r·stride ..` is readable for each
/// of tile `T`'s configured rows and bytes.
#[inline(always)]
pub(crate) unsafe fn load<const T: u8>(ptr: *const u8, stride: usize) {
    asm!("tileloadd tmm{t}, [{p} + {s} * 1]", t = const T, p = in(reg) ptr, s = in(reg) stride,
        options(nostack, preserves_flags, readonly));
}

/// `tilestored [ptr + stride·i], tmmT`.
///
/// # Safety
/// [`configure`] has run on this thread; `ptr + r·stride .. + 64` is writable for r < 16.
#[inline(always)]
pub(crate) unsafe fn store<const T: u8>(ptr: *mut u8, stride: usize) {
    asm!("tilestored [{p} + {s} * 1], tmm{t}", t = const T, p = in(reg) ptr, s = in(reg) stride,
        options(nostack, preserves_flags));
}

/// `tilezero tmmT`.
///
/// # Safety
/// [`configure`] has run on this thread.
#[inline(always)]
pub(crate) unsafe fn zero<const T: u8>() {
    asm!("tilezero tmm{t}", t = const T, options(nostack, preserves_flags, nomem));
}

/// `tdpbssd tmmC, tmmA, tmmB`: `C[m][n] += Σ_{k<64} A[m][k] · B[k/4][4n + k%4]` over signed
/// bytes into i32 (wrapping, which 64 products of at most 127² never reach).
///
/// # Safety
/// [`configure`] has run on this thread and the CPU has AMX-INT8.
#[inline(always)]
pub(crate) unsafe fn dot_i8<const C: u8, const A: u8, const B: u8>() {
    asm!("tdpbssd tmm{c}, tmm{a}, tmm{b}", c = const C, a = const A, b = const B,
        options(nostack, preserves_flags, nomem));
}

/// `tdpbf16ps tmmC, tmmA, tmmB`: per output, over the 16 bf16 pairs of a row, an even and an
/// odd f32 sum (fused multiply-adds from +0) whose sum is then added to `C`; inputs and
/// results denormal-flushed (the arithmetic of `crate::bf16::tile_dot`, which the tests hold
/// this instruction to).
///
/// # Safety
/// [`configure`] has run on this thread and the CPU has AMX-BF16.
#[inline(always)]
pub(crate) unsafe fn dot_bf16<const C: u8, const A: u8, const B: u8>() {
    asm!("tdpbf16ps tmm{c}, tmm{a}, tmm{b}", c = const C, a = const A, b = const B,
        options(nostack, preserves_flags, nomem));
}

#[cfg(test)]
mod tests {
    //! One test per instruction against its definition.
    use super::*;
    use crate::cpu::{Feature, Features};

    fn have(f: &[Feature]) -> bool {
        Features::detected().has_all(Features::of(f))
    }

    fn noise(seed: u64, n: usize) -> Vec<u8> {
        let mut s = seed | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 24) as u8
            })
            .collect()
    }

    #[test]
    fn load_store_zero_round_trip() {
        if !have(&[Feature::AmxTile]) {
            return;
        }
        let src = noise(1, 2 * ROWS * ROW_BYTES);
        let mut dst = vec![0u8; ROWS * ROW_BYTES * 3];
        unsafe {
            configure();
            // Every other row of src, into rows of stride 3·64.
            load::<3>(src.as_ptr(), 2 * ROW_BYTES);
            store::<3>(dst.as_mut_ptr(), 3 * ROW_BYTES);
        }
        for r in 0..ROWS {
            assert_eq!(
                &dst[r * 3 * ROW_BYTES..][..ROW_BYTES],
                &src[r * 2 * ROW_BYTES..][..ROW_BYTES]
            );
        }
        unsafe {
            zero::<3>();
            store::<3>(dst.as_mut_ptr(), ROW_BYTES);
        }
        assert!(dst[..ROWS * ROW_BYTES].iter().all(|&b| b == 0));
    }

    #[test]
    fn tdpbssd_is_the_signed_byte_product() {
        if !have(&[Feature::AmxTile, Feature::AmxInt8]) {
            return;
        }
        // Both shapes: operand rows of 64 bytes, and of 32 (ggml's groups), whose weight tile
        // reads 32 bytes of each row and whose activation tile 8 rows.
        for k in [ROW_BYTES, 32] {
            let a = noise(2, ROWS * ROW_BYTES);
            let b = noise(3, ROWS * ROW_BYTES);
            let c0: Vec<i32> = noise(4, ROWS * 16 * 4)
                .chunks(4)
                .map(|w| i32::from_ne_bytes([w[0], w[1], w[2], 0]) - (1 << 23))
                .collect();
            let mut c = c0.clone();
            unsafe {
                configure_for(k);
                load::<0>(c.as_ptr().cast(), ROW_BYTES);
                load::<4>(a.as_ptr(), ROW_BYTES);
                load::<6>(b.as_ptr(), ROW_BYTES);
                dot_i8::<0, 4, 6>();
                store::<0>(c.as_mut_ptr().cast(), ROW_BYTES);
                configure();
            }
            for m in 0..ROWS {
                for n in 0..16 {
                    let dot: i32 = (0..k)
                        .map(|k| {
                            i32::from(a[m * 64 + k] as i8)
                                * i32::from(b[(k / 4) * 64 + 4 * n + k % 4] as i8)
                        })
                        .sum();
                    assert_eq!(c[m * 16 + n], c0[m * 16 + n] + dot, "k {k}: ({m}, {n})");
                }
            }
        }
    }

    #[test]
    fn tdpbf16ps_is_the_tile_arithmetic() {
        if !have(&[Feature::AmxTile, Feature::AmxBf16]) {
            return;
        }
        for seed in 0..40u64 {
            let mut a: Vec<u16> = noise(10 + seed, ROWS * ROW_BYTES)
                .chunks(2)
                .map(|w| u16::from_ne_bytes([w[0], w[1]]))
                .collect();
            let b: Vec<u16> = noise(100 + seed, ROWS * ROW_BYTES)
                .chunks(2)
                // Exponents near 1 so that sums cancel and round (random bit patterns are
                // mostly huge or tiny), with some denormals and zeros kept.
                .map(|w| {
                    let v = u16::from_ne_bytes([w[0], w[1]]);
                    match v % 16 {
                        0 => v & 0x807f,
                        1 => v & 0x8000,
                        _ => (v & 0x807f) | (0x3c00 + ((v >> 7) & 0x7) * 0x80),
                    }
                })
                .collect();
            for v in a.iter_mut() {
                *v = match *v % 16 {
                    0 => *v & 0x807f,
                    _ => (*v & 0x807f) | (0x3e00 + ((*v >> 7) & 0xf) * 0x80),
                };
            }
            let c0: Vec<f32> = noise(200 + seed, ROWS * 64)
                .chunks(4)
                .enumerate()
                .map(|(i, w)| match i % 23 {
                    0 => f32::from_bits(u32::from_ne_bytes([w[0], w[1], w[2], 0])), // denormal
                    1 => -0.0,
                    _ => (u32::from_ne_bytes([w[0], w[1], w[2], w[3]]) as f32 / 4e9) - 0.5,
                })
                .collect();
            let mut c = c0.clone();
            unsafe {
                configure();
                load::<1>(c.as_ptr().cast(), ROW_BYTES);
                load::<5>(a.as_ptr().cast(), ROW_BYTES);
                load::<7>(b.as_ptr().cast(), ROW_BYTES);
                dot_bf16::<1, 5, 7>();
                store::<1>(c.as_mut_ptr().cast(), ROW_BYTES);
            }
            for m in 0..ROWS {
                for n in 0..16 {
                    let row: Vec<u16> = (0..32).map(|k| a[m * 32 + k]).collect();
                    let col: Vec<u16> = (0..32).map(|k| b[(k / 2) * 32 + 2 * n + k % 2]).collect();
                    let want = crate::bf16::tile_dot(c0[m * 16 + n], &row, &col);
                    assert_eq!(
                        c[m * 16 + n].to_bits(),
                        want.to_bits(),
                        "seed {seed} ({m}, {n}): {} vs {want}",
                        c[m * 16 + n]
                    );
                }
            }
        }
    }
}
