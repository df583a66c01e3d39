//! What can be wrong with a GGUF file, each case naming where.

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, GgufError>;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GgufError {
    /// The first four bytes are not `GGUF`.
    #[error("not a GGUF file: the first bytes are {found:02x?}, not \"GGUF\"")]
    Magic { found: Vec<u8> },
    /// A version this reader does not know (1 used 32-bit counts; a byte-swapped number is a
    /// big-endian file).
    #[error("GGUF version {0} is not supported (versions 2 and 3, little-endian)")]
    Version(u32),
    /// The file ends inside the part named.
    #[error("truncated GGUF file: it ends inside {what} (needs {needed} bytes at offset {at}, the file has {len})")]
    Truncated {
        what: String,
        at: usize,
        needed: u64,
        len: usize,
    },
    /// A metadata entry that cannot be read or is not what its key requires.
    #[error("GGUF metadata `{key}`: {message}")]
    Metadata { key: String, message: String },
    /// A tensor whose directory entry cannot be used.
    #[error("GGUF tensor `{name}`: {message}")]
    Tensor { name: String, message: String },
}

impl GgufError {
    pub(crate) fn metadata(key: &str, message: impl Into<String>) -> Self {
        GgufError::Metadata {
            key: key.to_string(),
            message: message.into(),
        }
    }

    pub(crate) fn tensor(name: &str, message: impl Into<String>) -> Self {
        GgufError::Tensor {
            name: name.to_string(),
            message: message.into(),
        }
    }
}
