//! A loaded Clef model: backbone, joint schema head and the `lm_head` rows the head gathers.
//! `score` runs one prompt from token ids (plus optional media rows) to option logits.

use crate::backbone::rope::Positions;
use crate::backbone::scratch::Scratch;
use crate::backbone::state::SequenceState;
use crate::backbone::{chunks, Backbone};
use crate::checkpoint::{self, Residency, TensorSet};
use crate::config::{HeadConfig, ModelConfig};
use crate::error::{ModelError, Result};
use crate::forward::{ForwardObserver, Pass};
use crate::head::layout::SchemaLayout;
use crate::head::stream::HeadStream;
use crate::head::JointHead;
use crate::linear::Linear;
use crate::matmul::MatmulMode;
use crate::numerics::{Exact, Numerics};
use crate::prefix::{PrefixState, PrefixUse, Scored};
use crate::rows::RowTable;
use crate::vision::VisionTower;
use clef_formats::affine4::codes_name;
use clef_formats::{dense_name, BundleFormat};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// The tensor prefix of the `lm_head` rows the head gathers.
const LM_HEAD: &str = "lm_head";

/// How the prefill walks the (rows × layers) grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PrefillOrder {
    /// Chunk by chunk through all layers: activation memory bounded by the chunk size.
    #[default]
    ChunkMajor,
    /// Layer by layer over all rows, releasing each layer's weight pages afterwards: weight
    /// memory bounded by one layer (models larger than RAM), activations [len, hidden].
    LayerMajor,
}

#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Rows per prefill call; `None` takes the linears' mode's default
    /// ([`MatmulMode::default_chunk`]). Any value gives the same answers.
    pub chunk_size: Option<usize>,
    pub order: PrefillOrder,
    /// The numerics of the run: [`Exact`] f32 by default; `clef-ane` has the FP16 emulation of
    /// the ANE programs (formats.md §2.8).
    pub numerics: Arc<dyn Numerics>,
    /// The linears' arithmetic; `None` runs the model's default ([`Model::default_matmul`]).
    pub matmul: Option<MatmulMode>,
}

impl RunOptions {
    /// The rows per prefill call of a run whose linears run in `mode` (integer products
    /// scaled every `integer_group` columns): the given size, else the mode's default.
    pub fn chunk_for(&self, mode: MatmulMode, integer_group: usize) -> usize {
        self.chunk_size
            .map_or_else(|| mode.default_chunk(integer_group), |c| c.max(1))
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            chunk_size: None,
            order: PrefillOrder::ChunkMajor,
            numerics: Arc::new(Exact),
            matmul: None,
        }
    }
}

/// Replacement input embeddings for a run of rows (the vision tower's merged outputs).
pub struct MediaRows {
    pub start: usize,
    /// `[len, hidden]`.
    pub rows: Vec<f32>,
}

/// One prompt, ready to run.
pub struct Prompt<'a> {
    pub ids: &'a [u32],
    pub positions: Positions,
    pub media: Vec<MediaRows>,
    pub layout: SchemaLayout,
    /// The end of the request's state: the rows before it can be shared with prompts that
    /// agree with this one there (encoding.md §9), so the prefill ends a chunk at it.
    pub cut: Option<usize>,
}

impl Prompt<'_> {
    /// What the backbone reads of it.
    pub fn sequence(&self) -> Sequence<'_> {
        Sequence {
            ids: self.ids,
            positions: &self.positions,
            media: &self.media,
            cut: self.cut,
        }
    }
}

/// The backbone's input: token ids, their rotary positions, and the media rows laid over their
/// embeddings.
#[derive(Clone, Copy)]
pub struct Sequence<'a> {
    pub ids: &'a [u32],
    pub positions: &'a Positions,
    pub media: &'a [MediaRows],
    /// Where a chunk must end ([`Prompt::cut`]).
    pub cut: Option<usize>,
}

#[derive(Clone, Debug, Default)]
pub struct Timings {
    pub backbone_s: f64,
    pub head_s: f64,
    pub tokens: usize,
    /// Rows not run because the prefill started from a kept prefix ([`PrefixUse::Resume`]).
    pub resumed_rows: usize,
}

/// A loaded model: its configs, the backbone, the joint head, `lm_head` and the vision tower.
/// The parts are read through methods, so that what a model holds can change behind them.
pub struct Model {
    pub(crate) dir: PathBuf,
    pub(crate) config: ModelConfig,
    pub(crate) head_config: HeadConfig,
    pub(crate) backbone: Backbone,
    pub(crate) head: JointHead,
    pub(crate) lm_head: RowTable,
    pub(crate) vision: Option<VisionTower>,
    /// The bundle's format (from its manifest); None for a release.
    pub(crate) format: Option<BundleFormat>,
    /// The GGUF file the weights are read from, when they are.
    pub(crate) gguf: Option<Arc<GgufSource>>,
}

/// A GGUF file a model was read from: its path, its tensor types (name → count) and metadata.
#[derive(Debug)]
pub struct GgufSource {
    pub path: PathBuf,
    pub tensor_types: std::collections::BTreeMap<&'static str, usize>,
    pub metadata: clef_gguf::Metadata,
}

impl Model {
    /// Load a release folder, or a bundle that stores its backbone as safetensors (bf16, f16,
    /// clef-ternary-v1). A LUT-6 bundle keeps its text weights in MIL blob storage, which
    /// `clef-ane` reads ([`Model::load_with_backbone`]).
    pub fn load(dir: &Path) -> Result<Model> {
        Self::load_resident(dir, Residency::Mapped)
    }

    /// [`Model::load`] with the linears' weights where `residency` says
    /// ([`Residency`]: mapped, or copied into the process's memory).
    pub fn load_resident(dir: &Path, residency: Residency) -> Result<Model> {
        Self::load_with_backbone_resident(dir, residency, |dir, format| {
            if format == Some(BundleFormat::Lut6) {
                return Err(ModelError::config(
                    dir.join(crate::bundle::MANIFEST),
                    format!(
                        "a {} bundle keeps its text weights in MIL blob storage: load it with \
                         clef_ane::load_model (as the engine does)",
                        BundleFormat::Lut6
                    ),
                ));
            }
            checkpoint::open_backbone(dir)
        })
    }

    /// Load the folder `dir` with its backbone tensors (text layers, embeddings, `lm_head`,
    /// vision tower) from the set `open` gives for the folder and its bundle format (another
    /// storage format may open it); the configs and the joint head are read from the folder as
    /// for a release. The folder's sizes are checked against its manifest before `open` reads
    /// anything, so a damaged file is named by the manifest check whatever its storage.
    pub fn load_with_backbone(
        dir: &Path,
        open: impl FnOnce(&Path, Option<BundleFormat>) -> Result<TensorSet>,
    ) -> Result<Model> {
        Self::load_with_backbone_resident(dir, Residency::Mapped, open)
    }

    /// [`Model::load_with_backbone`] with the linears' weights where `residency` says.
    pub fn load_with_backbone_resident(
        dir: &Path,
        residency: Residency,
        open: impl FnOnce(&Path, Option<BundleFormat>) -> Result<TensorSet>,
    ) -> Result<Model> {
        let format = crate::bundle::check_sizes(dir)?;
        let set = open(dir, format)?;
        Self::assemble(dir, format, set, residency)
    }

    fn assemble(
        dir: &Path,
        format: Option<BundleFormat>,
        set: TensorSet,
        residency: Residency,
    ) -> Result<Model> {
        let config = ModelConfig::from_file(&dir.join("config.json"))?;
        let head_config = HeadConfig::from_file(&dir.join("joint_head_config.json"))?;
        let mut hset = TensorSet::new();
        hset.add_file(&dir.join("joint_head.safetensors"))?;
        Self::assemble_sets(dir, format, config, head_config, set, hset, residency)
    }

    /// Load a GGUF file of llama.cpp's `clef` architecture (`checkpoint::gguf`): its tensors
    /// read where the file's map holds them (the linears copied into memory when `residency`
    /// says), under the release's names; the folder around it is where a tokenizer is looked
    /// for. A GGUF holds no vision tower: `vision`, a release folder, lends its own
    /// (`vision_config`, the media token ids and the `model.visual.*` tensors).
    pub fn load_gguf(path: &Path, residency: Residency, vision: Option<&Path>) -> Result<Model> {
        let mut ck = checkpoint::gguf::open(path)?;
        if let Some(vdir) = vision {
            let vpath = vdir.join("config.json");
            let release = ModelConfig::from_file(&vpath)?;
            let Some(vc) = release.vision_config.clone() else {
                return Err(ModelError::config(
                    &vpath,
                    "no vision_config: --vision needs a release folder with a vision tower",
                ));
            };
            let c = &mut ck.config;
            c.vision_config = Some(vc);
            c.image_token_id = release.image_token_id;
            c.video_token_id = release.video_token_id;
            c.vision_start_token_id = release.vision_start_token_id;
            c.vision_end_token_id = release.vision_end_token_id;
            c.check().map_err(|m| {
                ModelError::config(
                    &vpath,
                    format!("its vision tower does not fit {}: {m}", path.display()),
                )
            })?;
            let mut tower = checkpoint::open_backbone(vdir)?;
            tower.keep_prefix(&format!("{}.", crate::vision::PREFIX));
            ck.backbone.absorb(tower)?;
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut model = Self::assemble_sets(
            dir,
            None,
            ck.config,
            ck.head_config,
            ck.backbone,
            ck.head,
            residency,
        )?;
        model.gguf = Some(Arc::new(GgufSource {
            path: path.to_path_buf(),
            tensor_types: ck.tensor_types,
            metadata: ck.metadata,
        }));
        Ok(model)
    }

    /// The GGUF file the model was read from, if it was.
    pub fn gguf(&self) -> Option<&GgufSource> {
        self.gguf.as_deref()
    }

    #[allow(clippy::too_many_arguments)]
    fn assemble_sets(
        dir: &Path,
        format: Option<BundleFormat>,
        config: ModelConfig,
        head_config: HeadConfig,
        mut set: TensorSet,
        mut hset: TensorSet,
        residency: Residency,
    ) -> Result<Model> {
        if head_config.hidden_size != config.text_config.hidden_size {
            return Err(ModelError::config(
                dir.join("joint_head_config.json"),
                format!(
                    "head hidden_size {} differs from the backbone's {}",
                    head_config.hidden_size, config.text_config.hidden_size
                ),
            ));
        }
        // The text layers' linears where `residency` says; the vision tower's stay mapped (a
        // text-only run never reads them, and copying would add them to resident memory).
        set.set_residency(residency);
        let backbone = Backbone::take(&mut set, &config)?;
        set.set_residency(Residency::Mapped);
        // `tie_word_embeddings` (top level, as `Qwen3_5ForConditionalGeneration` reads it):
        // a tied checkpoint has no `lm_head` and gathers the embedding rows instead; one that
        // stores an `lm_head` anyway uses it, as transformers does. Untied, `lm_head` must exist.
        let has_lm_head = set.contains(&dense_name(LM_HEAD)) || set.contains(&codes_name(LM_HEAD));
        let lm_head = if config.tie_word_embeddings && !has_lm_head {
            // The embedding table itself: shared storage, no copy.
            backbone.embed.clone()
        } else {
            RowTable::take(
                &mut set,
                LM_HEAD,
                config.text_config.vocab_size,
                config.text_config.hidden_size,
            )?
        };
        let vision = match &config.vision_config {
            Some(vc) => Some(VisionTower::take(&mut set, vc)?),
            None => None,
        };
        set.finish()?;

        hset.set_residency(residency);
        let head = JointHead::take(&mut hset, &head_config)?;
        hset.finish()?;
        Ok(Model {
            dir: dir.to_path_buf(),
            config,
            head_config,
            backbone,
            head,
            lm_head,
            vision,
            format,
            gguf: None,
        })
    }

    /// The folder the model was loaded from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `config.json` as read.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    pub fn backbone(&self) -> &Backbone {
        &self.backbone
    }

    /// The backbone to change in place: a converter replacing linears or the embedding as it
    /// quantizes, or freeing layers it has finished with.
    pub fn backbone_mut(&mut self) -> &mut Backbone {
        &mut self.backbone
    }

    /// The rows the head's lexical vectors are read from (the embedding table when tied).
    pub fn lm_head(&self) -> &RowTable {
        &self.lm_head
    }

    /// The vision tower; `None` for a text-only model.
    pub fn vision(&self) -> Option<&VisionTower> {
        self.vision.as_ref()
    }

    /// Take the vision tower out, leaving a text-only model (which refuses media).
    pub fn take_vision(&mut self) -> Option<VisionTower> {
        self.vision.take()
    }

    /// The bundle's format (from its manifest); `None` for a release.
    pub fn format(&self) -> Option<BundleFormat> {
        self.format
    }

    /// Whether any backbone linear has integer codes (q8, ternary, 4-bit, ggml's integer
    /// types), i.e. can run
    /// [`MatmulMode::Int8`].
    pub fn has_integer_weights(&self) -> bool {
        self.any_backbone_linear(Linear::has_integer_path)
    }

    /// Columns per scale group of its integer weights, which picks the integer tile on a
    /// machine whose fastest tile is fixed to 64 (AMX): ggml's block types scale every 32 or 16
    /// values (both run on the same tiles, so 32 stands for either), the project's formats
    /// every [`clef_kernels::int8::GROUP`].
    pub fn integer_group(&self) -> usize {
        if self.gguf.is_some() {
            32
        } else {
            clef_kernels::int8::GROUP
        }
    }

    /// Whether any backbone linear is stored in bf16, i.e. can run [`MatmulMode::Bf16`].
    pub fn has_bf16_weights(&self) -> bool {
        self.any_backbone_linear(Linear::has_bf16_path)
    }

    fn any_backbone_linear(&self, test: impl Fn(&Linear) -> bool) -> bool {
        self.backbone.layers.iter().any(|layer| {
            layer
                .linear_kinds()
                .iter()
                .filter_map(|&kind| layer.linear(kind))
                .any(&test)
        })
    }

    /// The linears' arithmetic when a run does not choose: the integer product for integer
    /// weights (the reason to pick such a bundle is speed), exact for releases and LUT-6.
    pub fn default_matmul(&self) -> MatmulMode {
        if self.has_integer_weights() {
            MatmulMode::Int8
        } else {
            MatmulMode::Exact
        }
    }

    /// The arithmetic a run with `opts` uses, or an error when it asks for the integer product
    /// of a model that has no integer weights.
    /// What was loaded, for messages: `release`, `<format> bundle`, or `GGUF file`.
    fn kind(&self) -> String {
        match (&self.gguf, self.format) {
            (Some(_), _) => "GGUF file".into(),
            (None, Some(f)) => format!("{f} bundle"),
            (None, None) => "release".into(),
        }
    }

    pub fn matmul_mode(&self, opts: &RunOptions) -> Result<MatmulMode> {
        match opts.matmul {
            None => Ok(self.default_matmul()),
            Some(MatmulMode::Int8) if !self.has_integer_weights() => Err(ModelError::Input(
                format!(
                    "--matmul int8 needs integer weights (a q8 or clef-ternary-v1 bundle, or a GGUF file in Q8_0, Q4_K or another type with an integer form, docs/gguf.md); this {} has none",
                    self.kind()
                ),
            )),
            Some(MatmulMode::Bf16) if !self.has_bf16_weights() => Err(ModelError::Input(
                format!(
                    "--matmul bf16 needs weights stored in bf16 (a release or a bf16 bundle); this {} has none",
                    self.kind()
                ),
            )),
            Some(MatmulMode::Bf16) => match clef_kernels::Kernels::detected().bf16_unit() {
                Some(_) => Ok(MatmulMode::Bf16),
                None => Err(ModelError::Input(bf16_unit_missing())),
            },
            Some(mode) => Ok(mode),
        }
    }

    /// The rows per prefill call of a run: the given size, else its linears' mode's default.
    pub fn chunk_size(&self, opts: &RunOptions) -> Result<usize> {
        Ok(opts.chunk_for(self.matmul_mode(opts)?, self.integer_group()))
    }

    pub fn hidden(&self) -> usize {
        self.config.text_config.hidden_size
    }

    /// Bytes of the [`PrefixState`] a prompt cut at `rows` keeps ([`PrefixState::bytes`]),
    /// known before anything runs.
    pub fn prefix_bytes(&self, rows: usize) -> usize {
        self.backbone.state_bytes(rows) + rows * self.head.width() * std::mem::size_of::<f32>()
    }

    /// ℓ_o for every option: mean of the raw `lm_head` rows of its tokens.
    fn lexical_vectors(&self, layout: &SchemaLayout) -> Result<Vec<f32>> {
        let h = self.hidden();
        let vocab = self.lm_head.rows();
        let mut out = Vec::with_capacity(layout.num_options() * h);
        let mut row = vec![0.0f32; h];
        for q in &layout.questions {
            for o in &q.options {
                let mut acc = vec![0.0f64; h];
                for &id in &o.token_ids {
                    if id as usize >= vocab {
                        return Err(ModelError::Input(format!(
                            "token id {id} outside lm_head ({vocab} rows)"
                        )));
                    }
                    self.lm_head.row_to_f32(id as usize, &mut row)?;
                    for (a, v) in acc.iter_mut().zip(&row) {
                        *a += *v as f64;
                    }
                }
                let len = o.token_ids.len() as f64;
                out.extend(acc.iter().map(|v| (*v / len) as f32));
            }
        }
        Ok(out)
    }

    /// The final-normed hidden rows of a prompt (`[len, hidden]`), for comparing the backbone
    /// with other implementations.
    pub fn hidden_states(&self, prompt: &Prompt, opts: &RunOptions) -> Result<Vec<f32>> {
        let mut out = Vec::with_capacity(prompt.ids.len() * self.hidden());
        self.prefill(
            prompt.sequence(),
            opts,
            &mut (),
            &|| false,
            &mut |rows, n| {
                out.extend_from_slice(&rows[..n * self.hidden()]);
                Ok(())
            },
        )?;
        Ok(out)
    }

    /// The prefill: runs the backbone over the whole sequence in the configured order and
    /// numerics, handing each run of final-normed rows to `sink` in sequence order. `observer`
    /// sees the input of every linear layer; `cancelled` is polled at every chunk boundary, so
    /// a request whose client left stops promptly.
    pub fn prefill(
        &self,
        seq: Sequence,
        opts: &RunOptions,
        observer: &mut dyn ForwardObserver,
        cancelled: &dyn Fn() -> bool,
        sink: &mut dyn FnMut(&[f32], usize) -> Result<()>,
    ) -> Result<Timings> {
        self.prefill_from(seq, opts, observer, cancelled, PrefixUse::Run, sink)
            .map(|(timings, _)| timings)
    }

    /// [`Model::prefill`] with a use of the rows before the sequence's cut: run them, run and
    /// keep their backbone state (returned), or start at the cut from a kept state (`sink` then
    /// sees the rows from the cut on). Keeping and resuming need the chunk-major order.
    pub fn prefill_from(
        &self,
        seq: Sequence,
        opts: &RunOptions,
        observer: &mut dyn ForwardObserver,
        cancelled: &dyn Fn() -> bool,
        prefix: PrefixUse,
        sink: &mut dyn FnMut(&[f32], usize) -> Result<()>,
    ) -> Result<(Timings, Option<SequenceState>)> {
        let len = seq.ids.len();
        if len == 0 || seq.positions.len() != len {
            return Err(ModelError::Input(format!(
                "a sequence of {len} ids with {} positions",
                seq.positions.len()
            )));
        }
        if seq.cut.is_some_and(|c| c > len) {
            return Err(ModelError::Input(format!(
                "a cut at row {} of a {len}-row sequence",
                seq.cut.unwrap_or(0)
            )));
        }
        let h = self.hidden();
        for m in seq.media {
            if m.rows.len() % h != 0 || m.start + m.rows.len() / h > len {
                return Err(ModelError::Input("media rows do not fit the prompt".into()));
            }
        }
        let matmul = self.matmul_mode(opts)?;
        let chunk = opts.chunk_for(matmul, self.integer_group());
        let mut timings = Timings {
            tokens: len,
            ..Default::default()
        };
        let mut scratch = Scratch::default();
        let mut pass = Pass::new(opts.numerics.as_ref(), observer);
        pass.matmul = matmul;
        let embed_rows = |start: usize, x: &mut [f32]| -> Result<()> {
            self.backbone.embed_prompt(seq.ids, seq.media, start, x)
        };
        let mut kept = None;

        match opts.order {
            PrefillOrder::ChunkMajor => {
                let (mut state, from) = match prefix {
                    PrefixUse::Resume(p) => (self.resume_state(p, seq.cut, len)?, p.rows),
                    PrefixUse::Keep if seq.cut.is_none() => {
                        return Err(ModelError::Input(
                            "a prefix to keep needs a sequence with a cut".into(),
                        ))
                    }
                    _ => (self.backbone.new_state(len), 0),
                };
                timings.resumed_rows = from;
                let keep_at = matches!(prefix, PrefixUse::Keep)
                    .then_some(seq.cut)
                    .flatten();
                if keep_at == Some(0) {
                    kept = Some(state.snapshot());
                }
                let mut x = vec![0.0f32; chunk.min(len) * h];
                for (start, n) in chunks(len, chunk, seq.cut).skip_while(|&(s, _)| s < from) {
                    if cancelled() {
                        return Err(ModelError::Cancelled);
                    }
                    let rows = &mut x[..n * h];
                    embed_rows(start, rows)?;
                    let t0 = Instant::now();
                    self.backbone.forward_chunk(
                        rows,
                        n,
                        seq.positions,
                        &mut state,
                        &mut scratch,
                        &mut pass,
                    )?;
                    timings.backbone_s += t0.elapsed().as_secs_f64();
                    if keep_at == Some(state.position) {
                        kept = Some(state.snapshot());
                    }
                    sink(rows, n)?;
                }
            }
            PrefillOrder::LayerMajor => {
                if !matches!(prefix, PrefixUse::Run) {
                    return Err(ModelError::Input(
                        "keeping or resuming a prefix needs the chunk-major prefill".into(),
                    ));
                }
                let mut x = vec![0.0f32; len * h];
                embed_rows(0, &mut x)?;
                let t0 = Instant::now();
                for li in 0..self.backbone.layers.len() {
                    self.backbone.run_layer(
                        li,
                        &mut x,
                        seq.positions,
                        chunk,
                        seq.cut,
                        &mut scratch,
                        &mut pass,
                        cancelled,
                    )?;
                    self.backbone.release_layer(li);
                }
                timings.backbone_s += t0.elapsed().as_secs_f64();
                for (start, n) in chunks(len, chunk, seq.cut) {
                    let rows = &mut x[start * h..(start + n) * h];
                    self.backbone.final_norm_in_place(rows, n, &mut scratch);
                    sink(rows, n)?;
                }
            }
        }
        Ok((timings, kept))
    }

    /// The working state of a prefill resumed from `p` at the sequence's cut, after checking
    /// that `p` is a state of this backbone at that cut.
    fn resume_state(
        &self,
        p: &PrefixState,
        cut: Option<usize>,
        len: usize,
    ) -> Result<SequenceState> {
        if cut != Some(p.rows) || p.backbone.position != p.rows || p.rows > len {
            return Err(ModelError::Input(format!(
                "a kept prefix of {} rows for a {len}-row sequence cut at {cut:?}",
                p.rows
            )));
        }
        if p.backbone.layers.len() != self.backbone.layers.len() {
            return Err(ModelError::Input(format!(
                "a kept prefix of {} layers for a {}-layer backbone",
                p.backbone.layers.len(),
                self.backbone.layers.len()
            )));
        }
        Ok(p.backbone.resumed(len))
    }

    /// Run a prompt to option logits (encode order per question). `cancelled` is polled at
    /// every chunk boundary so a request whose client left stops promptly.
    pub fn score(
        &self,
        prompt: &Prompt,
        opts: &RunOptions,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<(Vec<Vec<f32>>, Timings)> {
        self.score_observed(prompt, opts, &mut (), cancelled)
    }

    /// [`Model::score`] with an observer of the backbone's linears (profilers, calibration).
    pub fn score_observed(
        &self,
        prompt: &Prompt,
        opts: &RunOptions,
        observer: &mut dyn ForwardObserver,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<(Vec<Vec<f32>>, Timings)> {
        self.score_from(prompt, opts, observer, cancelled, PrefixUse::Run)
            .map(|s| (s.logits, s.timings))
    }

    /// [`Model::score_observed`] with a use of the rows before the prompt's cut: keep their
    /// state ([`Scored::prefix`]) or start from one kept by a prompt that agrees with this one
    /// up to the cut. All three uses give the same logits, bit for bit.
    pub fn score_from(
        &self,
        prompt: &Prompt,
        opts: &RunOptions,
        observer: &mut dyn ForwardObserver,
        cancelled: &dyn Fn() -> bool,
        prefix: PrefixUse,
    ) -> Result<Scored> {
        if prompt.layout.len != prompt.ids.len() {
            return Err(ModelError::Input(format!(
                "prompt of {} ids with a layout of {} rows",
                prompt.ids.len(),
                prompt.layout.len
            )));
        }
        let mut stream = match prefix {
            PrefixUse::Resume(p) => {
                HeadStream::resume(&self.head, &prompt.layout, &p.memory, p.rows)?
            }
            _ => HeadStream::new(&self.head, &prompt.layout)?,
        };
        let mut head_s = 0.0;
        let sequence = prompt.sequence();
        let (mut timings, kept) = self.prefill_from(
            sequence,
            opts,
            observer,
            cancelled,
            prefix,
            &mut |rows, n| {
                let t = Instant::now();
                stream.push(rows, n)?;
                head_s += t.elapsed().as_secs_f64();
                Ok(())
            },
        )?;
        timings.head_s += head_s;

        let t2 = Instant::now();
        let inputs = stream.finish()?;
        // Memory rows depend on their own row only: the first rows of the finished memory are
        // what they were at the cut.
        let prefix = match (kept, prompt.cut) {
            (Some(backbone), Some(rows)) => Some(PrefixState {
                rows,
                backbone,
                memory: inputs.memory[..rows * self.head.width()].to_vec(),
            }),
            _ => None,
        };
        let lexical = self.lexical_vectors(&prompt.layout)?;
        let logits = self.head.forward(&prompt.layout, &inputs, &lexical)?;
        timings.head_s += t2.elapsed().as_secs_f64();
        for (qi, q) in logits.iter().enumerate() {
            if q.iter().any(|v| !v.is_finite()) {
                return Err(ModelError::NonFinite(format!(
                    "the logits of question {qi}"
                )));
            }
        }
        Ok(Scored {
            logits,
            timings,
            prefix,
        })
    }
}

/// Why `--matmul bf16` cannot run here: no bf16 unit at the running level.
fn bf16_unit_missing() -> String {
    let k = clef_kernels::Kernels::detected();
    let why = match clef_kernels::cpu::refusal() {
        Some(reason) => format!(" ({reason})"),
        None => String::new(),
    };
    format!(
        "--matmul bf16 needs a bf16 unit ({}); the kernels run at level `{}` ({}){why}. Use --matmul exact",
        clef_kernels::cpu::bf16_units(),
        k.level(),
        k.features()
    )
}
