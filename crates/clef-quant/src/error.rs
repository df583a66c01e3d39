//! One error type for the whole crate: every failure on user data is a typed value, never a panic.

use clef_formats::coreml::BlobError;
use clef_formats::FormatError;
use thiserror::Error;

/// Result alias used throughout the crate.
pub type Result<T> = std::result::Result<T, QuantError>;

/// Everything that can go wrong while quantizing, packing or reading packed data.
#[derive(Debug, Error)]
pub enum QuantError {
    /// A buffer, shape or code that breaks a storage format's rules (clef-formats' checks,
    /// converted once, whatever the rule).
    #[error(transparent)]
    Format(#[from] FormatError),
    /// The Core ML blob storage (clef-formats' `coreml`).
    #[error(transparent)]
    Blob(#[from] BlobError),
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
    /// An input value is NaN or infinite.
    #[error("{what}: non-finite value at index {index}")]
    NonFinite { what: &'static str, index: usize },
    /// A table entry does not fit in FP16.
    #[error("value {value} does not fit in FP16")]
    F16Overflow { value: f64 },
    /// The damped Hessian could not be factorized even after raising the damping.
    #[error("Hessian is not positive definite (last damping factor {damp})")]
    NotPositiveDefinite { damp: f64 },
    /// A dense decomposition did not converge.
    #[error("{what} did not converge")]
    NoConvergence { what: &'static str },
    /// A model configuration is missing a key or has an unusable value.
    #[error("model config: {0}")]
    Config(String),
    /// An I/O failure while writing or reading a file.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl QuantError {
    /// A buffer whose length is not the one its shape implies.
    pub(crate) fn length(what: &'static str, expected: usize, got: usize) -> Self {
        FormatError::LengthMismatch {
            what,
            expected,
            got,
        }
        .into()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A format's error passes through whole: the same value inside, the same message outside,
    /// whatever its kind.
    #[test]
    fn format_and_blob_errors_convert_once() {
        let format = [
            FormatError::SizeOverflow { what: "w" },
            FormatError::CodeOutOfRange {
                what: "trits",
                index: 3,
                value: 250,
                max: 242,
            },
            FormatError::ScaleOverflow {
                group: 2,
                amax: "1e10".into(),
            },
        ];
        for e in format {
            let q = QuantError::from(e.clone());
            assert_eq!(q.to_string(), e.to_string());
            assert!(matches!(q, QuantError::Format(ref inner) if *inner == e));
        }
        let blob = QuantError::from(BlobError::Malformed("short".into()));
        assert_eq!(blob.to_string(), "weight blob file: short");
        assert_eq!(
            QuantError::length("row", 3, 2).to_string(),
            "row: expected 3 elements, got 2"
        );
    }
}
