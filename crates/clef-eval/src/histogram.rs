//! Histogram of |dp| with log-scale (decade) bins: the differences between a model and its
//! reference span many orders of magnitude (1e-7 for a faithful port, 0.1 for a flip).

use serde::Serialize;

/// Upper edges of the decade bins after the exact-zero bin. Literals, not powers computed at run
/// time, so that a value such as 1e-3 lands exactly on its edge.
const DECADE_EDGES: [f64; 7] = [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0];

/// One bin: values in (lo, hi]; the first bin holds exact zeros only (lo = hi = 0).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistogramBin {
    pub lo: f64,
    pub hi: f64,
    pub count: usize,
}

/// |dp| counts per bin, one entry per (question, option).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DpHistogram {
    pub bins: Vec<HistogramBin>,
}

impl DpHistogram {
    pub fn new() -> Self {
        let mut bins = vec![HistogramBin {
            lo: 0.0,
            hi: 0.0,
            count: 0,
        }];
        let mut lo = 0.0;
        for hi in DECADE_EDGES {
            bins.push(HistogramBin { lo, hi, count: 0 });
            lo = hi;
        }
        Self { bins }
    }

    /// Adds one |dp|; values above 1 (impossible for probabilities) go to the last bin.
    pub fn add(&mut self, value: f64) {
        let index = if value <= 0.0 {
            0
        } else {
            1 + DECADE_EDGES
                .iter()
                .position(|&hi| value <= hi)
                .unwrap_or(DECADE_EDGES.len() - 1)
        };
        self.bins[index].count += 1;
    }

    pub fn total(&self) -> usize {
        self.bins.iter().map(|b| b.count).sum()
    }
}

impl Default for DpHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl FromIterator<f64> for DpHistogram {
    fn from_iter<I: IntoIterator<Item = f64>>(values: I) -> Self {
        let mut histogram = Self::new();
        for value in values {
            histogram.add(value);
        }
        histogram
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_land_in_their_decades_with_upper_edges_inclusive() {
        let h: DpHistogram = [0.0, 1e-9, 1e-6, 1.1e-6, 1e-3, 0.0011, 0.5, 1.0]
            .into_iter()
            .collect();
        let counts: Vec<_> = h.bins.iter().map(|b| b.count).collect();
        // bins: 0 | (0,1e-6] | (1e-6,1e-5] | (1e-5,1e-4] | (1e-4,1e-3] | (1e-3,1e-2] | (1e-2,0.1] | (0.1,1]
        assert_eq!(counts, [1, 2, 1, 0, 1, 1, 0, 2]);
        assert_eq!(h.total(), 8);
        assert_eq!(h.bins[1].lo, 0.0);
        assert_eq!(h.bins[7].hi, 1.0);
    }
}
