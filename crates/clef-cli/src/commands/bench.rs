//! `clef bench`: prefill throughput, time per stage and peak memory on a model folder, with
//! efficiency against this machine's f32 FMA peak measured in the same run.

use clap::Args;
use clef_engine::cli::MatmulArgs;
use clef_kernels::cpu::Family;
use clef_kernels::Kernels;
use clef_model::bench::{bench_prefill, BenchResult, LinearTime};
use clef_model::{memory, PrefillOrder, RunOptions};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct BenchArgs {
    /// Model folder (a release, a bundle or a `clef synth` output).
    #[arg(long)]
    pub model: PathBuf,
    /// Prompt lengths to time, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "512")]
    pub tokens: Vec<usize>,
    /// Rows per prefill call (default: 512 where the linears run on a matrix unit, bf16
    /// products and AMX integer products; 128 otherwise).
    #[arg(long)]
    pub chunk: Option<usize>,
    /// Untimed warm-up runs at each timed length before its measurement (so that the timed
    /// runs find the scratch memory of that length already faulted in, as a serving process's
    /// requests do).
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// Timed runs per length; the fastest is reported (a shared machine's noise only ever
    /// slows a run down).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    /// Run the prefill layer by layer, dropping each layer's pages afterwards (bounded weight
    /// residency for models larger than memory).
    #[arg(long)]
    pub low_memory: bool,
    /// Print one JSON object per length instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub matmul: MatmulArgs,
}

pub fn run(args: BenchArgs, threads: usize) -> anyhow::Result<ExitCode> {
    let t0 = std::time::Instant::now();
    clef_engine::cli::check_model_folder(&args.model)?;
    let order = if args.low_memory {
        PrefillOrder::LayerMajor
    } else {
        PrefillOrder::ChunkMajor
    };
    let model = clef_engine::load_model_resident(&args.model, clef_engine::residency_for(order))?;
    let load_s = t0.elapsed().as_secs_f64();
    let peak = clef_kernels::measure_fma_peak_gflops(threads);
    if args.chunk == Some(0) {
        anyhow::bail!("--chunk must be at least 1");
    }
    let opts = RunOptions {
        matmul: args.matmul.mode(),
        chunk_size: args.chunk,
        order,
        ..Default::default()
    };
    let matmul = model.matmul_mode(&opts)?;
    let chunk = model.chunk_size(&opts)?;
    let kernels = Kernels::detected();
    // ggml's block types run on the VNNI tile of an AMX machine: its peak is the one to
    // compare their products with.
    let group = model.integer_group();
    // A GGUF file's K-quants multiply on the level's super-block tile, named where it is
    // another (the peak is the instruction's either way).
    let int8_tile = match kernels.int8_superblock_implementation(16) {
        kq if model.gguf().is_some() && kq != kernels.int8_implementation(group) => {
            format!("{}; K-quants: {kq}", kernels.int8_implementation(group))
        }
        _ => kernels.int8_implementation(group).to_string(),
    };
    let int8_peak = (matmul == clef_model::MatmulMode::Int8)
        .then(|| clef_kernels::measure_int8_peak_gops_for(threads, group));
    let bf16_peak = (matmul == clef_model::MatmulMode::Bf16)
        .then(|| clef_kernels::measure_bf16_peak_gflops(threads))
        .flatten();
    let peaks = Peaks {
        f32: peak,
        int8: int8_peak,
        bf16: bf16_peak,
    };
    if !args.json {
        println!(
            "model {} | load {:.2} s | RSS after load {} | threads {threads} | matmul {matmul} | chunk {chunk} | ISA {} | f32 FMA peak {peak:.1} GFLOP/s{}{}",
            args.model.display(),
            load_s,
            memory::fmt_bytes(memory::rss_bytes()),
            kernels.level(),
            int8_peak.map_or(String::new(), |p| format!(
                " | int8 peak {p:.1} G-ops/s ({int8_tile})"
            )),
            bf16_peak.map_or(String::new(), |p| format!(
                " | bf16 peak {p:.1} GFLOP/s ({})",
                kernels.implementation(Family::Bf16Tile)
            )),
        );
        println!(
            "{:>7} {:>9} {:>9} {:>10} {:>9} {:>11} {:>8} {:>10}",
            "tokens", "total s", "tok/s", "backbone s", "head s", "GFLOP/tok", "% peak", "peak RSS"
        );
    }
    for &n in &args.tokens {
        for _ in 0..args.warmup {
            bench_prefill(&model, n, &opts)?;
        }
        let mut r = bench_prefill(&model, n, &opts)?;
        for _ in 1..args.repeat {
            let again = bench_prefill(&model, n, &opts)?;
            if again.seconds < r.seconds {
                r = BenchResult {
                    peak_rss: r.peak_rss.max(again.peak_rss),
                    ..again
                };
            } else {
                r.peak_rss = r.peak_rss.max(again.peak_rss);
            }
        }
        let pct = 100.0 * r.gflops_per_second() / peak;
        if args.json {
            println!(
                "{}",
                serde_json::json!({
                    "tokens": r.tokens, "seconds": r.seconds, "tokens_per_second": r.tokens_per_second(),
                    "backbone_seconds": r.timings.backbone_s, "head_seconds": r.timings.head_s,
                    "gflop": r.flops.total() / 1e9, "gflop_linear": r.flops.linear / 1e9,
                    "gflop_scan": r.flops.scan / 1e9, "gflop_attention": r.flops.attention / 1e9,
                    "gflop_head": r.flops.head / 1e9, "gflops_per_second": r.gflops_per_second(),
                    "peak_gflops": peak, "percent_of_peak": pct, "peak_rss_bytes": r.peak_rss,
                    "threads": threads, "chunk": chunk, "matmul": matmul.name(),
                    "warmup": args.warmup, "repeat": args.repeat,
                    "isa": kernels.level(),
                    "int8_isa": int8_peak.map(|_| int8_tile.as_str()),
                    "int8_peak_gops": int8_peak,
                    "bf16_isa": bf16_peak.map(|_| kernels.implementation(Family::Bf16Tile)),
                    "bf16_peak_gflops": bf16_peak,
                    "linear_seconds": r.linears.iter().map(|t| t.seconds).sum::<f64>(),
                    "stage_seconds": r.stages.iter().map(|(s, t)| (s.name().to_string(), serde_json::json!(t))).collect::<serde_json::Map<_, _>>(),
                    "linears": r.linears.iter().map(|t| serde_json::json!({
                        "kind": t.kind.name(), "seconds": t.seconds, "gflop": t.flops / 1e9,
                        "integer": t.integer, "bf16": t.bf16,
                        "percent_of_peak": 100.0 * t.flops / t.seconds / 1e9 / peaks.of(t).0,
                    })).collect::<Vec<_>>(),
                })
            );
        } else {
            println!(
                "{:>7} {:>9.3} {:>9.1} {:>10.3} {:>9.3} {:>11.3} {:>7.1}% {:>10}",
                r.tokens,
                r.seconds,
                r.tokens_per_second(),
                r.timings.backbone_s,
                r.timings.head_s,
                r.flops.total() / 1e9 / r.tokens as f64,
                pct,
                memory::fmt_bytes(r.peak_rss)
            );
            print_stages(&r, &peaks);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The peaks a run measured: f32 FMA always, the unit of its matmul mode when it has one.
struct Peaks {
    f32: f64,
    int8: Option<f64>,
    bf16: Option<f64>,
}

impl Peaks {
    /// The peak a linear's rate compares with, and its name.
    fn of(&self, t: &LinearTime) -> (f64, &'static str) {
        match (t.integer, self.int8, t.bf16, self.bf16) {
            (true, Some(p), _, _) => (p, "int8"),
            (_, _, true, Some(p)) => (p, "bf16"),
            _ => (self.f32, "f32"),
        }
    }
}

/// The prefill's stages as shares of its time (the linears, the DeltaNet conv and scan,
/// attention, the rest of the backbone: norms, gates, residuals, embeddings; and the joint
/// head), then each linear kind's share of the linears and its rate against the matching peak.
fn print_stages(r: &BenchResult, peaks: &Peaks) {
    let total: f64 = r.linears.iter().map(|t| t.seconds).sum();
    let work: f64 = r.linears.iter().map(|t| t.flops).sum();
    let prefill = (r.timings.backbone_s + r.timings.head_s).max(1e-12);
    let staged: f64 = r.stages.iter().map(|(_, s)| s).sum();
    let other = (r.timings.backbone_s - total - staged).max(0.0);
    let mut line = format!("        stages: linears {:.1}%", 100.0 * total / prefill);
    for (stage, seconds) in &r.stages {
        line += &format!(" | {} {:.1}%", stage.name(), 100.0 * seconds / prefill);
    }
    line += &format!(
        " | norms, gates and the rest {:.1}% | head {:.1}%",
        100.0 * other / prefill,
        100.0 * r.timings.head_s / prefill
    );
    println!("{line}");
    println!(
        "        linears: {:.3} s, {:.1}% of the backbone, {:.1} G-ops/s",
        total,
        100.0 * total / r.timings.backbone_s.max(1e-12),
        work / total.max(1e-12) / 1e9
    );
    for t in &r.linears {
        let rate = t.flops / t.seconds.max(1e-12) / 1e9;
        let (peak, unit) = peaks.of(t);
        println!(
            "        {:<14} {:>8.3} s {:>6.1}% {:>9.1} G-ops/s {:>6.1}% of the {unit} peak",
            t.kind.name(),
            t.seconds,
            100.0 * t.seconds / total.max(1e-12),
            rate,
            100.0 * rate / peak,
        );
    }
}
