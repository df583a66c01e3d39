//! ggml dequantization checked against its reference, `gguf.quants.dequantize` of the `gguf`
//! Python package 0.19.0: `tests/ggml/cases/<TYPE>.bin` hold random blocks of each type and the
//! reference's output for them (written by `tests/ggml/make_cases.py`, which documents the
//! layout), and every value must come out with the same bits. Plus the errors: wrong lengths,
//! partial blocks and types clef.rs does not decode are refused, never a panic.

use std::path::{Path, PathBuf};

use clef_formats::ggml::{dequantize_row, integer_form, integer_row, GgmlType};
use clef_formats::FormatError;
use proptest::prelude::*;

/// The types clef.rs must decode.
const REQUIRED: [GgmlType; 17] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q8_0,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::Q3_K,
    GgmlType::Q2_K,
    GgmlType::IQ4_XS,
    GgmlType::IQ4_NL,
    GgmlType::IQ3_S,
    GgmlType::IQ3_XXS,
];

/// Types with no decoder (gguf-py has none either).
const UNSUPPORTED: [GgmlType; 7] = [
    GgmlType::Q8_1,
    GgmlType::Q8_K,
    GgmlType::I8,
    GgmlType::I16,
    GgmlType::I32,
    GgmlType::I64,
    GgmlType::F64,
];

struct Case {
    ty: GgmlType,
    bytes: Vec<u8>,
    expected: Vec<f32>,
}

fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ggml/cases")
}

fn u32_at(data: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(data[at..at + 4].try_into().unwrap())
}

/// Every `<TYPE>.bin` of the cases folder: u32 type id, u32 elements, u32 bytes, the bytes, the
/// f32 values.
fn cases() -> Vec<Case> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(cases_dir())
        .expect("tests/ggml/cases is missing")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|path| {
            let stem = path.file_stem().unwrap().to_str().unwrap();
            let ty = GgmlType::ALL
                .into_iter()
                .find(|t| t.name() == stem)
                .unwrap_or_else(|| panic!("{}: no ggml type is named {stem}", path.display()));
            let data = std::fs::read(path).unwrap();
            assert_eq!(u32_at(&data, 0), ty as u32, "{stem}: type id");
            let n = u32_at(&data, 4) as usize;
            let m = u32_at(&data, 8) as usize;
            assert_eq!(data.len(), 12 + m + 4 * n, "{stem}: file length");
            assert_eq!(ty.bytes_for(n), Some(m), "{stem}: bytes of {n} elements");
            let bytes = data[12..12 + m].to_vec();
            let expected = data[12 + m..]
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            Case {
                ty,
                bytes,
                expected,
            }
        })
        .collect()
}

/// `None` for equal bits, else the first difference (and how many there are).
fn compare_bits(ty: GgmlType, what: &str, got: &[f32], expected: &[f32]) -> Option<String> {
    assert_eq!(got.len(), expected.len());
    let differ: Vec<usize> = (0..got.len())
        .filter(|&i| got[i].to_bits() != expected[i].to_bits())
        .collect();
    let &i = differ.first()?;
    Some(format!(
        "{ty} ({what}): {} of {} values differ; first at element {i} (block {}): got {:e} \
         ({:#010x}), gguf-py {:e} ({:#010x})",
        differ.len(),
        got.len(),
        i / ty.block().0,
        got[i],
        got[i].to_bits(),
        expected[i],
        expected[i].to_bits(),
    ))
}

/// Fails with every difference found, one line per type and way of decoding.
fn report(failures: Vec<String>) {
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn every_case_equals_gguf_py_bit_for_bit() {
    let mut failures = Vec::new();
    for case in cases() {
        let mut out = vec![f32::NAN; case.expected.len()];
        dequantize_row(case.ty, &case.bytes, &mut out).unwrap();
        failures.extend(compare_bits(case.ty, "whole row", &out, &case.expected));
    }
    report(failures);
}

/// A block decodes on its own: block by block, and in runs of 3 blocks (the last one shorter),
/// the values are the same.
#[test]
fn pieces_of_a_row_decode_the_same() {
    let mut failures = Vec::new();
    for case in cases() {
        let (per, size) = case.ty.block();
        for run in [1, 3] {
            let mut out = vec![f32::NAN; case.expected.len()];
            for (b, y) in case.bytes.chunks(run * size).zip(out.chunks_mut(run * per)) {
                dequantize_row(case.ty, b, y).unwrap();
            }
            let what = format!("runs of {run} blocks");
            failures.extend(compare_bits(case.ty, &what, &out, &case.expected));
        }
    }
    report(failures);
}

#[test]
fn required_types_have_cases_and_supported_types_are_exactly_those_with_cases() {
    let covered: Vec<GgmlType> = cases().iter().map(|c| c.ty).collect();
    for ty in REQUIRED {
        assert!(covered.contains(&ty), "no case file for {ty}");
    }
    for ty in GgmlType::ALL {
        assert_eq!(
            ty.is_supported(),
            covered.contains(&ty),
            "{ty}: is_supported() = {}, but a case file {}",
            ty.is_supported(),
            if covered.contains(&ty) {
                "exists"
            } else {
                "does not"
            },
        );
    }
    for ty in UNSUPPORTED {
        assert!(!ty.is_supported(), "{ty}");
    }
}

#[test]
fn unsupported_types_are_refused() {
    for ty in UNSUPPORTED {
        let (per, size) = ty.block();
        let mut out = vec![0.0; 2 * per];
        let err = dequantize_row(ty, &vec![0; 2 * size], &mut out).unwrap_err();
        assert_eq!(err, FormatError::UnsupportedGgmlType { ty: ty.name() });
        assert!(err.to_string().contains(ty.name()), "{err}");
    }
}

#[test]
fn wrong_lengths_are_refused_and_leave_the_output_alone() {
    for ty in GgmlType::ALL.into_iter().filter(|t| t.is_supported()) {
        let (per, size) = ty.block();
        // A partial block (impossible for the one-element float types).
        if per > 1 {
            for elements in [1, per - 1, per + 1, 3 * per + per / 2] {
                let mut out = vec![7.0; elements];
                let bytes = vec![0; ty.bytes_for(elements / per * per).unwrap() + size];
                let err = dequantize_row(ty, &bytes, &mut out).unwrap_err();
                assert_eq!(
                    err,
                    FormatError::PartialGgmlBlock {
                        ty: ty.name(),
                        elements,
                        block: per,
                    }
                );
                assert!(out.iter().all(|&v| v == 7.0));
            }
        }
        // Bytes that are not the count the elements take.
        for (blocks, got) in [
            (2, 2 * size - 1),
            (2, 2 * size + 1),
            (1, 0),
            (0, size),
            (3, size),
        ] {
            let mut out = vec![7.0; blocks * per];
            let err = dequantize_row(ty, &vec![0; got], &mut out).unwrap_err();
            assert_eq!(
                err,
                FormatError::GgmlByteLength {
                    ty: ty.name(),
                    elements: blocks * per,
                    expected: blocks * size,
                    got,
                },
            );
            assert!(out.iter().all(|&v| v == 7.0));
        }
        // An empty row is a row of no blocks.
        dequantize_row(ty, &[], &mut []).unwrap();
    }
}

proptest! {
    /// Any type, any bytes, any lengths: an answer, never a panic; success exactly when the type
    /// is decoded and the lengths are whole, matching blocks.
    #[test]
    fn any_input_is_answered_without_panicking(
        which in 0..GgmlType::ALL.len(),
        bytes in proptest::collection::vec(any::<u8>(), 0..700),
        elements in 0usize..600,
    ) {
        let ty = GgmlType::ALL[which];
        let mut out = vec![0.0; elements];
        let r = dequantize_row(ty, &bytes, &mut out);
        let fits = ty.bytes_for(elements) == Some(bytes.len());
        prop_assert_eq!(r.is_ok(), ty.is_supported() && fits);
    }

    /// Whole blocks of random bytes always decode (there are no invalid codes).
    #[test]
    fn random_whole_blocks_decode(
        which in 0..GgmlType::ALL.len(),
        blocks in 0usize..4,
        seed in any::<u64>(),
    ) {
        let ty = GgmlType::ALL[which];
        let (per, size) = ty.block();
        let mut state = seed;
        let bytes: Vec<u8> = (0..blocks * size)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (state >> 56) as u8
            })
            .collect();
        let mut out = vec![0.0; blocks * per];
        prop_assert_eq!(dequantize_row(ty, &bytes, &mut out).is_ok(), ty.is_supported());
    }
}

/// The integer form (codes, a scale per run, an offset for the affine types) rebuilds every
/// case's reference values bit for bit as `scale·code + offset` (product, then sum, as the
/// dequantizers round), and every code lies in the range the form states.
#[test]
fn integer_forms_rebuild_the_reference_values() {
    let mut failures = Vec::new();
    let mut covered = Vec::new();
    for case in cases() {
        let Some(form) = integer_form(case.ty) else {
            continue;
        };
        covered.push(case.ty);
        let n = case.expected.len();
        let mut codes = vec![0i8; n];
        let mut scales = vec![f32::NAN; n / form.group];
        let mut offsets = vec![f32::NAN; if form.affine { n / form.group } else { 0 }];
        integer_row(case.ty, &case.bytes, &mut codes, &mut scales, &mut offsets).unwrap();
        // The K-quants, and only they, scale per 256-value super-block.
        let k_quant = matches!(
            case.ty,
            GgmlType::Q2_K | GgmlType::Q3_K | GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K
        );
        if form.superblock != k_quant.then_some(256) {
            failures.push(format!("{}: super-block {:?}", case.ty, form.superblock));
        }
        let (lo, hi) = form.codes;
        if let Some(c) = codes.iter().find(|&&c| c < lo || c > hi) {
            failures.push(format!("{}: code {c} outside {lo}..={hi}", case.ty));
        }
        let rebuilt: Vec<f32> = codes
            .iter()
            .enumerate()
            .map(|(i, &c)| {
                let y = scales[i / form.group] * f32::from(c);
                if form.affine {
                    y + offsets[i / form.group]
                } else {
                    y
                }
            })
            .collect();
        failures.extend(compare_bits(
            case.ty,
            "integer form",
            &rebuilt,
            &case.expected,
        ));
    }
    report(failures);
    use GgmlType::*;
    for ty in [
        Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, IQ4_XS, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
    ] {
        assert!(covered.contains(&ty), "{ty}: no case has an integer form");
    }
    // A type without one, and wrong lengths, are errors.
    let mut c = vec![0i8; 32];
    assert!(integer_row(GgmlType::F16, &[0; 64], &mut c, &mut [0.0], &mut []).is_err());
    assert!(integer_row(GgmlType::Q8_0, &[0; 33], &mut c, &mut [0.0], &mut []).is_err());
    assert!(integer_row(GgmlType::Q8_0, &[0; 34], &mut c, &mut [], &mut []).is_err());
    assert!(integer_row(GgmlType::Q4_1, &[0; 20], &mut c, &mut [0.0], &mut []).is_err());
    assert!(integer_row(GgmlType::Q8_0, &[0; 34], &mut c[..31], &mut [0.0], &mut []).is_err());
}
