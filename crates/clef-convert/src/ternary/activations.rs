//! The calibration records' hidden rows between two layers (formats.md §6 step 2: kept per
//! record in f32, spilled to disk when they do not fit the memory budget). Two stores
//! alternate: the inputs of the current layer and the inputs of the next.

use crate::error::{ConvertError, Result};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

enum Backing {
    Memory(Vec<Vec<f32>>),
    File {
        file: File,
        path: PathBuf,
        offsets: Vec<u64>,
    },
}

/// `[len_i, hidden]` f32 rows per record.
pub struct Activations {
    hidden: usize,
    lens: Vec<usize>,
    backing: Backing,
}

fn io_error(path: &Path, e: std::io::Error) -> ConvertError {
    ConvertError::Invalid(format!("{}: {e}", path.display()))
}

impl Activations {
    /// Room for records of `lens` rows of width `hidden`: in memory when the total is at most
    /// `budget` bytes, else in a file at `spill` (created, removed by [`Activations::remove`]).
    pub fn new(lens: &[usize], hidden: usize, budget: u64, spill: &Path) -> Result<Activations> {
        let total: u64 = lens.iter().map(|&l| (l * hidden * 4) as u64).sum();
        let backing = if total <= budget {
            Backing::Memory(vec![Vec::new(); lens.len()])
        } else {
            let file = File::options()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(spill)
                .map_err(|e| io_error(spill, e))?;
            let mut offsets = Vec::with_capacity(lens.len());
            let mut at = 0u64;
            for &l in lens {
                offsets.push(at);
                at += (l * hidden * 4) as u64;
            }
            Backing::File {
                file,
                path: spill.to_path_buf(),
                offsets,
            }
        };
        Ok(Activations {
            hidden,
            lens: lens.to_vec(),
            backing,
        })
    }

    pub fn len(&self) -> usize {
        self.lens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lens.is_empty()
    }

    pub fn spilled(&self) -> bool {
        matches!(self.backing, Backing::File { .. })
    }

    /// Record `i`'s rows.
    pub fn get(&mut self, i: usize) -> Result<Vec<f32>> {
        let n = self.lens[i] * self.hidden;
        match &mut self.backing {
            Backing::Memory(v) => {
                if v[i].len() != n {
                    return Err(ConvertError::Calibration(format!(
                        "activations of record {i} were never stored"
                    )));
                }
                Ok(v[i].clone())
            }
            Backing::File {
                file,
                path,
                offsets,
            } => {
                let mut bytes = vec![0u8; n * 4];
                file.seek(SeekFrom::Start(offsets[i]))
                    .and_then(|_| file.read_exact(&mut bytes))
                    .map_err(|e| io_error(path, e))?;
                Ok(bytes
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect())
            }
        }
    }

    /// Stores record `i`'s rows (`[len_i, hidden]`).
    pub fn set(&mut self, i: usize, rows: &[f32]) -> Result<()> {
        if rows.len() != self.lens[i] * self.hidden {
            return Err(ConvertError::Calibration(format!(
                "record {i}: {} values for {} rows of {}",
                rows.len(),
                self.lens[i],
                self.hidden
            )));
        }
        match &mut self.backing {
            Backing::Memory(v) => v[i] = rows.to_vec(),
            Backing::File {
                file,
                path,
                offsets,
            } => {
                let bytes: Vec<u8> = rows.iter().flat_map(|x| x.to_le_bytes()).collect();
                file.seek(SeekFrom::Start(offsets[i]))
                    .and_then(|_| file.write_all(&bytes))
                    .map_err(|e| io_error(path, e))?;
            }
        }
        Ok(())
    }

    /// Frees the memory or deletes the spill file.
    pub fn remove(self) -> Result<()> {
        if let Backing::File { file, path, .. } = self.backing {
            drop(file);
            std::fs::remove_file(&path).map_err(|e| io_error(&path, e))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_and_file_backings_agree() {
        let dir = tempfile::tempdir().unwrap();
        for budget in [u64::MAX, 0] {
            let spill = dir.path().join("acts");
            let mut a = Activations::new(&[2, 1], 3, budget, &spill).unwrap();
            assert_eq!(a.spilled(), budget == 0);
            assert!(a.get(0).is_err() || a.spilled());
            a.set(1, &[7.0, 8.0, 9.0]).unwrap();
            a.set(0, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
            assert!(a.set(0, &[1.0]).is_err());
            assert_eq!(a.get(1).unwrap(), vec![7.0, 8.0, 9.0]);
            assert_eq!(a.get(0).unwrap(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
            a.remove().unwrap();
            assert!(!spill.exists());
        }
    }
}
