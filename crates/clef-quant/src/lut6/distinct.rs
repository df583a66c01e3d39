//! Distinct values with multiplicities: the input of both clusterers.
//!
//! A BF16 group of 16·in weights has only a few thousand distinct values, so every k-means
//! step over (value, count) pairs gives identical results to one over the raw weights at a
//! fraction of the cost.

use crate::error::{check_finite, Result};

/// Sorted distinct values (widened to f64, exact) with their counts.
#[derive(Debug, Clone, PartialEq)]
pub struct WeightedValues {
    /// Strictly increasing.
    pub values: Vec<f64>,
    /// `counts[i]` occurrences of `values[i]`; every count is ≥ 1.
    pub counts: Vec<u64>,
}

impl WeightedValues {
    /// Collects the distinct values of `values`. −0 and +0 are the same value and are stored
    /// as +0, so a table entry for zero is +0 (like the padding entries of formats.md §2.2
    /// step 4, and like the Lloyd means, whose f64 sums start at +0) whatever signs the
    /// weights carry and in whatever order they come.
    pub fn from_f32(values: &[f32]) -> Result<Self> {
        check_finite("k-means input", values)?;
        let mut sorted: Vec<f32> = values.to_vec();
        sorted.sort_unstable_by(f32::total_cmp);
        let mut out = WeightedValues {
            values: Vec::new(),
            counts: Vec::new(),
        };
        for v in sorted {
            // `+ 0.0` turns −0 into +0 and leaves every other value unchanged
            let v = f64::from(v) + 0.0;
            match out.values.last() {
                Some(&last) if last == v => {
                    if let Some(c) = out.counts.last_mut() {
                        *c += 1;
                    }
                }
                _ => {
                    out.values.push(v);
                    out.counts.push(1);
                }
            }
        }
        Ok(out)
    }

    /// Number of distinct values.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True when there are no values at all.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Total number of weights (sum of counts).
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Σ count·(v − nearest centroid)² for sorted `centroids` (f64, the quantity k-means minimises).
    pub fn sse_sorted(&self, centroids: &[f64]) -> f64 {
        let mut sse = 0.0;
        for (&v, &c) in self.values.iter().zip(&self.counts) {
            let d = nearest_distance_sorted(centroids, v);
            sse += c as f64 * d * d;
        }
        sse
    }
}

/// Distance from `v` to the nearest element of the sorted slice `centroids` (∞ when empty).
pub(crate) fn nearest_distance_sorted(centroids: &[f64], v: f64) -> f64 {
    let i = centroids.partition_point(|&c| c < v);
    let mut d = f64::INFINITY;
    if i < centroids.len() {
        d = d.min(centroids[i] - v);
    }
    if i > 0 {
        d = d.min(v - centroids[i - 1]);
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_duplicates_and_signed_zero() {
        let w = WeightedValues::from_f32(&[1.0, -0.0, 0.0, 1.0, -2.5, 1.0]).unwrap();
        assert_eq!(w.values, vec![-2.5, 0.0, 1.0]);
        assert_eq!(w.counts, vec![1, 2, 3]);
        assert_eq!(w.total(), 6);
    }

    #[test]
    fn zero_is_stored_as_positive_zero() {
        // formats.md §2.2 steps 1–2: the distinct values (−0 and +0 are one value); the table
        // entry for zero must not depend on which sign the sort happened to put first.
        for input in [
            &[-0.0f32, 0.0, 1.0][..],
            &[0.0, -0.0, 1.0],
            &[-0.0, -0.0, 1.0],
        ] {
            let w = WeightedValues::from_f32(input).unwrap();
            assert_eq!(w.values[0].to_bits(), 0, "{input:?}");
        }
    }

    #[test]
    fn rejects_nan() {
        assert!(WeightedValues::from_f32(&[1.0, f32::NAN]).is_err());
    }

    #[test]
    fn sse_uses_nearest_centroid() {
        let w = WeightedValues::from_f32(&[0.0, 1.0, 1.0, 4.0]).unwrap();
        // centroids 0.5 and 3: distances 0.5, 0.5, 0.5, 1
        assert_eq!(w.sse_sorted(&[0.5, 3.0]), 0.25 * 3.0 + 1.0);
    }
}
