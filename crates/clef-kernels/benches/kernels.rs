//! Kernel throughput against the machine's measured FMA peak, in one run.
//!
//! `cargo bench -p clef-kernels --bench kernels` (threads: `CLEF_BENCH_THREADS`, default 2;
//! `CLEF_BENCH_SLICE=1` adds the prefill-slice estimate, which takes ~20 s).
//! Criterion reports `elem/s` where one element is one FLOP, so `Gelem/s` reads as GFLOP/s. A
//! summary with the fraction of peak follows: best-of-N wall time, and on Linux the same work
//! per CPU-second of this process (which discounts time slices taken by other processes on a
//! shared machine).

use clef_kernels::{
    causal_attention, gated_delta_rule, l2_normalize, matmul, measure_fma_peak_gflops,
    DeltaNetDims, HeadOrder, Kernels, WeightData, WeightView,
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
    ("qkv_q_8192x4096", 8192, 4096),
    ("z_out_o_4096x4096", 4096, 4096),
    ("k_v_1024x4096", 1024, 4096),
];

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn random_f32(rng: &mut StdRng, len: usize, amp: f32) -> Vec<f32> {
    (0..len).map(|_| rng.random_range(-amp..amp)).collect()
}

/// bf16 bytes with one junk byte in front, so the weight starts at an odd address as an
/// mmapped tensor may.
fn random_bf16_bytes(rng: &mut StdRng, len: usize) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(len * 2 + 1);
    bytes.push(0);
    for _ in 0..len {
        let v = half::bf16::from_f32(rng.random_range(-0.05f32..0.05));
        bytes.extend_from_slice(&v.to_bits().to_le_bytes());
    }
    bytes
}

struct Weight {
    rows: usize,
    cols: usize,
    bytes: Vec<u8>,
}

impl Weight {
    fn new(rng: &mut StdRng, rows: usize, cols: usize) -> Weight {
        Weight {
            rows,
            cols,
            bytes: random_bf16_bytes(rng, rows * cols),
        }
    }

    fn view(&self) -> WeightView<&[u8]> {
        WeightView::new(self.rows, self.cols, WeightData::Bf16(&self.bytes[1..])).expect("shape")
    }
}

/// CPU seconds used by this process so far (all threads), where the OS tells.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat[stat.rfind(')')? + 2..].split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// Best-of-`runs` wall seconds for `f`, and CPU seconds per run (averaged) when known.
fn measure(runs: usize, mut f: impl FnMut()) -> (f64, Option<f64>) {
    f();
    let cpu0 = cpu_seconds();
    let mut best = f64::INFINITY;
    for _ in 0..runs {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed().as_secs_f64());
    }
    let cpu = cpu0.zip(cpu_seconds()).map(|(a, b)| (b - a) / runs as f64);
    (best, cpu)
}

struct Summary {
    threads: usize,
    peak: f64,
    core_peak: f64,
    rows: Vec<String>,
}

impl Summary {
    fn add(&mut self, name: &str, flops: f64, (wall, cpu): (f64, Option<f64>)) {
        let gflops = flops / wall / 1e9;
        let mut line = format!(
            "  {name:<34} {:9.2} ms {gflops:7.1} GFLOP/s {:5.1}% of peak",
            wall * 1e3,
            100.0 * gflops / self.peak
        );
        if let Some(cpu) = cpu.filter(|&c| c > 0.0) {
            let per_cpu = flops / cpu / 1e9;
            line += &format!(
                " | {:5.1}% per CPU-second",
                100.0 * per_cpu / self.core_peak
            );
        }
        self.rows.push(line);
    }
}

fn benches(c: &mut Criterion) {
    let threads = env_usize("CLEF_BENCH_THREADS", 2);
    // Ignore the error if a pool was already built (it can only be set once per process).
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global();
    // Best of three: on a shared machine a single measurement can lose a time slice.
    let peak1 = (0..3)
        .map(|_| measure_fma_peak_gflops(1))
        .fold(0.0, f64::max);
    let peak = (0..3)
        .map(|_| measure_fma_peak_gflops(threads))
        .fold(0.0, f64::max);
    println!(
        "ISA {:?}; FMA peak: 1 thread {peak1:.1} GFLOP/s, {threads} threads {peak:.1} GFLOP/s",
        Kernels::detected()
    );
    // The per-core peak per CPU-second: the 1-thread loop's rate scaled by wall / CPU time
    // (its thread is the only busy one during the call).
    let core_peak = (0..3)
        .map(|_| {
            let cpu0 = cpu_seconds();
            let start = Instant::now();
            let rate = measure_fma_peak_gflops(1);
            let wall = start.elapsed().as_secs_f64();
            match cpu0.zip(cpu_seconds()) {
                Some((a, b)) if b > a => rate * wall / (b - a),
                _ => rate,
            }
        })
        .fold(peak1, f64::max);
    let mut summary = Summary {
        threads,
        peak,
        core_peak,
        rows: Vec::new(),
    };

    let mut rng = StdRng::seed_from_u64(1);
    let weights: Vec<(&str, Weight)> = SHAPES
        .iter()
        .map(|&(name, rows, cols)| (name, Weight::new(&mut rng, rows, cols)))
        .collect();

    let mut group = c.benchmark_group("matmul_bf16_m128");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(2));
    for (name, weight) in &weights {
        let w = weight.view();
        let x = random_f32(&mut rng, M * w.cols(), 1.0);
        let mut y = vec![0.0f32; M * w.rows()];
        let flops = 2.0 * (M * w.rows() * w.cols()) as f64;
        group.throughput(Throughput::Elements(flops as u64));
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| matmul(black_box(&x), M, &w, &mut y))
        });
        summary.add(
            &format!("matmul {name}"),
            flops,
            measure(5, || matmul(&x, M, &w, &mut y)),
        );
    }
    group.finish();

    // DeltaNet core, one 128-token chunk of a Flash layer (32 value heads over 16 key heads).
    let dims = DeltaNetDims {
        k_heads: 16,
        v_heads: 32,
        dk: 128,
        dv: 128,
        order: HeadOrder::Grouped,
    };
    let dn = DeltaNetInputs::new(&mut rng, M, dims);
    let mut state = vec![0.0f32; 32 * 128 * 128];
    let mut out = vec![0.0f32; M * 32 * 128];
    let dn_flops = dn.flops();
    let mut group = c.benchmark_group("deltanet_chunk128");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300));
    group.throughput(Throughput::Elements(dn_flops as u64));
    group.bench_function("gated_delta_rule", |b| {
        b.iter(|| dn.run(&mut state, &mut out))
    });
    group.finish();
    summary.add(
        "gated_delta_rule n=128",
        dn_flops,
        measure(10, || dn.run(&mut state, &mut out)),
    );

    // Causal attention, the last 128-token chunk of a 2,048-token prefill.
    let at = AttentionInputs::new(&mut rng, M, 2048);
    let mut out = vec![0.0f32; M * 16 * 256];
    let mut group = c.benchmark_group("causal_attention_n128_t2048");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300));
    group.throughput(Throughput::Elements(at.flops(2048) as u64));
    group.bench_function("causal_attention", |b| b.iter(|| at.run(2048, &mut out)));
    group.finish();
    summary.add(
        "causal_attention n=128 t=2048",
        at.flops(2048),
        measure(5, || at.run(2048, &mut out)),
    );

    if std::env::var("CLEF_BENCH_SLICE").is_ok_and(|v| v == "1") {
        slice_estimate(&mut rng, &weights, &mut summary);
    }

    println!(
        "\nsummary: {} threads, peak {:.1} GFLOP/s; one core {:.1} GFLOP/s per CPU-second",
        summary.threads, summary.peak, summary.core_peak
    );
    for row in &summary.rows {
        println!("{row}");
    }
}

struct DeltaNetInputs {
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    g: Vec<f32>,
    beta: Vec<f32>,
    n: usize,
    dims: DeltaNetDims,
}

impl DeltaNetInputs {
    fn new(rng: &mut StdRng, n: usize, dims: DeltaNetDims) -> DeltaNetInputs {
        let kd = n * dims.k_heads * dims.dk;
        let mut q = random_f32(rng, kd, 1.0);
        let mut k = random_f32(rng, kd, 1.0);
        l2_normalize(&mut q, dims.dk, 1e-6);
        l2_normalize(&mut k, dims.dk, 1e-6);
        let scale = (dims.dk as f32).powf(-0.5);
        q.iter_mut().for_each(|x| *x *= scale);
        DeltaNetInputs {
            q,
            k,
            v: random_f32(rng, n * dims.v_heads * dims.dv, 1.0),
            g: (0..n * dims.v_heads)
                .map(|_| -rng.random_range(0.0f32..0.5))
                .collect(),
            beta: (0..n * dims.v_heads)
                .map(|_| rng.random_range(0.0f32..1.0))
                .collect(),
            n,
            dims,
        }
    }

    fn run(&self, state: &mut [f32], out: &mut [f32]) {
        gated_delta_rule(
            &self.q, &self.k, &self.v, &self.g, &self.beta, self.n, &self.dims, state, out,
        )
    }

    /// Useful work of the chunked form (model.md §3.2 step 9) per head and 64-row chunk:
    /// K·Kᵀ and Q·Kᵀ (lower triangles), T·(βV) and T·(βe^γK) (triangular), Wy·S₀, (Q e^γ)·S₀,
    /// the masked (QKᵀ ⊙ D)·V′ and Kᵀ·V′, i.e. about 3·C·dk·dv + 2·C²·(dk + dv)/2 … counted as
    /// 3·C·dk·dv + C²·(dk + dv) multiply-adds, 2 FLOP each.
    fn flops(&self) -> f64 {
        let DeltaNetDims {
            v_heads, dk, dv, ..
        } = self.dims;
        let c = 64.0;
        let chunks = self.n.div_ceil(64) as f64;
        let per = 3.0 * c * (dk * dv) as f64 + c * c * (dk + dv) as f64;
        2.0 * v_heads as f64 * chunks * per
    }
}

struct AttentionInputs {
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    n: usize,
}

impl AttentionInputs {
    const HQ: usize = 16;
    const HKV: usize = 4;
    const D: usize = 256;

    fn new(rng: &mut StdRng, n: usize, t_max: usize) -> AttentionInputs {
        AttentionInputs {
            q: random_f32(rng, n * Self::HQ * Self::D, 1.0),
            k: random_f32(rng, t_max * Self::HKV * Self::D, 1.0),
            v: random_f32(rng, t_max * Self::HKV * Self::D, 1.0),
            n,
        }
    }

    fn run(&self, t: usize, out: &mut [f32]) {
        let kv = t * Self::HKV * Self::D;
        let (n, hq, hkv, d) = (self.n, Self::HQ, Self::HKV, Self::D);
        causal_attention(
            &self.q,
            &self.k[..kv],
            &self.v[..kv],
            n,
            t,
            hq,
            hkv,
            d,
            1.0 / 16.0,
            out,
        )
    }

    /// Q·Kᵀ and P·V over the visible keys: 4·hq·d FLOP per (query, visible key).
    fn flops(&self, t: usize) -> f64 {
        let visible: f64 = (0..self.n).map(|i| (t - self.n + i + 1) as f64).sum();
        4.0 * (Self::HQ * Self::D) as f64 * visible
    }
}

/// A chunked prefill (m = 128) through one Flash DeltaNet layer and one attention layer
/// (projections, cores, MLPs; no norms, convolution, gates or rotary, which the model crate
/// adds), at 512 and 2,048 tokens.
fn slice_estimate(rng: &mut StdRng, weights: &[(&str, Weight)], summary: &mut Summary) {
    let find = |name: &str| &weights.iter().find(|(n, _)| *n == name).expect("shape").1;
    let (gate_up, down) = (find("mlp_gate_up_12288x4096"), find("mlp_down_4096x12288"));
    let (wide, square, narrow) = (
        find("qkv_q_8192x4096"),
        find("z_out_o_4096x4096"),
        find("k_v_1024x4096"),
    );
    let small = Weight::new(rng, 32, 4096); // in_proj_a / in_proj_b
    let dims = DeltaNetDims {
        k_heads: 16,
        v_heads: 32,
        dk: 128,
        dv: 128,
        order: HeadOrder::Grouped,
    };
    let dn = DeltaNetInputs::new(rng, M, dims);
    for total in [512usize, 2048] {
        let at = AttentionInputs::new(rng, M, total);
        let x = random_f32(rng, M * 12288, 1.0);
        let mut y = vec![0.0f32; M * 12288];
        let mut state = vec![0.0f32; 32 * 128 * 128];
        let mut out = vec![0.0f32; M * 32 * 128];
        let mm = |w: &Weight, y: &mut [f32]| {
            let v = w.view();
            matmul(&x[..M * v.cols()], M, &v, &mut y[..M * v.rows()]);
            2.0 * (M * v.rows() * v.cols()) as f64
        };
        let cpu0 = cpu_seconds();
        let start = Instant::now();
        let mut flops = 0.0;
        for chunk in 0..total / M {
            // DeltaNet layer: in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, core, out_proj.
            for w in [wide, square, &small, &small] {
                flops += mm(w, &mut y);
            }
            dn.run(&mut state, &mut out);
            flops += dn.flops();
            flops += mm(square, &mut y);
            // Attention layer: q_proj (query + gate), k_proj, v_proj, core, o_proj.
            for w in [wide, narrow, narrow] {
                flops += mm(w, &mut y);
            }
            let t = (chunk + 1) * M;
            at.run(t, &mut out[..M * 16 * 256]);
            flops += at.flops(t);
            flops += mm(square, &mut y);
            // Two MLPs.
            for _ in 0..2 {
                flops += mm(gate_up, &mut y) + mm(gate_up, &mut y) + mm(down, &mut y);
            }
        }
        let wall = start.elapsed().as_secs_f64();
        let cpu = cpu0.zip(cpu_seconds()).map(|(a, b)| b - a);
        summary.add(&format!("slice prefill {total} tokens"), flops, (wall, cpu));
    }
}

criterion_group!(kernel_benches, benches);
criterion_main!(kernel_benches);
