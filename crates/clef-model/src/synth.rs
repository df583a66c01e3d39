//! `clef synth`: synthetic checkpoints in the exact release layout (real tensor names, real
//! widths, random weights) for tests, benchmarks and demos. Presets follow the published
//! shapes of Clef-Flash (9B) and Clef (27B); `layers` shortens them into slices whose per-layer
//! cost is the real one. Weights stream to disk tensor by tensor, so writing a multi-gigabyte
//! slice needs little memory.

use crate::checkpoint::writer::{write_safetensors, TensorSpec};
use crate::config::{HeadConfig, ModelConfig};
use crate::error::{ModelError, Result};
use crate::layout::{backbone_tensors, head_tensors, Init, TensorEntry};
use crate::tensor::Dtype;
use half::bf16;
use rayon::prelude::*;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;

const REAL_TOKENIZER: &[u8] =
    include_bytes!("../../../tests/fixtures/tokenizers/qwen35/tokenizer.json");
const REAL_TOKENIZER_CONFIG: &[u8] =
    include_bytes!("../../../tests/fixtures/tokenizers/qwen35/tokenizer_config.json");
const TINY_TOKENIZER: &[u8] =
    include_bytes!("../../../tests/fixtures/models/tiny-a/tokenizer.json");
const TINY_TOKENIZER_CONFIG: &[u8] =
    include_bytes!("../../../tests/fixtures/models/tiny-a/tokenizer_config.json");
const TINY_PROCESSOR: &[u8] =
    include_bytes!("../../../tests/fixtures/models/tiny-a/processor_config.json");

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    /// The tiny fixture shapes (hidden 64, 8 layers, 832 vocabulary rows, tiny tokenizer).
    Tiny,
    /// Clef-Flash (Qwen3.5-9B widths, real tokenizer).
    Flash,
    /// Clef (Qwen3.5-27B widths, real tokenizer).
    Clef,
}

impl std::str::FromStr for Preset {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "tiny" => Ok(Preset::Tiny),
            "flash" | "clef-flash" => Ok(Preset::Flash),
            "clef" => Ok(Preset::Clef),
            _ => Err(format!("unknown preset `{s}` (tiny, flash, clef)")),
        }
    }
}

#[derive(Clone, Debug)]
pub struct SynthOptions {
    pub preset: Preset,
    /// Keep only the first N backbone layers (and at most N vision blocks).
    pub layers: Option<usize>,
    pub seed: u64,
}

struct Shapes {
    hidden: usize,
    inter: usize,
    layers: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    lin_k: usize,
    lin_v: usize,
    lin_dk: usize,
    vocab: usize,
    mrope: [usize; 3],
    vision_depth: usize,
    vision_hidden: usize,
    vision_inter: usize,
    vision_heads: usize,
    vision_pos: usize,
    head_width: usize,
    head_heads: usize,
    head_ff: usize,
    /// image, video, vision_start, vision_end token ids, eos, pad.
    ids: [u32; 6],
}

fn shapes(p: Preset) -> Shapes {
    match p {
        Preset::Tiny => Shapes {
            hidden: 64,
            inter: 128,
            layers: 8,
            heads: 4,
            kv_heads: 2,
            head_dim: 32,
            lin_k: 2,
            lin_v: 4,
            lin_dk: 16,
            vocab: 832,
            mrope: [2, 1, 1],
            vision_depth: 2,
            vision_hidden: 32,
            vision_inter: 64,
            vision_heads: 2,
            vision_pos: 16,
            head_width: 32,
            head_heads: 4,
            head_ff: 64,
            ids: [780, 781, 777, 778, 770, 768],
        },
        Preset::Flash => Shapes {
            hidden: 4096,
            inter: 12288,
            layers: 32,
            heads: 16,
            kv_heads: 4,
            head_dim: 256,
            lin_k: 16,
            lin_v: 32,
            lin_dk: 128,
            vocab: 248_320,
            mrope: [11, 11, 10],
            vision_depth: 27,
            vision_hidden: 1152,
            vision_inter: 4304,
            vision_heads: 16,
            vision_pos: 2304,
            head_width: 1024,
            head_heads: 16,
            head_ff: 4096,
            ids: [248_056, 248_057, 248_053, 248_054, 248_046, 248_044],
        },
        Preset::Clef => Shapes {
            hidden: 5120,
            inter: 17408,
            layers: 64,
            heads: 24,
            kv_heads: 4,
            head_dim: 256,
            lin_k: 16,
            lin_v: 48,
            lin_dk: 128,
            vocab: 248_320,
            mrope: [11, 11, 10],
            vision_depth: 27,
            vision_hidden: 1152,
            vision_inter: 4304,
            vision_heads: 16,
            vision_pos: 2304,
            head_width: 1024,
            head_heads: 16,
            head_ff: 4096,
            ids: [248_056, 248_057, 248_053, 248_054, 248_046, 248_044],
        },
    }
}

/// The `config.json` of a preset, written like the release's.
pub fn config_json(opts: &SynthOptions) -> serde_json::Value {
    let s = shapes(opts.preset);
    let layers = opts.layers.unwrap_or(s.layers).max(1);
    let vision_depth = opts
        .layers
        .map_or(s.vision_depth, |l| l.clamp(1, s.vision_depth));
    let layer_types: Vec<&str> = (0..layers)
        .map(|i| {
            if (i + 1) % 4 == 0 {
                "full_attention"
            } else {
                "linear_attention"
            }
        })
        .collect();
    json!({
        "architectures": ["Qwen3_5ForConditionalGeneration"],
        "model_type": "qwen3_5",
        "image_token_id": s.ids[0],
        "video_token_id": s.ids[1],
        "vision_start_token_id": s.ids[2],
        "vision_end_token_id": s.ids[3],
        "tie_word_embeddings": false,
        "text_config": {
            "model_type": "qwen3_5_text",
            "attention_bias": false,
            "attn_output_gate": true,
            "dtype": "bfloat16",
            "eos_token_id": s.ids[4],
            "full_attention_interval": 4,
            "head_dim": s.head_dim,
            "hidden_act": "silu",
            "hidden_size": s.hidden,
            "intermediate_size": s.inter,
            "layer_types": layer_types,
            "linear_conv_kernel_dim": 4,
            "linear_key_head_dim": s.lin_dk,
            "linear_num_key_heads": s.lin_k,
            "linear_num_value_heads": s.lin_v,
            "linear_value_head_dim": s.lin_dk,
            "mamba_ssm_dtype": "float32",
            "max_position_embeddings": 262_144,
            "mtp_num_hidden_layers": 1,
            "mtp_use_dedicated_embeddings": false,
            "num_attention_heads": s.heads,
            "num_hidden_layers": layers,
            "num_key_value_heads": s.kv_heads,
            "partial_rotary_factor": 0.25,
            "rms_norm_eps": 1e-6,
            "rope_parameters": {
                "mrope_interleaved": true,
                "mrope_section": s.mrope,
                "partial_rotary_factor": 0.25,
                "rope_theta": 10_000_000,
                "rope_type": "default"
            },
            "tie_word_embeddings": false,
            "vocab_size": s.vocab
        },
        "vision_config": {
            "model_type": "qwen3_5_vision",
            "deepstack_visual_indexes": [],
            "depth": vision_depth,
            "hidden_act": "gelu_pytorch_tanh",
            "hidden_size": s.vision_hidden,
            "in_channels": 3,
            "intermediate_size": s.vision_inter,
            "num_heads": s.vision_heads,
            "num_position_embeddings": s.vision_pos,
            "out_hidden_size": s.hidden,
            "patch_size": 16,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2
        }
    })
}

pub fn head_config(preset: Preset) -> HeadConfig {
    let s = shapes(preset);
    HeadConfig {
        hidden_size: s.hidden,
        width: s.head_width,
        routing_layers: 2,
        layers: 4,
        heads: s.head_heads,
        feedforward: s.head_ff,
    }
}

fn real_processor_config() -> serde_json::Value {
    let common = json!({
        "do_convert_rgb": true, "do_normalize": true, "do_rescale": true, "do_resize": true,
        "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
        "merge_size": 2, "patch_size": 16, "temporal_patch_size": 2, "resample": 3,
        "rescale_factor": 0.00392156862745098
    });
    let mut image = common.clone();
    image["image_processor_type"] = json!("Qwen2VLImageProcessorFast");
    image["size"] = json!({"shortest_edge": 65536, "longest_edge": 16777216});
    let mut video = common;
    video["video_processor_type"] = json!("Qwen3VLVideoProcessor");
    video["size"] = json!({"shortest_edge": 4096, "longest_edge": 25165824});
    video["fps"] = json!(2);
    video["min_frames"] = json!(4);
    video["max_frames"] = json!(768);
    json!({"processor_class": "Qwen3VLProcessor", "image_processor": image, "video_processor": video})
}

/// splitmix64: tiny, fast and deterministic across platforms and thread counts.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in (0, 1].
    fn unit(&mut self) -> f32 {
        ((self.next() >> 40) as f32 + 1.0) / (1u64 << 24) as f32
    }
    fn normal_pair(&mut self) -> (f32, f32) {
        let (u1, u2) = (self.unit(), self.unit());
        let r = (-2.0 * u1.ln()).sqrt();
        let a = std::f32::consts::TAU * u2;
        (r * a.cos(), r * a.sin())
    }
}

fn name_hash(name: &str, seed: u64) -> u64 {
    // FNV-1a over the name, mixed with the seed: each tensor gets its own stream, so adding or
    // removing tensors (e.g. --layers) never changes the others.
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for b in name.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

const BLOCK: usize = 1 << 16;

fn fill_block(init: Init, seed: u64, block: usize, out: &mut [u8]) {
    let mut rng = Rng(seed ^ (block as u64).wrapping_mul(0xD1B5_4A32_D192_ED03));
    let n = out.len() / 2;
    let mut i = 0;
    while i < n {
        let (a, b) = rng.normal_pair();
        for (k, z) in [a, b].into_iter().enumerate() {
            if i + k >= n {
                break;
            }
            let v = match init {
                Init::Normal(std) => z * std,
                Init::AroundOne(std) => 1.0 + z * std,
                Init::Uniform(lo, hi) => lo + (hi - lo) * rng.unit(),
                // ln of a log-uniform value is uniform in [ln lo, ln hi].
                Init::LogUniformLog(lo, hi) => lo.ln() + (hi.ln() - lo.ln()) * rng.unit(),
                Init::Const(c) => c,
            };
            let bits = bf16::from_f32(v).to_bits().to_le_bytes();
            out[2 * (i + k)] = bits[0];
            out[2 * (i + k) + 1] = bits[1];
        }
        i += 2;
    }
}

fn write_tensor(e: &TensorEntry, seed: u64, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let numel: usize = e
        .shape
        .iter()
        .product::<usize>()
        .max(usize::from(e.shape.is_empty()));
    let tseed = name_hash(&e.name, seed);
    let blocks = numel.div_ceil(BLOCK);
    // Generate a batch of blocks in parallel, then write them in order.
    let batch = 64;
    let mut buf = Vec::new();
    for first in (0..blocks).step_by(batch) {
        let last = (first + batch).min(blocks);
        let len = (last * BLOCK).min(numel) - first * BLOCK;
        buf.resize(len * 2, 0u8);
        buf.par_chunks_mut(BLOCK * 2)
            .enumerate()
            .for_each(|(i, chunk)| fill_block(e.init, tseed, first + i, chunk));
        out.write_all(&buf)?;
    }
    Ok(())
}

fn write_entries(path: &Path, entries: &[TensorEntry], seed: u64) -> Result<u64> {
    let specs: Vec<TensorSpec> = entries
        .iter()
        .map(|e| TensorSpec::new(e.name.clone(), Dtype::Bf16, &e.shape))
        .collect();
    let meta = BTreeMap::from([("format".to_string(), "pt".to_string())]);
    write_safetensors(path, &specs, &meta, |i, out| {
        write_tensor(&entries[i], seed, out)
    })
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).map_err(|e| ModelError::io(path, e))
}

/// Write a synthetic checkpoint into `dir` (created if missing). Returns the bytes written.
pub fn synthesize(dir: &Path, opts: &SynthOptions) -> Result<u64> {
    std::fs::create_dir_all(dir).map_err(|e| ModelError::io(dir, e))?;
    let cfg_json = config_json(opts);
    let cfg: ModelConfig =
        serde_json::from_value(cfg_json.clone()).map_err(|e| ModelError::Json {
            path: dir.join("config.json"),
            message: e.to_string(),
        })?;
    let head = head_config(opts.preset);
    let s = shapes(opts.preset);
    let pretty = |v: &serde_json::Value| serde_json::to_vec_pretty(v).unwrap_or_default();
    write_file(&dir.join("config.json"), &pretty(&cfg_json))?;
    write_file(
        &dir.join("joint_head_config.json"),
        &pretty(&serde_json::to_value(&head).unwrap_or_default()),
    )?;
    write_file(
        &dir.join("generation_config.json"),
        &pretty(
            &json!({"bos_token_id": s.ids[5], "eos_token_id": [s.ids[4], s.ids[5]], "pad_token_id": s.ids[5]}),
        ),
    )?;
    let (tok, tok_cfg) = match opts.preset {
        Preset::Tiny => (TINY_TOKENIZER, TINY_TOKENIZER_CONFIG),
        _ => (REAL_TOKENIZER, REAL_TOKENIZER_CONFIG),
    };
    write_file(&dir.join("tokenizer.json"), tok)?;
    write_file(&dir.join("tokenizer_config.json"), tok_cfg)?;
    match opts.preset {
        Preset::Tiny => write_file(&dir.join("processor_config.json"), TINY_PROCESSOR)?,
        _ => write_file(
            &dir.join("processor_config.json"),
            &pretty(&real_processor_config()),
        )?,
    }
    write_weights(dir, &cfg, &head, opts.seed)
}

/// Random weights for the configs already in `dir` (`config.json`, `joint_head_config.json`):
/// a checkpoint of any custom shape in the release layout. Returns the bytes written.
pub fn synthesize_from_configs(dir: &Path, seed: u64) -> Result<u64> {
    let cfg = ModelConfig::from_file(&dir.join("config.json"))?;
    let head = HeadConfig::from_file(&dir.join("joint_head_config.json"))?;
    write_weights(dir, &cfg, &head, seed)
}

fn write_weights(dir: &Path, cfg: &ModelConfig, head: &HeadConfig, seed: u64) -> Result<u64> {
    let mut total = write_entries(&dir.join("model.safetensors"), &backbone_tensors(cfg), seed)?;
    total += write_entries(
        &dir.join("joint_head.safetensors"),
        &head_tensors(head),
        seed ^ 0x5eed,
    )?;
    Ok(total)
}
