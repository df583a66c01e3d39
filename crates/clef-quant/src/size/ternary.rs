//! clef-ternary-v1 `model.safetensors` layout and size (formats.md §3.1, §3.6, §3.7).

use serde_json::{json, Map, Value};

use super::tensors::{release_tensors, TensorRole};
use super::{ModelShapes, Part};
use crate::error::{QuantError, Result};
use crate::{affine4, ternary};
use clef_formats::GROUP;

/// Adapter rank of the card (`cloq_rank`).
pub const CLOQ_RANK: usize = 16;

/// Element type of a stored tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoredDType {
    U8,
    BF16,
}

impl StoredDType {
    fn name(self) -> &'static str {
        match self {
            StoredDType::U8 => "U8",
            StoredDType::BF16 => "BF16",
        }
    }
}

/// One tensor of the bundle's `model.safetensors`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedTensor {
    pub name: String,
    pub dtype: StoredDType,
    pub shape: Vec<usize>,
    pub bytes: u64,
}

/// Sizes by part, as in the table of formats.md §3.7.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TernarySizeBreakdown {
    /// Ternary linears: trits + scales.
    pub ternary: Part,
    /// 4-bit backbone linears: codes + scales + biases.
    pub affine4_backbone: Part,
    /// `embed_tokens` and `lm_head`, 4-bit.
    pub embeddings: Part,
    /// CLoQ `lora_a` / `lora_b`, BF16 (weights = adapter parameters).
    pub adapters: Part,
    /// Vision tower, BF16.
    pub vision: Part,
    /// Norms, conv, a/b projections, gates, BF16.
    pub other_bf16: Part,
    /// Safetensors header including its 8-byte length (estimated from the planned JSON).
    pub header_bytes: u64,
    /// Number of stored tensors.
    pub tensor_count: usize,
    /// Whole file.
    pub total_bytes: u64,
}

fn base_name(name: &str) -> &str {
    name.strip_suffix(".weight").unwrap_or(name)
}

fn matrix_dims(name: &str, shape: &[usize]) -> Result<(usize, usize)> {
    match shape {
        [rows, cols] => Ok((*rows, *cols)),
        _ => Err(QuantError::Config(format!(
            "{name}: expected a matrix, got shape {shape:?}"
        ))),
    }
}

/// Every stored tensor with its dtype, shape and size, plus the per-part breakdown.
pub fn ternary_plan(shapes: &ModelShapes) -> Result<(Vec<PlannedTensor>, TernarySizeBreakdown)> {
    let mut plan = Vec::new();
    let mut b = TernarySizeBreakdown::default();
    let mut add = |name: String, dtype: StoredDType, shape: Vec<usize>| -> u64 {
        let bytes = shape.iter().map(|&d| d as u64).product::<u64>()
            * if dtype == StoredDType::BF16 { 2 } else { 1 };
        plan.push(PlannedTensor {
            name,
            dtype,
            shape,
            bytes,
        });
        bytes
    };
    for t in release_tensors(shapes) {
        let n = t.numel();
        match t.role {
            TensorRole::Mlp | TensorRole::DeltaNetInput => {
                let (rows, cols) = matrix_dims(&t.name, &t.shape)?;
                let p = base_name(&t.name);
                let groups = cols.div_ceil(GROUP);
                let bytes = add(
                    clef_formats::ternary::trits_name(p),
                    StoredDType::U8,
                    vec![rows, ternary::row_bytes(cols)],
                ) + add(
                    clef_formats::ternary::scales_name(p),
                    StoredDType::BF16,
                    vec![rows, groups],
                );
                b.ternary.add(n, bytes);
                let ad = add(
                    clef_formats::ternary::adapter_names(p).0,
                    StoredDType::BF16,
                    vec![CLOQ_RANK, cols],
                ) + add(
                    clef_formats::ternary::adapter_names(p).1,
                    StoredDType::BF16,
                    vec![rows, CLOQ_RANK],
                );
                b.adapters.add((CLOQ_RANK * (rows + cols)) as u64, ad);
            }
            TensorRole::DeltaNetOutput
            | TensorRole::AttentionProj
            | TensorRole::Embedding
            | TensorRole::LmHead => {
                let (rows, cols) = matrix_dims(&t.name, &t.shape)?;
                let p = base_name(&t.name);
                let groups = cols.div_ceil(GROUP);
                let bytes = add(
                    clef_formats::affine4::codes_name(p),
                    StoredDType::U8,
                    vec![rows, affine4::row_bytes(cols)],
                ) + add(
                    clef_formats::ternary::scales_name(p),
                    StoredDType::BF16,
                    vec![rows, groups],
                ) + add(
                    clef_formats::affine4::biases_name(p),
                    StoredDType::BF16,
                    vec![rows, groups],
                );
                if t.role.is_backbone_linear() {
                    b.affine4_backbone.add(n, bytes);
                    let ad = add(
                        clef_formats::ternary::adapter_names(p).0,
                        StoredDType::BF16,
                        vec![CLOQ_RANK, cols],
                    ) + add(
                        clef_formats::ternary::adapter_names(p).1,
                        StoredDType::BF16,
                        vec![rows, CLOQ_RANK],
                    );
                    b.adapters.add((CLOQ_RANK * (rows + cols)) as u64, ad);
                } else {
                    b.embeddings.add(n, bytes);
                }
            }
            TensorRole::Vision => {
                let bytes = add(t.name.clone(), StoredDType::BF16, t.shape.clone());
                b.vision.add(n, bytes);
            }
            TensorRole::FinalNorm
            | TensorRole::Norm
            | TensorRole::DeltaNetGateProj
            | TensorRole::DeltaNetOther => {
                let bytes = add(t.name.clone(), StoredDType::BF16, t.shape.clone());
                b.other_bf16.add(n, bytes);
            }
        }
    }
    b.tensor_count = plan.len();
    b.header_bytes = header_len(&plan);
    let data: u64 = plan.iter().map(|t| t.bytes).sum();
    b.total_bytes = b.header_bytes + data;
    Ok((plan, b))
}

/// Length prefix plus the JSON header as safetensors writes it (space-padded to 8 bytes).
fn header_len(plan: &[PlannedTensor]) -> u64 {
    let mut map = Map::new();
    map.insert(
        "__metadata__".into(),
        json!({
            "format": clef_formats::BundleFormat::Ternary.name(),
            "group_size": GROUP.to_string(),
            "cloq_rank": CLOQ_RANK.to_string(),
            "trit_order": "base3-lsb-first",
            "source_revision": "0".repeat(40),
        }),
    );
    let mut offset = 0u64;
    for t in plan {
        map.insert(
            t.name.clone(),
            json!({"dtype": t.dtype.name(), "shape": t.shape, "data_offsets": [offset, offset + t.bytes]}),
        );
        offset += t.bytes;
    }
    let text = Value::Object(map).to_string();
    8 + (text.len() as u64).div_ceil(8) * 8
}

/// Predicted size of the clef-ternary-v1 `model.safetensors` by part.
pub fn ternary_bundle_size(shapes: &ModelShapes) -> Result<TernarySizeBreakdown> {
    Ok(ternary_plan(shapes)?.1)
}
