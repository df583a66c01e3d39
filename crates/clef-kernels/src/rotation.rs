//! The orthonormal Hadamard rotation of a matrix product's inputs, group by group: `y = x · Wᵀ =
//! (x H) · (W H)ᵀ` because `H Hᵀ = I`, so a format may store `W H` and rotate the activations
//! as they arrive (docs/kernels.md, "Rotated inputs").
//!
//! Why: the integer products quantize each group of 64 activations with one scale, set by the
//! group's largest value. The inputs of DeltaNet's `out_proj` and the MLP's `down_proj` are
//! products of gates, so a group is often one large value among near-zeros (max/rms at the
//! bound √64 = 8 on the trained nano model) and the small values round to nothing. `H`
//! spreads a spike over the whole group (max/rms about 3 after it), so the same codes keep
//! them; the weights, near-Gaussian, quantize as well rotated as not.
//!
//! `H` is the 64 × 64 Sylvester Hadamard matrix (`H₁ = [1]`, `H₂ₙ = [[Hₙ, Hₙ], [Hₙ, −Hₙ]]`)
//! times 1/8: symmetric and its own inverse. It is applied as the fast transform, six stages
//! of butterflies `(a, b) → (a + b, a − b)` over strides 1, 2, …, 32, then the exact scaling by
//! 1/8. Every element sees the same additions in the same order whatever the compiler
//! vectorizes, so the result has the same bits on every machine. Only whole groups are
//! rotated: a row's last partial group (columns past the last multiple of 64) is left as it is.

use crate::cpu::Kernels;
use rayon::prelude::*;

/// Columns per rotated group (the integer formats' scale group).
pub const ROTATION_GROUP: usize = 64;

/// Rows per parallel work item: enough work per task at the narrowest widths.
const ROWS_PER_TASK: usize = 16;

/// Rotates every whole group of 64 columns of each of the `m` rows of `x` (`[m × k]`) in
/// place, on the best instruction set: [`rotate_groups_into`] from a copy (the converter's use,
/// one block of a weight at a time; the runtime rotates out of place).
pub fn rotate_groups(x: &mut [f32], m: usize, k: usize) {
    let src = x.to_vec();
    rotate_groups_into(&src, m, k, x);
}

/// `out = x` with every whole group of 64 columns of each of the `m` rows rotated (one pass
/// over both, parallel over rows), with the detected kernel table.
pub fn rotate_groups_into(x: &[f32], m: usize, k: usize, out: &mut [f32]) {
    rotate_groups_into_with(Kernels::detected(), x, m, k, out)
}

/// [`rotate_groups_into`] with the kernel table `kt`: the same additions in the same order in
/// every table, so the same bits.
pub fn rotate_groups_into_with(kt: &Kernels, x: &[f32], m: usize, k: usize, out: &mut [f32]) {
    assert_eq!(x.len(), m * k, "x must be m × k");
    assert_eq!(out.len(), m * k, "out must be m × k");
    if k == 0 {
        return;
    }
    out.par_chunks_mut(k * ROWS_PER_TASK)
        .zip(x.par_chunks(k * ROWS_PER_TASK))
        .for_each(|(dst, src)| {
            for (d, s) in dst.chunks_exact_mut(k).zip(src.chunks_exact(k)) {
                // SAFETY: the table's functions run on this CPU.
                unsafe { (kt.rotate_row)(s, d) };
            }
        });
}

/// One row: whole groups rotated from `src` into `dst`, a partial last group copied. The
/// kernel table's portable entry; `crate::x86::compiled` compiles it with AVX2, where the
/// groups' eight-wide rows become single vector additions.
#[inline(always)]
pub(crate) fn row_body(src: &[f32], dst: &mut [f32]) {
    debug_assert_eq!(src.len(), dst.len());
    let whole = src.len() / ROTATION_GROUP * ROTATION_GROUP;
    for (s, d) in src[..whole]
        .chunks_exact(ROTATION_GROUP)
        .zip(dst[..whole].chunks_exact_mut(ROTATION_GROUP))
    {
        hadamard64(
            s.try_into().expect("a whole group"),
            d.try_into().expect("a whole group"),
        );
    }
    dst[whole..].copy_from_slice(&src[whole..]);
}

/// `g ← H g` for one group, as eight rows of eight: the strides 1, 2, 4 within each row
/// (fixed-index butterflies that compile to lane shuffles), then the strides 8, 16, 32 across
/// rows (whole-row additions), then the scaling. The same additions in the same order as
/// [`hadamard64_reference`], so the same bits (a test compares them), at about a sixth of its
/// time: the plain loop's short inner runs at strides 1, 2 and 4 stay scalar.
#[inline(always)]
fn hadamard64(src: &[f32; ROTATION_GROUP], g: &mut [f32; ROTATION_GROUP]) {
    let mut rows = [[0.0f32; 8]; 8];
    for (row, src) in rows.iter_mut().zip(src.chunks_exact(8)) {
        *row = within_row(src.try_into().expect("8 values"));
    }
    let mut half = 1;
    while half < 8 {
        for block in (0..8).step_by(2 * half) {
            for i in block..block + half {
                let (a, b) = (rows[i], rows[i + half]);
                rows[i] = std::array::from_fn(|l| a[l] + b[l]);
                rows[i + half] = std::array::from_fn(|l| a[l] - b[l]);
            }
        }
        half *= 2;
    }
    for (dst, row) in g.chunks_exact_mut(8).zip(&rows) {
        for (d, &v) in dst.iter_mut().zip(row) {
            // 1/8 = 1/√64 is a power of two: exact for every normal result.
            *d = v * 0.125;
        }
    }
}

/// The butterflies at strides 1, 2 and 4 of one row of eight.
#[inline(always)]
fn within_row(x: [f32; 8]) -> [f32; 8] {
    let a = [
        x[0] + x[1],
        x[0] - x[1],
        x[2] + x[3],
        x[2] - x[3],
        x[4] + x[5],
        x[4] - x[5],
        x[6] + x[7],
        x[6] - x[7],
    ];
    let b = [
        a[0] + a[2],
        a[1] + a[3],
        a[0] - a[2],
        a[1] - a[3],
        a[4] + a[6],
        a[5] + a[7],
        a[4] - a[6],
        a[5] - a[7],
    ];
    [
        b[0] + b[4],
        b[1] + b[5],
        b[2] + b[6],
        b[3] + b[7],
        b[0] - b[4],
        b[1] - b[5],
        b[2] - b[6],
        b[3] - b[7],
    ]
}

/// The definition, stage by stage: butterflies `(a, b) → (a + b, a − b)` at strides 1, 2, …,
/// 32, then × 1/8. The twin [`hadamard64`] is checked against.
#[cfg(test)]
fn hadamard64_reference(g: &mut [f32; ROTATION_GROUP]) {
    let mut half = 1;
    while half < ROTATION_GROUP {
        for block in g.chunks_exact_mut(2 * half) {
            let (a, b) = block.split_at_mut(half);
            for (u, v) in a.iter_mut().zip(b.iter_mut()) {
                let (s, d) = (*u + *v, *u - *v);
                *u = s;
                *v = d;
            }
        }
        half *= 2;
    }
    for v in g.iter_mut() {
        *v *= 0.125;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Sylvester matrix entry `H[i][j] = (−1)^popcount(i & j)`, unscaled.
    fn sylvester(i: usize, j: usize) -> f64 {
        if (i & j).count_ones().is_multiple_of(2) {
            1.0
        } else {
            -1.0
        }
    }

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| {
                let h = (i as u32 ^ seed).wrapping_mul(0x9e37_79b9).rotate_left(13);
                (h % 20_001) as f32 / 10_000.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn the_fast_transform_is_the_scaled_sylvester_matrix() {
        let x = values(ROTATION_GROUP, 7);
        let mut y = x.clone();
        rotate_groups(&mut y, 1, ROTATION_GROUP);
        for (i, &yi) in y.iter().enumerate() {
            let want: f64 = (0..ROTATION_GROUP)
                .map(|j| sylvester(i, j) * f64::from(x[j]))
                .sum::<f64>()
                / 8.0;
            assert!((f64::from(yi) - want).abs() < 1e-6, "{i}: {yi} vs {want}");
        }
    }

    #[test]
    fn rotating_twice_gives_the_input_back_and_partial_groups_stay() {
        let (m, k) = (3, 2 * ROTATION_GROUP + 5);
        let x = values(m * k, 3);
        let mut y = x.clone();
        rotate_groups(&mut y, m, k);
        for r in 0..m {
            let tail = r * k + 2 * ROTATION_GROUP..(r + 1) * k;
            assert_eq!(y[tail.clone()], x[tail]);
        }
        assert_ne!(y, x);
        rotate_groups(&mut y, m, k);
        for (a, b) in y.iter().zip(&x) {
            assert!((a - b).abs() < 1e-6, "{a} vs {b}");
        }
    }

    #[test]
    fn a_spike_is_spread_over_its_group() {
        let mut g = vec![0.0f32; ROTATION_GROUP];
        g[5] = 8.0;
        rotate_groups(&mut g, 1, ROTATION_GROUP);
        assert!(g.iter().all(|v| v.abs() == 1.0), "{g:?}");
    }

    proptest::proptest! {
        /// The row-split transform gives the definition's bits, on every instruction set, in
        /// place and out of place, whatever the row count and width.
        #[test]
        fn every_path_gives_the_definitions_bits(
            m in 1usize..40,
            k in 1usize..300,
            seed in proptest::prelude::any::<u32>(),
            spike in proptest::prelude::any::<bool>(),
        ) {
            let mut x = values(m * k, seed);
            if spike {
                // a group dominated by one value, as the rotated linears' inputs are
                x.iter_mut().for_each(|v| *v *= 1e-3);
                x[seed as usize % (m * k)] = 40.0;
            }
            let mut want = x.clone();
            for row in want.chunks_exact_mut(k) {
                for g in row.chunks_exact_mut(ROTATION_GROUP) {
                    hadamard64_reference(g.try_into().unwrap());
                }
            }
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            for kt in Kernels::available() {
                let mut out = vec![f32::NAN; m * k];
                rotate_groups_into_with(kt, &x, m, k, &mut out);
                proptest::prop_assert_eq!(bits(&out), bits(&want), "{:?}", kt);
            }
            let mut y = x.clone();
            rotate_groups(&mut y, m, k);
            proptest::prop_assert_eq!(bits(&y), bits(&want));
        }
    }

    #[test]
    fn rows_narrower_than_a_group_are_untouched() {
        let x = values(2 * 40, 1);
        let mut y = x.clone();
        rotate_groups(&mut y, 2, 40);
        assert_eq!(x, y);
    }
}
