//! The orthonormal Hadamard rotation of a matrix product's inputs, group by group: `y = x · Wᵀ =
//! (x H) · (W H)ᵀ` because `H Hᵀ = I`, so a format may store `W H` and rotate the activations
//! as they arrive (docs/kernels.md, "Rotated inputs"). The rotation itself is the format's
//! ([`clef_formats::rotation`]); this module runs it over the rows of a product's inputs, in
//! parallel, compiled per instruction set.
//!
//! Why: the integer products quantize each group of 64 activations with one scale, set by the
//! group's largest value. The inputs of DeltaNet's `out_proj` and the MLP's `down_proj` are
//! products of gates, so a group is often one large value among near-zeros (max/rms at the
//! bound √64 = 8 on the trained nano model) and the small values round to nothing. `H`
//! spreads a spike over the whole group (max/rms about 3 after it), so the same codes keep
//! them; the weights, near-Gaussian, quantize as well rotated as not.

use crate::cpu::Kernels;
use rayon::prelude::*;

/// Columns per rotated group (the integer formats' scale group).
pub use clef_formats::rotation::GROUP as ROTATION_GROUP;

/// Rows per parallel work item: enough work per task at the narrowest widths.
const ROWS_PER_TASK: usize = 16;

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
    clef_formats::rotation::rotate_row(src, dst)
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

    /// `x` rotated in place (a copy rotated back into it).
    fn rotate_groups(x: &mut [f32], m: usize, k: usize) {
        let src = x.to_vec();
        rotate_groups_into(&src, m, k, x);
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
                    clef_formats::rotation::rotate_group_reference(g.try_into().unwrap());
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
