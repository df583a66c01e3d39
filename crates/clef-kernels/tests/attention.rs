//! Attention paths (each ISA forced, the dispatcher, the scalar twin) against a naive
//! softmax(QKᵀ)V computed in f64 in this file: GQA groups, n < t, many key blocks.

use clef_kernels::{
    attention, attention_scalar, attention_with, causal_attention, causal_attention_scalar,
    causal_attention_with, Kernels,
};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn random(rng: &mut StdRng, len: usize, amp: f32) -> Vec<f32> {
    (0..len).map(|_| rng.random_range(-amp..amp)).collect()
}

/// softmax(scale · q·kᵀ) v in f64; query i sees keys `0..visible(i)`.
#[allow(clippy::too_many_arguments)]
fn naive(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    nq: usize,
    hq: usize,
    hkv: usize,
    d: usize,
    scale: f32,
    visible: impl Fn(usize) -> usize,
) -> Vec<f64> {
    let group = hq / hkv;
    let mut out = vec![0.0f64; nq * hq * d];
    for i in 0..nq {
        for h in 0..hq {
            let kvh = h / group;
            let qi = &q[(i * hq + h) * d..][..d];
            let scores: Vec<f64> = (0..visible(i))
                .map(|j| {
                    let kj = &k[(j * hkv + kvh) * d..][..d];
                    f64::from(scale)
                        * qi.iter()
                            .zip(kj)
                            .map(|(&a, &b)| f64::from(a) * f64::from(b))
                            .sum::<f64>()
                })
                .collect();
            let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let total: f64 = weights.iter().sum();
            for (j, w) in weights.iter().enumerate() {
                let vj = &v[(j * hkv + kvh) * d..][..d];
                for (o, &x) in out[(i * hq + h) * d..][..d].iter_mut().zip(vj) {
                    *o += w / total * f64::from(x);
                }
            }
        }
    }
    out
}

/// Outputs are convex combinations of values in [-1, 1]; f32 rounding of the scores, the
/// exponentials and the sums stays well below 1e-5 absolute at these lengths.
fn assert_close(got: &[f32], want: &[f64], what: &str) {
    for (idx, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (f64::from(g) - w).abs() <= 1e-5,
            "{what}[{idx}] = {g}, naive {w}"
        );
    }
}

fn check_causal(seed: u64, n: usize, extra: usize, hkv: usize, group: usize, d: usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let (t, hq) = (n + extra, hkv * group);
    let scale = 1.0 / (d as f32).sqrt();
    let q = random(&mut rng, n * hq * d, 2.0);
    let k = random(&mut rng, t * hkv * d, 2.0);
    let v = random(&mut rng, t * hkv * d, 1.0);
    let want = naive(&q, &k, &v, n, hq, hkv, d, scale, |i| t - n + i + 1);
    let mut got = vec![f32::NAN; n * hq * d];
    causal_attention_scalar(&q, &k, &v, n, t, hq, hkv, d, scale, &mut got);
    assert_close(&got, &want, "scalar twin");
    for kt in Kernels::available() {
        let mut got = vec![f32::NAN; n * hq * d];
        causal_attention_with(kt, &q, &k, &v, n, t, hq, hkv, d, scale, &mut got);
        assert_close(&got, &want, kt.level());
    }
    let mut got = vec![f32::NAN; n * hq * d];
    causal_attention(&q, &k, &v, n, t, hq, hkv, d, scale, &mut got);
    assert_close(&got, &want, "dispatched");
}

fn check_bidirectional(seed: u64, nq: usize, nk: usize, h: usize, d: usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let scale = 1.0 / (d as f32).sqrt();
    let q = random(&mut rng, nq * h * d, 2.0);
    let k = random(&mut rng, nk * h * d, 2.0);
    let v = random(&mut rng, nk * h * d, 1.0);
    let want = naive(&q, &k, &v, nq, h, h, d, scale, |_| nk);
    let mut got = vec![f32::NAN; nq * h * d];
    attention_scalar(&q, &k, &v, nq, nk, h, d, scale, &mut got);
    assert_close(&got, &want, "scalar twin");
    for kt in Kernels::available() {
        let mut got = vec![f32::NAN; nq * h * d];
        attention_with(kt, &q, &k, &v, nq, nk, h, d, scale, &mut got);
        assert_close(&got, &want, kt.level());
    }
    let mut got = vec![f32::NAN; nq * h * d];
    attention(&q, &k, &v, nq, nk, h, d, scale, &mut got);
    assert_close(&got, &want, "dispatched");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn causal_gqa_matches_naive(
        n in 1usize..=70,
        extra in 0usize..=150,
        hkv in 1usize..=3,
        group in 1usize..=4,
        d in 1usize..=70,
        seed in any::<u64>(),
    ) {
        check_causal(seed, n, extra, hkv, group, d);
    }

    #[test]
    fn bidirectional_matches_naive(
        nq in 1usize..=40,
        nk in 1usize..=300,
        h in 1usize..=3,
        d in 1usize..=70,
        seed in any::<u64>(),
    ) {
        check_bidirectional(seed, nq, nk, h, d);
    }
}

#[test]
fn model_shapes_and_long_context() {
    // Flash attention layer shape (16 q / 4 kv heads of 256), a chunk at the end of a context
    // spanning many key blocks.
    check_causal(1, 5, 1200, 4, 4, 256);
    // Prefill from the start: n = t.
    check_causal(2, 33, 0, 1, 6, 64);
    // The head's cross-attention: few queries over a long memory, 64-wide heads.
    check_bidirectional(3, 3, 2000, 2, 64);
    // The last tokens of a 16,384-token context.
    check_causal(4, 3, 16_381, 1, 2, 16);
}

#[test]
fn no_keys_gives_zeros() {
    let mut out = vec![f32::NAN; 2 * 3];
    attention(&[1.0; 6], &[], &[], 2, 0, 1, 3, 1.0, &mut out);
    assert_eq!(out, vec![0.0; 6]);
}
