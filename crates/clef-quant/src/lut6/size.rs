//! Storage cost of LUT-6 tensors (formats.md §2.1, §2.3).

use super::{GROUP_ROWS, TABLE_LEN};
use crate::error::{checked_mul, QuantError, Result};

/// A text linear is LUT-compressed when it has at least this many weights (coremltools'
/// `numel > weight_threshold` with threshold 1,048,575).
pub const LUT_MIN_WEIGHTS: u64 = 1_048_576;

/// True when a `[rows, cols]` text linear is stored as LUT-6.
pub fn is_lut_tensor(rows: usize, cols: usize) -> bool {
    (rows as u64).saturating_mul(cols as u64) >= LUT_MIN_WEIGHTS
}

/// Bytes of one LUT-6 tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lut6Bytes {
    /// Packed 6-bit indices.
    pub indices: u64,
    /// FP16 tables.
    pub tables: u64,
}

impl Lut6Bytes {
    /// Indices plus tables.
    pub fn total(&self) -> u64 {
        self.indices + self.tables
    }
}

fn check_shape(rows: usize, cols: usize) -> Result<()> {
    if rows == 0 || cols == 0 {
        return Err(QuantError::OutOfRange {
            what: "LUT-6 matrix dimension",
            value: 0,
            allowed: "rows and cols ≥ 1",
        });
    }
    if !rows.is_multiple_of(GROUP_ROWS) {
        return Err(QuantError::NotMultiple {
            what: "LUT-6 output rows",
            value: rows,
            multiple: GROUP_ROWS,
        });
    }
    Ok(())
}

/// Bytes of a `[rows, cols]` LUT-6 tensor (indices, then tables).
pub fn tensor_bytes(rows: usize, cols: usize) -> Result<Lut6Bytes> {
    check_shape(rows, cols)?;
    let n = checked_mul(rows, cols, "LUT-6 tensor")?;
    Ok(Lut6Bytes {
        indices: clef_formats::lut6::packed_len(n)? as u64,
        tables: (rows / GROUP_ROWS * TABLE_LEN * 2) as u64,
    })
}

/// Stored bits per weight (indices + tables): 6 + 64·16 / (16·cols).
pub fn bits_per_weight(rows: usize, cols: usize) -> Result<f64> {
    let b = tensor_bytes(rows, cols)?;
    Ok(b.total() as f64 * 8.0 / (rows as f64 * cols as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn card_rates() {
        // formats.md §2.3: 6.0125 at in = 5120, 6.0104 at 6144, 6.0037 at 17408
        assert!((bits_per_weight(17408, 5120).unwrap() - 6.0125).abs() < 1e-12);
        assert!((bits_per_weight(5120, 6144).unwrap() - 6.0104).abs() < 1e-4);
        assert!((bits_per_weight(5120, 17408).unwrap() - 6.0037).abs() < 1e-4);
    }

    #[test]
    fn threshold_and_shapes() {
        assert!(is_lut_tensor(1024, 1024));
        assert!(!is_lut_tensor(48, 5120));
        assert!(bits_per_weight(20, 64).is_err());
        let b = tensor_bytes(32, 64).unwrap();
        assert_eq!((b.indices, b.tables), (1536, 256));
    }
}
