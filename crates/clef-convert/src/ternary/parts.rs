//! Bytes of converted tensors, produced in calibration order (layer by layer) but written in
//! the bundle's file order: appended to one scratch file as they are made, each tensor a list
//! of chunks, and streamed back when `model.safetensors` is assembled. Peak memory stays at
//! one layer's worth of quantized data, whatever the model size. A [`StoreState`] taken at a
//! commit point lets a stopped conversion reopen the store there ([`PartStore::resume`]).

use crate::error::{ConvertError, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

pub struct PartStore {
    path: PathBuf,
    out: BufWriter<File>,
    len: u64,
    chunks: HashMap<String, Vec<(u64, u64)>>,
}

fn io_error(path: &Path, e: std::io::Error) -> ConvertError {
    ConvertError::Invalid(format!("{}: {e}", path.display()))
}

/// A store's length and chunks at a commit point, as a conversion journal records them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreState {
    pub len: u64,
    /// Per tensor: its (offset, length) chunks in order.
    pub chunks: BTreeMap<String, Vec<(u64, u64)>>,
}

impl PartStore {
    /// Reopens the store at `path` as it was at `state`: whatever was appended after that
    /// commit (by a run stopped mid-unit) is cut off.
    pub fn resume(path: &Path, state: &StoreState) -> Result<PartStore> {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| io_error(path, e))?;
        let have = file.metadata().map_err(|e| io_error(path, e))?.len();
        if have < state.len {
            return Err(ConvertError::Invalid(format!(
                "{}: {have} bytes, but the journal committed {}",
                path.display(),
                state.len
            )));
        }
        file.set_len(state.len).map_err(|e| io_error(path, e))?;
        file.seek(SeekFrom::Start(state.len))
            .map_err(|e| io_error(path, e))?;
        Ok(PartStore {
            path: path.to_path_buf(),
            out: BufWriter::with_capacity(1 << 20, file),
            len: state.len,
            chunks: state.chunks.clone().into_iter().collect(),
        })
    }

    /// Makes everything appended so far durable and returns the state to journal.
    pub fn commit(&mut self) -> Result<StoreState> {
        self.out.flush().map_err(|e| io_error(&self.path, e))?;
        self.out
            .get_ref()
            .sync_data()
            .map_err(|e| io_error(&self.path, e))?;
        Ok(StoreState {
            len: self.len,
            chunks: self.chunks.clone().into_iter().collect(),
        })
    }

    /// Every byte stored for `name`, in order (a resumed conversion reinstalls finished
    /// layers from them).
    pub fn read(&mut self, name: &str) -> Result<Vec<u8>> {
        self.out.flush().map_err(|e| io_error(&self.path, e))?;
        let chunks = self.chunks.get(name).ok_or_else(|| {
            ConvertError::Invalid(format!("no converted data for tensor `{name}`"))
        })?;
        let mut file = File::open(&self.path).map_err(|e| io_error(&self.path, e))?;
        let mut out = Vec::with_capacity(chunks.iter().map(|c| c.1 as usize).sum());
        for &(offset, len) in chunks {
            file.seek(SeekFrom::Start(offset))
                .map_err(|e| io_error(&self.path, e))?;
            let at = out.len();
            out.resize(at + len as usize, 0);
            file.read_exact(&mut out[at..])
                .map_err(|e| io_error(&self.path, e))?;
        }
        Ok(out)
    }

    /// A new, empty store at `path` (created or truncated).
    pub fn create(path: &Path) -> Result<PartStore> {
        let file = File::create(path).map_err(|e| io_error(path, e))?;
        Ok(PartStore {
            path: path.to_path_buf(),
            out: BufWriter::with_capacity(1 << 20, file),
            len: 0,
            chunks: HashMap::new(),
        })
    }

    /// Appends `bytes` to tensor `name` (after its earlier chunks).
    pub fn append(&mut self, name: &str, bytes: &[u8]) -> Result<()> {
        self.out
            .write_all(bytes)
            .map_err(|e| io_error(&self.path, e))?;
        self.chunks
            .entry(name.to_string())
            .or_default()
            .push((self.len, bytes.len() as u64));
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// Total bytes stored for `name` (0 when absent).
    pub fn bytes_of(&self, name: &str) -> u64 {
        self.chunks
            .get(name)
            .map_or(0, |c| c.iter().map(|(_, n)| n).sum())
    }

    pub fn contains(&self, name: &str) -> bool {
        self.chunks.contains_key(name)
    }

    /// Finishes writing and returns a reader over the stored chunks.
    pub fn into_reader(self) -> Result<PartReader> {
        let path = self.path.clone();
        let file = self
            .out
            .into_inner()
            .map_err(|e| io_error(&path, e.into_error()))?;
        drop(file);
        let file = File::open(&path).map_err(|e| io_error(&path, e))?;
        Ok(PartReader {
            path,
            file,
            chunks: self.chunks,
        })
    }
}

pub struct PartReader {
    path: PathBuf,
    file: File,
    chunks: HashMap<String, Vec<(u64, u64)>>,
}

impl PartReader {
    /// Copies every chunk of `name`, in order, to `out`.
    pub fn copy_to(&mut self, name: &str, out: &mut dyn Write) -> std::io::Result<()> {
        let Some(chunks) = self.chunks.get(name) else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("no converted data for tensor `{name}`"),
            ));
        };
        let mut buf = vec![0u8; 1 << 20];
        for &(offset, len) in chunks {
            self.file.seek(SeekFrom::Start(offset))?;
            let mut left = len;
            while left > 0 {
                let n = left.min(buf.len() as u64) as usize;
                self.file.read_exact(&mut buf[..n])?;
                out.write_all(&buf[..n])?;
                left -= n as u64;
            }
        }
        Ok(())
    }

    /// Deletes the scratch file.
    pub fn remove(self) -> Result<()> {
        drop(self.file);
        std::fs::remove_file(&self.path).map_err(|e| io_error(&self.path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_come_back_in_order_per_tensor() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = PartStore::create(&dir.path().join("parts")).unwrap();
        s.append("a", &[1, 2]).unwrap();
        s.append("b", &[9]).unwrap();
        s.append("a", &[3]).unwrap();
        assert_eq!(s.bytes_of("a"), 3);
        assert!(!s.contains("c"));
        let mut r = s.into_reader().unwrap();
        let mut out = Vec::new();
        r.copy_to("a", &mut out).unwrap();
        r.copy_to("b", &mut out).unwrap();
        assert_eq!(out, vec![1, 2, 3, 9]);
        assert!(r.copy_to("c", &mut out).is_err());
        r.remove().unwrap();
        assert!(!dir.path().join("parts").exists());
    }

    /// A store reopened at a commit point forgets what came after it and goes on appending.
    #[test]
    fn a_resumed_store_continues_from_its_commit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("parts");
        let mut s = PartStore::create(&path).unwrap();
        s.append("a", &[1, 2]).unwrap();
        let state = s.commit().unwrap();
        s.append("b", &[7, 7, 7]).unwrap();
        s.append("a", &[3]).unwrap();
        drop(s.commit().unwrap());
        drop(s);
        let mut s = PartStore::resume(&path, &state).unwrap();
        assert!(!s.contains("b"));
        assert_eq!(s.read("a").unwrap(), [1, 2]);
        s.append("a", &[4]).unwrap();
        s.append("c", &[5]).unwrap();
        assert_eq!(s.read("a").unwrap(), [1, 2, 4]);
        let mut r = s.into_reader().unwrap();
        let mut out = Vec::new();
        r.copy_to("a", &mut out).unwrap();
        r.copy_to("c", &mut out).unwrap();
        assert_eq!(out, [1, 2, 4, 5]);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 4);
        let long = StoreState {
            len: 99,
            ..Default::default()
        };
        assert!(PartStore::resume(&path, &long).is_err());
    }
}
