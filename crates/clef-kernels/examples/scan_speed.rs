//! The chunked Gated DeltaNet scan at Clef-Flash's shapes (16 key heads, 32 value heads of 128,
//! `n` tokens from a zero state), best of several runs, in GFLOP/s of the chunked form.
//!
//! `cargo run --release -p clef-kernels --example scan_speed [threads] [tokens]`

use clef_kernels::{gated_delta_rule, DeltaNetDims, HeadOrder};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let threads: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2048);
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()
        .unwrap();
    let dims = DeltaNetDims {
        k_heads: 16,
        v_heads: 32,
        dk: 128,
        dv: 128,
        order: HeadOrder::Grouped,
    };
    let mut s = 7u32;
    let mut next = move || {
        s = s.wrapping_mul(1664525).wrapping_add(1013904223);
        (s >> 9) as f32 / (1u32 << 23) as f32 - 0.5
    };
    // L2-normalised keys and queries, as the layer gives them.
    let mut unit = |rows: usize| {
        let mut v: Vec<f32> = (0..rows * dims.dk).map(|_| next()).collect();
        for r in v.chunks_exact_mut(dims.dk) {
            let norm = r.iter().map(|x| x * x).sum::<f32>().sqrt();
            r.iter_mut().for_each(|x| *x /= norm);
        }
        v
    };
    let q = unit(n * dims.k_heads);
    let k = unit(n * dims.k_heads);
    let v: Vec<f32> = (0..n * dims.v_heads * dims.dv)
        .map(|i| ((i % 97) as f32 - 48.0) / 97.0)
        .collect();
    let strong = std::env::var_os("STRONG").is_some();
    let g: Vec<f32> = (0..n * dims.v_heads)
        .map(|i| {
            if strong {
                -0.05 - (i % 7) as f32 * 0.5
            } else {
                -0.05 - (i % 7) as f32 * 0.01
            }
        })
        .collect();
    let beta: Vec<f32> = (0..n * dims.v_heads)
        .map(|i| 0.3 + (i % 5) as f32 * 0.1)
        .collect();
    let mut out = vec![0f32; n * dims.v_heads * dims.dv];
    // Multiply-adds per chunk of c tokens and head: K·Kᵀ, Q·Kᵀ (c²·dk each), T·V and T·K (c²·dv,
    // c²·dk), Wy·S₀ and Q·S₀ (c·dk·dv each), P·V′ (c²·dv), the state update (dk·dv·c).
    let c = 64f64;
    let (dk, dv) = (dims.dk as f64, dims.dv as f64);
    let per_chunk =
        2.0 * (2.0 * c * c * dk + c * c * (dv + dk) + 2.0 * c * dk * dv + c * c * dv + dk * dv * c);
    let flops = per_chunk * (n as f64 / c) * dims.v_heads as f64;
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let mut state = vec![0f32; dims.v_heads * dims.dk * dims.dv];
        let t = Instant::now();
        gated_delta_rule(&q, &k, &v, &g, &beta, n, &dims, &mut state, &mut out);
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!(
        "{n} tokens, {threads} threads: {:.2} ms, {:.1} GFLOP/s",
        best * 1e3,
        flops / best / 1e9
    );
}
