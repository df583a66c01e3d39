//! Speed of the mse range search against a libm baseline measured in the same run (not a test).
//!
//! `cargo run --release -p clef-quant --example search_speed` (the search runs on the best
//! instruction set; `CLEF_ISA=avx2` or `scalar` lowers it, the scalar twin being the search as
//! it was before the SIMD scores).

use std::time::Instant;

use clef_quant::affine4::Affine4Params;
use clef_quant::quantizer::{fit_group, GroupParams, QuantFormat};
use clef_quant::ternary::TernaryParams;

/// The search written with libm `powf` and `round_ties_even`, as before the branch-free loop.
fn fit_group_libm(format: QuantFormat, g: &[f32]) -> GroupParams {
    let mut best = None;
    let mut best_err = f64::INFINITY;
    let (lo, hi, m) = g.iter().fold((0.0f32, 0.0f32, 0.0f32), |(lo, hi, m), &w| {
        (lo.min(w), hi.max(w), m.max(w.abs()))
    });
    for k in 0..80 {
        let p = (1.0 - k as f64 / 100.0) as f32;
        let c = match format {
            QuantFormat::Ternary => GroupParams::Ternary(TernaryParams::from_max_abs(m, p)),
            QuantFormat::Affine4 => GroupParams::Affine4(Affine4Params::from_range(lo, hi, p)),
        };
        let err: f64 = g
            .iter()
            .map(|&w| {
                let q = match c {
                    GroupParams::Ternary(t) => {
                        let s = t.scale.to_f32();
                        s * (w / s).round_ties_even().clamp(-1.0, 1.0)
                    }
                    GroupParams::Affine4(a) => {
                        let (s, b) = (a.scale.to_f32(), a.bias.to_f32());
                        s * ((w - b) / s).round_ties_even().clamp(0.0, 15.0) + b
                    }
                };
                f64::from((q - w).abs().powf(2.4))
            })
            .sum();
        if err < best_err {
            best_err = err;
            best = Some(c);
        }
    }
    best.unwrap_or(GroupParams::Ternary(TernaryParams::from_max_abs(m, 1.0)))
}

fn main() {
    let n_groups = 20_000;
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let data: Vec<f32> = (0..n_groups * 64)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.04
        })
        .collect();
    for format in [QuantFormat::Ternary, QuantFormat::Affine4] {
        let t0 = Instant::now();
        let base: Vec<GroupParams> = data.chunks(64).map(|g| fit_group_libm(format, g)).collect();
        let t_base = t0.elapsed().as_secs_f64();
        let t0 = Instant::now();
        let fast: Vec<GroupParams> = data.chunks(64).map(|g| fit_group(format, g)).collect();
        let t_fast = t0.elapsed().as_secs_f64();
        let same = base.iter().zip(&fast).filter(|(a, b)| a == b).count();
        println!(
            "{format:?}: libm {:.1} ns/eval, search ({}) {:.1} ns/eval, speed-up {:.1}×, same choice in {same}/{n_groups} groups",
            t_base * 1e9 / (n_groups * 64 * 80) as f64,
            clef_kernels::Kernels::detected().level(),
            t_fast * 1e9 / (n_groups * 64 * 80) as f64,
            t_base / t_fast
        );
    }
}
