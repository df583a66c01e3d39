//! Options shared by every command that runs a model (`clef decide`, `serve`, `eval`, `bench`,
//! and the `clef-server` binary).

use crate::{EngineConfig, StateCacheConfig};
use clap::{Args, ValueEnum};
use clef_api::{AnswerOptions, ConfidenceFormula, Limits};
use clef_model::{MatmulMode, PrefillOrder, RunOptions};
use std::path::{Path, PathBuf};

/// What a newcomer needs when `--model` names no model: what a model folder holds and two
/// ways to get one without a download.
const MODEL_FOLDER_HINT: &str =
    "a model folder is a Clef release (config.json, model*.safetensors, \
joint_head.safetensors, joint_head_config.json, tokenizer.json, processor_config.json), a bundle \
written by `clef convert`, or a GGUF file of llama.cpp's `clef` architecture; to try clef.rs without downloading weights, use the trained toy model \
committed in this repository (--model tests/fixtures/models/nano) or write a random-weight one \
with `clef synth --preset tiny --out DIR`";

/// Refuses a `--model` that is neither a model folder nor a GGUF file, before anything is
/// loaded, with the hint.
pub fn check_model_folder(dir: &Path) -> anyhow::Result<()> {
    // a file is read as GGUF, whose reader says what is wrong with one that is not
    if dir.is_file() {
        return Ok(());
    }
    if !dir.is_dir() {
        anyhow::bail!("no model folder at {}: {MODEL_FOLDER_HINT}", dir.display());
    }
    if !dir.join("config.json").is_file() {
        anyhow::bail!(
            "{} is not a model folder (it has no config.json): {MODEL_FOLDER_HINT}",
            dir.display()
        );
    }
    Ok(())
}

#[derive(Args, Clone)]
pub struct EngineArgs {
    /// Model folder: a Hugging Face release (config.json, model*.safetensors,
    /// joint_head.safetensors, tokenizer.json) or a converted bundle; or a GGUF file of
    /// llama.cpp's `clef` architecture (tokenizer.json beside it).
    #[arg(long, env = "CLEF_MODEL")]
    pub model: PathBuf,
    /// Rows per prefill call; any value gives the same answers. Default: 512 where the
    /// linears run on a matrix unit (`--matmul bf16`, and int8 on AMX: each call streams every
    /// weight once, which the matrix unit waits on), 128 otherwise.
    #[arg(long, env = "CLEF_CHUNK")]
    pub chunk: Option<usize>,
    /// Run the prefill layer by layer, dropping each layer's weight pages afterwards, so a
    /// model larger than RAM can run (slower; activations grow with the prompt).
    #[arg(long, env = "CLEF_LOW_MEMORY")]
    pub low_memory: bool,
    /// Largest image area after resizing, in pixels (default 1,048,576 = 1,024 tokens;
    /// 262,144 for a LUT-6 bundle, whose vision programs take 1,024 patches).
    #[arg(long, env = "CLEF_MAX_IMAGE_PIXELS")]
    pub max_image_pixels: Option<u64>,
    /// Activation precision: f32, or fp16 to predict what the ANE programs compute (FP16
    /// activations at op boundaries, scaled down-projection input and attention probabilities).
    #[arg(long, value_enum, default_value_t = ActivationsArg::F32, env = "CLEF_ACTIVATIONS")]
    pub activations: ActivationsArg,
    /// Largest prompt in tokens.
    #[arg(long, env = "CLEF_MAX_CONTEXT")]
    pub max_context: Option<usize>,
    #[command(flatten)]
    pub matmul: MatmulArgs,
    /// Memory for kept states, in MiB: a request about a state already read (the same state
    /// and media, other questions) runs only its own question tokens. 0 turns the cache off
    /// (for clients that must not learn from timing what others asked about; docs/state-cache.md).
    #[arg(long, default_value_t = crate::state_cache::DEFAULT_BUDGET_MIB, env = "CLEF_STATE_CACHE_MIB")]
    pub state_cache_mib: usize,
    /// The `ffmpeg` that decodes video files (default: the one on PATH, found once at start-up;
    /// without one, video files are refused with a 422 and frame lists still work).
    #[arg(long, env = "CLEF_FFMPEG")]
    pub ffmpeg: Option<PathBuf>,
    /// The `ffprobe` that reads video files' streams (default: the one on PATH).
    #[arg(long, env = "CLEF_FFPROBE")]
    pub ffprobe: Option<PathBuf>,
    /// With a GGUF `--model`: a release folder whose vision tower (config.json's vision_config
    /// and media token ids, the model.visual.* tensors, processor_config.json) answers images
    /// and videos; a GGUF file holds none.
    #[arg(long, env = "CLEF_VISION")]
    pub vision: Option<PathBuf>,
    /// States (media plus state tokens) shorter than this are not kept.
    #[arg(long, default_value_t = crate::state_cache::DEFAULT_MIN_TOKENS, env = "CLEF_STATE_CACHE_MIN_TOKENS")]
    pub state_cache_min_tokens: usize,
}

/// `--matmul`, shared with `clef bench`.
#[derive(Args, Clone, Copy)]
pub struct MatmulArgs {
    /// Arithmetic of the linear layers: `exact` (f32 products of the stored weights), `int8`
    /// (int8 activations against integer weights) or `bf16` (activations rounded to bf16
    /// against bf16 weights, on a CPU with AMX, AVX512-BF16 or Arm's bf16 extension).
    /// Default: int8 for q8 and ternary bundles, exact for releases, f16/bf16 and LUT-6
    /// bundles (docs/kernels.md, "bf16 products").
    #[arg(long = "matmul", value_enum, env = "CLEF_MATMUL")]
    pub mode: Option<MatmulArg>,
}

impl MatmulArgs {
    pub fn mode(&self) -> Option<MatmulMode> {
        self.mode.map(|m| match m {
            MatmulArg::Exact => MatmulMode::Exact,
            MatmulArg::Int8 => MatmulMode::Int8,
            MatmulArg::Bf16 => MatmulMode::Bf16,
        })
    }
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub enum MatmulArg {
    Exact,
    Int8,
    Bf16,
}

impl EngineArgs {
    pub fn config(&self, mut limits: Limits) -> anyhow::Result<EngineConfig> {
        check_model_folder(&self.model)?;
        if self.chunk == Some(0) {
            anyhow::bail!("--chunk must be at least 1");
        }
        if let Some(c) = self.max_context {
            limits.max_context = c;
        }
        let budget_bytes = self.state_cache_mib.checked_mul(1 << 20).ok_or_else(|| {
            anyhow::anyhow!("--state-cache-mib {} is too large", self.state_cache_mib)
        })?;
        let mut cfg = EngineConfig {
            limits,
            state_cache: StateCacheConfig {
                budget_bytes,
                min_tokens: self.state_cache_min_tokens,
            },
            ffmpeg: self.ffmpeg.clone(),
            ffprobe: self.ffprobe.clone(),
            vision: self.vision.clone(),
            run: RunOptions {
                chunk_size: self.chunk,
                order: if self.low_memory {
                    PrefillOrder::LayerMajor
                } else {
                    PrefillOrder::ChunkMajor
                },
                numerics: clef_ane::Activations::from(self.activations).numerics(&self.model)?,
                matmul: self.matmul.mode(),
            },
            ..Default::default()
        };
        if let Some(px) = self.max_image_pixels {
            cfg.media.max_image_pixels = px;
            cfg.model_image_cap = false;
        }
        Ok(cfg)
    }
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub enum ActivationsArg {
    F32,
    Fp16,
}

impl From<ActivationsArg> for clef_ane::Activations {
    fn from(a: ActivationsArg) -> Self {
        match a {
            ActivationsArg::F32 => clef_ane::Activations::F32,
            ActivationsArg::Fp16 => clef_ane::Activations::Fp16,
        }
    }
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub enum Confidence {
    Pmax,
    Typesafe,
    Entropy,
}

impl From<Confidence> for ConfidenceFormula {
    fn from(c: Confidence) -> Self {
        match c {
            Confidence::Pmax => ConfidenceFormula::Pmax,
            Confidence::Typesafe => ConfidenceFormula::Typesafe,
            Confidence::Entropy => ConfidenceFormula::Entropy,
        }
    }
}

/// Decimals of the answers, or `none` for full precision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rounding(pub Option<u32>);

impl std::str::FromStr for Rounding {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" | "full" => Ok(Rounding(None)),
            d => match d.parse::<u32>() {
                Ok(n) if n <= 17 => Ok(Rounding(Some(n))),
                _ => Err(format!(
                    "`{d}` is not a number of decimals (0-17) or `none`"
                )),
            },
        }
    }
}

#[derive(Args, Clone)]
pub struct OutputArgs {
    /// Decimals of every probability, confidence and score (`none` = full precision).
    #[arg(long, default_value = "4", env = "CLEF_ROUNDING")]
    pub rounding: Rounding,
    /// Confidence formula of choice and score answers (api.md §8).
    #[arg(long, value_enum, default_value_t = Confidence::Pmax, env = "CLEF_CONFIDENCE")]
    pub confidence: Confidence,
}

impl OutputArgs {
    pub fn answer_options(&self) -> AnswerOptions {
        AnswerOptions {
            rounding: self.rounding.0,
            confidence: self.confidence.into(),
        }
    }
}
