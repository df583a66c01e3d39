//! Reading a GGUF file's header, metadata and tensor directory from its bytes, checked.

use crate::error::{GgufError, Result};
use crate::metadata::{Metadata, Value};
use clef_formats::ggml::GgmlType;
use std::ops::Range;

/// `GGUF`, the first four bytes.
pub const MAGIC: [u8; 4] = *b"GGUF";
/// Tensor data alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: usize = 32;
/// ggml's `GGML_MAX_DIMS`.
const MAX_DIMS: usize = 4;

/// One tensor of the directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    /// ggml's `ne`: the innermost (contiguous) dimension first. A matrix `[rows, cols]` in
    /// PyTorch's order is `[cols, rows]` here.
    pub dims: Vec<usize>,
    pub ty: GgmlType,
    /// Absolute byte offset of the data in the file.
    pub offset: usize,
    /// Bytes of the data.
    pub bytes: usize,
}

impl TensorInfo {
    /// The data's byte range in the file.
    pub fn range(&self) -> Range<usize> {
        self.offset..self.offset + self.bytes
    }

    /// Elements in all.
    pub fn numel(&self) -> usize {
        self.dims.iter().product()
    }

    /// The shape in PyTorch's order (outermost first), as safetensors stores it.
    pub fn shape(&self) -> Vec<usize> {
        self.dims.iter().rev().copied().collect()
    }
}

/// A checked GGUF file: its version, metadata and tensors (in file order).
#[derive(Clone, Debug)]
pub struct Gguf {
    pub version: u32,
    pub metadata: Metadata,
    pub tensors: Vec<TensorInfo>,
    /// Alignment of the tensor data (`general.alignment`).
    pub alignment: usize,
    /// Where the tensor data starts.
    pub data_offset: usize,
}

impl Gguf {
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }
}

/// Reads and checks the header, metadata and directory of the GGUF file whose bytes are
/// `bytes` (the whole file).
pub fn read(bytes: &[u8]) -> Result<Gguf> {
    let mut r = Cursor { bytes, at: 0 };
    let magic = r.take(4, "the magic number")?;
    if magic != MAGIC {
        return Err(GgufError::Magic {
            found: magic.to_vec(),
        });
    }
    let version = r.u32("the version")?;
    if !(2..=3).contains(&version) {
        return Err(GgufError::Version(version));
    }
    let n_tensors = r.u64("the tensor count")?;
    let n_kv = r.u64("the metadata count")?;
    // Each entry needs at least a key length and a type (12 bytes), each tensor a name length,
    // a dimension count, a type and an offset (24 bytes): counts beyond what the file can hold
    // are refused before anything is allocated for them.
    r.fits(n_kv, 12, "the metadata entries")?;
    let mut metadata = Metadata::default();
    for _ in 0..n_kv {
        let key = r.string("a metadata key")?;
        let ty = r.u32(&format!("the type of `{key}`"))?;
        let value = r.value(ty, &key, true)?;
        metadata.insert(key, value)?;
    }
    let alignment = match metadata.get("general.alignment") {
        None => DEFAULT_ALIGNMENT,
        Some(Value::U32(a)) if *a > 0 && a.is_power_of_two() => *a as usize,
        Some(v) => {
            return Err(GgufError::metadata(
                "general.alignment",
                format!("must be a u32 power of two, found {v:?}"),
            ))
        }
    };

    r.fits(n_tensors, 24, "the tensor directory")?;
    let mut infos = Vec::with_capacity(n_tensors as usize);
    let mut names = std::collections::HashSet::new();
    for _ in 0..n_tensors {
        let name = r.string("a tensor name")?;
        if !names.insert(name.clone()) {
            return Err(GgufError::tensor(&name, "the name appears twice"));
        }
        let n_dims = r.u32(&format!("the dimension count of `{name}`"))? as usize;
        if n_dims == 0 || n_dims > MAX_DIMS {
            return Err(GgufError::tensor(
                &name,
                format!("{n_dims} dimensions (ggml has 1 to {MAX_DIMS})"),
            ));
        }
        let mut dims = Vec::with_capacity(n_dims);
        for _ in 0..n_dims {
            let d = r.u64(&format!("the dimensions of `{name}`"))?;
            dims.push(usize::try_from(d).map_err(|_| {
                GgufError::tensor(&name, format!("dimension {d} does not fit in memory"))
            })?);
        }
        let id = r.u32(&format!("the type of `{name}`"))?;
        let ty = GgmlType::from_id(id)
            .ok_or_else(|| GgufError::tensor(&name, format!("unknown ggml tensor type {id}")))?;
        let offset = r.u64(&format!("the data offset of `{name}`"))?;
        infos.push((name, dims, ty, offset));
    }
    let data_offset = r.at.div_ceil(alignment) * alignment;

    let file_len = r.bytes.len();
    let mut tensors = Vec::with_capacity(infos.len());
    for (name, dims, ty, offset) in infos {
        let numel = dims
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or_else(|| GgufError::tensor(&name, format!("shape {dims:?} overflows")))?;
        let (per_block, _) = ty.block();
        if dims[0] % per_block != 0 {
            return Err(GgufError::tensor(
                &name,
                format!(
                    "rows of {} values are not whole {ty} blocks of {per_block}",
                    dims[0]
                ),
            ));
        }
        let bytes = ty
            .bytes_for(numel)
            .ok_or_else(|| GgufError::tensor(&name, format!("shape {dims:?} overflows")))?;
        if offset % alignment as u64 != 0 {
            return Err(GgufError::tensor(
                &name,
                format!("data offset {offset} is not a multiple of the alignment {alignment}"),
            ));
        }
        let start = usize::try_from(offset)
            .ok()
            .and_then(|o| o.checked_add(data_offset))
            .filter(|s| s.checked_add(bytes).is_some_and(|end| end <= file_len))
            .ok_or_else(|| GgufError::Truncated {
                what: format!("the data of tensor `{name}` ({ty}, {dims:?})"),
                at: data_offset.saturating_add(offset as usize),
                needed: bytes as u64,
                len: file_len,
            })?;
        tensors.push(TensorInfo {
            name,
            dims,
            ty,
            offset: start,
            bytes,
        });
    }
    // Tensors must not share bytes: a damaged directory could otherwise alias two weights.
    let mut by_start: Vec<&TensorInfo> = tensors.iter().collect();
    by_start.sort_by_key(|t| t.offset);
    for pair in by_start.windows(2) {
        if pair[0].offset + pair[0].bytes > pair[1].offset {
            return Err(GgufError::tensor(
                &pair[1].name,
                format!("its data overlaps that of `{}`", pair[0].name),
            ));
        }
    }
    Ok(Gguf {
        version,
        metadata,
        tensors,
        alignment,
        data_offset,
    })
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8]> {
        let left = self.bytes.len() - self.at;
        if n > left as u64 {
            return Err(GgufError::Truncated {
                what: what.to_string(),
                at: self.at,
                needed: n,
                len: self.bytes.len(),
            });
        }
        let s = &self.bytes[self.at..self.at + n as usize];
        self.at += n as usize;
        Ok(s)
    }

    /// Fails unless `count` items of at least `min` bytes each can follow.
    fn fits(&self, count: u64, min: u64, what: &str) -> Result<()> {
        let left = (self.bytes.len() - self.at) as u64;
        match count.checked_mul(min) {
            Some(n) if n <= left => Ok(()),
            _ => Err(GgufError::Truncated {
                what: format!("{what} ({count} of them)"),
                at: self.at,
                needed: count.saturating_mul(min),
                len: self.bytes.len(),
            }),
        }
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        Ok(self.take(N as u64, what)?.try_into().expect("N bytes"))
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    fn string(&mut self, what: &str) -> Result<String> {
        let n = self.u64(what)?;
        let at = self.at;
        let raw = self.take(n, what)?;
        String::from_utf8(raw.to_vec()).map_err(|_| {
            GgufError::metadata(what, format!("the string at offset {at} is not UTF-8"))
        })
    }

    /// A value of GGUF type `ty`; `outer` allows an array (arrays do not nest).
    fn value(&mut self, ty: u32, key: &str, outer: bool) -> Result<Value> {
        let what = format!("the value of `{key}`");
        Ok(match ty {
            0 => Value::U8(self.array::<1>(&what)?[0]),
            1 => Value::I8(self.array::<1>(&what)?[0] as i8),
            2 => Value::U16(u16::from_le_bytes(self.array(&what)?)),
            3 => Value::I16(i16::from_le_bytes(self.array(&what)?)),
            4 => Value::U32(u32::from_le_bytes(self.array(&what)?)),
            5 => Value::I32(i32::from_le_bytes(self.array(&what)?)),
            6 => Value::F32(f32::from_le_bytes(self.array(&what)?)),
            7 => match self.array::<1>(&what)?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => return Err(GgufError::metadata(key, format!("bool byte {b}"))),
            },
            8 => Value::String(self.string(&what)?),
            9 if outer => {
                let item = self.u32(&what)?;
                let n = self.u64(&what)?;
                let min = match item {
                    0 | 1 | 7 => 1,
                    2 | 3 => 2,
                    4..=6 => 4,
                    8 | 10..=12 => 8,
                    9 => return Err(GgufError::metadata(key, "an array of arrays")),
                    t => return Err(GgufError::metadata(key, format!("unknown item type {t}"))),
                };
                self.fits(n, min, &what)?;
                let mut items = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    items.push(self.value(item, key, false)?);
                }
                Value::Array(items)
            }
            10 => Value::U64(u64::from_le_bytes(self.array(&what)?)),
            11 => Value::I64(i64::from_le_bytes(self.array(&what)?)),
            12 => Value::F64(f64::from_le_bytes(self.array(&what)?)),
            t => return Err(GgufError::metadata(key, format!("unknown value type {t}"))),
        })
    }
}
