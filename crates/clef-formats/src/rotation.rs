//! The rotation clef-q8-v2 stores some linears under (docs/formats.md, "clef-q8"): `y = x · Wᵀ
//! = (x H) · (W H)ᵀ` because `H Hᵀ = I`, so the format stores `W H` and whoever multiplies it
//! rotates the inputs the same way.
//!
//! `H` is the 64 × 64 Sylvester Hadamard matrix (`H₁ = [1]`, `H₂ₙ = [[Hₙ, Hₙ], [Hₙ, −Hₙ]]`)
//! times 1/8, applied to each whole group of [`GROUP`] columns of a row (the q8 scale groups):
//! symmetric and its own inverse. It is applied as the fast transform, six stages of butterflies
//! `(a, b) → (a + b, a − b)` over strides 1, 2, …, 32, then the exact scaling by 1/8 (the
//! definition, [`rotate_group_reference`]). Every element sees the same additions in the same
//! order however the compiler vectorizes them, so the result has the same bits on every
//! machine: the converter rotates weights with these functions, and the kernels compile
//! [`rotate_row`] for each instruction set to rotate activations. A row's last partial group
//! (columns past the last multiple of 64) is left as it is.

/// Columns per rotated group: the scale group of the integer formats.
pub const GROUP: usize = crate::GROUP;

/// One row: whole groups rotated from `src` into `dst`, a partial last group copied.
/// (`inline(always)`: the kernels compile it into their per-instruction-set bodies.)
#[inline(always)]
pub fn rotate_row(src: &[f32], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len(), "row lengths");
    let whole = src.len() / GROUP * GROUP;
    for (s, d) in src[..whole]
        .chunks_exact(GROUP)
        .zip(dst[..whole].chunks_exact_mut(GROUP))
    {
        rotate_group(
            s.try_into().expect("a whole group"),
            d.try_into().expect("a whole group"),
        );
    }
    dst[whole..].copy_from_slice(&src[whole..]);
}

/// `g ← H g` for one group, as eight rows of eight: the strides 1, 2, 4 within each row
/// (fixed-index butterflies that compile to lane shuffles), then the strides 8, 16, 32 across
/// rows (whole-row additions), then the scaling. The same additions in the same order as
/// [`rotate_group_reference`], so the same bits (a test compares them), at about a sixth of its
/// time: the plain loop's short inner runs at strides 1, 2 and 4 stay scalar.
#[inline(always)]
pub fn rotate_group(src: &[f32; GROUP], g: &mut [f32; GROUP]) {
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
/// 32, then × 1/8. The twin [`rotate_group`] is checked against.
pub fn rotate_group_reference(g: &mut [f32; GROUP]) {
    let mut half = 1;
    while half < GROUP {
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

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| {
                let h = (i as u32 ^ seed).wrapping_mul(0x9e37_79b9).rotate_left(13);
                (h % 20_001) as f32 / 10_000.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn the_fast_transform_gives_the_definitions_bits() {
        for seed in 0..64 {
            let x = values(GROUP, seed);
            let mut want: [f32; GROUP] = x.clone().try_into().unwrap();
            rotate_group_reference(&mut want);
            let mut got = [f32::NAN; GROUP];
            rotate_group(x.as_slice().try_into().unwrap(), &mut got);
            assert_eq!(got.map(f32::to_bits), want.map(f32::to_bits), "seed {seed}");
        }
    }

    #[test]
    fn a_row_rotates_its_whole_groups_and_keeps_its_tail() {
        let x = values(2 * GROUP + 5, 3);
        let mut y = vec![0.0; x.len()];
        rotate_row(&x, &mut y);
        assert_eq!(y[2 * GROUP..], x[2 * GROUP..]);
        let mut back = vec![0.0; x.len()];
        rotate_row(&y, &mut back);
        for (a, b) in back.iter().zip(&x) {
            assert!((a - b).abs() < 1e-6, "{a} vs {b}");
        }
    }
}
