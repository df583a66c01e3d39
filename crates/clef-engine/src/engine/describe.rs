//! What a loaded engine is, as plain values: what a server publishes (`/v1/models`) and logs at
//! start-up, so that it needs nothing of the model's or the kernels' types.

use super::{Engine, Revision};
use crate::state_cache::StateCacheConfig;
use clef_api::Limits;
use clef_kernels::cpu::Family;
use clef_kernels::Kernels;

/// A loaded engine described.
#[derive(Clone, Debug)]
pub struct EngineDescription {
    /// The stored format: a bundle manifest's (`clef-q8-v2`, ...), else the release's dtype
    /// from config.json (`bf16`, `f16`, `f32`; `unknown` when it states none).
    pub format: String,
    /// What identifies the weights.
    pub revision: Revision,
    /// The backbone's hidden size (what tells a 27B config from a 9B one).
    pub hidden_size: usize,
    /// Whether the model has a vision tower (images and videos can be answered).
    pub vision: bool,
    /// The request validation limits.
    pub limits: Limits,
    /// The largest image area after resizing, in pixels (the model's own cap applied).
    pub max_image_pixels: u64,
    /// The programs video files are read with, or why video files are refused.
    pub video_files: Result<VideoPrograms, String>,
    /// The linears' arithmetic: `exact`, `int8` or `bf16`.
    pub matmul: &'static str,
    /// Rows per prefill call.
    pub chunk: usize,
    /// The state cache's budget and minimum state length.
    pub state_cache: StateCacheConfig,
    /// What the state cache charges for a kept state of `n` tokens (prefix, media and state):
    /// `state_bytes_fixed + n * state_bytes_per_token`.
    pub state_bytes_fixed: usize,
    pub state_bytes_per_token: usize,
    /// The instruction sets the kernels run on.
    pub kernels: KernelSets,
}

/// `ffmpeg` and `ffprobe` as found at load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VideoPrograms {
    pub ffmpeg: String,
    pub ffmpeg_version: String,
    pub ffprobe: String,
    pub ffprobe_version: String,
}

/// The kernels' instruction sets (`CLEF_ISA` lowers them): a figure or a bug report means
/// little without them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSets {
    /// The level of the kernel table (`scalar`, `avx2`, `avxvnni`, `avx512`, ...).
    pub isa: &'static str,
    /// The integer tiles' (`--matmul int8`: `portable`, `avx2`, `avxvnni`, `avx512vnni`,
    /// `amx`).
    pub int8_isa: String,
    /// The bf16 matrix unit (`--matmul bf16`: `amx`), `None` where the mode is refused.
    pub bf16_isa: Option<&'static str>,
    /// The f32 tile (`--matmul exact`).
    pub f32_isa: &'static str,
    /// Why a feature the CPU reports is off (the OS refused the AMX tile state), if one is.
    pub refused: Option<&'static str>,
}

impl KernelSets {
    /// What runs the linears in `matmul` mode (`amx`, `avx512vnni`, `avx512 12x32`, ...).
    pub fn matmul_isa(&self, matmul: &str) -> &str {
        match matmul {
            "int8" => &self.int8_isa,
            "bf16" => self.bf16_isa.unwrap_or("portable"),
            _ => self.f32_isa,
        }
    }
}

impl Engine {
    /// The engine as plain values.
    pub fn description(&self) -> EngineDescription {
        let fixed = self.state_charge(0);
        EngineDescription {
            format: self.format.clone(),
            revision: self.revision.clone(),
            hidden_size: self.model.hidden(),
            vision: self.supports_vision(),
            limits: self.config.limits.clone(),
            max_image_pixels: self.config.media.max_image_pixels,
            video_files: self
                .video
                .as_ref()
                .map(|found| VideoPrograms {
                    ffmpeg: found.tools.ffmpeg.to_string_lossy().into_owned(),
                    ffmpeg_version: found.ffmpeg_version.clone(),
                    ffprobe: found.tools.ffprobe.to_string_lossy().into_owned(),
                    ffprobe_version: found.ffprobe_version.clone(),
                })
                .map_err(Clone::clone),
            matmul: self.matmul_mode().name(),
            chunk: self.chunk_size(),
            state_cache: self.state_cache.config().clone(),
            state_bytes_fixed: fixed,
            state_bytes_per_token: self.state_charge(1) - fixed,
            kernels: self.kernels(),
        }
    }

    /// The instruction sets the kernels picked on this machine. The one place that asks the
    /// kernels which they run.
    pub fn kernels(&self) -> KernelSets {
        let k = Kernels::detected();
        KernelSets {
            isa: k.level(),
            int8_isa: self.int8_tiles(k),
            bf16_isa: k.bf16_unit(),
            f32_isa: k.implementation(Family::F32Tile),
            refused: clef_kernels::cpu::refusal(),
        }
    }
}

impl Engine {
    /// What runs the integer products: the tile for the model's scale groups, and for a GGUF
    /// file, whose K-quants (Q2_K..Q6_K) multiply under the super-block contract, the tile
    /// those take where it is another (`amx (K-quants: avx512vnni-superblock)`).
    fn int8_tiles(&self, k: &Kernels) -> String {
        let group = self.model.integer_group();
        let main = k.int8_implementation(group);
        let kquants = k.int8_superblock_implementation(16);
        if self.model.gguf().is_some() && kquants != main {
            format!("{main} (K-quants: {kquants})")
        } else {
            main.to_string()
        }
    }
}

/// The kernel table `CLEF_ISA` asks for, or why it cannot be had (an unknown level, or one this
/// CPU lacks): every binary checks it before any work, so that it never silently measures or
/// serves another instruction set.
pub fn instruction_set() -> Result<(), String> {
    Kernels::from_env().map(|_| ()).map_err(|e| e.to_string())
}

/// This process's resident memory in bytes (`None` where the system does not say).
pub fn resident_bytes() -> Option<u64> {
    clef_model::memory::rss_bytes()
}
