//! Memory-mapping one safetensors file and listing its tensors without reading their data.

use crate::error::{ModelError, Result};
use crate::tensor::{Dtype, Storage, Tensor};
use memmap2::Mmap;
use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

/// Tensors of one file plus the file's `__metadata__` map.
pub struct SafetensorsFile {
    pub tensors: Vec<Tensor>,
    pub metadata: HashMap<String, String>,
}

pub fn open(path: &Path) -> Result<SafetensorsFile> {
    let file = File::open(path).map_err(|e| ModelError::io(path, e))?;
    // SAFETY: the mapping is read-only. A file modified by another process while mapped is
    // outside what any mmap-based loader can defend against; sizes are checked on load and
    // `clef verify` checks hashes.
    let mmap = unsafe { Mmap::map(&file) }.map_err(|e| ModelError::io(path, e))?;
    let (header_len, meta) =
        safetensors::SafeTensors::read_metadata(&mmap).map_err(|e| ModelError::Safetensors {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
    let data_start = 8 + header_len;
    let storage = Arc::new(Storage::Mapped(mmap));
    let mut tensors = Vec::new();
    for name in meta.offset_keys() {
        let Some(info) = meta.info(&name) else {
            continue;
        };
        let dtype = Dtype::from_safetensors(info.dtype).ok_or_else(|| ModelError::TensorDtype {
            name: name.clone(),
            dtype: format!("{:?}", info.dtype),
        })?;
        let (start, end) = info.data_offsets;
        tensors.push(Tensor::new(
            name,
            dtype,
            info.shape.clone(),
            storage.clone(),
            data_start + start,
            end - start,
        ));
    }
    Ok(SafetensorsFile {
        tensors,
        metadata: meta.metadata().clone().unwrap_or_default(),
    })
}
