//! Exact, globally optimal 1-D k-means by dynamic programming.
//!
//! Clusters of an optimal 1-D k-means are contiguous runs of the sorted values, so
//! `D[m][j] = min_i D[m−1][i−1] + cost(i..=j)` with `cost` the weighted within-run sum of
//! squares. [`optimal_kmeans_quadratic`] evaluates every split (O(k·n²), the test oracle);
//! [`optimal_kmeans`] uses the monotonicity of the optimal split (the cost satisfies the
//! quadrangle inequality) and divide and conquer, O(k·n·log n), fast enough for whole groups.
//! This is the algorithm coremltools' `kmeans` palettizer solves (there with SMAWK).

use super::distinct::WeightedValues;

/// Result of an exact clustering.
#[derive(Debug, Clone, PartialEq)]
pub struct ExactClustering {
    /// Cluster means, strictly increasing; `min(k, n)` of them.
    pub centroids: Vec<f64>,
    /// Optimal Σ count·(v − centroid)².
    pub cost: f64,
}

/// Prefix sums over the values, shifted by their weighted mean so that the
/// `Σv² − (Σv)²/n` cancellation stays small.
struct Prefix {
    shift: f64,
    w: Vec<f64>,
    s: Vec<f64>,
    q: Vec<f64>,
}

impl Prefix {
    fn new(data: &WeightedValues) -> Self {
        let n = data.len();
        let total: f64 = data.counts.iter().map(|&c| c as f64).sum();
        let shift = if total > 0.0 {
            data.values
                .iter()
                .zip(&data.counts)
                .map(|(&v, &c)| v * c as f64)
                .sum::<f64>()
                / total
        } else {
            0.0
        };
        let mut w = vec![0.0; n + 1];
        let mut s = vec![0.0; n + 1];
        let mut q = vec![0.0; n + 1];
        for i in 0..n {
            let c = data.counts[i] as f64;
            let v = data.values[i] - shift;
            w[i + 1] = w[i] + c;
            s[i + 1] = s[i] + c * v;
            q[i + 1] = q[i] + c * v * v;
        }
        Prefix { shift, w, s, q }
    }

    /// Within-run sum of squares of values `i..=j` (0-based, inclusive).
    #[inline]
    fn cost(&self, i: usize, j: usize) -> f64 {
        let w = self.w[j + 1] - self.w[i];
        let s = self.s[j + 1] - self.s[i];
        let q = self.q[j + 1] - self.q[i];
        (q - s * s / w).max(0.0)
    }

    #[inline]
    fn mean(&self, i: usize, j: usize) -> f64 {
        let w = self.w[j + 1] - self.w[i];
        let s = self.s[j + 1] - self.s[i];
        s / w + self.shift
    }
}

/// Recovers centroids from the split table: `split[m][j]` = first index of the last run when
/// values `0..=j` form `m + 1` runs.
fn backtrack(prefix: &Prefix, split: &[Vec<u32>], n: usize, k: usize) -> Vec<f64> {
    let mut centroids = vec![0.0; k];
    let mut end = n - 1;
    for m in (0..k).rev() {
        let start = split[m][end] as usize;
        centroids[m] = prefix.mean(start, end);
        if m > 0 {
            end = start - 1;
        }
    }
    centroids
}

fn trivial(data: &WeightedValues) -> ExactClustering {
    ExactClustering {
        centroids: data.values.clone(),
        cost: 0.0,
    }
}

/// Exact k-means by the plain O(k·n²) recurrence (test oracle).
pub fn optimal_kmeans_quadratic(data: &WeightedValues, k: usize) -> ExactClustering {
    let n = data.len();
    if k == 0 || n == 0 || n <= k {
        return trivial(data);
    }
    let prefix = Prefix::new(data);
    let mut prev: Vec<f64> = (0..n).map(|j| prefix.cost(0, j)).collect();
    let mut split = vec![vec![0u32; n]];
    for m in 1..k {
        let mut cur = vec![f64::INFINITY; n];
        let mut arg = vec![0u32; n];
        for j in m..n {
            for i in m..=j {
                let c = prev[i - 1] + prefix.cost(i, j);
                if c < cur[j] {
                    cur[j] = c;
                    arg[j] = i as u32;
                }
            }
        }
        prev = cur;
        split.push(arg);
    }
    ExactClustering {
        centroids: backtrack(&prefix, &split, n, k),
        cost: prev[n - 1],
    }
}

/// Fills `cur[lo..=hi]` knowing the optimal split of each lies in `[opt_lo, opt_hi]`.
#[allow(clippy::too_many_arguments)]
fn divide_and_conquer(
    prefix: &Prefix,
    prev: &[f64],
    cur: &mut [f64],
    arg: &mut [u32],
    m: usize,
    lo: usize,
    hi: usize,
    opt_lo: usize,
    opt_hi: usize,
) {
    // An explicit stack keeps deep recursion off the thread stack for large n.
    let mut stack = vec![(lo, hi, opt_lo, opt_hi)];
    while let Some((lo, hi, opt_lo, opt_hi)) = stack.pop() {
        if lo > hi {
            continue;
        }
        let mid = lo + (hi - lo) / 2;
        let mut best = f64::INFINITY;
        let mut best_i = opt_lo.max(m);
        for i in opt_lo.max(m)..=opt_hi.min(mid) {
            let c = prev[i - 1] + prefix.cost(i, mid);
            if c < best {
                best = c;
                best_i = i;
            }
        }
        cur[mid] = best;
        arg[mid] = best_i as u32;
        if mid > lo {
            stack.push((lo, mid - 1, opt_lo, best_i));
        }
        stack.push((mid + 1, hi, best_i, opt_hi));
    }
}

/// Exact k-means by divide and conquer over monotone splits, O(k·n·log n).
pub fn optimal_kmeans(data: &WeightedValues, k: usize) -> ExactClustering {
    let n = data.len();
    if k == 0 || n == 0 || n <= k {
        return trivial(data);
    }
    let prefix = Prefix::new(data);
    let mut prev: Vec<f64> = (0..n).map(|j| prefix.cost(0, j)).collect();
    let mut split = vec![vec![0u32; n]];
    for m in 1..k {
        let mut cur = vec![f64::INFINITY; n];
        let mut arg = vec![0u32; n];
        divide_and_conquer(&prefix, &prev, &mut cur, &mut arg, m, m, n - 1, m, n - 1);
        prev = cur;
        split.push(arg);
    }
    ExactClustering {
        centroids: backtrack(&prefix, &split, n, k),
        cost: prev[n - 1],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn weighted(values: &[f32]) -> WeightedValues {
        WeightedValues::from_f32(values).unwrap()
    }

    /// Exhaustive search over every way of cutting n sorted values into k runs.
    fn brute_force(data: &WeightedValues, k: usize) -> f64 {
        let n = data.len();
        let mut best = f64::INFINITY;
        // cut positions as a bitmask over the n-1 gaps
        for mask in 0u32..(1 << (n - 1)) {
            if mask.count_ones() as usize != k - 1 {
                continue;
            }
            let mut cost = 0.0;
            let mut start = 0;
            for end in 0..n {
                if end == n - 1 || mask & (1 << end) != 0 {
                    let (mut w, mut s) = (0.0, 0.0);
                    for i in start..=end {
                        w += data.counts[i] as f64;
                        s += data.counts[i] as f64 * data.values[i];
                    }
                    let mean = s / w;
                    for i in start..=end {
                        cost += data.counts[i] as f64 * (data.values[i] - mean).powi(2);
                    }
                    start = end + 1;
                }
            }
            best = best.min(cost);
        }
        best
    }

    #[test]
    fn two_obvious_clusters() {
        let data = weighted(&[0.0, 1.0, 2.0, 10.0, 11.0, 12.0]);
        let r = optimal_kmeans_quadratic(&data, 2);
        assert_eq!(r.centroids, vec![1.0, 11.0]);
        assert!((r.cost - 4.0).abs() < 1e-12);
        assert_eq!(optimal_kmeans(&data, 2).centroids, r.centroids);
    }

    #[test]
    fn weights_pull_the_mean() {
        // 0 three times and 4 once in one cluster: mean 1.
        let data = weighted(&[0.0, 0.0, 0.0, 4.0, 100.0]);
        let r = optimal_kmeans_quadratic(&data, 2);
        assert_eq!(r.centroids, vec![1.0, 100.0]);
        assert!((r.cost - 12.0).abs() < 1e-12);
    }

    #[test]
    fn few_values_are_their_own_centroids() {
        let data = weighted(&[3.0, 1.0, 2.0]);
        let r = optimal_kmeans(&data, 64);
        assert_eq!(r.centroids, vec![1.0, 2.0, 3.0]);
        assert_eq!(r.cost, 0.0);
    }

    proptest! {
        #[test]
        fn quadratic_matches_exhaustive(values in prop::collection::vec(-50i32..50, 2..12), k in 1usize..5) {
            let v: Vec<f32> = values.iter().map(|&x| x as f32 * 0.25).collect();
            let data = weighted(&v);
            // fewer clusters than distinct values, so the search has a choice to make
            prop_assume!(data.len() > 1);
            let k = k.min(data.len() - 1);
            let r = optimal_kmeans_quadratic(&data, k);
            let bf = brute_force(&data, k);
            prop_assert!((r.cost - bf).abs() <= 1e-9 * (1.0 + bf));
            prop_assert!((data.sse_sorted(&r.centroids) - r.cost).abs() <= 1e-9 * (1.0 + bf));
        }

        #[test]
        fn divide_and_conquer_matches_quadratic(values in prop::collection::vec(-1000i32..1000, 2..300), k in 1usize..20) {
            let v: Vec<f32> = values.iter().map(|&x| x as f32 / 64.0).collect();
            let data = weighted(&v);
            let a = optimal_kmeans_quadratic(&data, k);
            let b = optimal_kmeans(&data, k);
            prop_assert!((a.cost - b.cost).abs() <= 1e-9 * (1.0 + a.cost));
        }
    }
}
