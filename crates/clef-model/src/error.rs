//! Errors of model loading and inference. Every variant names the file or tensor involved,
//! because a user pointing the engine at a damaged download needs to know which part to fetch
//! again.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: invalid JSON: {message}")]
    Json { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    Config { path: PathBuf, message: String },
    #[error(
        "{path}: not a valid safetensors file ({message}); the file may be truncated or corrupt"
    )]
    Safetensors { path: PathBuf, message: String },
    #[error("missing tensor `{name}` (expected shape {expected:?})")]
    MissingTensor { name: String, expected: Vec<usize> },
    #[error("tensor `{name}` has shape {found:?}, expected {expected:?}")]
    TensorShape {
        name: String,
        found: Vec<usize>,
        expected: Vec<usize>,
    },
    #[error("tensor `{name}` has unsupported dtype {dtype} for its role")]
    TensorDtype { name: String, dtype: String },
    #[error("unexpected tensor `{name}` in {file}: it is not part of this model's layout")]
    ExtraTensor { name: String, file: String },
    #[error("tensor `{name}` appears in more than one file ({first} and {second})")]
    DuplicateTensor {
        name: String,
        first: String,
        second: String,
    },
    #[error("invalid input: {0}")]
    Input(String),
    /// A weight the kernels cannot use as stored (lengths that do not match its shape, ...),
    /// named.
    #[error("{name}: {source}")]
    Kernel {
        name: String,
        #[source]
        source: clef_kernels::KernelError,
    },
    #[error("inference produced a non-finite value in {0}")]
    NonFinite(String),
    /// FP16 activation emulation overflowed (formats.md §2.9: refused, never answered).
    #[error("FP16 overflow in {0}")]
    Fp16Overflow(String),
    #[error("cancelled")]
    Cancelled,
}

impl ModelError {
    /// A kernel's refusal of the weight `name`.
    pub fn kernel(name: &str, source: clef_kernels::KernelError) -> Self {
        ModelError::Kernel {
            name: name.to_string(),
            source,
        }
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ModelError::Io {
            path: path.into(),
            source,
        }
    }

    pub fn config(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        ModelError::Config {
            path: path.into(),
            message: message.into(),
        }
    }
}

pub type Result<T, E = ModelError> = std::result::Result<T, E>;
