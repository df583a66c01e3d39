//! Typed errors for the few kernel entry points that validate input.

/// Shape or length problems detected before any work is done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// A buffer does not hold the number of elements (or bytes) its shape requires.
    #[error("{what}: expected {expected} {unit}, got {actual}")]
    LengthMismatch {
        what: &'static str,
        expected: usize,
        actual: usize,
        unit: &'static str,
    },
    /// `rows × cols` (times the element size) does not fit in `usize`.
    #[error("shape {rows} × {cols} overflows the address space")]
    ShapeOverflow { rows: usize, cols: usize },
    /// A stored format this build cannot widen.
    #[error("{what} is not supported")]
    Unsupported { what: String },
    /// A matrix whose rows are not whole blocks of its format.
    #[error("{what}: rows of {cols} values are not whole blocks of {block}")]
    PartialBlock {
        what: String,
        cols: usize,
        block: usize,
    },
}
