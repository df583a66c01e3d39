//! Timing and peak memory of the quantizers at real layer shapes (not a test).
//!
//! `cargo run --release -p clef-quant --example quant_scale -- <in> <out> <tokens> [ternary|affine4]`
//!
//! Prints each stage's wall time, GPTQ's time relative to round-to-nearest measured in the same
//! run, the calibration-error ratio GPTQ/RTN, and the process's peak resident memory.

use std::time::Instant;

use clef_quant::cloq::{cloq_adapter, CloqOptions};
use clef_quant::gptq::{gptq_quantize_with_stats, GptqOptions, HessianAccumulator};
use clef_quant::lut6::palettize_matrix;
use clef_quant::quantizer::{rtn_quantize, QuantFormat};
use half::bf16;

struct Rng(u64);

impl Rng {
    fn normal(&mut self) -> f32 {
        // sum of 4 uniforms, centred: cheap and roughly Gaussian
        let mut s = 0.0;
        for _ in 0..4 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            s += (self.0 >> 40) as f32 / (1u64 << 24) as f32;
        }
        (s - 2.0) * 1.732
    }
}

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<f64>().ok())
            })
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

fn calib_error(x: &[f32], tokens: usize, w: &[f32], q: &[f32], rows: usize, cols: usize) -> f64 {
    use faer::linalg::matmul::matmul;
    use faer::{Accum, Mat, MatRef, Par};
    let d: Vec<f32> = w.iter().zip(q).map(|(a, b)| a - b).collect();
    let xm = MatRef::from_row_major_slice(&x[..tokens * cols], tokens, cols);
    let dm = MatRef::from_row_major_slice(&d, rows, cols);
    let mut out = Mat::<f32>::zeros(tokens, rows);
    matmul(
        out.as_mut(),
        Accum::Replace,
        xm,
        dm.transpose(),
        1.0,
        Par::rayon(0),
    );
    f64::from(out.norm_l2())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: quant_scale <in> <out> <tokens> [ternary|affine4]");
        std::process::exit(2);
    }
    let parse = |s: &str| {
        s.parse::<usize>()
            .unwrap_or_else(|_| panic!("not a number: {s}"))
    };
    let (cols, rows, tokens) = (parse(&args[1]), parse(&args[2]), parse(&args[3]));
    let format = match args.get(4).map(String::as_str) {
        Some("affine4") => QuantFormat::Affine4,
        _ => QuantFormat::Ternary,
    };
    println!(
        "shape [{rows}, {cols}], {tokens} calibration tokens, {format:?}, {} threads",
        rayon::current_num_threads()
    );
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut x = vec![0.0f32; tokens * cols];
    for t in 0..tokens {
        let mut prev = rng.normal();
        for i in 0..cols {
            prev = 0.9 * prev + 0.436 * rng.normal();
            x[t * cols + i] = prev;
        }
    }
    let w: Vec<f32> = (0..rows * cols)
        .map(|_| bf16::from_f32(rng.normal() * 0.02).to_f32())
        .collect();

    let t0 = Instant::now();
    let mut acc = HessianAccumulator::new(cols).unwrap();
    for chunk in x.chunks(512 * cols) {
        acc.add_rows(chunk, chunk.len() / cols).unwrap();
    }
    let h = acc.finish().unwrap();
    let t_hess = t0.elapsed().as_secs_f64();
    println!("hessian        {t_hess:8.2} s");

    let t0 = Instant::now();
    let rtn = rtn_quantize(&w, rows, cols, format, 64).unwrap();
    let t_rtn = t0.elapsed().as_secs_f64();
    println!("rtn            {t_rtn:8.2} s");

    let t0 = Instant::now();
    let (g, stats) =
        gptq_quantize_with_stats(&w, rows, cols, &h, format, &GptqOptions::default()).unwrap();
    let t_gptq = t0.elapsed().as_secs_f64();
    println!(
        "gptq           {t_gptq:8.2} s  ({:.1}× rtn; damp {})",
        t_gptq / t_rtn,
        stats.damp_used
    );

    let t0 = Instant::now();
    let ad = cloq_adapter(&w, &g.dequantized, rows, cols, &h, &CloqOptions::default()).unwrap();
    let t_cloq = t0.elapsed().as_secs_f64();
    println!("cloq (rank 16) {t_cloq:8.2} s");

    if rows % 16 == 0 {
        let wb: Vec<bf16> = w.iter().map(|&v| bf16::from_f32(v)).collect();
        let t0 = Instant::now();
        let m = palettize_matrix(&wb, rows, cols).unwrap();
        let t_lut = t0.elapsed().as_secs_f64();
        println!(
            "lut6 palettize {t_lut:8.2} s  ({} tables)",
            m.luts.len() / 64
        );
    }

    let sub = tokens.min(256);
    let e_rtn = calib_error(&x, sub, &w, &rtn.dequantized, rows, cols);
    let e_gptq = calib_error(&x, sub, &w, &g.dequantized, rows, cols);
    let delta = ad.delta().expect("adapter shapes");
    let with: Vec<f32> = g
        .dequantized
        .iter()
        .zip(&delta)
        .map(|(a, b)| a + b)
        .collect();
    let e_cloq = calib_error(&x, sub, &w, &with, rows, cols);
    println!(
        "‖X·err‖ on {sub} tokens: gptq/rtn {:.4}, gptq+cloq/gptq {:.4}",
        e_gptq / e_rtn,
        e_cloq / e_gptq
    );
    println!("peak RSS       {:8.0} MiB", peak_rss_mib());
}
