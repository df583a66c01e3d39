//! The chunked Gated DeltaNet (every ISA, and the dispatcher) against the token-by-token
//! recurrence: any length (chunk boundaries anywhere), carried state, head groups r = 1, 2, 3.

use clef_kernels::{
    gated_delta_rule, gated_delta_rule_recurrent, gated_delta_rule_with, l2_normalize,
    DeltaNetDims, HeadOrder, Kernels,
};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A DeltaNet call on one stretch of the sequence: (q, k, v, g, beta, len, state, out).
type Step<'a> = dyn Fn(&[f32], &[f32], &[f32], &[f32], &[f32], usize, &mut [f32], &mut [f32]) + 'a;

struct Case {
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    g: Vec<f32>,
    beta: Vec<f32>,
    state: Vec<f32>,
    n: usize,
    dims: DeltaNetDims,
}

fn case(seed: u64, n: usize, dims: DeltaNetDims) -> Case {
    let mut rng = StdRng::seed_from_u64(seed);
    let DeltaNetDims {
        k_heads,
        v_heads,
        dk,
        dv,
        ..
    } = dims;
    let mut uniform = |len: usize, lo: f32, hi: f32| -> Vec<f32> {
        (0..len).map(|_| rng.random_range(lo..hi)).collect()
    };
    let mut q = uniform(n * k_heads * dk, -1.0, 1.0);
    let mut k = uniform(n * k_heads * dk, -1.0, 1.0);
    l2_normalize(&mut q, dk, 1e-6);
    l2_normalize(&mut k, dk, 1e-6);
    let scale = (dk as f32).powf(-0.5);
    q.iter_mut().for_each(|v| *v *= scale);
    let v = uniform(n * v_heads * dv, -1.0, 1.0);
    // Log decays in [-3, 0]: from no decay to strong decay within a chunk.
    let g = uniform(n * v_heads, -3.0, 0.0);
    let beta = uniform(n * v_heads, 0.0, 1.0);
    let state = uniform(v_heads * dk * dv, -1.0, 1.0);
    Case {
        q,
        k,
        v,
        g,
        beta,
        state,
        n,
        dims,
    }
}

/// Runs `f` over the sequence split at `split` (two calls carrying the state), returning the
/// outputs and the final state.
fn run_split(c: &Case, split: usize, f: &Step) -> (Vec<f32>, Vec<f32>) {
    let DeltaNetDims {
        k_heads,
        v_heads,
        dk,
        dv,
        ..
    } = c.dims;
    let mut state = c.state.clone();
    let mut out = vec![f32::NAN; c.n * v_heads * dv];
    let mut t0 = 0;
    for t1 in [split.min(c.n), c.n] {
        let len = t1 - t0;
        let qk = t0 * k_heads * dk..t1 * k_heads * dk;
        let vv = t0 * v_heads * dv..t1 * v_heads * dv;
        let gb = t0 * v_heads..t1 * v_heads;
        f(
            &c.q[qk.clone()],
            &c.k[qk],
            &c.v[vv.clone()],
            &c.g[gb.clone()],
            &c.beta[gb],
            len,
            &mut state,
            &mut out[vv],
        );
        t0 = t1;
    }
    (out, state)
}

/// Relative to the largest magnitude of the reference (outputs and states are O(1) here).
fn assert_close(got: &[f32], want: &[f32], what: &str) {
    let scale = want.iter().fold(1.0f32, |m, v| m.max(v.abs()));
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= 1e-5 * scale,
            "{what}[{i}]: chunked {a}, recurrent {b} (scale {scale})"
        );
    }
}

fn check(seed: u64, n: usize, split: usize, dims: DeltaNetDims) {
    let c = case(seed, n, dims);
    let reference =
        |q: &[f32],
         k: &[f32],
         v: &[f32],
         g: &[f32],
         b: &[f32],
         len: usize,
         s: &mut [f32],
         o: &mut [f32]| { gated_delta_rule_recurrent(q, k, v, g, b, len, &dims, s, o) };
    // The reference itself never splits: the recurrence is the definition.
    let (want_out, want_state) = run_split(&c, n, &reference);
    for kt in Kernels::available() {
        let fast = |q: &[f32],
                    k: &[f32],
                    v: &[f32],
                    g: &[f32],
                    b: &[f32],
                    len: usize,
                    s: &mut [f32],
                    o: &mut [f32]| {
            gated_delta_rule_with(kt, q, k, v, g, b, len, &dims, s, o)
        };
        let (out, state) = run_split(&c, split, &fast);
        assert_close(&out, &want_out, &format!("{kt:?} out"));
        assert_close(&state, &want_state, &format!("{kt:?} state"));
    }
    let dispatched =
        |q: &[f32],
         k: &[f32],
         v: &[f32],
         g: &[f32],
         b: &[f32],
         len: usize,
         s: &mut [f32],
         o: &mut [f32]| { gated_delta_rule(q, k, v, g, b, len, &dims, s, o) };
    let (out, state) = run_split(&c, split, &dispatched);
    assert_close(&out, &want_out, "dispatched out");
    assert_close(&state, &want_state, "dispatched state");
}

#[test]
fn named_lengths_at_model_head_sizes() {
    // dk = dv = 128 as in the model, r = 2, lengths around the chunk size.
    let dims = DeltaNetDims {
        k_heads: 2,
        v_heads: 4,
        dk: 128,
        dv: 128,
        order: HeadOrder::Grouped,
    };
    for (i, n) in [1usize, 7, 64, 65, 200].into_iter().enumerate() {
        check(100 + i as u64, n, n, dims);
        check(200 + i as u64, n, n / 2 + 1, dims);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn chunked_matches_recurrent(
        n in 1usize..=200,
        split in 0usize..=200,
        k_heads in 1usize..=3,
        r in 1usize..=3,
        dk in 1usize..=45,
        dv in 1usize..=45,
        tiled in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let order = if tiled { HeadOrder::Tiled } else { HeadOrder::Grouped };
        check(seed, n, split, DeltaNetDims { k_heads, v_heads: k_heads * r, dk, dv, order });
    }
}

/// Heads that decay by e⁻⁴ to e⁻⁸ a token: within a chunk the decays `exp(γ_r − γ_s)` and the
/// carried state reach far below f32's normal range, which the scan flushes to zero
/// (`float_env`) and the recurrence computes as denormals. The answers stay within the
/// tolerance, and every thread that ran the scan computes denormals again afterwards.
#[test]
fn strong_decays_flush_denormals_without_moving_the_answer() {
    let dims = DeltaNetDims {
        k_heads: 2,
        v_heads: 4,
        dk: 64,
        dv: 64,
        order: HeadOrder::Grouped,
    };
    let n = 150;
    let mut c = case(7, n, dims);
    let mut rng = StdRng::seed_from_u64(8);
    c.g.iter_mut()
        .for_each(|g| *g = rng.random_range(-8.0..-4.0));
    let mut want_state = c.state.clone();
    let mut want_out = vec![0.0; n * dims.v_heads * dims.dv];
    gated_delta_rule_recurrent(
        &c.q,
        &c.k,
        &c.v,
        &c.g,
        &c.beta,
        n,
        &dims,
        &mut want_state,
        &mut want_out,
    );
    // The case does reach denormals: head 0's decays between tokens of its first chunk.
    let gamma: Vec<f32> = c.g[..64 * dims.v_heads]
        .iter()
        .step_by(dims.v_heads)
        .scan(0.0f32, |acc, &g| {
            *acc += g;
            Some(*acc)
        })
        .collect();
    let denormal = (0..64)
        .flat_map(|r| (0..r).map(move |s| (r, s)))
        .filter(|&(r, s)| (gamma[r] - gamma[s]).exp().is_subnormal())
        .count();
    assert!(denormal > 0, "the case must make denormal decays");
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let (out, state) = pool.install(|| {
        let mut state = c.state.clone();
        let mut out = vec![0.0; n * dims.v_heads * dims.dv];
        gated_delta_rule(
            &c.q, &c.k, &c.v, &c.g, &c.beta, n, &dims, &mut state, &mut out,
        );
        (out, state)
    });
    assert_close(&out, &want_out, "out");
    assert_close(&state, &want_state, "state");
    let half = || std::hint::black_box(f32::MIN_POSITIVE) * std::hint::black_box(0.5);
    assert!(half() > 0.0, "the calling thread keeps denormals");
    for kept in pool.broadcast(|_| half() > 0.0) {
        assert!(
            kept,
            "a worker that ran the scan keeps denormals afterwards"
        );
    }
}

#[test]
fn empty_sequence_leaves_state_alone() {
    let dims = DeltaNetDims {
        k_heads: 1,
        v_heads: 2,
        dk: 3,
        dv: 5,
        order: HeadOrder::Grouped,
    };
    let mut state: Vec<f32> = (0..30).map(|i| i as f32).collect();
    let before = state.clone();
    gated_delta_rule(&[], &[], &[], &[], &[], 0, &dims, &mut state, &mut []);
    assert_eq!(state, before);
}

/// The tiled order (llama.cpp's GGUF files) is the grouped order with the value heads renamed:
/// value head `h = i·k_heads + j` (tiled) is head `j·r + i` (grouped). Moving every per-value-head
/// input to its grouped place and running the grouped layer gives the tiled layer's outputs and
/// states, bit for bit, on every kernel table.
#[test]
fn tiled_heads_are_grouped_heads_renamed() {
    let (k_heads, r, dk, dv, n) = (3, 2, 20, 12, 70);
    let v_heads = k_heads * r;
    let dims = |order| DeltaNetDims {
        k_heads,
        v_heads,
        dk,
        dv,
        order,
    };
    let tiled = case(77, n, dims(HeadOrder::Tiled));
    let grouped_of = |h: usize| (h % k_heads) * r + h / k_heads;
    // per token, per value head blocks of `w` values: tiled head h goes to grouped_of(h)
    let regroup = |x: &[f32], w: usize, rows: usize| {
        let mut y = vec![0.0f32; x.len()];
        for t in 0..rows {
            for h in 0..v_heads {
                let (src, dst) = ((t * v_heads + h) * w, (t * v_heads + grouped_of(h)) * w);
                y[dst..dst + w].copy_from_slice(&x[src..src + w]);
            }
        }
        y
    };
    for kt in Kernels::available() {
        let run = |c: &Case, d: DeltaNetDims| {
            let mut state = c.state.clone();
            let mut out = vec![0.0f32; n * v_heads * dv];
            gated_delta_rule_with(
                kt, &c.q, &c.k, &c.v, &c.g, &c.beta, n, &d, &mut state, &mut out,
            );
            (out, state)
        };
        let (out_t, state_t) = run(&tiled, dims(HeadOrder::Tiled));
        let grouped = Case {
            v: regroup(&tiled.v, dv, n),
            g: regroup(&tiled.g, 1, n),
            beta: regroup(&tiled.beta, 1, n),
            state: regroup(&tiled.state, dk * dv, 1),
            q: tiled.q.clone(),
            k: tiled.k.clone(),
            n,
            dims: dims(HeadOrder::Grouped),
        };
        let (out_g, state_g) = run(&grouped, dims(HeadOrder::Grouped));
        assert_eq!(regroup(&out_t, dv, n), out_g, "{kt:?}");
        assert_eq!(regroup(&state_t, dk * dv, 1), state_g, "{kt:?}");
        // and the orders do differ
        assert_ne!(out_t, run(&tiled, dims(HeadOrder::Grouped)).0);
    }
}
