//! MIL blob storage, version 2 (`weight.bin`, formats.md §2.5): the Core ML storage a LUT-6
//! bundle keeps its text weights in. A storage-format fact like the others of this crate, so
//! that the bundle's reader (`clef-ane`) and its writer (the converter) share it without the
//! reader depending on the quantizers.
//!
//! Layout: a 64-byte header (`u32 count`, `u32 version = 2`, reserved), then per blob a 64-byte
//! metadata record at a 64-byte aligned offset followed directly by its data. Program references
//! point at the metadata record. The header count is rewritten after every append so that a
//! partially written file still describes the blobs it holds.

use std::io::{Seek, SeekFrom, Write};

use half::f16;

/// Result alias of the blob storage.
pub type Result<T> = std::result::Result<T, BlobError>;

/// What can go wrong writing or reading a blob file.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    /// A blob file is malformed, or a blob does not match its declared size.
    #[error("weight blob file: {0}")]
    Malformed(String),
    /// An element count whose bit size does not fit in memory arithmetic.
    #[error("{what}: size overflows")]
    SizeOverflow { what: &'static str },
    /// An I/O failure while writing the file.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Header and metadata size, and the alignment of every metadata record.
pub const ALIGNMENT: u64 = 64;
/// File header length.
pub const HEADER_LEN: u64 = 64;
/// Metadata record length.
pub const METADATA_LEN: u64 = 64;
/// Marks the start of every metadata record.
pub const SENTINEL: u32 = 0xDEAD_BEEF;
/// The only storage version written and accepted.
pub const VERSION: u32 = 2;

/// MIL blob data types and their codes in the metadata record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum MilDType {
    Float16 = 1,
    Float32 = 2,
    UInt8 = 3,
    Int8 = 4,
    BFloat16 = 5,
    Int16 = 6,
    UInt16 = 7,
    Int4 = 8,
    UInt1 = 9,
    UInt2 = 10,
    UInt4 = 11,
    UInt3 = 12,
    UInt6 = 13,
    Int32 = 14,
    UInt32 = 15,
    Float8E4M3FN = 16,
    Float8E5M2 = 17,
}

impl MilDType {
    /// The code stored in the metadata record.
    pub fn code(self) -> u32 {
        self as u32
    }

    /// Parses a metadata dtype code.
    pub fn from_code(code: u32) -> Option<Self> {
        use MilDType::*;
        Some(match code {
            1 => Float16,
            2 => Float32,
            3 => UInt8,
            4 => Int8,
            5 => BFloat16,
            6 => Int16,
            7 => UInt16,
            8 => Int4,
            9 => UInt1,
            10 => UInt2,
            11 => UInt4,
            12 => UInt3,
            13 => UInt6,
            14 => Int32,
            15 => UInt32,
            16 => Float8E4M3FN,
            17 => Float8E5M2,
            _ => return None,
        })
    }

    /// Bits per element.
    pub fn bits(self) -> u64 {
        use MilDType::*;
        match self {
            UInt1 => 1,
            UInt2 => 2,
            UInt3 => 3,
            Int4 | UInt4 => 4,
            UInt6 => 6,
            UInt8 | Int8 | Float8E4M3FN | Float8E5M2 => 8,
            Float16 | BFloat16 | Int16 | UInt16 => 16,
            Float32 | Int32 | UInt32 => 32,
        }
    }
}

fn align_up(x: u64) -> u64 {
    x.div_ceil(ALIGNMENT) * ALIGNMENT
}

/// Expected byte length and padding bits of `count` elements of `dtype`.
fn data_len(dtype: MilDType, count: u64) -> Result<(u64, u64)> {
    let bits = count
        .checked_mul(dtype.bits())
        .ok_or(BlobError::SizeOverflow {
            what: "blob element count",
        })?;
    let bytes = bits.div_ceil(8);
    Ok((bytes, bytes * 8 - bits))
}

/// Streams blobs into a `weight.bin`.
#[derive(Debug)]
pub struct BlobWriter<W: Write + Seek> {
    inner: W,
    count: u32,
    end: u64,
}

impl<W: Write + Seek> BlobWriter<W> {
    /// Writes the header of an empty blob file at the start of `inner`.
    pub fn new(mut inner: W) -> Result<Self> {
        inner.seek(SeekFrom::Start(0))?;
        inner.write_all(&header_bytes(0))?;
        Ok(BlobWriter {
            inner,
            count: 0,
            end: HEADER_LEN,
        })
    }

    /// Number of blobs written so far.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Appends `element_count` elements of `dtype` stored in `data` (sub-byte types packed,
    /// `data.len()` = ⌈count·bits/8⌉). Returns the metadata offset that program references use.
    pub fn append(&mut self, dtype: MilDType, data: &[u8], element_count: u64) -> Result<u64> {
        let (bytes, padding) = data_len(dtype, element_count)?;
        if data.len() as u64 != bytes {
            return Err(BlobError::Malformed(format!(
                "{dtype:?} blob of {element_count} elements needs {bytes} bytes, got {}",
                data.len()
            )));
        }
        if self.count == u32::MAX {
            return Err(BlobError::Malformed(
                "too many blobs for a u32 count".into(),
            ));
        }
        let meta = align_up(self.end);
        let fill = (meta - self.end) as usize;
        self.inner.seek(SeekFrom::Start(self.end))?;
        self.inner.write_all(&[0u8; ALIGNMENT as usize][..fill])?;
        let mut record = [0u8; METADATA_LEN as usize];
        record[0..4].copy_from_slice(&SENTINEL.to_le_bytes());
        record[4..8].copy_from_slice(&dtype.code().to_le_bytes());
        record[8..16].copy_from_slice(&bytes.to_le_bytes());
        record[16..24].copy_from_slice(&(meta + METADATA_LEN).to_le_bytes());
        record[24..32].copy_from_slice(&padding.to_le_bytes());
        self.inner.write_all(&record)?;
        self.inner.write_all(data)?;
        self.end = meta + METADATA_LEN + bytes;
        self.count += 1;
        self.inner.seek(SeekFrom::Start(0))?;
        self.inner.write_all(&self.count.to_le_bytes())?;
        self.inner.seek(SeekFrom::Start(self.end))?;
        Ok(meta)
    }

    /// Appends FP16 values (little-endian).
    pub fn append_f16(&mut self, values: &[f16]) -> Result<u64> {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.append(MilDType::Float16, &bytes, values.len() as u64)
    }

    /// Appends `count` 6-bit indices already packed with [`crate::lut6::pack6`].
    pub fn append_uint6(&mut self, packed: &[u8], count: u64) -> Result<u64> {
        self.append(MilDType::UInt6, packed, count)
    }

    /// Flushes and returns the underlying writer.
    pub fn finish(mut self) -> Result<W> {
        self.inner.flush()?;
        Ok(self.inner)
    }
}

fn header_bytes(count: u32) -> [u8; HEADER_LEN as usize] {
    let mut h = [0u8; HEADER_LEN as usize];
    h[0..4].copy_from_slice(&count.to_le_bytes());
    h[4..8].copy_from_slice(&VERSION.to_le_bytes());
    h
}

/// One blob read back from a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Blob<'a> {
    /// Offset of the metadata record (what references store).
    pub metadata_offset: u64,
    /// Element type.
    pub dtype: MilDType,
    /// Absolute offset of the data.
    pub data_offset: u64,
    /// The data bytes.
    pub data: &'a [u8],
    /// Unused trailing bits of the last byte (sub-byte types).
    pub padding_bits: u64,
}

impl Blob<'_> {
    /// Number of elements the blob holds.
    pub fn element_count(&self) -> u64 {
        (self.data.len() as u64 * 8 - self.padding_bits) / self.dtype.bits()
    }
}

/// A parsed blob file over borrowed bytes (e.g. a memory map).
#[derive(Debug, Clone, Copy)]
pub struct BlobFile<'a> {
    bytes: &'a [u8],
    count: u32,
}

fn read_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn read_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

impl<'a> BlobFile<'a> {
    /// Checks the header.
    pub fn parse(bytes: &'a [u8]) -> Result<Self> {
        if (bytes.len() as u64) < HEADER_LEN {
            return Err(BlobError::Malformed(format!(
                "file of {} bytes has no header",
                bytes.len()
            )));
        }
        let version = read_u32(bytes, 4);
        if version != VERSION {
            return Err(BlobError::Malformed(format!(
                "storage version {version}, expected {VERSION}"
            )));
        }
        Ok(BlobFile {
            bytes,
            count: read_u32(bytes, 0),
        })
    }

    /// Blob count from the header.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Reads the blob whose metadata record starts at `metadata_offset`.
    pub fn blob_at(&self, metadata_offset: u64) -> Result<Blob<'a>> {
        let len = self.bytes.len() as u64;
        if metadata_offset < HEADER_LEN || !metadata_offset.is_multiple_of(ALIGNMENT) {
            return Err(BlobError::Malformed(format!(
                "bad metadata offset {metadata_offset}"
            )));
        }
        let meta_end = metadata_offset
            .checked_add(METADATA_LEN)
            .filter(|&e| e <= len)
            .ok_or_else(|| {
                BlobError::Malformed(format!("metadata at {metadata_offset} past end of file"))
            })?;
        let m = metadata_offset as usize;
        let sentinel = read_u32(self.bytes, m);
        if sentinel != SENTINEL {
            return Err(BlobError::Malformed(format!(
                "no sentinel at {metadata_offset} (found {sentinel:#x})"
            )));
        }
        let code = read_u32(self.bytes, m + 4);
        let dtype = MilDType::from_code(code).ok_or_else(|| {
            BlobError::Malformed(format!("unknown dtype code {code} at {metadata_offset}"))
        })?;
        let size = read_u64(self.bytes, m + 8);
        let data_offset = read_u64(self.bytes, m + 16);
        let padding_bits = read_u64(self.bytes, m + 24);
        if data_offset != meta_end {
            return Err(BlobError::Malformed(format!(
                "blob at {metadata_offset}: data offset {data_offset}, expected {meta_end}"
            )));
        }
        let data_end = data_offset
            .checked_add(size)
            .filter(|&e| e <= len)
            .ok_or_else(|| {
                BlobError::Malformed(format!("blob at {metadata_offset}: data past end of file"))
            })?;
        if padding_bits >= 8
            || (size == 0 && padding_bits != 0)
            || !(size * 8 - padding_bits).is_multiple_of(dtype.bits())
        {
            return Err(BlobError::Malformed(format!(
                "blob at {metadata_offset}: {padding_bits} padding bits do not fit {size} bytes of {dtype:?}"
            )));
        }
        Ok(Blob {
            metadata_offset,
            dtype,
            data_offset,
            data: &self.bytes[data_offset as usize..data_end as usize],
            padding_bits,
        })
    }

    /// Every blob in file order, walking the aligned records.
    pub fn blobs(&self) -> Result<Vec<Blob<'a>>> {
        let mut out = Vec::with_capacity(self.count as usize);
        let mut at = HEADER_LEN;
        for _ in 0..self.count {
            let b = self.blob_at(at)?;
            at = align_up(b.data_offset + b.data.len() as u64);
            out.push(b);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lut6::{pack6, unpack6};
    use std::io::Cursor;

    #[test]
    fn worked_layout_of_formats_md() {
        // One 32×64 linear with bias: uint6 indices, two FP16 tables (one per 16 rows), FP16
        // bias. The values are arbitrary; the layout is what is checked.
        let codes: Vec<u8> = (0..32 * 64).map(|i| ((i * 7919) % 64) as u8).collect();
        let indices = pack6(&codes).unwrap();
        let luts: Vec<f16> = (0..2 * 64)
            .map(|i| f16::from_f32(i as f32 / 128.0))
            .collect();
        let bias: Vec<f16> = (0..32).map(|i| f16::from_f32(i as f32 * 0.01)).collect();
        let mut wr = BlobWriter::new(Cursor::new(Vec::new())).unwrap();
        let a = wr.append_uint6(&indices, 32 * 64).unwrap();
        let b = wr.append_f16(&luts).unwrap();
        let c = wr.append_f16(&bias).unwrap();
        assert_eq!((a, b, c), (64, 1664, 1984));
        let bytes = wr.finish().unwrap().into_inner();
        assert_eq!(bytes.len(), 2112);
        // header
        assert_eq!(read_u32(&bytes, 0), 3);
        assert_eq!(read_u32(&bytes, 4), 2);
        assert!(bytes[8..64].iter().all(|&x| x == 0));
        // metadata fields as §2.5 spells them
        let f = BlobFile::parse(&bytes).unwrap();
        let blobs = f.blobs().unwrap();
        let summary: Vec<(u64, u32, usize, u64, u64)> = blobs
            .iter()
            .map(|b| {
                (
                    b.metadata_offset,
                    b.dtype.code(),
                    b.data.len(),
                    b.data_offset,
                    b.padding_bits,
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                (64, 13, 1536, 128, 0),
                (1664, 1, 256, 1728, 0),
                (1984, 1, 64, 2048, 0)
            ]
        );
        assert_eq!(read_u32(&bytes, 64), 0xDEAD_BEEF);
        assert!(
            bytes[64 + 32..128].iter().all(|&x| x == 0),
            "reserved words are zero"
        );
        assert!(bytes[128 + 1536..1664].iter().all(|&x| x == 0));
        // data reads back
        assert_eq!(unpack6(blobs[0].data, 2048).unwrap(), codes);
        assert_eq!(blobs[0].element_count(), 2048);
        assert_eq!(blobs[1].element_count(), 128);
        assert_eq!(&blobs[2].data[2..4], &bias[1].to_le_bytes());
    }

    #[test]
    fn sub_byte_padding_is_recorded_and_header_count_tracks_appends() {
        let mut wr = BlobWriter::new(Cursor::new(Vec::new())).unwrap();
        wr.append_uint6(&pack6(&[5, 6, 7]).unwrap(), 3).unwrap();
        let mut cur = wr.finish().unwrap();
        assert_eq!(read_u32(cur.get_ref(), 0), 1);
        let bytes = cur.get_mut().clone();
        let b = BlobFile::parse(&bytes).unwrap().blob_at(64).unwrap();
        assert_eq!((b.data.len(), b.padding_bits, b.element_count()), (3, 6, 3));
        assert_eq!(bytes.len(), 128 + 3, "no trailing fill after the last blob");
    }

    #[test]
    fn rejects_wrong_data_length_and_corrupt_files() {
        let mut wr = BlobWriter::new(Cursor::new(Vec::new())).unwrap();
        assert!(wr.append(MilDType::Float16, &[0u8; 3], 2).is_err());
        wr.append(MilDType::Float32, &[0u8; 8], 2).unwrap();
        let bytes = wr.finish().unwrap().into_inner();
        let f = BlobFile::parse(&bytes).unwrap();
        assert!(f.blob_at(0).is_err());
        assert!(f.blob_at(128).is_err());
        let mut bad = bytes.clone();
        bad[64] ^= 1;
        assert!(BlobFile::parse(&bad).unwrap().blob_at(64).is_err());
        let mut bad = bytes.clone();
        bad[68] = 99;
        assert!(BlobFile::parse(&bad).unwrap().blob_at(64).is_err());
        let mut bad = bytes.clone();
        bad[4] = 1;
        assert!(BlobFile::parse(&bad).is_err());
        assert!(BlobFile::parse(&bytes[..bytes.len() - 1])
            .unwrap()
            .blob_at(64)
            .is_err());
        assert!(BlobFile::parse(&bytes[..10]).is_err());
    }

    #[test]
    fn dtype_codes_round_trip() {
        for code in 1..=17 {
            let d = MilDType::from_code(code).unwrap();
            assert_eq!(d.code(), code);
        }
        assert_eq!(MilDType::from_code(0), None);
        assert_eq!(MilDType::from_code(18), None);
        assert_eq!(MilDType::UInt6.bits(), 6);
    }
}
