//! Acceptance of the LUT-6 clustering (formats.md §2.2) on normal, Student-t (3 dof) and
//! 20σ-outlier groups: tables sorted and finite; the reconstruction error no worse than a uniform
//! 64-level grid; and within 2% of the exact optimal 1-D clustering.
//!
//! Like is compared with like: f64 centroids against the f64 DP optimum (both before FP16
//! rounding), and FP16 tables against the DP centroids and the uniform grid each put through the
//! same FP16 rounding and nearest-entry assignment.
//!
//! Finding: the card's Lloyd recipe (the default) converges — it stops early, well inside 40
//! rounds — to a local optimum 15–20% above the DP optimum on normal groups, about 2× on t3 and
//! 3–4× with outliers (the evenly spread seeds in empty stretches keep their centroids). More
//! rounds do not help. So the 2% criterion is met by `ClusterMode::ExactDp` (the clustering
//! coremltools' palettizer computes), and the Lloyd recipe is held to the uniform-grid bound and
//! to never beating the optimum; its measured ratios are printed (`--nocapture`).

use clef_quant::lut6::exact::optimal_kmeans;
use clef_quant::lut6::kmeans::{lloyd_centroids, table_from_centroids, NearestEntry};
use clef_quant::lut6::{
    palettize_group, palettize_group_with, ClusterMode, WeightedValues, TABLE_LEN,
};
use half::bf16;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal, StudentT};

/// 16 rows × 256 inputs, rounded to BF16 like the release weights.
const GROUP: usize = 16 * 256;

fn bf16_round(v: Vec<f32>) -> Vec<f32> {
    v.into_iter().map(|x| bf16::from_f32(x).to_f32()).collect()
}

fn normal_group(rng: &mut StdRng) -> Vec<f32> {
    let d = Normal::new(0.0f32, 0.02).unwrap();
    bf16_round((0..GROUP).map(|_| d.sample(rng)).collect())
}

fn student_t3_group(rng: &mut StdRng) -> Vec<f32> {
    let d = StudentT::new(3.0f32).unwrap();
    bf16_round((0..GROUP).map(|_| d.sample(rng) * 0.02).collect())
}

fn outlier_group(rng: &mut StdRng) -> Vec<f32> {
    let d = Normal::new(0.0f32, 0.02).unwrap();
    let mut v: Vec<f32> = (0..GROUP).map(|_| d.sample(rng)).collect();
    for k in 0..6 {
        let i = rng.random_range(0..GROUP);
        v[i] = if k % 2 == 0 { 0.4 } else { -0.4 }; // 20σ
    }
    bf16_round(v)
}

fn sse_fp16_table(values: &[f32], centroids: &[f64]) -> f64 {
    let (table, n) = table_from_centroids(centroids).unwrap();
    let lookup = NearestEntry::new(&table, n);
    values
        .iter()
        .map(|&v| {
            let q = table[lookup.index(f64::from(v)) as usize].to_f64();
            (q - f64::from(v)).powi(2)
        })
        .sum()
}

fn sse_of_table(values: &[f32], table: &[half::f16], idx: &[u8]) -> f64 {
    values
        .iter()
        .zip(idx)
        .map(|(&v, &i)| (table[i as usize].to_f64() - f64::from(v)).powi(2))
        .sum()
}

fn check(name: &str, values: &[f32]) {
    let data = WeightedValues::from_f32(values).unwrap();
    assert!(
        data.len() > TABLE_LEN,
        "{name}: needs more than 64 distinct values"
    );
    let lo = data.values[0];
    let hi = data.values[data.len() - 1];
    let uniform: Vec<f64> = (0..TABLE_LEN)
        .map(|j| lo + (hi - lo) * j as f64 / (TABLE_LEN - 1) as f64)
        .collect();

    // before FP16 rounding
    let lloyd = lloyd_centroids(&data);
    let opt = optimal_kmeans(&data, TABLE_LEN);
    let sse_lloyd = data.sse_sorted(&lloyd);
    let sse_uniform = data.sse_sorted(&uniform);
    assert!((data.sse_sorted(&opt.centroids) - opt.cost).abs() <= 1e-9 * opt.cost);

    // after FP16 rounding, as the runtime reconstructs
    let (table, idx) = palettize_group(values).unwrap();
    let fp16_lloyd = sse_of_table(values, &table, &idx);
    let (dp_table, dp_idx) = palettize_group_with(values, ClusterMode::ExactDp).unwrap();
    let fp16_dp = sse_of_table(values, &dp_table, &dp_idx);
    assert_eq!(fp16_dp, sse_fp16_table(values, &opt.centroids));
    let fp16_uniform = sse_fp16_table(values, &uniform);

    eprintln!(
        "{name}: f64 lloyd/opt = {:.5}, lloyd/uniform = {:.4}; fp16 lloyd/dp = {:.5}, lloyd/uniform = {:.4}, dp/opt = {:.6}",
        sse_lloyd / opt.cost,
        sse_lloyd / sse_uniform,
        fp16_lloyd / fp16_dp,
        fp16_lloyd / fp16_uniform,
        fp16_dp / opt.cost
    );
    assert!(
        table.windows(2).all(|w| w[0] <= w[1]),
        "{name}: table not sorted"
    );
    assert!(
        table.iter().all(|h| h.is_finite()),
        "{name}: table not finite"
    );
    assert!(
        sse_lloyd <= sse_uniform,
        "{name}: worse than a uniform grid"
    );
    assert!(
        fp16_lloyd <= fp16_uniform,
        "{name}: FP16 table worse than a uniform grid"
    );
    // the oracle really is a lower bound for the recipe
    assert!(
        sse_lloyd >= opt.cost * (1.0 - 1e-12),
        "{name}: Lloyd beat the optimum"
    );
    // exact mode: DP tables through FP16 stay within 2% of the unrounded optimum, and beat the grid
    assert!(dp_table.windows(2).all(|w| w[0] <= w[1]) && dp_table.iter().all(|h| h.is_finite()));
    assert!(
        fp16_dp <= 1.02 * opt.cost,
        "{name}: FP16 DP table {} × the optimum",
        fp16_dp / opt.cost
    );
    assert!(
        fp16_dp <= fp16_uniform,
        "{name}: FP16 DP table worse than a uniform grid"
    );
}

#[test]
fn normal_groups() {
    let mut rng = StdRng::seed_from_u64(1);
    for k in 0..4 {
        check(&format!("normal #{k}"), &normal_group(&mut rng));
    }
}

#[test]
fn student_t3_groups() {
    let mut rng = StdRng::seed_from_u64(2);
    for k in 0..4 {
        check(&format!("student-t3 #{k}"), &student_t3_group(&mut rng));
    }
}

#[test]
fn groups_with_20_sigma_outliers() {
    let mut rng = StdRng::seed_from_u64(3);
    for k in 0..4 {
        check(&format!("outliers #{k}"), &outlier_group(&mut rng));
    }
}

#[test]
fn f32_groups_with_all_distinct_values() {
    // not BF16-rounded: every value distinct
    let mut rng = StdRng::seed_from_u64(4);
    let d = Normal::new(0.0f32, 0.02).unwrap();
    let v: Vec<f32> = (0..GROUP).map(|_| d.sample(&mut rng)).collect();
    check("normal f32", &v);
}
