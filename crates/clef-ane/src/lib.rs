//! The Clef-ANE-LUT6 artifact (formats.md §2), everything about it that is the Apple Neural
//! Engine's rather than the model's: the bundle's text tensors (`text/tensors.json` over the MIL
//! blob file `text/weights/weight.bin`) opened for the CPU engine ([`load_model`]), the partition
//! of the text layers into ANE programs (`text/programs.json`), the MIL text of those programs
//! (a second implementation of the model, in MIL), and the FP16 numerics that predict what the
//! ANE computes ([`Fp16`], a [`clef_model::numerics::Numerics`]).
//!
//! `clef-model` knows none of this: it runs whatever numerics it is given and loads a backbone
//! from whatever tensor set it is handed.

pub mod bundle;
pub mod mil;
pub mod numerics;
pub mod plan;
pub mod programs;

pub use bundle::{load_model, StoredAs, TensorEntry, TensorsFile};
pub use numerics::{Activations, Fp16};
pub use plan::{plan_programs, Part, Program, ProgramKind, ProgramPlan};

/// The manifest format of a LUT-6 bundle.
pub const FORMAT: clef_formats::BundleFormat = clef_formats::BundleFormat::Lut6;
/// The MIL blob file holding every LUT index/table blob and every FP16 text tensor.
pub const WEIGHT_BIN: &str = "text/weights/weight.bin";
/// HF tensor name → shape, storage and blob offsets.
pub const TENSORS_JSON: &str = "text/tensors.json";
/// The program partition with per-program inputs, outputs and activation scales.
pub const PROGRAMS_JSON: &str = "text/programs.json";
/// Folder of the MIL program texts `NNN_<kind>.mil`.
pub const PROGRAMS_DIR: &str = "text/programs";
/// `embed_tokens`, `lm_head` and the final norm (BF16).
pub const EMBEDDINGS: &str = "embeddings.safetensors";
/// The vision tower (BF16).
pub const VISION: &str = "vision.safetensors";
/// How MIL programs name the weight file (relative to the compiled model).
pub const MIL_WEIGHT_PATH: &str = "@model_path/weights/weight.bin";
/// Images on the LUT-6 backend are resized to at most this many pixels: an image must fit in
/// one 1,024-patch vision program (formats.md §2.9).
pub const MAX_IMAGE_PIXELS: u64 = 262_144;
