//! Streaming safetensors writer: the header is computed from the tensor specs first, then each
//! tensor's bytes are produced on demand, so writing a multi-gigabyte checkpoint (synthetic
//! models, converted bundles) never holds more than one tensor's worth of data.

use crate::error::{ModelError, Result};
use crate::tensor::Dtype;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

#[derive(Clone, Debug)]
pub struct TensorSpec {
    pub name: String,
    pub dtype: Dtype,
    pub shape: Vec<usize>,
}

impl TensorSpec {
    pub fn new(name: impl Into<String>, dtype: Dtype, shape: &[usize]) -> Self {
        TensorSpec {
            name: name.into(),
            dtype,
            shape: shape.to_vec(),
        }
    }

    pub fn nbytes(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.size()
    }
}

/// Counts bytes so a producer that writes too few or too many is caught before the file is
/// declared complete.
struct Counting<'a, W: Write> {
    inner: &'a mut W,
    written: usize,
}

impl<W: Write> Write for Counting<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// One tensor of a file to write, by safetensors dtype name, for dtypes this crate does not
/// load itself (MLX's packed `U32` words).
pub struct RawSpec<'a> {
    pub name: &'a str,
    pub dtype: &'a str,
    pub shape: &'a [usize],
    pub nbytes: usize,
}

fn header_json(specs: &[RawSpec], metadata: &BTreeMap<String, String>) -> String {
    let mut obj = serde_json::Map::new();
    if !metadata.is_empty() {
        let m: serde_json::Map<String, serde_json::Value> = metadata
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect();
        obj.insert("__metadata__".into(), serde_json::Value::Object(m));
    }
    let mut offset = 0usize;
    for s in specs {
        let end = offset + s.nbytes;
        obj.insert(
            s.name.to_string(),
            serde_json::json!({
                "dtype": s.dtype,
                "shape": s.shape,
                "data_offsets": [offset, end],
            }),
        );
        offset = end;
    }
    let mut text = serde_json::Value::Object(obj).to_string();
    // The data section starts 8-byte aligned, as the reference writer pads it.
    while !(text.len() + 8).is_multiple_of(8) {
        text.push(' ');
    }
    text
}

/// Write `specs` in order; `fill(i, out)` must write exactly `specs[i].nbytes()` bytes.
/// Returns the file size.
pub fn write_safetensors<F>(
    path: &Path,
    specs: &[TensorSpec],
    metadata: &BTreeMap<String, String>,
    fill: F,
) -> Result<u64>
where
    F: FnMut(usize, &mut dyn Write) -> std::io::Result<()>,
{
    let names: Vec<String> = specs
        .iter()
        .map(|s| s.dtype.to_safetensors().to_string())
        .collect();
    let raw: Vec<RawSpec> = specs
        .iter()
        .zip(&names)
        .map(|(s, dtype)| RawSpec {
            name: &s.name,
            dtype,
            shape: &s.shape,
            nbytes: s.nbytes(),
        })
        .collect();
    write_safetensors_raw(path, &raw, metadata, fill)
}

/// [`write_safetensors`] with dtypes given by name.
pub fn write_safetensors_raw<F>(
    path: &Path,
    specs: &[RawSpec],
    metadata: &BTreeMap<String, String>,
    mut fill: F,
) -> Result<u64>
where
    F: FnMut(usize, &mut dyn Write) -> std::io::Result<()>,
{
    let io = |e| ModelError::io(path, e);
    let file = File::create(path).map_err(io)?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let header = header_json(specs, metadata);
    out.write_all(&(header.len() as u64).to_le_bytes())
        .map_err(io)?;
    out.write_all(header.as_bytes()).map_err(io)?;
    let mut total = 8 + header.len() as u64;
    for (i, spec) in specs.iter().enumerate() {
        let mut counting = Counting {
            inner: &mut out,
            written: 0,
        };
        fill(i, &mut counting).map_err(io)?;
        if counting.written != spec.nbytes {
            return Err(ModelError::Input(format!(
                "writer produced {} bytes for tensor `{}`, expected {}",
                counting.written, spec.name, spec.nbytes
            )));
        }
        total += spec.nbytes as u64;
    }
    out.flush().map_err(io)?;
    out.into_inner()
        .map_err(|e| ModelError::io(path, e.into_error()))?
        .sync_all()
        .map_err(io)?;
    Ok(total)
}
