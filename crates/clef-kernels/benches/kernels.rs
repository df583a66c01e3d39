//! Kernel throughput against the machine's measured FMA peak, in one run.
//!
//! `cargo bench -p clef-kernels --bench kernels` (threads: `CLEF_BENCH_THREADS`, default 2).
//! Criterion reports `elem/s` where one element is one FLOP, so `Gelem/s` reads as GFLOP/s;
//! a summary with the fraction of peak is printed at the end.

use clef_kernels::{
    causal_attention, gated_delta_rule, matmul, measure_fma_peak_gflops, DeltaNetDims, WeightData,
    WeightView,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// The engine's default prefill chunk.
const M: usize = 128;

/// Clef-Flash linear shapes `(name, rows = out, cols = in)`.
const SHAPES: [(&str, usize, usize); 5] = [
    ("mlp_gate_up_12288x4096", 12288, 4096),
    ("mlp_down_4096x12288", 4096, 12288),
    ("qkv_or_q_8192x4096", 8192, 4096),
    ("z_out_o_4096x4096", 4096, 4096),
    ("k_v_1024x4096", 1024, 4096),
];

fn threads() -> usize {
    std::env::var("CLEF_BENCH_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
}

fn random_f32(rng: &mut StdRng, len: usize) -> Vec<f32> {
    (0..len).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

fn random_bf16_bytes(rng: &mut StdRng, len: usize) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(len * 2 + 1);
    bytes.push(0); // start at an odd address, as an mmapped tensor may
    for _ in 0..len {
        let v = half::bf16::from_f32(rng.random_range(-0.05f32..0.05));
        bytes.extend_from_slice(&v.to_bits().to_le_bytes());
    }
    bytes
}

/// Best-of-`runs` seconds for `f`.
fn best_time(runs: usize, mut f: impl FnMut()) -> f64 {
    f();
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn benches(c: &mut Criterion) {
    let threads = threads();
    // Ignore the error if a pool was already built (it can only be set once per process).
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global();
    let peak1 = measure_fma_peak_gflops(1);
    let peak = measure_fma_peak_gflops(threads);
    println!("FMA peak: 1 thread {peak1:.1} GFLOP/s, {threads} threads {peak:.1} GFLOP/s");
    println!("ISA: {:?}", clef_kernels::Isa::detect());

    let mut rng = StdRng::seed_from_u64(1);
    let mut summary = Vec::new();

    let mut group = c.benchmark_group("matmul_bf16_m128");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(2));
    for (name, rows, cols) in SHAPES {
        let bytes = random_bf16_bytes(&mut rng, rows * cols);
        let w = WeightView::new(rows, cols, WeightData::Bf16(&bytes[1..])).expect("shape");
        let x = random_f32(&mut rng, M * cols);
        let mut y = vec![0.0f32; M * rows];
        let flops = 2.0 * (M * rows * cols) as f64;
        group.throughput(Throughput::Elements(flops as u64));
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| matmul(black_box(&x), M, &w, &mut y))
        });
        let secs = best_time(3, || matmul(&x, M, &w, &mut y));
        summary.push((format!("matmul {name}"), flops / secs / 1e9));
    }
    group.finish();

    // DeltaNet core, one 128-token chunk of a Flash layer.
    let dims = DeltaNetDims {
        k_heads: 16,
        v_heads: 32,
        dk: 128,
        dv: 128,
    };
    let n = M;
    let q = random_f32(&mut rng, n * 16 * 128);
    let k = normalised(&mut rng, n * 16, 128);
    let v = random_f32(&mut rng, n * 32 * 128);
    let g: Vec<f32> = (0..n * 32)
        .map(|_| -rng.random_range(0.0f32..0.5))
        .collect();
    let beta: Vec<f32> = (0..n * 32).map(|_| rng.random_range(0.0f32..1.0)).collect();
    let mut state = vec![0.0f32; 32 * 128 * 128];
    let mut out = vec![0.0f32; n * 32 * 128];
    // Useful work of the chunked form per head and 64-row chunk: about 3·C·dk·dv + C²·(dk+dv)
    // multiply-adds (see docs/kernels.md); reported against the same peak.
    let chunks = n.div_ceil(64) as f64;
    let dn_flops = 2.0 * 32.0 * chunks * (3.0 * 64.0 * 128.0 * 128.0 + 64.0 * 64.0 * 256.0);
    let mut group = c.benchmark_group("deltanet_chunk128");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300));
    group.throughput(Throughput::Elements(dn_flops as u64));
    group.bench_function("gated_delta_rule", |b| {
        b.iter(|| gated_delta_rule(&q, &k, &v, &g, &beta, n, &dims, &mut state, &mut out))
    });
    group.finish();
    let secs = best_time(5, || {
        gated_delta_rule(&q, &k, &v, &g, &beta, n, &dims, &mut state, &mut out)
    });
    summary.push(("gated_delta_rule n=128".into(), dn_flops / secs / 1e9));

    // Causal attention, the last 128-token chunk of a 2,048-token prefill.
    let (t, hq, hkv, d) = (2048usize, 16usize, 4usize, 256usize);
    let q = random_f32(&mut rng, n * hq * d);
    let kk = random_f32(&mut rng, t * hkv * d);
    let vv = random_f32(&mut rng, t * hkv * d);
    let mut out = vec![0.0f32; n * hq * d];
    let visible: f64 = (0..n).map(|i| (t - n + i + 1) as f64).sum();
    let at_flops = 4.0 * hq as f64 * d as f64 * visible;
    let mut group = c.benchmark_group("causal_attention_n128_t2048");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300));
    group.throughput(Throughput::Elements(at_flops as u64));
    group.bench_function("causal_attention", |b| {
        b.iter(|| causal_attention(&q, &kk, &vv, n, t, hq, hkv, d, 1.0 / 16.0, &mut out))
    });
    group.finish();
    let secs = best_time(3, || {
        causal_attention(&q, &kk, &vv, n, t, hq, hkv, d, 1.0 / 16.0, &mut out)
    });
    summary.push((
        "causal_attention n=128 t=2048".into(),
        at_flops / secs / 1e9,
    ));

    println!("\nsummary ({threads} threads, peak {peak:.1} GFLOP/s)");
    for (name, gflops) in summary {
        println!(
            "  {name:<40} {gflops:8.1} GFLOP/s  {:5.1}% of peak",
            100.0 * gflops / peak
        );
    }
}

fn normalised(rng: &mut StdRng, rows: usize, dim: usize) -> Vec<f32> {
    let mut x = random_f32(rng, rows * dim);
    clef_kernels::l2_normalize(&mut x, dim, 1e-6);
    x
}

criterion_group!(kernel_benches, benches);
criterion_main!(kernel_benches);
