//! What AVX2 (no VNNI) can do for an int8 × int8 product such as the q8 bundle's, against f32
//! FMA: register-resident 4 × 16 and 6 × 16 tiles (operands in L1, one thread),
//! multiply-adds per second for
//!
//! - f32 FMA (what the exact BF16 path runs);
//! - the sign trick, `vpmaddubsw(|w|, sign(x, w))` + `vpmaddwd` + `vpaddd` (for 8-bit weights
//!   and 8-bit activations, which can both be negative, while `vpmaddubsw` needs one unsigned
//!   operand);
//! - the same with `|w|` precomputed (what removing the `vpabsb` could gain);
//! - no sign at all, `vpmaddubsw(x, w)` + `vpmaddwd` + `vpaddd`, 4 and 6 rows (possible only when
//!   one operand is unsigned and the pair sums cannot saturate: ternary and 4-bit codes against
//!   `qx + 128`, and q8's codes against 7-bit activations `qx + 64`, what the q8 tile does; the
//!   bench's int8 peak);
//! - `vpmaddwd` on 16-bit operands (int8 widened once: no sign trick, half the lanes; the q8 tile
//!   before 7-bit activations).
//!
//! docs/performance.md ("q8 on AVX2: the instruction ceiling") reads these figures.
//!
//! `cargo run --release -p clef-kernels --example avx2_int8_ceiling`

#[cfg(target_arch = "x86_64")]
mod loops {
    use std::arch::x86_64::*;

    /// Integer registers as loaded.
    #[inline(always)]
    fn same(x: __m256i) -> __m256i {
        x
    }

    /// `a + Σ pairs`: the 16-bit pair sums of `vpmaddubsw` widened to 32 bits and added.
    #[inline(always)]
    unsafe fn widen_add(a: __m256i, pairs: __m256i) -> __m256i {
        _mm256_add_epi32(a, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))
    }

    /// Steps of one sweep over the operands (each step: 2 vector loads, 4 broadcasts).
    const STEPS: usize = 64;

    macro_rules! tile {
        ($name:ident, $rows:expr, $acc:ty, $zero:expr, $cast:path, $x:ty, |$xv:ident, $wb:ident, $a:ident| $body:expr) => {
            #[target_feature(enable = "avx2,fma")]
            pub unsafe fn $name(n: usize, x: &[$x], w: &[i32]) -> [[$acc; 2]; $rows] {
                let lanes = 32 / std::mem::size_of::<$x>();
                let mut acc = [[$zero; 2]; $rows];
                for it in 0..n {
                    let o = (it % STEPS) * 2 * lanes;
                    let xs: [$acc; 2] = std::array::from_fn(|v| {
                        $cast(_mm256_loadu_si256(x.as_ptr().add(o + v * lanes).cast()))
                    });
                    for (r, row) in acc.iter_mut().enumerate() {
                        let $wb = _mm256_set1_epi32(w[(it % STEPS) + STEPS * r]);
                        for ($a, &$xv) in row.iter_mut().zip(&xs) {
                            *$a = $body;
                        }
                    }
                }
                acc
            }
        };
    }

    tile!(
        fma,
        4,
        __m256,
        _mm256_setzero_ps(),
        _mm256_castsi256_ps,
        f32,
        |x, wb, a| {
            let w = _mm256_castsi256_ps(wb);
            _mm256_fmadd_ps(x, w, *a)
        }
    );
    tile!(
        sign,
        4,
        __m256i,
        _mm256_setzero_si256(),
        same,
        i8,
        |x, wb, a| {
            let p = _mm256_maddubs_epi16(_mm256_abs_epi8(wb), _mm256_sign_epi8(x, wb));
            widen_add(*a, p)
        }
    );
    tile!(
        sign_no_abs,
        4,
        __m256i,
        _mm256_setzero_si256(),
        same,
        i8,
        |x, wb, a| {
            // `wb` stands in for a precomputed |w| (the values do not matter for the timing)
            let p = _mm256_maddubs_epi16(wb, _mm256_sign_epi8(x, wb));
            widen_add(*a, p)
        }
    );
    tile!(
        unsigned,
        4,
        __m256i,
        _mm256_setzero_si256(),
        same,
        i8,
        |x, wb, a| widen_add(*a, _mm256_maddubs_epi16(x, wb))
    );
    tile!(
        words,
        4,
        __m256i,
        _mm256_setzero_si256(),
        same,
        i16,
        |x, wb, a| _mm256_add_epi32(*a, _mm256_madd_epi16(x, wb))
    );

    tile!(
        unsigned6,
        6,
        __m256i,
        _mm256_setzero_si256(),
        same,
        i8,
        |x, wb, a| widen_add(*a, _mm256_maddubs_epi16(x, wb))
    );
    tile!(
        words6,
        6,
        __m256i,
        _mm256_setzero_si256(),
        same,
        i16,
        |x, wb, a| _mm256_add_epi32(*a, _mm256_madd_epi16(x, wb))
    );
    tile!(
        fma6,
        6,
        __m256,
        _mm256_setzero_ps(),
        _mm256_castsi256_ps,
        f32,
        |x, wb, a| {
            let w = _mm256_castsi256_ps(wb);
            _mm256_fmadd_ps(x, w, *a)
        }
    );

    /// Activations as f32, int8 and int16, weights as packed bytes and as f32 bits (normal
    /// numbers: no denormal slow paths).
    #[allow(clippy::type_complexity)]
    pub fn operands() -> (Vec<f32>, Vec<i8>, Vec<i16>, Vec<i32>, Vec<i32>) {
        let xf = (0..STEPS * 16).map(|i| (i % 7) as f32 * 0.25).collect();
        let xb = (0..STEPS * 64).map(|i| (i % 251) as i8).collect();
        let xw = (0..STEPS * 32).map(|i| (i % 251) as i16 - 125).collect();
        let w = (0..STEPS * 6)
            .map(|i| (i as i32).wrapping_mul(0x3F80_7919))
            .collect();
        let wf = (0..STEPS * 6)
            .map(|i| (1.0 + i as f32 / 1024.0).to_bits() as i32)
            .collect();
        (xf, xb, xw, w, wf)
    }
}

#[cfg(target_arch = "x86_64")]
fn main() {
    use std::time::Instant;
    // The kernels' own level check: AVX2 with FMA (and F16C).
    if let Err(e) = clef_kernels::cpu::Level::named("avx2") {
        println!("{e}");
        return;
    }
    let (xf, xb, xw, w, wf) = loops::operands();
    let n = 20_000_000usize;
    // multiply-adds per step of each loop: 4 rows × 2 vectors × lanes × (pairs per lane)
    let kinds: [(&str, f64); 8] = [
        ("f32 FMA", 64.0),
        ("f32 FMA, 6 rows", 96.0),
        ("int16 vpmaddwd, 6 rows", 192.0),
        ("int8 sign trick", 256.0),
        ("int8 sign trick, |w| precomputed", 256.0),
        ("int8 unsigned × signed, no sign op", 256.0),
        ("int16 vpmaddwd", 128.0),
        ("int8 unsigned × signed, no sign op, 6 rows", 384.0),
    ];
    let mut best = [f64::INFINITY; 8];
    for _ in 0..5 {
        for (k, b) in best.iter_mut().enumerate() {
            let t = Instant::now();
            // SAFETY: AVX2 and FMA checked above; the operands hold every step.
            unsafe {
                match k {
                    0 => drop(std::hint::black_box(loops::fma(n, &xf, &wf))),
                    1 => drop(std::hint::black_box(loops::fma6(n, &xf, &wf))),
                    2 => drop(std::hint::black_box(loops::words6(n, &xw, &w))),
                    3 => drop(std::hint::black_box(loops::sign(n, &xb, &w))),
                    4 => drop(std::hint::black_box(loops::sign_no_abs(n, &xb, &w))),
                    5 => drop(std::hint::black_box(loops::unsigned(n, &xb, &w))),
                    6 => drop(std::hint::black_box(loops::words(n, &xw, &w))),
                    _ => drop(std::hint::black_box(loops::unsigned6(n, &xb, &w))),
                }
            }
            *b = b.min(t.elapsed().as_secs_f64());
        }
    }
    let fma = n as f64 * kinds[0].1 / best[0];
    for ((name, macs), t) in kinds.iter().zip(best) {
        let rate = n as f64 * macs / t;
        println!(
            "{name:>36}: {:6.1} G multiply-adds/s, {:.2}x f32 FMA",
            rate / 1e9,
            rate / fma
        );
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn main() {
    println!("an x86-64 measurement");
}
