//! The card's clustering of one 16-row group into a 64-entry FP16 table (formats.md §2.2).
//!
//! Seeds are half quantiles, half an even spread between the extremes (so outliers get table
//! entries), refined by at most 40 Lloyd rounds over weighted distinct values, rounded to FP16,
//! and every weight is finally assigned to its nearest FP16 entry: exactly what the runtime
//! reconstructs as `lut[idx]`.

use half::f16;

use super::distinct::WeightedValues;
use super::exact;
use super::{ClusterMode, TABLE_LEN};
use crate::error::{QuantError, Result};
use crate::round::f16_from_f64;

/// Quantile seeds at (j + 0.5)/32 plus 32 evenly spaced seeds.
const HALF_SEEDS: usize = 32;
/// The card's Lloyd round limit.
pub const MAX_ROUNDS: usize = 40;

/// Linear-interpolation quantile at probability `p` of the multiset (numpy's default "linear":
/// position h = (N − 1)·p between order statistics ⌊h⌋ and ⌊h⌋ + 1).
fn quantile(data: &WeightedValues, cumulative: &[u64], p: f64) -> f64 {
    let n = data.total();
    let h = (n - 1) as f64 * p;
    let lo = h.floor() as u64;
    let frac = h - lo as f64;
    let order_stat = |k: u64| -> f64 {
        // first distinct index whose cumulative count exceeds k
        let i = cumulative.partition_point(|&c| c <= k);
        data.values[i.min(data.len() - 1)]
    };
    let a = order_stat(lo);
    if frac == 0.0 || lo + 1 >= n {
        return a;
    }
    let b = order_stat(lo + 1);
    a + (b - a) * frac
}

/// Initial centroids of §2.2 step 2 (sorted, distinct, `min(64, distinct)` of them).
pub fn seeds(data: &WeightedValues) -> Vec<f64> {
    if data.len() <= TABLE_LEN {
        return data.values.clone();
    }
    let mut cumulative = Vec::with_capacity(data.len());
    let mut acc = 0u64;
    for &c in &data.counts {
        acc += c;
        cumulative.push(acc);
    }
    let min = data.values[0];
    let max = data.values[data.len() - 1];
    let mut s: Vec<f64> = Vec::with_capacity(2 * HALF_SEEDS);
    for j in 0..HALF_SEEDS {
        s.push(quantile(
            data,
            &cumulative,
            (j as f64 + 0.5) / HALF_SEEDS as f64,
        ));
    }
    for j in 0..HALF_SEEDS {
        s.push(min + (max - min) * j as f64 / (HALF_SEEDS - 1) as f64);
    }
    s.sort_by(f64::total_cmp);
    s.dedup();
    top_up(data, &mut s, TABLE_LEN);
    s
}

/// Adds, one at a time, the distinct value farthest from its nearest seed (ties: the smaller
/// value) until there are `target` seeds. Greedy so that two neighbouring values far from every
/// seed do not both get picked before the gap next to them is filled.
fn top_up(data: &WeightedValues, seeds: &mut Vec<f64>, target: usize) {
    if seeds.len() >= target || data.len() <= seeds.len() {
        return;
    }
    let mut dist: Vec<f64> = data
        .values
        .iter()
        .map(|&v| super::distinct::nearest_distance_sorted(seeds, v))
        .collect();
    while seeds.len() < target {
        let mut best = 0usize;
        for i in 1..dist.len() {
            // strict: on a tie the earlier (smaller) value stays
            if dist[i] > dist[best] {
                best = i;
            }
        }
        if dist[best] <= 0.0 {
            break; // every distinct value is already a seed
        }
        let v = data.values[best];
        let pos = seeds.partition_point(|&c| c < v);
        seeds.insert(pos, v);
        for (d, &x) in dist.iter_mut().zip(&data.values) {
            *d = d.min((x - v).abs());
        }
    }
}

/// Lloyd iterations from sorted `centroids` (§2.2 step 3). Returns the refined centroids and
/// the number of update rounds performed.
pub fn lloyd(
    data: &WeightedValues,
    mut centroids: Vec<f64>,
    max_rounds: usize,
) -> (Vec<f64>, usize) {
    let k = centroids.len();
    if k == 0 {
        return (centroids, 0);
    }
    let n = data.len();
    let mut assign = vec![0u32; n];
    let mut prev: Option<Vec<u32>> = None;
    let mut sums = vec![0.0f64; k];
    let mut weights = vec![0.0f64; k];
    let mut rounds = 0;
    for _ in 0..max_rounds {
        // Midpoint thresholds; a value exactly on one goes to the lower centroid, hence `>`.
        let mut cluster = 0usize;
        for (a, &v) in assign.iter_mut().zip(&data.values) {
            while cluster + 1 < k && v > 0.5 * (centroids[cluster] + centroids[cluster + 1]) {
                cluster += 1;
            }
            *a = cluster as u32;
        }
        if prev.as_deref() == Some(assign.as_slice()) {
            break;
        }
        sums.iter_mut().for_each(|s| *s = 0.0);
        weights.iter_mut().for_each(|w| *w = 0.0);
        for ((&a, &v), &c) in assign.iter().zip(&data.values).zip(&data.counts) {
            sums[a as usize] += c as f64 * v;
            weights[a as usize] += c as f64;
        }
        for j in 0..k {
            // An empty cluster keeps its centroid.
            if weights[j] > 0.0 {
                centroids[j] = sums[j] / weights[j];
            }
        }
        // Lloyd preserves the order in exact arithmetic; sorting guards against rounding.
        centroids.sort_by(f64::total_cmp);
        rounds += 1;
        prev = Some(assign.clone());
    }
    (centroids, rounds)
}

/// The card's recipe up to (not including) FP16 rounding: seeds, then ≤ 40 Lloyd rounds.
pub fn lloyd_centroids(data: &WeightedValues) -> Vec<f64> {
    let s = seeds(data);
    if data.len() <= TABLE_LEN {
        return s;
    }
    lloyd(data, s, MAX_ROUNDS).0
}

/// A 64-entry FP16 table from f64 centroids: round (nearest, ties to even), sort, pad with 0.
/// Also returns how many entries are real (the rest are padding).
pub fn table_from_centroids(centroids: &[f64]) -> Result<([f16; TABLE_LEN], usize)> {
    if centroids.len() > TABLE_LEN {
        return Err(QuantError::OutOfRange {
            what: "centroid count",
            value: centroids.len() as u64,
            allowed: "at most 64",
        });
    }
    let mut entries = Vec::with_capacity(centroids.len());
    for &c in centroids {
        let h = f16_from_f64(c);
        if !h.is_finite() {
            return Err(QuantError::F16Overflow { value: c });
        }
        entries.push(h);
    }
    entries.sort_by(|a, b| a.to_f32().total_cmp(&b.to_f32()));
    let mut table = [f16::ZERO; TABLE_LEN];
    table[..entries.len()].copy_from_slice(&entries);
    Ok((table, entries.len()))
}

/// Nearest-entry lookup over a table whose first `sorted_len` entries are ascending and whose
/// remaining entries (if any) are the 0 padding. Ties go to the lower index.
#[derive(Debug, Clone)]
pub struct NearestEntry {
    entries: Vec<f64>,
    sorted_len: usize,
}

impl NearestEntry {
    /// Prepares the lookup for `table` with `sorted_len` real entries.
    pub fn new(table: &[f16; TABLE_LEN], sorted_len: usize) -> Self {
        NearestEntry {
            entries: table[..sorted_len].iter().map(|h| h.to_f64()).collect(),
            sorted_len,
        }
    }

    /// Index of the nearest entry to `v`.
    pub fn index(&self, v: f64) -> u8 {
        let e = &self.entries;
        let hi = e.partition_point(|&x| x < v);
        let mut best: Option<(usize, f64)> = None;
        if hi > 0 {
            // first index of the run of equal entries, so duplicates resolve to the lowest index
            let lo_val = e[hi - 1];
            let lo = e.partition_point(|&x| x < lo_val);
            best = Some((lo, v - lo_val));
        }
        if hi < e.len() {
            let d = e[hi] - v;
            if best.is_none_or(|(_, bd)| d < bd) {
                best = Some((hi, d));
            }
        }
        if self.sorted_len < TABLE_LEN {
            // padding zeros sit after every real entry, so they only win when strictly closer
            let d = v.abs();
            if best.is_none_or(|(_, bd)| d < bd) {
                best = Some((self.sorted_len, d));
            }
        }
        best.map_or(0, |(i, _)| i as u8)
    }
}

/// Clusters one group (the 16·in weights of 16 output rows, any order) with the card's recipe.
/// Returns the 64-entry table and one index per input value, in input order.
pub fn palettize_group(values: &[f32]) -> Result<(Vec<f16>, Vec<u8>)> {
    palettize_group_with(values, ClusterMode::Lloyd)
}

/// [`palettize_group`] with a choice of clusterer.
pub fn palettize_group_with(values: &[f32], mode: ClusterMode) -> Result<(Vec<f16>, Vec<u8>)> {
    if values.is_empty() {
        return Err(QuantError::OutOfRange {
            what: "group size",
            value: 0,
            allowed: "at least one value",
        });
    }
    let data = WeightedValues::from_f32(values)?;
    let centroids = match mode {
        ClusterMode::Lloyd => lloyd_centroids(&data),
        ClusterMode::ExactDp => exact::optimal_kmeans(&data, TABLE_LEN).centroids,
    };
    let (table, sorted_len) = table_from_centroids(&centroids)?;
    let lookup = NearestEntry::new(&table, sorted_len);
    let indices = values.iter().map(|&v| lookup.index(f64::from(v))).collect();
    Ok((table.to_vec(), indices))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weighted(values: &[f32]) -> WeightedValues {
        WeightedValues::from_f32(values).unwrap()
    }

    #[test]
    fn lloyd_converges_on_two_clusters() {
        let data = weighted(&[0.0, 1.0, 2.0, 10.0, 11.0, 12.0]);
        let (c, rounds) = lloyd(&data, vec![0.0, 1.0], 40);
        assert_eq!(c, vec![1.0, 11.0]);
        // round 1: {0} {1..12}; round 2: {0,1,2} {10,11,12}; round 3 changes nothing
        assert_eq!(rounds, 2);
    }

    #[test]
    fn lloyd_midpoint_goes_to_lower_centroid() {
        let data = weighted(&[0.0, 1.0, 2.0]);
        let (c, _) = lloyd(&data, vec![0.0, 2.0], 1);
        assert_eq!(c, vec![0.5, 2.0]);
    }

    #[test]
    fn lloyd_empty_cluster_keeps_centroid() {
        let data = weighted(&[0.0, 1.0, 99.0, 100.0]);
        let (c, _) = lloyd(&data, vec![0.0, 5.0, 100.0], 1);
        assert_eq!(c, vec![0.5, 5.0, 99.5]);
    }

    #[test]
    fn lloyd_respects_round_limit() {
        let data = weighted(&[0.0, 1.0, 2.0, 10.0, 11.0, 12.0]);
        let (c, rounds) = lloyd(&data, vec![0.0, 1.0], 1);
        assert_eq!(rounds, 1);
        assert_eq!(c, vec![0.0, 36.0 / 5.0]);
    }

    #[test]
    fn seeds_are_sorted_unique_and_span_the_range() {
        let values: Vec<f32> = (0..1000)
            .map(|i| (i as f32 * 0.37).sin() * (1.0 + i as f32 / 100.0))
            .collect();
        let data = weighted(&values);
        let s = seeds(&data);
        assert_eq!(s.len(), 64);
        assert!(s.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(s[0], data.values[0]);
        assert_eq!(s[63], data.values[data.len() - 1]);
    }

    #[test]
    fn quantile_interpolates_between_order_statistics() {
        // 0, 10, 20, 30: p = 0.5 → h = 1.5 → 15
        let data = weighted(&[30.0, 0.0, 20.0, 10.0]);
        let cum = [1, 2, 3, 4];
        assert_eq!(quantile(&data, &cum, 0.5), 15.0);
        assert_eq!(quantile(&data, &cum, 0.0), 0.0);
        assert_eq!(quantile(&data, &cum, 1.0), 30.0);
        // with multiplicity: 0,0,0,10 → p = 0.9 → h = 2.7 → 0 + 0.7·10
        let data = weighted(&[0.0, 0.0, 0.0, 10.0]);
        assert!((quantile(&data, &[3, 4], 0.9) - 7.0).abs() < 1e-12);
    }

    /// Naive version of the top-up rule: recompute every distance from scratch at each step.
    fn top_up_naive(data: &WeightedValues, seeds: &[f64], target: usize) -> Vec<f64> {
        let mut s = seeds.to_vec();
        while s.len() < target && data.len() > s.len() {
            let mut best_v = f64::NAN;
            let mut best_d = -1.0;
            for &v in &data.values {
                let d = s
                    .iter()
                    .map(|&c| (c - v).abs())
                    .fold(f64::INFINITY, f64::min);
                if d > best_d || (d == best_d && v < best_v) {
                    best_d = d;
                    best_v = v;
                }
            }
            s.push(best_v);
            s.sort_by(f64::total_cmp);
        }
        s
    }

    #[test]
    fn collapsed_seeds_are_topped_up_greedily() {
        // 10,000 zeros and the integers 1..=70: every quantile seed is 0, so only 32 distinct
        // seeds survive and 32 distinct values must be added.
        let mut values = vec![0.0f32; 10_000];
        values.extend((1..=70).map(|i| i as f32));
        let data = weighted(&values);
        let s = seeds(&data);
        assert_eq!(s.len(), 64);
        let mut base: Vec<f64> = (0..32).map(|j| 70.0 * j as f64 / 31.0).collect();
        base.push(0.0);
        base.sort_by(f64::total_cmp);
        base.dedup();
        assert_eq!(base.len(), 32);
        assert_eq!(s, top_up_naive(&data, &base, 64));
        // every added seed is one of the distinct values
        for v in &s {
            assert!(base.contains(v) || data.values.contains(v));
        }
    }

    #[test]
    fn few_distinct_values_are_kept_exactly() {
        let values = [0.5f32, -0.25, 0.5, 3.0, -0.25, 0.125];
        let (table, idx) = palettize_group(&values).unwrap();
        assert_eq!(table.len(), 64);
        assert_eq!(
            table[..4].iter().map(|h| h.to_f32()).collect::<Vec<_>>(),
            vec![-0.25, 0.125, 0.5, 3.0]
        );
        assert!(table[4..].iter().all(|h| h.to_f32() == 0.0));
        for (&v, &i) in values.iter().zip(&idx) {
            assert_eq!(table[i as usize].to_f32(), v);
        }
    }

    #[test]
    fn zero_table_entry_is_positive_zero() {
        // formats.md §2.2 step 2: a group with ≤ 64 distinct values gets exactly those values;
        // −0 and +0 are the same value, stored as +0 like the padding of step 4.
        let values = [-0.0f32, 2.0, 0.0, -1.0, -0.0];
        let (table, idx) = palettize_group(&values).unwrap();
        assert_eq!(
            table[..3].iter().map(|h| h.to_bits()).collect::<Vec<_>>(),
            vec![
                f16::from_f32(-1.0).to_bits(),
                0x0000,
                f16::from_f32(2.0).to_bits()
            ]
        );
        assert_eq!(idx, vec![1, 2, 1, 0, 1]);
    }

    #[test]
    fn padding_zero_is_used_only_when_strictly_closer() {
        let mut table = [f16::ZERO; TABLE_LEN];
        table[0] = f16::from_f32(-1.0);
        table[1] = f16::from_f32(1.0);
        let lookup = NearestEntry::new(&table, 2);
        assert_eq!(lookup.index(0.1), 2);
        assert_eq!(lookup.index(0.5), 1); // tie between 1.0 (index 1) and pad 0 (index 2)
        assert_eq!(lookup.index(-0.5), 0);
        assert_eq!(lookup.index(0.0), 2);
    }

    #[test]
    fn duplicate_entries_resolve_to_lowest_index() {
        let mut table = [f16::ZERO; TABLE_LEN];
        for (i, t) in table.iter_mut().enumerate() {
            *t = f16::from_f32((i / 2) as f32); // 0,0,1,1,2,2,...
        }
        let lookup = NearestEntry::new(&table, TABLE_LEN);
        assert_eq!(lookup.index(1.0), 2);
        assert_eq!(lookup.index(1.5), 2); // tie between 1 and 2: lower index
        assert_eq!(lookup.index(1.6), 4);
        assert_eq!(lookup.index(-3.0), 0);
        assert_eq!(lookup.index(100.0), 62);
    }

    #[test]
    fn rejects_values_beyond_fp16() {
        let values: Vec<f32> = (0..100).map(|i| i as f32 * 1000.0).collect();
        assert!(matches!(
            palettize_group(&values),
            Err(QuantError::F16Overflow { .. })
        ));
    }

    #[test]
    fn rejects_empty_and_nan() {
        assert!(palettize_group(&[]).is_err());
        assert!(palettize_group(&[1.0, f32::NAN]).is_err());
    }
}
