//! A GGUF file from llama.cpp (`clef` architecture: backbone and decision head; model.md §3.7,
//! §5.6) read as a release: its metadata turned into the release's two configs, its tensors
//! renamed to the release's names over the file's memory map (nothing converted on disk), and
//! what llama.cpp stores differently recorded as [`Conventions`] (norm weights holding their
//! `+1`, `ssm_a = −exp(A_log)`, value heads in tiled order) or, for the head, undone exactly
//! (the packed attention projections rejoined, the scalars kept as the values they stand for).
//!
//! Strict: an unknown architecture, a missing or unexpected tensor, a wrong shape or an
//! unsupported tensor type is an error naming it. docs/gguf.md says what is read and how.

use super::{Conventions, TensorSet};
use crate::backbone::deltanet::NEG_A;
use crate::backbone::PREFIX;
use crate::config::{HeadConfig, ModelConfig};
use crate::error::{ModelError, Result};
use crate::head::TRANSFORMED_SCALES;
use crate::tensor::{Dtype, Storage, Tensor};
use clef_gguf::{GgmlType, Gguf, TensorInfo};
use clef_kernels::HeadOrder;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The architectures read: llama.cpp's `clef` (Clef and Clef-Flash with their decision head),
/// and `qwen35` (the backbone alone, as llama.cpp converted Clef before it knew the head), whose
/// head is the release's `joint_head.safetensors` and `joint_head_config.json` beside the file.
pub const ARCHITECTURES: [&str; 2] = ["clef", "qwen35"];

/// The architecture whose files carry no decision head.
const BACKBONE_ONLY: &str = "qwen35";

/// A GGUF file read as a release: configs, the backbone's and the head's tensors under the
/// release's names, and what the file holds.
pub struct GgufCheckpoint {
    pub path: PathBuf,
    pub config: ModelConfig,
    pub head_config: HeadConfig,
    pub backbone: TensorSet,
    pub head: TensorSet,
    /// The file's metadata (its tokenizer is read from here when no `tokenizer.json` is at hand).
    pub metadata: clef_gguf::Metadata,
    /// Tensors per ggml type, by type name.
    pub tensor_types: BTreeMap<&'static str, usize>,
}

/// Whether `path` names a GGUF file (by its first four bytes).
pub fn is_gguf(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    path.is_file()
        && std::fs::File::open(path)
            .and_then(|mut f| f.read_exact(&mut magic))
            .is_ok()
        && magic == clef_gguf::MAGIC
}

fn gguf_error(path: &Path, e: impl std::fmt::Display) -> ModelError {
    ModelError::config(path, e.to_string())
}

/// Reads and checks the GGUF file `path` (memory-mapped).
pub fn open(path: &Path) -> Result<GgufCheckpoint> {
    let file = std::fs::File::open(path).map_err(|e| ModelError::io(path, e))?;
    // SAFETY: the file is mapped read-only; as for safetensors, a file changed underneath a
    // running process is outside what the engine can defend against.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| ModelError::io(path, e))?;
    let gguf = clef_gguf::read(&map).map_err(|e| gguf_error(path, e))?;
    let storage = Arc::new(Storage::Mapped(map));
    let arch = gguf
        .metadata
        .string("general.architecture")
        .map_err(|e| gguf_error(path, e))?
        .to_string();
    if !ARCHITECTURES.contains(&arch.as_str()) {
        return Err(gguf_error(
            path,
            format!(
                "architecture `{arch}` is not one clef.rs reads (it reads {}: a Clef model with \
                 its decision head)",
                ARCHITECTURES.join(", ")
            ),
        ));
    }
    let config = text_config(&gguf, &arch).map_err(|m| gguf_error(path, m))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut head = TensorSet::new();
    let head_config = if arch == BACKBONE_ONLY {
        // the head lies beside the file, as a release holds it
        let (cfg, weights) = (
            dir.join("joint_head_config.json"),
            dir.join("joint_head.safetensors"),
        );
        if !cfg.is_file() || !weights.is_file() {
            return Err(gguf_error(
                path,
                "a `qwen35` GGUF holds the backbone only: put the release's \
                 joint_head_config.json and joint_head.safetensors beside it",
            ));
        }
        head.add_file(&weights)?;
        HeadConfig::from_file(&cfg)?
    } else {
        head_config(&gguf, &arch).map_err(|m| gguf_error(path, m))?
    };
    let mut tensor_types = BTreeMap::new();
    for t in &gguf.tensors {
        *tensor_types.entry(t.ty.name()).or_insert(0) += 1;
        if !matches!(t.ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16) && !t.ty.is_supported() {
            return Err(gguf_error(
                path,
                format!(
                    "tensor `{}` has type {}, which clef.rs does not read",
                    t.name, t.ty
                ),
            ));
        }
    }
    let t = &config.text_config;
    let mut backbone = TensorSet::new();
    head.conventions.outer_unit_dims_implicit = true;
    backbone.conventions = Conventions {
        outer_unit_dims_implicit: true,
        norms_include_one: true,
        value_heads: if t.linear_num_value_heads != t.linear_num_key_heads {
            HeadOrder::Tiled
        } else {
            HeadOrder::Grouped
        },
    };
    let mut packed: BTreeMap<String, [Option<&TensorInfo>; 3]> = BTreeMap::new();
    for info in &gguf.tensors {
        let tensor = |name: String, shape: Vec<usize>| mapped(&storage, info, name, shape);
        if is_prediction_layer(&info.name, config.text_config.num_hidden_layers) {
            continue;
        }
        let target = release_name(&info.name, head_config.routing_layers)
            .filter(|t| arch != BACKBONE_ONLY || matches!(t, Target::Backbone(_)));
        match target {
            Some(Target::Backbone(name)) => {
                let shape = if info.name.ends_with(".ssm_conv1d.weight") {
                    // llama.cpp squeezes the conv kernel [c, 1, k] to [c, k]
                    let s = info.shape();
                    vec![s[0], 1, *s.last().unwrap_or(&1)]
                } else {
                    info.shape()
                };
                backbone.insert(tensor(name, shape)?, "gguf")?;
            }
            Some(Target::Head(name)) => head.insert(tensor(name, info.shape())?, "gguf")?,
            Some(Target::HeadPacked { name, part }) => {
                packed.entry(name).or_default()[part] = Some(info);
            }
            None => {
                return Err(gguf_error(
                    path,
                    format!("tensor `{}` is not part of a `{arch}` model", info.name),
                ))
            }
        }
    }
    for (name, parts) in packed {
        head.insert(join_packed(&storage, &name, parts)?, "gguf")?;
    }
    Ok(GgufCheckpoint {
        path: path.to_path_buf(),
        config,
        head_config,
        backbone,
        head,
        metadata: gguf.metadata,
        tensor_types,
    })
}

/// How the model holds a ggml type: the float types as a release's dtypes, the block types as
/// themselves.
fn dtype(ty: GgmlType) -> Dtype {
    match ty {
        GgmlType::F32 => Dtype::F32,
        GgmlType::F16 => Dtype::F16,
        GgmlType::BF16 => Dtype::Bf16,
        t => Dtype::Ggml(t),
    }
}

/// A tensor of the file under its release name.
fn mapped(
    storage: &Arc<Storage>,
    info: &TensorInfo,
    name: String,
    shape: Vec<usize>,
) -> Result<Tensor> {
    Ok(Tensor::new(
        name,
        dtype(info.ty),
        shape,
        storage.clone(),
        info.offset,
        info.bytes,
    ))
}

/// The packed `in_proj` of a head attention from its q, k and v parts (`[W, W]` weights or
/// `[W]` biases): their bytes one after the other when all three are stored alike in a float
/// type, else their values widened to f32 (the head's products read the packed matrix by rows).
fn join_packed(
    storage: &Arc<Storage>,
    name: &str,
    parts: [Option<&TensorInfo>; 3],
) -> Result<Tensor> {
    let mut infos = Vec::with_capacity(3);
    for (part, p) in parts.iter().enumerate() {
        infos.push(p.ok_or_else(|| ModelError::MissingTensor {
            name: format!("{name} (its {} part)", ["q", "k", "v"][part]),
            expected: vec![],
        })?);
    }
    let shape0 = infos[0].shape();
    if let Some(bad) = infos.iter().find(|i| i.shape() != shape0) {
        return Err(ModelError::TensorShape {
            name: bad.name.clone(),
            found: bad.shape(),
            expected: shape0,
        });
    }
    let mut shape = shape0;
    shape[0] *= 3;
    let ty = infos[0].ty;
    let same_float = matches!(ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16)
        && infos.iter().all(|i| i.ty == ty);
    if same_float {
        let mut bytes = Vec::new();
        for i in &infos {
            bytes.extend_from_slice(&storage_bytes(storage)[i.range()]);
        }
        return Ok(Tensor::owned(name, dtype(ty), shape, bytes));
    }
    let mut values = Vec::new();
    for i in &infos {
        values.extend(mapped(storage, i, i.name.clone(), i.shape())?.to_f32()?);
    }
    Ok(Tensor::from_f32(name, shape, &values))
}

fn storage_bytes(storage: &Arc<Storage>) -> &[u8] {
    match storage.as_ref() {
        Storage::Mapped(m) => m,
        Storage::Owned(v) => v,
    }
}

/// Whether `name` belongs to a multi-token-prediction block (`blk.N.*` with N past the text
/// layers): weights for generating tokens, which a decision model's prefill never uses.
fn is_prediction_layer(name: &str, layers: usize) -> bool {
    name.strip_prefix("blk.")
        .and_then(|r| r.split_once('.'))
        .and_then(|(n, _)| n.parse::<usize>().ok())
        .is_some_and(|n| n >= layers)
}

/// Where a GGUF tensor goes.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    Backbone(String),
    Head(String),
    /// Part `part` (q, k, v) of a head attention's packed `in_proj_weight` / `in_proj_bias`.
    HeadPacked {
        name: String,
        part: usize,
    },
}

/// The release name of GGUF tensor `name` (llama.cpp's `tensor_mapping.py` read backwards).
fn release_name(name: &str, routing: usize) -> Option<Target> {
    let backbone = |s: String| Some(Target::Backbone(s));
    match name {
        "token_embd.weight" => return backbone(format!("{PREFIX}.embed_tokens.weight")),
        "output_norm.weight" => return backbone(format!("{PREFIX}.norm.weight")),
        "output.weight" => return backbone("lm_head.weight".into()),
        _ => {}
    }
    if let Some(rest) = name.strip_prefix("blk.") {
        let (layer, leaf) = rest.split_once('.')?;
        let layer: usize = layer.parse().ok()?;
        let p = format!("{PREFIX}.layers.{layer}");
        let leaf = match leaf {
            "attn_norm.weight" => "input_layernorm.weight".to_string(),
            "post_attention_norm.weight" => "post_attention_layernorm.weight".into(),
            "ffn_gate.weight" => "mlp.gate_proj.weight".into(),
            "ffn_up.weight" => "mlp.up_proj.weight".into(),
            "ffn_down.weight" => "mlp.down_proj.weight".into(),
            "attn_qkv.weight" => "linear_attn.in_proj_qkv.weight".into(),
            "attn_gate.weight" => "linear_attn.in_proj_z.weight".into(),
            "ssm_alpha.weight" => "linear_attn.in_proj_a.weight".into(),
            "ssm_beta.weight" => "linear_attn.in_proj_b.weight".into(),
            "ssm_conv1d.weight" => "linear_attn.conv1d.weight".into(),
            "ssm_dt.bias" => "linear_attn.dt_bias".into(),
            "ssm_a" => format!("linear_attn.{NEG_A}"),
            "ssm_norm.weight" => "linear_attn.norm.weight".into(),
            "ssm_out.weight" => "linear_attn.out_proj.weight".into(),
            "attn_q.weight" => "self_attn.q_proj.weight".into(),
            "attn_k.weight" => "self_attn.k_proj.weight".into(),
            "attn_v.weight" => "self_attn.v_proj.weight".into(),
            "attn_output.weight" => "self_attn.o_proj.weight".into(),
            "attn_q.bias" => "self_attn.q_proj.bias".into(),
            "attn_k.bias" => "self_attn.k_proj.bias".into(),
            "attn_v.bias" => "self_attn.v_proj.bias".into(),
            "attn_output.bias" => "self_attn.o_proj.bias".into(),
            "attn_q_norm.weight" => "self_attn.q_norm.weight".into(),
            "attn_k_norm.weight" => "self_attn.k_norm.weight".into(),
            _ => return None,
        };
        return backbone(format!("{p}.{leaf}"));
    }
    head_name(name, routing)
}

/// The joint head's names (model.md §5.6): `decision.*`, and `dec.blk.N.*` with the `routing`
/// routing blocks first, then the joint layers.
fn head_name(name: &str, routing: usize) -> Option<Target> {
    let head = |s: String| Some(Target::Head(s));
    let (stem, suffix) = name.rsplit_once('.')?;
    if !matches!(suffix, "weight" | "bias") {
        return if name == "decision.scales" {
            head(TRANSFORMED_SCALES.into())
        } else {
            None
        };
    }
    if name == "token_types.weight" {
        return head("type_embedding.weight".into());
    }
    if let Some(part) = stem.strip_prefix("decision.") {
        let release = match part {
            "hidden_norm" | "option_summary_norm" | "field_norm" | "option_norm" => part,
            "proj_memory" => "memory_projection",
            "proj_question" => "question_projection",
            "proj_option_question" => "option_question_projection",
            "proj_global" => "global_projection",
            "proj_option_context" => "option_context_projection",
            "proj_option_lexical" => "option_lexical_projection",
            "scorer" => "residual_scorer.0",
            "scorer_out" => "residual_scorer.3",
            _ => return None,
        };
        return head(format!("{release}.{suffix}"));
    }
    let rest = stem.strip_prefix("dec.blk.")?;
    let (block, leaf) = rest.split_once('.')?;
    let block: usize = block.parse().ok()?;
    let packed = |module: String, part: usize| {
        let kind = if suffix == "weight" {
            "in_proj_weight"
        } else {
            "in_proj_bias"
        };
        Some(Target::HeadPacked {
            name: format!("{module}.{kind}"),
            part,
        })
    };
    let qkv = |leaf: &str, prefix: &str| match leaf.strip_prefix(prefix) {
        Some("q") => Some(0),
        Some("k") => Some(1),
        Some("v") => Some(2),
        _ => None,
    };
    if block < routing {
        let p = format!("evidence_layers.{block}");
        if let Some(part) = qkv(leaf, "cross_attn_") {
            return packed(format!("{p}.attention"), part);
        }
        let release = match leaf {
            "cross_attn_norm" => "query_norm",
            "cross_attn_norm_kv" => "memory_norm",
            "ffn_norm" => "feedforward_norm",
            "cross_attn_o" => "attention.out_proj",
            "ffn_up" => "feedforward.0",
            "ffn_down" => "feedforward.3",
            _ => return None,
        };
        return head(format!("{p}.{release}.{suffix}"));
    }
    let p = format!("layers.{}", block - routing);
    if let Some(part) = qkv(leaf, "attn_") {
        return packed(format!("{p}.self_attn"), part);
    }
    if let Some(part) = qkv(leaf, "cross_attn_") {
        return packed(format!("{p}.multihead_attn"), part);
    }
    let release = match leaf {
        "attn_norm" => "norm1",
        "attn_o" => "self_attn.out_proj",
        "cross_attn_norm" => "norm2",
        "cross_attn_o" => "multihead_attn.out_proj",
        "ffn_norm" => "norm3",
        "ffn_up" => "linear1",
        "ffn_down" => "linear2",
        _ => return None,
    };
    head(format!("{p}.{release}.{suffix}"))
}

/// The release's `config.json` from the file's metadata (llama.cpp's `Qwen3NextModel` and
/// `Qwen3_5TextModel` writers read backwards), checked as a release's is.
fn text_config(gguf: &Gguf, arch: &str) -> std::result::Result<ModelConfig, String> {
    let m = &gguf.metadata;
    let key = |k: &str| format!("{arch}.{k}");
    let u = |k: &str| m.uint(&key(k)).map_err(|e| e.to_string());
    let hidden = u("embedding_length")?;
    // llama.cpp counts the multi-token-prediction layers it may store after the text layers
    // in the block count; Clef has none, and a prefill uses none.
    let layers = u("block_count")?
        .checked_sub(
            m.uint_or(&key("nextn_predict_layers"), 0)
                .map_err(|e| e.to_string())?,
        )
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("{} leaves no text layers", key("nextn_predict_layers")))?;
    let heads = u("attention.head_count")?;
    let head_dim = u("attention.key_length")?;
    let v_heads = u("ssm.time_step_rank")?;
    let inner = u("ssm.inner_size")?;
    if v_heads == 0 || !inner.is_multiple_of(v_heads) {
        return Err(format!(
            "{} {inner} is not a multiple of {} {v_heads}",
            key("ssm.inner_size"),
            key("ssm.time_step_rank")
        ));
    }
    let vocab = gguf
        .tensor("token_embd.weight")
        .map(|t| t.shape()[0])
        .ok_or("tensor `token_embd.weight` is missing")?;
    let recurrent = match m.get(&key("attention.recurrent_layers")) {
        Some(clef_gguf::Value::Array(items)) => Some(
            items
                .iter()
                .map(|v| match v {
                    clef_gguf::Value::Bool(b) => Ok(if *b {
                        "linear_attention"
                    } else {
                        "full_attention"
                    }),
                    _ => Err(format!(
                        "{} holds a non-bool",
                        key("attention.recurrent_layers")
                    )),
                })
                .take(layers)
                .collect::<std::result::Result<Vec<_>, _>>()?,
        ),
        Some(_) => {
            return Err(format!(
                "{} is not an array",
                key("attention.recurrent_layers")
            ))
        }
        None => None,
    };
    let rope_dims = u("rope.dimension_count")?;
    let mut sections = m
        .uint_array(&key("rope.dimension_sections"))
        .map_err(|e| e.to_string())?;
    while sections.last() == Some(&0) {
        sections.pop();
    }
    let theta = m.float(&key("rope.freq_base")).map_err(|e| e.to_string())?;
    let eps = m
        .float(&key("attention.layer_norm_rms_epsilon"))
        .map_err(|e| e.to_string())?;
    // Qwen3.5's attention packs a sigmoid output gate with each query head (model.md §3.3):
    // its q projection is twice the heads' width.
    let q_rows = gguf
        .tensors
        .iter()
        .find(|t| t.name.starts_with("blk.") && t.name.ends_with(".attn_q.weight"))
        .map(|t| t.shape()[0]);
    let gate = q_rows.is_none_or(|r| r == 2 * heads * head_dim);
    let bias = gguf
        .tensors
        .iter()
        .any(|t| t.name.starts_with("blk.") && t.name.ends_with(".attn_q.bias"));
    let json = serde_json::json!({
        "architectures": ["ClefGguf"],
        "model_type": "qwen3_5",
        "tie_word_embeddings": gguf.tensor("output.weight").is_none(),
        "text_config": {
            "hidden_size": hidden,
            "intermediate_size": u("feed_forward_length")?,
            "num_hidden_layers": layers,
            "num_attention_heads": heads,
            "num_key_value_heads": u("attention.head_count_kv")?,
            "head_dim": head_dim,
            "linear_num_key_heads": u("ssm.group_count")?,
            "linear_num_value_heads": v_heads,
            "linear_key_head_dim": u("ssm.state_size")?,
            "linear_value_head_dim": inner / v_heads,
            "linear_conv_kernel_dim": u("ssm.conv_kernel")?,
            "full_attention_interval": m.uint_or(&key("full_attention_interval"), 4).map_err(|e| e.to_string())?,
            "layer_types": recurrent,
            "vocab_size": vocab,
            // the file stores f32; the engine computes with the f32 value either way
            "rms_norm_eps": eps,
            "max_position_embeddings": m.uint_or(&key("context_length"), 262_144).map_err(|e| e.to_string())?,
            "attn_output_gate": gate,
            "attention_bias": bias,
            "tie_word_embeddings": gguf.tensor("output.weight").is_none(),
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": theta,
                "partial_rotary_factor": rope_dims as f64 / head_dim as f64,
                "mrope_section": sections,
                "mrope_interleaved": true,
            },
        },
    });
    let config: ModelConfig = serde_json::from_value(json).map_err(|e| e.to_string())?;
    config.check()?;
    Ok(config)
}

fn head_config(gguf: &Gguf, arch: &str) -> std::result::Result<HeadConfig, String> {
    let m = &gguf.metadata;
    let key = |k: &str| format!("{arch}.decision.{k}");
    let decision = m.string(&key("type")).map_err(|e| e.to_string())?;
    if decision != "clef" {
        return Err(format!(
            "{} is `{decision}`; clef.rs runs the `clef` joint schema head",
            key("type")
        ));
    }
    let u = |k: &str| m.uint(&key(k)).map_err(|e| e.to_string());
    let rows = |name: &str| {
        gguf.tensor(name)
            .map(|t| t.shape()[0])
            .ok_or_else(|| format!("tensor `{name}` is missing"))
    };
    let cfg = HeadConfig {
        hidden_size: m
            .uint(&format!("{arch}.embedding_length"))
            .map_err(|e| e.to_string())?,
        width: rows("decision.proj_memory.weight")?,
        routing_layers: u("routing_block_count")?,
        layers: u("block_count")?,
        heads: u("head_count")?,
        feedforward: rows("dec.blk.0.ffn_up.weight")?,
    };
    if cfg.heads == 0 || !cfg.width.is_multiple_of(cfg.heads) {
        return Err(format!(
            "width {} is not a multiple of heads {}",
            cfg.width, cfg.heads
        ));
    }
    Ok(cfg)
}
