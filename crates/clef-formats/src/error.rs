//! Errors of packing and unpacking codes and of reading format names.

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, FormatError>;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// A buffer does not have the length its declared shape implies.
    #[error("{what}: expected {expected} elements, got {got}")]
    LengthMismatch {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    /// A shape whose element or byte count does not fit in memory arithmetic.
    #[error("{what}: size overflows")]
    SizeOverflow { what: &'static str },
    /// A code (index, trit byte, nibble) is larger than its format allows.
    #[error("{what}: value {value} at index {index} exceeds the maximum {max}")]
    CodeOutOfRange {
        what: &'static str,
        index: usize,
        value: u64,
        max: u64,
    },
    /// A value to quantize is NaN or infinite (formatted, so the error stays `Eq`).
    #[error("{what} at index {index} is {value}, not a finite number")]
    NonFinite {
        what: &'static str,
        index: usize,
        value: String,
    },
    /// A q8 group whose amax/127 is too large for an FP16 scale.
    #[error("group {group}: amax {amax} / 127 overflows an FP16 scale (largest 65504)")]
    ScaleOverflow { group: usize, amax: String },
    /// A ggml tensor type that [`crate::ggml::dequantize_row`] does not decode.
    #[error("ggml type {ty} is not dequantized by this clef.rs")]
    UnsupportedGgmlType { ty: &'static str },
    /// A ggml row whose element count is not a whole number of its type's blocks.
    #[error("{ty}: {elements} elements are not a whole number of {block}-element blocks")]
    PartialGgmlBlock {
        ty: &'static str,
        elements: usize,
        block: usize,
    },
    /// A ggml row whose bytes are not the count its elements take.
    #[error("{ty}: {elements} elements take {expected} bytes, got {got}")]
    GgmlByteLength {
        ty: &'static str,
        elements: usize,
        expected: usize,
        got: usize,
    },
    /// A manifest names a format (or a version of one) this clef.rs does not read.
    #[error("unknown bundle format `{name}` version {version} (this clef.rs reads {known})")]
    UnknownFormat {
        name: String,
        version: u32,
        known: String,
    },
}

/// `a * b` with an overflow check, for shape arithmetic on untrusted dimensions.
pub fn checked_mul(a: usize, b: usize, what: &'static str) -> Result<usize> {
    a.checked_mul(b).ok_or(FormatError::SizeOverflow { what })
}

/// Checks that `len == rows * cols`.
pub fn check_len(what: &'static str, len: usize, rows: usize, cols: usize) -> Result<()> {
    let expected = checked_mul(rows, cols, what)?;
    if len != expected {
        return Err(FormatError::LengthMismatch {
            what,
            expected,
            got: len,
        });
    }
    Ok(())
}
