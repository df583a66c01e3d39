//! The container reader on files made by `write::Writer`: what it reads back, and every kind of
//! damage refused with an error that names the part (never a panic, never an allocation sized by
//! an untrusted count).

use clef_gguf::write::Writer;
use clef_gguf::{read, GgmlType, GgufError, Value};

fn sample() -> Writer {
    let mut w = Writer::new();
    w.meta("general.architecture", Value::String("clef".into()))
        .meta("clef.block_count", Value::U32(2))
        .meta(
            "clef.rope.dimension_sections",
            Value::Array(vec![Value::I32(11), Value::I32(11)]),
        )
        .meta(
            "tokenizer.ggml.tokens",
            Value::Array(vec![Value::String("a".into()), Value::String("é".into())]),
        )
        .meta("clef.attention.layer_norm_epsilon", Value::F32(1e-5))
        .tensor(
            "norm.weight",
            &[8],
            GgmlType::F32,
            (0..8u32).flat_map(|i| (i as f32).to_le_bytes()).collect(),
        )
        .tensor("w.weight", &[3, 64], GgmlType::Q8_0, vec![7u8; 3 * 2 * 34])
        .tensor("e.weight", &[2, 4], GgmlType::F16, vec![1u8; 16]);
    w
}

#[test]
fn a_written_file_reads_back() {
    let bytes = sample().bytes();
    let g = read(&bytes).unwrap();
    assert_eq!(g.version, 3);
    assert_eq!(g.metadata.string("general.architecture").unwrap(), "clef");
    assert_eq!(g.metadata.uint("clef.block_count").unwrap(), 2);
    assert_eq!(
        g.metadata
            .uint_array("clef.rope.dimension_sections")
            .unwrap(),
        [11, 11]
    );
    assert_eq!(
        g.metadata.string_array("tokenizer.ggml.tokens").unwrap(),
        ["a", "é"]
    );
    assert!(
        (g.metadata
            .float("clef.attention.layer_norm_epsilon")
            .unwrap()
            - 1e-5)
            .abs()
            < 1e-12
    );
    assert_eq!(g.tensors.len(), 3);
    let w = g.tensor("w.weight").unwrap();
    assert_eq!(
        (w.dims.clone(), w.shape(), w.ty, w.bytes),
        (vec![64, 3], vec![3, 64], GgmlType::Q8_0, 204)
    );
    assert_eq!(w.offset % 32, 0);
    assert!(bytes[w.range()].iter().all(|&b| b == 7));
    let n = g.tensor("norm.weight").unwrap();
    assert_eq!(&bytes[n.range()][4..8], 1f32.to_le_bytes());
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = sample().bytes();
    let last = read(&bytes)
        .unwrap()
        .tensors
        .iter()
        .map(|t| t.offset + t.bytes)
        .max()
        .unwrap();
    for cut in 0..last {
        match read(&bytes[..cut]) {
            Err(GgufError::Truncated { .. }) | Err(GgufError::Magic { .. }) => {}
            other => panic!("cut at {cut}: {other:?}"),
        }
    }
}

#[test]
fn wrong_magic_and_versions_are_refused() {
    let mut bytes = sample().bytes();
    bytes[0] = b'g';
    assert!(matches!(read(&bytes), Err(GgufError::Magic { .. })));
    for v in [1u32, 4, 3u32.swap_bytes()] {
        let mut bytes = sample().bytes();
        bytes[4..8].copy_from_slice(&v.to_le_bytes());
        assert_eq!(read(&bytes).unwrap_err(), GgufError::Version(v));
    }
}

#[test]
fn hostile_counts_are_refused_before_allocating() {
    let bytes = sample().bytes();
    for (at, what) in [(8, "tensor"), (16, "metadata")] {
        let mut b = bytes.clone();
        b[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        let e = read(&b).unwrap_err();
        assert!(matches!(e, GgufError::Truncated { .. }), "{what}: {e}");
    }
    // a string length of 2^63
    let mut b = bytes.clone();
    b[24..32].copy_from_slice(&(1u64 << 63).to_le_bytes());
    assert!(matches!(read(&b), Err(GgufError::Truncated { .. })));
}

#[test]
fn bad_tensors_are_named() {
    let q8 = |dims: &[usize], n: usize| {
        let mut w = Writer::new();
        w.tensor("blk.0.ffn_up.weight", dims, GgmlType::Q8_0, vec![0; n]);
        w.bytes()
    };
    // 48 columns are not whole 32-value blocks
    let e = read(&q8(&[2, 48], 68)).unwrap_err();
    assert!(
        e.to_string().contains("blk.0.ffn_up.weight") && e.to_string().contains("blocks"),
        "{e}"
    );
    // the data runs past the end
    let mut b = q8(&[2, 64], 136);
    let end = read(&b).unwrap().tensors[0].range().end;
    b.truncate(end - 1);
    let e = read(&b).unwrap_err();
    assert!(
        matches!(e, GgufError::Truncated { .. }) && e.to_string().contains("blk.0.ffn_up.weight"),
        "{e}"
    );

    // an unknown type id (written as Q8_0, then patched: the id sits before the offset)
    let mut b = q8(&[2, 64], 136);
    let name_end = 24 + 8 + "blk.0.ffn_up.weight".len();
    let type_at = name_end + 4 + 2 * 8;
    assert_eq!(&b[type_at..type_at + 4], &8u32.to_le_bytes());
    b[type_at..type_at + 4].copy_from_slice(&31u32.to_le_bytes());
    let e = read(&b).unwrap_err();
    assert!(e.to_string().contains("unknown ggml tensor type 31"), "{e}");
    // five dimensions
    let mut b = q8(&[2, 64], 136);
    b[name_end..name_end + 4].copy_from_slice(&5u32.to_le_bytes());
    assert!(read(&b).unwrap_err().to_string().contains("5 dimensions"));
    // a misaligned offset
    let mut b = q8(&[2, 64], 136);
    b[type_at + 4..type_at + 12].copy_from_slice(&4u64.to_le_bytes());
    assert!(read(&b).unwrap_err().to_string().contains("alignment"));
}

#[test]
fn overlapping_and_duplicate_tensors_are_refused() {
    let mut w = Writer::new();
    w.tensor("a", &[32], GgmlType::F32, vec![0; 128]).tensor(
        "b",
        &[32],
        GgmlType::F32,
        vec![0; 128],
    );
    let mut b = w.bytes();
    // point b's offset at a's data
    let b_offset_at = 24 + (8 + 1 + 4 + 8 + 4 + 8) + (8 + 1 + 4 + 8 + 4);
    b[b_offset_at..b_offset_at + 8].copy_from_slice(&64u64.to_le_bytes());
    assert!(read(&b).unwrap_err().to_string().contains("overlaps"));

    let mut w = Writer::new();
    w.tensor("a", &[32], GgmlType::F32, vec![0; 128]).tensor(
        "a",
        &[32],
        GgmlType::F32,
        vec![0; 128],
    );
    assert!(read(&w.bytes()).unwrap_err().to_string().contains("twice"));
    let mut w = Writer::new();
    w.meta("k", Value::U8(1)).meta("k", Value::U8(2));
    assert!(read(&w.bytes()).unwrap_err().to_string().contains("twice"));
}

#[test]
fn metadata_accessors_say_what_is_wrong() {
    let bytes = sample().bytes();
    let g = read(&bytes).unwrap();
    let e = g.metadata.uint("general.architecture").unwrap_err();
    assert!(
        e.to_string().contains("general.architecture") && e.to_string().contains("string"),
        "{e}"
    );
    assert!(g
        .metadata
        .string("nope")
        .unwrap_err()
        .to_string()
        .contains("missing"));
    let mut w = Writer::new();
    w.meta("general.alignment", Value::U32(3));
    assert!(read(&w.bytes())
        .unwrap_err()
        .to_string()
        .contains("power of two"));
}
