//! What the converter writes for each release tensor (formats.md §3.1, §3.6), computed from
//! names and shapes only, so the same plan sizes a bundle before any weight is read (and for a
//! model whose weights are not at hand, e.g. Clef-Flash from its config).

use super::recipe::{Recipe, Roles};
use clef_formats::{affine4, ternary};
use clef_model::checkpoint::writer::TensorSpec;
use clef_model::tensor::Dtype;
use std::collections::BTreeMap;

/// Prefix of the text backbone's tensors.
pub const TEXT_PREFIX: &str = "model.language_model";
/// Input columns per scale (and bias) group.
pub use clef_formats::GROUP;
/// CLoQ adapter rank of the card (`cloq_rank`).
pub const CLOQ_RANK: usize = 16;
/// The card's `hi_names`: linears quantized to 4 bits instead of ternary.
pub const HI_NAMES: &str = "out_proj,q_proj,k_proj,v_proj,o_proj";

/// Storage of one release tensor in the bundle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Ternary codes + BF16 scales + CLoQ adapter (DeltaNet `in_proj_qkv`/`in_proj_z`, MLPs).
    Ternary,
    /// 4-bit codes + BF16 scales and biases + CLoQ adapter (DeltaNet `out_proj`, attention
    /// q/k/v/o).
    Affine4Linear,
    /// 4-bit codes + BF16 scales and biases, no adapter (`embed_tokens`, `lm_head`).
    Affine4Table,
    /// Release bytes unchanged (norms, conv, gates, `in_proj_a/b`, vision).
    Keep,
}

impl Role {
    /// The role of a release tensor by name under the card's recipe (shape-independent);
    /// [`Roles`] for another recipe's `hi_names`.
    pub fn of(name: &str) -> Role {
        Roles::card().of(name)
    }

    pub fn is_quantized(self) -> bool {
        self != Role::Keep
    }

    pub fn has_adapter(self) -> bool {
        matches!(self, Role::Ternary | Role::Affine4Linear)
    }
}

/// A release tensor as the planner sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceTensor {
    pub name: String,
    pub dtype: Dtype,
    pub shape: Vec<usize>,
}

/// One stored tensor of the bundle's `model.safetensors`, with what it is made from.
#[derive(Clone, Debug)]
pub struct PlannedTensor {
    pub spec: TensorSpec,
    /// Index of the release tensor it comes from.
    pub source: usize,
    pub role: Role,
}

/// Adapter rank for a `[rows, cols]` linear: the recipe's (the card's 16), or less for a tiny
/// matrix.
pub fn adapter_rank(rank: usize, rows: usize, cols: usize) -> usize {
    rank.min(rows).min(cols)
}

/// Linear prefix of a release weight name (`<p>.weight` → `<p>`).
pub fn prefix(name: &str) -> &str {
    name.strip_suffix(".weight").unwrap_or(name)
}

fn matrix(t: &SourceTensor) -> Option<(usize, usize)> {
    match t.shape.as_slice() {
        [rows, cols] if *rows > 0 && *cols > 0 => Some((*rows, *cols)),
        _ => None,
    }
}

/// Every stored tensor in file order under `recipe`: each release tensor in its order, a
/// quantized one expanded into its parts (formats.md §3.6). A tensor the name rules would
/// quantize but that is not a non-empty matrix is an error.
pub fn plan(tensors: &[SourceTensor], recipe: &Recipe) -> Result<Vec<PlannedTensor>, String> {
    let roles = recipe.roles()?;
    let mut out = Vec::with_capacity(tensors.len() * 2);
    for (i, t) in tensors.iter().enumerate() {
        let role = roles.of(&t.name);
        let mut push = |name: String, dtype: Dtype, shape: &[usize]| {
            out.push(PlannedTensor {
                spec: TensorSpec::new(name, dtype, shape),
                source: i,
                role,
            })
        };
        if role == Role::Keep {
            push(t.name.clone(), t.dtype, &t.shape);
            continue;
        }
        let (rows, cols) = matrix(t)
            .ok_or_else(|| format!("`{}` has shape {:?}, expected a matrix", t.name, t.shape))?;
        let p = prefix(&t.name);
        let groups = cols.div_ceil(GROUP);
        if role == Role::Ternary {
            push(
                ternary::trits_name(p),
                Dtype::U8,
                &[rows, ternary::row_bytes(cols)],
            );
            push(ternary::scales_name(p), Dtype::Bf16, &[rows, groups]);
        } else {
            push(
                affine4::codes_name(p),
                Dtype::U8,
                &[rows, affine4::row_bytes(cols)],
            );
            push(affine4::scales_name(p), Dtype::Bf16, &[rows, groups]);
            push(affine4::biases_name(p), Dtype::Bf16, &[rows, groups]);
        }
        if role.has_adapter() {
            let r = adapter_rank(recipe.cloq_rank, rows, cols);
            let (a, b) = ternary::adapter_names(p);
            push(a, Dtype::Bf16, &[r, cols]);
            push(b, Dtype::Bf16, &[rows, r]);
        }
    }
    Ok(out)
}

/// The `__metadata__` of the bundle's `model.safetensors` (formats.md §3.6).
pub fn metadata(source_revision: Option<&str>, recipe: &Recipe) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("format".into(), super::FORMAT.name().into()),
        ("group_size".into(), recipe.group.to_string()),
        ("cloq_rank".into(), recipe.cloq_rank.to_string()),
        ("trit_order".into(), "base3-lsb-first".into()),
        (
            "source_revision".into(),
            source_revision.unwrap_or("unknown").into(),
        ),
    ])
}

/// Bytes by part of the bundle, as in formats.md §3.7: (weights, bytes) per part.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SizeBreakdown {
    /// Ternary linears: trits + scales (weights = release parameters).
    pub ternary: (u64, u64),
    /// 4-bit backbone linears: codes + scales + biases.
    pub affine4_linears: (u64, u64),
    /// `embed_tokens` + `lm_head`, 4-bit.
    pub tables: (u64, u64),
    /// CLoQ adapters (weights = adapter parameters).
    pub adapters: (u64, u64),
    /// Vision tower, kept.
    pub vision: (u64, u64),
    /// Every other kept tensor.
    pub other: (u64, u64),
    /// The safetensors header with its 8-byte length prefix.
    pub header: u64,
    /// The whole `model.safetensors`.
    pub total: u64,
}

/// Exact size of the `model.safetensors` the plan describes, by part.
pub fn size(
    tensors: &[SourceTensor],
    planned: &[PlannedTensor],
    meta: &BTreeMap<String, String>,
) -> SizeBreakdown {
    let mut b = SizeBreakdown::default();
    let mut counted = vec![false; tensors.len()];
    for p in planned {
        let src = &tensors[p.source];
        let weights = if counted[p.source] {
            0
        } else {
            counted[p.source] = true;
            src.shape.iter().product::<usize>() as u64
        };
        let bytes = p.spec.nbytes() as u64;
        let adapter = p.spec.name.ends_with(clef_formats::ternary::LORA_A)
            || p.spec.name.ends_with(clef_formats::ternary::LORA_B);
        let part = if adapter {
            &mut b.adapters
        } else {
            match p.role {
                Role::Ternary => &mut b.ternary,
                Role::Affine4Linear => &mut b.affine4_linears,
                Role::Affine4Table => &mut b.tables,
                Role::Keep if src.name.starts_with("model.visual.") => &mut b.vision,
                Role::Keep => &mut b.other,
            }
        };
        if adapter {
            part.0 += p.spec.shape.iter().product::<usize>() as u64;
        } else {
            part.0 += weights;
        }
        part.1 += bytes;
    }
    b.header = header_bytes(planned, meta);
    let data: u64 = planned.iter().map(|p| p.spec.nbytes() as u64).sum();
    b.total = b.header + data;
    b
}

/// Length prefix plus the JSON header exactly as `write_safetensors` lays it out.
pub fn header_bytes(planned: &[PlannedTensor], meta: &BTreeMap<String, String>) -> u64 {
    let mut obj = serde_json::Map::new();
    if !meta.is_empty() {
        let m: serde_json::Map<String, serde_json::Value> = meta
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect();
        obj.insert("__metadata__".into(), serde_json::Value::Object(m));
    }
    let mut offset = 0usize;
    for p in planned {
        let end = offset + p.spec.nbytes();
        obj.insert(
            p.spec.name.clone(),
            serde_json::json!({
                "dtype": p.spec.dtype.to_safetensors().to_string(),
                "shape": p.spec.shape,
                "data_offsets": [offset, end],
            }),
        );
        offset = end;
    }
    let len = serde_json::Value::Object(obj).to_string().len() as u64;
    // the writer pads the JSON with spaces to a multiple of 8 bytes
    8 + len.next_multiple_of(8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_follow_the_card() {
        let l = |s: &str| format!("{TEXT_PREFIX}.layers.3.{s}.weight");
        assert_eq!(Role::of(&l("linear_attn.in_proj_qkv")), Role::Ternary);
        assert_eq!(Role::of(&l("linear_attn.in_proj_z")), Role::Ternary);
        assert_eq!(Role::of(&l("mlp.down_proj")), Role::Ternary);
        assert_eq!(Role::of(&l("linear_attn.out_proj")), Role::Affine4Linear);
        assert_eq!(Role::of(&l("self_attn.o_proj")), Role::Affine4Linear);
        assert_eq!(Role::of(&l("linear_attn.in_proj_a")), Role::Keep);
        assert_eq!(Role::of(&l("linear_attn.in_proj_b")), Role::Keep);
        assert_eq!(Role::of(&l("linear_attn.conv1d")), Role::Keep);
        assert_eq!(Role::of(&l("self_attn.q_norm")), Role::Keep);
        assert_eq!(Role::of(&l("input_layernorm")), Role::Keep);
        assert_eq!(
            Role::of(&format!("{TEXT_PREFIX}.layers.3.linear_attn.A_log")),
            Role::Keep
        );
        assert_eq!(
            Role::of("model.visual.blocks.0.mlp.linear_fc1.weight"),
            Role::Keep
        );
        assert_eq!(
            Role::of("model.visual.blocks.0.attn.qkv.weight"),
            Role::Keep
        );
        assert_eq!(Role::of("lm_head.weight"), Role::Affine4Table);
        assert_eq!(
            Role::of(&format!("{TEXT_PREFIX}.embed_tokens.weight")),
            Role::Affine4Table
        );
        assert_eq!(Role::of(&format!("{TEXT_PREFIX}.norm.weight")), Role::Keep);
    }

    #[test]
    fn shorter_last_group_and_partial_trit_byte() {
        let t = vec![SourceTensor {
            name: format!("{TEXT_PREFIX}.layers.0.mlp.down_proj.weight"),
            dtype: Dtype::Bf16,
            shape: vec![10, 150],
        }];
        let p = plan(&t, &Recipe::default()).unwrap();
        let shapes: Vec<(&str, Vec<usize>)> = p
            .iter()
            .map(|p| {
                (
                    p.spec.name.rsplit('.').next().unwrap(),
                    p.spec.shape.clone(),
                )
            })
            .collect();
        assert_eq!(
            shapes,
            vec![
                ("trits", vec![10, 30]),
                ("scales", vec![10, 3]),
                ("lora_a", vec![10, 150]),
                ("lora_b", vec![10, 10]),
            ]
        );
        let bad = vec![SourceTensor {
            name: "lm_head.weight".into(),
            dtype: Dtype::Bf16,
            shape: vec![10],
        }];
        assert!(plan(&bad, &Recipe::default()).is_err());
    }
}
