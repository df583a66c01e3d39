//! Core ML artefacts needed by the LUT-6 bundle.

pub mod blob;

pub use blob::{
    Blob, BlobFile, BlobWriter, MilDType, ALIGNMENT, HEADER_LEN, METADATA_LEN, SENTINEL,
};
