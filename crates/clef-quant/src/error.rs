//! One error type for the whole crate: every failure on user data is a typed value, never a panic.

use thiserror::Error;

/// Result alias used throughout the crate.
pub type Result<T> = std::result::Result<T, QuantError>;

/// Everything that can go wrong while quantizing, packing or reading packed data.
#[derive(Debug, Error)]
pub enum QuantError {
    /// A buffer does not have the length its declared shape implies.
    #[error("{what}: expected {expected} elements, got {got}")]
    LengthMismatch {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    /// A dimension that must be a multiple of something is not.
    #[error("{what} = {value} is not a multiple of {multiple}")]
    NotMultiple {
        what: &'static str,
        value: usize,
        multiple: usize,
    },
    /// A dimension or parameter is outside its allowed range.
    #[error("{what} = {value} is out of range ({allowed})")]
    OutOfRange {
        what: &'static str,
        value: u64,
        allowed: &'static str,
    },
    /// A shape whose element or byte count does not fit in memory arithmetic.
    #[error("{what}: size overflows")]
    SizeOverflow { what: &'static str },
    /// An input value is NaN or infinite.
    #[error("{what}: non-finite value at index {index}")]
    NonFinite { what: &'static str, index: usize },
    /// A code (index, trit byte, nibble) is larger than its format allows.
    #[error("{what}: value {value} at index {index} exceeds the maximum {max}")]
    CodeOutOfRange {
        what: &'static str,
        index: usize,
        value: u64,
        max: u64,
    },
    /// A table entry does not fit in FP16.
    #[error("value {value} does not fit in FP16")]
    F16Overflow { value: f64 },
    /// The damped Hessian could not be factorized even after raising the damping.
    #[error("Hessian is not positive definite (last damping factor {damp})")]
    NotPositiveDefinite { damp: f64 },
    /// A dense decomposition did not converge.
    #[error("{what} did not converge")]
    NoConvergence { what: &'static str },
    /// A MIL blob storage file is malformed.
    #[error("weight blob file: {0}")]
    Blob(String),
    /// A model configuration is missing a key or has an unusable value.
    #[error("model config: {0}")]
    Config(String),
    /// An I/O failure while writing or reading a blob file.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl From<clef_formats::FormatError> for QuantError {
    fn from(e: clef_formats::FormatError) -> Self {
        use clef_formats::FormatError as F;
        match e {
            F::LengthMismatch {
                what,
                expected,
                got,
            } => QuantError::LengthMismatch {
                what,
                expected,
                got,
            },
            F::SizeOverflow { what } => QuantError::SizeOverflow { what },
            F::CodeOutOfRange {
                what,
                index,
                value,
                max,
            } => QuantError::CodeOutOfRange {
                what,
                index,
                value,
                max,
            },
            F::NonFinite { what, index, .. } => QuantError::NonFinite { what, index },
            // The scale amax/127 that did not fit.
            F::ScaleOverflow { amax, .. } => QuantError::F16Overflow {
                value: amax.parse::<f64>().unwrap_or(f64::INFINITY) / 127.0,
            },
            F::UnknownFormat { .. } => QuantError::Config(e.to_string()),
        }
    }
}

/// The blob storage's failures keep the messages they had when it lived in this crate.
impl From<clef_formats::coreml::BlobError> for QuantError {
    fn from(e: clef_formats::coreml::BlobError) -> Self {
        use clef_formats::coreml::BlobError as B;
        match e {
            B::Malformed(message) => QuantError::Blob(message),
            B::SizeOverflow { what } => QuantError::SizeOverflow { what },
            B::Io(e) => QuantError::Io(e),
        }
    }
}

/// `a * b` with an overflow check, for shape arithmetic on untrusted dimensions.
pub(crate) fn checked_mul(a: usize, b: usize, what: &'static str) -> Result<usize> {
    Ok(clef_formats::checked_mul(a, b, what)?)
}

/// Checks that `data.len() == rows * cols`.
pub(crate) fn check_len(what: &'static str, len: usize, rows: usize, cols: usize) -> Result<()> {
    Ok(clef_formats::check_len(what, len, rows, cols)?)
}

/// Rejects NaN and infinities, which would silently poison sorting, k-means and factorizations.
pub(crate) fn check_finite(what: &'static str, values: &[f32]) -> Result<()> {
    match values.iter().position(|v| !v.is_finite()) {
        Some(index) => Err(QuantError::NonFinite { what, index }),
        None => Ok(()),
    }
}
