//! Byte-level pieces of the integer weight panels, each a SIMD path with a scalar twin that
//! gives the same bytes: the groups' code sums (the `−128 · Σ qw` of the unsigned tiles), 4-bit
//! codes to bytes, and 2-bit ternary planes to bytes.
//!
//! At one 128-row prefill chunk an integer tile spends about 0.2 ns per weight, so decoding a
//! weight must cost a small fraction of that: these loops handle 32 codes per instruction group.

use super::GROUP;
use crate::cpu::Kernels;

/// Bytes of one group of 2-bit planes: byte `j` holds the digits (code + 1) of columns `j`,
/// `j + 16`, `j + 32`, `j + 48` in bits 0–1, 2–3, 4–5, 6–7.
pub(crate) const PLANE_BYTES: usize = GROUP / 4;

/// `out[g] = Σ codes[g·group .. (g + 1)·group]` for `g < out.len()` (`codes` holds whole
/// groups; `group` a multiple of 16: the project's 64, ggml's 32 and 16).
pub(crate) fn group_sums(k: &Kernels, codes: &[i8], group: usize, out: &mut [i32]) {
    assert!(group.is_multiple_of(16) && codes.len() >= out.len() * group);
    // SAFETY: the table's functions run on this CPU; extents asserted above.
    unsafe { (k.group_sums)(codes, group, out) }
}

/// The scalar twin of [`group_sums`] (the kernel table's portable entry).
pub(crate) fn group_sums_scalar(codes: &[i8], group: usize, out: &mut [i32]) {
    for (g, o) in out.iter_mut().enumerate() {
        *o = codes[g * group..(g + 1) * group]
            .iter()
            .map(|&c| i32::from(c))
            .sum();
    }
}

/// 4-bit codes, two per byte (low nibble first), to one byte each: `out[2j] = src[j] & 15`,
/// `out[2j + 1] = src[j] >> 4`, for `out.len()` codes.
pub(crate) fn nibbles(k: &Kernels, src: &[u8], out: &mut [i8]) {
    assert!(src.len() >= out.len().div_ceil(2));
    // SAFETY: the table's functions run on this CPU; extents asserted above.
    unsafe { (k.nibbles)(src, out) }
}

/// The scalar twin of [`nibbles`] (the kernel table's portable entry).
pub(crate) fn nibbles_scalar(src: &[u8], out: &mut [i8]) {
    nibbles_from(src, out, 0);
}

/// [`nibbles_scalar`] from code `from` on (the vector forms' tails).
pub(crate) fn nibbles_from(src: &[u8], out: &mut [i8], from: usize) {
    for (i, o) in out.iter_mut().enumerate().skip(from) {
        *o = ((src[i / 2] >> (4 * (i % 2))) & 0x0f) as i8;
    }
}

/// Whole groups of 2-bit planes ([`PLANE_BYTES`] each) to codes `digit − 1` ∈ {−1, 0, +1},
/// and each group's code sum into `sums` (one per group): taken from the digits while they are
/// in registers, it saves the unsigned tiles' separate [`group_sums`] pass over the codes.
pub(crate) fn planes(k: &Kernels, src: &[u8], out: &mut [i8], sums: &mut [i32]) {
    let groups = out.len() / GROUP;
    assert!(out.len() == groups * GROUP && src.len() >= groups * PLANE_BYTES);
    assert_eq!(sums.len(), groups);
    // SAFETY: the table's functions run on this CPU; extents asserted above.
    unsafe { (k.planes)(src, out, sums) }
}

/// The scalar twin of [`planes`] (the kernel table's portable entry).
pub(crate) fn planes_scalar(src: &[u8], out: &mut [i8], sums: &mut [i32]) {
    for ((g, block), sum) in out.chunks_exact_mut(GROUP).enumerate().zip(sums) {
        let bytes = &src[g * PLANE_BYTES..(g + 1) * PLANE_BYTES];
        for (c, o) in block.iter_mut().enumerate() {
            let (j, plane) = (c % PLANE_BYTES, c / PLANE_BYTES);
            *o = ((bytes[j] >> (2 * plane)) & 3) as i8 - 1;
        }
        *sum = block.iter().map(|&c| i32::from(c)).sum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn simd_byte_decoders_match_their_scalar_twins(
            bytes in proptest::collection::vec(any::<u8>(), 0..400), n in 0usize..700,
        ) {
            for k in Kernels::available() {
                let codes: Vec<i8> = bytes.iter().map(|&b| b as i8).collect();
                for group in [16, 32, GROUP] {
                    let groups = codes.len() / group;
                    let (mut want, mut got) = (vec![0; groups], vec![-1; groups]);
                    group_sums_scalar(&codes, group, &mut want);
                    group_sums(k, &codes, group, &mut got);
                    prop_assert_eq!(&got, &want, "groups of {}", group);
                }

                let n = n.min(2 * bytes.len());
                let (mut want, mut got) = (vec![0i8; n], vec![0i8; n]);
                nibbles_scalar(&bytes, &mut want);
                nibbles(k, &bytes, &mut got);
                prop_assert_eq!(&got, &want);

                let g = bytes.len() / PLANE_BYTES;
                let (mut want, mut got) = (vec![0i8; g * GROUP], vec![0i8; g * GROUP]);
                let (mut want_sums, mut got_sums) = (vec![0; g], vec![-1; g]);
                planes_scalar(&bytes, &mut want, &mut want_sums);
                planes(k, &bytes, &mut got, &mut got_sums);
                prop_assert_eq!(&got, &want);
                prop_assert_eq!(&got_sums, &want_sums);
            }
        }
    }
}
