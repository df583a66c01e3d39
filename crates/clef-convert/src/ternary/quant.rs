//! One backbone linear to clef-ternary-v1: GPTQ (or round-to-nearest in quick mode) in the
//! card's format, then the CLoQ rank-16 adapter from the same Hessian (formats.md §3–§5).

use super::plan::{adapter_rank, Role, GROUP};
use super::recipe::Recipe;
use crate::error::{ConvertError, Result};
use clef_model::linear::Linear;
use clef_model::tensor::{Dtype, Tensor};
use clef_model::weights::{Affine4, LowRank, Ternary, WithLowRank};
use clef_quant::cloq::{cloq_adapter, CloqAdapter, CloqOptions, Weighting};
use clef_quant::gptq::{gptq_quantize_with_stats, GptqOptions, Hessian};
use clef_quant::quantizer::rtn_quantize;
use clef_quant::{QuantFormat, QuantizedMatrix};
use half::bf16;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// How weights are rounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// GPTQ with the calibration Hessian (the card's recipe).
    Gptq,
    /// Round-to-nearest with the same range search, no calibration; adapters from an identity
    /// Hessian (the plain truncated SVD of W − Q). A quick mode for size and speed runs.
    Rtn,
}

/// What happened to one linear, for the conversion report (and the journal of a resumable
/// conversion).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LinearStats {
    pub name: String,
    pub format: String,
    pub rows: usize,
    pub cols: usize,
    /// Damping that factorized (GPTQ).
    pub damp: Option<f64>,
    /// The reference's GPTQ loss Σ (w − q)² / U_ii² / 2.
    pub gptq_loss: Option<f64>,
    /// ‖X(W − Q)‖² / ‖XW‖² on sampled rows (calibration Hessian).
    pub rel_error: Option<f64>,
    /// ‖X(W − Q − BA)‖² / ‖XW‖² on the same rows.
    pub rel_error_adapter: Option<f64>,
    pub seconds: f64,
}

/// A quantized linear in its stored form (little-endian bytes, as in `model.safetensors`).
pub struct QuantizedLinear {
    pub prefix: String,
    pub format: QuantFormat,
    pub rows: usize,
    pub cols: usize,
    /// `.trits` or `.q4`.
    pub codes: Vec<u8>,
    pub scales: Vec<u8>,
    /// `.biases` (4-bit only).
    pub biases: Vec<u8>,
    /// `.lora_a` [rank, cols] and `.lora_b` [rows, rank], BF16.
    pub adapter: Option<(usize, Vec<u8>, Vec<u8>)>,
    pub stats: LinearStats,
}

fn bf16_bytes(v: &[bf16]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Quantizes `w` (`[rows, cols]`, f32 row-major) of linear `prefix` with role `role` under
/// `recipe` (damping, adapter rank). `h` is the calibration Hessian (required for GPTQ; with
/// RTN it is only used for the adapter and defaults to the identity).
#[allow(clippy::too_many_arguments)] // one linear's whole description, passed through once
pub fn quantize_linear(
    prefix: &str,
    w: &[f32],
    rows: usize,
    cols: usize,
    role: Role,
    h: Option<&Hessian>,
    method: Method,
    recipe: &Recipe,
) -> Result<QuantizedLinear> {
    let t0 = Instant::now();
    let format = match role {
        Role::Ternary => QuantFormat::Ternary,
        Role::Affine4Linear | Role::Affine4Table => QuantFormat::Affine4,
        Role::Keep => {
            return Err(ConvertError::Invalid(format!(
                "{prefix}: not a quantized tensor"
            )))
        }
    };
    let (q, damp, loss): (QuantizedMatrix, Option<f64>, Option<f64>) = match (method, h) {
        (Method::Gptq, Some(h)) => {
            let opts = GptqOptions {
                damp: recipe.damp,
                ..GptqOptions::default()
            };
            let (q, st) = gptq_quantize_with_stats(w, rows, cols, h, format, &opts)?;
            (q, Some(st.damp_used), Some(st.loss))
        }
        (Method::Gptq, None) => {
            return Err(ConvertError::Calibration(format!(
                "{prefix}: GPTQ needs the calibration Hessian"
            )))
        }
        (Method::Rtn, _) => (rtn_quantize(w, rows, cols, format, GROUP)?, None, None),
    };
    let adapter = if role.has_adapter() {
        // without calibration the adapter's objective is unweighted (CLoQ is the plain SVD)
        let weighting = h.map_or(Weighting::Identity, Weighting::Hessian);
        let opts = CloqOptions {
            rank: adapter_rank(recipe.cloq_rank, rows, cols),
            damp: damp.unwrap_or(recipe.damp),
            ..CloqOptions::default()
        };
        Some(cloq_adapter(
            w,
            &q.dequantized,
            rows,
            cols,
            weighting,
            &opts,
        )?)
    } else {
        None
    };
    let (rel_error, rel_error_adapter) = match (h, method) {
        (Some(h), Method::Gptq) => {
            let (e, ea) = weighted_errors(w, &q.dequantized, adapter.as_ref(), rows, cols, h);
            (Some(e), ea)
        }
        _ => (None, None),
    };
    let codes = q.packed_codes()?;
    Ok(QuantizedLinear {
        prefix: prefix.to_string(),
        format,
        rows,
        cols,
        codes,
        scales: bf16_bytes(&q.scales),
        biases: bf16_bytes(&q.biases),
        adapter: adapter.map(|a| (a.rank, bf16_bytes(&a.a), bf16_bytes(&a.b))),
        stats: LinearStats {
            name: prefix.to_string(),
            format: match format {
                QuantFormat::Ternary => "ternary",
                QuantFormat::Affine4 => "affine4",
            }
            .into(),
            rows,
            cols,
            damp,
            gptq_loss: loss,
            rel_error,
            rel_error_adapter,
            seconds: t0.elapsed().as_secs_f64(),
        },
    })
}

/// Relative calibration-weighted errors Σ eᵀHe / Σ wᵀHw over a few evenly spaced rows, without
/// and with the adapter (the objective GPTQ and CLoQ minimise).
fn weighted_errors(
    w: &[f32],
    w_hat: &[f32],
    adapter: Option<&CloqAdapter>,
    rows: usize,
    cols: usize,
    h: &Hessian,
) -> (f64, Option<f64>) {
    // bounded work: about 2^31 multiply-adds per linear
    let budget = (1usize << 31) / (cols * cols).max(1);
    let sample = rows.min(budget.clamp(4, 64));
    // eᵀHe = Σ_i e_i (H_ii e_i + 2 Σ_{k<i} H_ik e_k), from the stored lower triangle
    let quad = |e: &[f64]| -> f64 {
        (0..cols)
            .into_par_iter()
            .map(|i| {
                let row = h.lower_row(i);
                let off: f64 = row[..i]
                    .iter()
                    .zip(e)
                    .map(|(&a, &b)| f64::from(a) * b)
                    .sum();
                e[i] * (f64::from(row[i]) * e[i] + 2.0 * off)
            })
            .sum()
    };
    let (mut num, mut num_a, mut den) = (0.0, 0.0, 0.0);
    for k in 0..sample {
        let r = k * rows / sample;
        let wr = &w[r * cols..(r + 1) * cols];
        let qr = &w_hat[r * cols..(r + 1) * cols];
        let e: Vec<f64> = wr
            .iter()
            .zip(qr)
            .map(|(&a, &b)| f64::from(a) - f64::from(b))
            .collect();
        den += quad(&wr.iter().map(|&a| f64::from(a)).collect::<Vec<_>>());
        num += quad(&e);
        if let Some(a) = adapter {
            // the adapter's row r: Σ_k B[r, k] A[k, :] with the stored BF16 factors
            let mut ea = e.clone();
            for j in 0..a.rank {
                let b = f64::from(a.b[r * a.rank + j].to_f32());
                for (x, av) in ea.iter_mut().zip(&a.a[j * cols..(j + 1) * cols]) {
                    *x -= b * f64::from(av.to_f32());
                }
            }
            num_a += quad(&ea);
        }
    }
    let den = den.max(f64::MIN_POSITIVE);
    (num / den, adapter.map(|_| num_a / den))
}

impl QuantizedLinear {
    /// Stored tensors `(name, dtype, shape, bytes)` in the plan's order.
    pub fn tensors(&self) -> Vec<(String, Dtype, Vec<usize>, &[u8])> {
        let p = &self.prefix;
        let groups = self.cols.div_ceil(GROUP);
        let mut v: Vec<(String, Dtype, Vec<usize>, &[u8])> = Vec::new();
        let row_bytes = self.codes.len() / self.rows.max(1);
        match self.format {
            QuantFormat::Ternary => {
                v.push((
                    clef_formats::ternary::trits_name(p),
                    Dtype::U8,
                    vec![self.rows, row_bytes],
                    &self.codes,
                ));
                v.push((
                    clef_formats::ternary::scales_name(p),
                    Dtype::Bf16,
                    vec![self.rows, groups],
                    &self.scales,
                ));
            }
            QuantFormat::Affine4 => {
                v.push((
                    clef_formats::affine4::codes_name(p),
                    Dtype::U8,
                    vec![self.rows, row_bytes],
                    &self.codes,
                ));
                v.push((
                    clef_formats::ternary::scales_name(p),
                    Dtype::Bf16,
                    vec![self.rows, groups],
                    &self.scales,
                ));
                v.push((
                    clef_formats::affine4::biases_name(p),
                    Dtype::Bf16,
                    vec![self.rows, groups],
                    &self.biases,
                ));
            }
        }
        if let Some((r, a, b)) = &self.adapter {
            v.push((
                clef_formats::ternary::adapter_names(p).0,
                Dtype::Bf16,
                vec![*r, self.cols],
                a,
            ));
            v.push((
                clef_formats::ternary::adapter_names(p).1,
                Dtype::Bf16,
                vec![self.rows, *r],
                b,
            ));
        }
        v
    }

    /// A linear read back from its stored parts, `read(tensor name)` giving each part's bytes
    /// (a resumed conversion puts its finished layers back into the model with this). The
    /// report line is left empty: the journal keeps the original one.
    pub fn from_stored(
        prefix: &str,
        role: Role,
        rows: usize,
        cols: usize,
        rank: usize,
        mut read: impl FnMut(&str) -> Result<Vec<u8>>,
    ) -> Result<QuantizedLinear> {
        let (format, codes, biases) = match role {
            Role::Ternary => (
                QuantFormat::Ternary,
                read(&clef_formats::ternary::trits_name(prefix))?,
                Vec::new(),
            ),
            Role::Affine4Linear => (
                QuantFormat::Affine4,
                read(&clef_formats::affine4::codes_name(prefix))?,
                read(&clef_formats::affine4::biases_name(prefix))?,
            ),
            Role::Affine4Table | Role::Keep => {
                return Err(ConvertError::Invalid(format!(
                    "{prefix}: not a backbone linear"
                )))
            }
        };
        let scales = read(&clef_formats::ternary::scales_name(prefix))?;
        let (a, b) = clef_formats::ternary::adapter_names(prefix);
        let adapter = Some((rank, read(&a)?, read(&b)?));
        Ok(QuantizedLinear {
            prefix: prefix.to_string(),
            format,
            rows,
            cols,
            codes,
            scales,
            biases,
            adapter,
            stats: LinearStats {
                name: prefix.to_string(),
                format: String::new(),
                rows,
                cols,
                damp: None,
                gptq_loss: None,
                rel_error: None,
                rel_error_adapter: None,
                seconds: 0.0,
            },
        })
    }

    /// The runtime layer over owned copies of the stored bytes (what the calibration runs
    /// with after this linear is quantized, so later layers see exactly the bundle's numerics).
    pub fn to_linear(&self) -> Result<Linear> {
        let owned = |(name, dtype, shape, bytes): &(String, Dtype, Vec<usize>, &[u8])| {
            Tensor::owned(name.clone(), *dtype, shape.clone(), bytes.to_vec())
        };
        let t: Vec<Tensor> = self.tensors().iter().map(owned).collect();
        let (rows, cols) = (self.rows, self.cols);
        let split = match self.format {
            QuantFormat::Ternary => 2,
            QuantFormat::Affine4 => 3,
        };
        let adapter = match &t[split..] {
            [a, b] => Some(LowRank::new(a.clone(), b.clone(), rows, cols)?),
            _ => None,
        };
        let weight = match self.format {
            QuantFormat::Ternary => {
                let codes = Ternary::new(t[0].clone(), t[1].clone(), rows, cols)?;
                WithLowRank::maybe(codes, adapter)?
            }
            QuantFormat::Affine4 => {
                let codes = Affine4::new(t[0].clone(), t[1].clone(), t[2].clone(), rows, cols)?;
                WithLowRank::maybe(codes, adapter)?
            }
        };
        Ok(Linear::new(weight, None)?)
    }
}

/// Row-major f32 of a dense stored tensor (BF16, F16 or F32 bytes) or of a block of its rows.
pub fn rows_to_f32(t: &Tensor, row0: usize, nrows: usize) -> Result<Vec<f32>> {
    let cols = t.shape.iter().skip(1).product::<usize>();
    let es = t.dtype.size();
    let bytes = t
        .bytes()
        .get(row0 * cols * es..(row0 + nrows) * cols * es)
        .ok_or_else(|| {
            ConvertError::Invalid(format!("{}: rows {row0}+{nrows} out of range", t.name))
        })?;
    Ok(match t.dtype {
        Dtype::Bf16 => bytes
            .par_chunks_exact(2)
            .map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        Dtype::F16 => bytes
            .par_chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        Dtype::F32 => bytes
            .par_chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        other => {
            return Err(ConvertError::Invalid(format!(
                "{}: dtype {} cannot be quantized",
                t.name,
                other.name()
            )))
        }
    })
}
