//! Byte-for-byte copies of release tensors (embeddings, `lm_head`, vision) with ordinary file
//! reads in bounded chunks. Going through the memory map would make every copied page part of
//! this process's resident set until the whole tensor is written (2.5 GB for the 27B
//! embeddings); reads keep the resident set at one chunk.

use crate::error::{ConvertError, Result};
use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Bytes per read.
const CHUNK: usize = 8 << 20;

/// Where a tensor's bytes live: file, absolute offset, length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub file: PathBuf,
    pub offset: u64,
    pub len: u64,
}

fn invalid(path: &Path, m: impl std::fmt::Display) -> ConvertError {
    ConvertError::Invalid(format!("{}: {m}", path.display()))
}

/// Every tensor's location in the safetensors files `files` (their headers only are read).
pub fn locate(files: &[PathBuf]) -> Result<HashMap<String, Location>> {
    let mut out = HashMap::new();
    for path in files {
        let io = |e| ConvertError::Io {
            path: path.clone(),
            source: e,
        };
        let mut f = File::open(path).map_err(io)?;
        let file_len = f.metadata().map_err(io)?.len();
        let mut n = [0u8; 8];
        f.read_exact(&mut n).map_err(io)?;
        let header_len = u64::from_le_bytes(n);
        // the header precedes the data, so it cannot be longer than the file
        if header_len > file_len.saturating_sub(8) {
            return Err(invalid(path, "header longer than the file"));
        }
        let mut header = vec![0u8; header_len as usize];
        f.read_exact(&mut header).map_err(io)?;
        let v: serde_json::Value = serde_json::from_slice(&header).map_err(|e| invalid(path, e))?;
        let obj = v
            .as_object()
            .ok_or_else(|| invalid(path, "header is not an object"))?;
        let data = 8 + header_len;
        for (name, info) in obj {
            if name == "__metadata__" {
                continue;
            }
            let offs = info
                .get("data_offsets")
                .and_then(|o| o.as_array())
                .filter(|o| o.len() == 2)
                .and_then(|o| Some((o[0].as_u64()?, o[1].as_u64()?)))
                .ok_or_else(|| invalid(path, format!("`{name}` has no data_offsets")))?;
            if offs.1 < offs.0 || data + offs.1 > file_len {
                return Err(invalid(path, format!("`{name}` lies outside the file")));
            }
            out.insert(
                name.clone(),
                Location {
                    file: path.clone(),
                    offset: data + offs.0,
                    len: offs.1 - offs.0,
                },
            );
        }
    }
    Ok(out)
}

/// Copies the bytes at `loc` into `out`, one chunk at a time.
pub fn copy_to(loc: &Location, out: &mut dyn Write) -> std::io::Result<()> {
    let mut f = File::open(&loc.file)?;
    f.seek(SeekFrom::Start(loc.offset))?;
    let mut buf = vec![0u8; CHUNK.min(loc.len as usize)];
    let mut left = loc.len as usize;
    while left > 0 {
        let n = left.min(buf.len());
        f.read_exact(&mut buf[..n])?;
        out.write_all(&buf[..n])?;
        left -= n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_match_the_mapped_tensors() {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/models/tiny-a/model.safetensors");
        let locs = locate(std::slice::from_ref(&path)).unwrap();
        let mapped = clef_model::checkpoint::safetensors_file::open(&path).unwrap();
        assert_eq!(locs.len(), mapped.tensors.len());
        for t in &mapped.tensors {
            let mut copied = Vec::new();
            copy_to(&locs[&t.name], &mut copied).unwrap();
            assert_eq!(copied, t.bytes(), "{}", t.name);
        }
        let bad = std::env::temp_dir().join(format!("clef-copy-{}", std::process::id()));
        std::fs::write(&bad, [255u8; 16]).unwrap();
        assert!(locate(std::slice::from_ref(&bad)).is_err());
        let _ = std::fs::remove_file(bad);
    }
}
