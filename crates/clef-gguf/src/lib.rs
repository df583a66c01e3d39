//! GGUF, llama.cpp's model container (ggml `docs/gguf.md`, versions 2 and 3, little-endian):
//! a header, typed metadata, a directory of tensors and their aligned data. [`read`] checks a
//! whole file before anything uses it: every length against the bytes that are there (so a
//! hostile count cannot make it allocate), every tensor type against ggml's table, every shape
//! against whole blocks and every data range against the file, each failure an error naming
//! the key or tensor. It borrows the bytes and copies no tensor data: the caller maps the file
//! and reads tensors where [`TensorInfo::range`] says.
//!
//! What a model's metadata and tensor names mean is the model crate's business; this crate
//! knows the container only. [`write`] makes files (tests and fixtures).

mod error;
mod metadata;
mod reader;
pub mod write;

pub use clef_formats::ggml::GgmlType;
pub use error::{GgufError, Result};
pub use metadata::{Metadata, Value};
pub use reader::{read, Gguf, TensorInfo, DEFAULT_ALIGNMENT, MAGIC};
