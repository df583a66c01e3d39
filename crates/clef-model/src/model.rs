//! A loaded Clef model: backbone, joint schema head and the `lm_head` rows the head gathers.
//! `score` runs one prompt from token ids (plus optional media rows) to option logits.

use crate::ane::precision::{Activations, Precision};
use crate::backbone::rope::Positions;
use crate::backbone::state::Scratch;
use crate::backbone::Backbone;
use crate::checkpoint::{self, TensorSet};
use crate::config::{HeadConfig, ModelConfig};
use crate::error::{ModelError, Result};
use crate::head::layout::SchemaLayout;
use crate::head::stream::HeadStream;
use crate::head::JointHead;
use crate::rows::RowTable;
use crate::vision::VisionTower;
use std::path::{Path, PathBuf};
use std::time::Instant;

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
    /// Rows per prefill call (128 by default, as the ANE artifact runs).
    pub chunk_size: usize,
    pub order: PrefillOrder,
    /// f32 (default) or the FP16 emulation of the ANE programs (formats.md §2.8).
    pub activations: Activations,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            chunk_size: 128,
            order: PrefillOrder::ChunkMajor,
            activations: Activations::F32,
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
}

#[derive(Clone, Debug, Default)]
pub struct Timings {
    pub backbone_s: f64,
    pub head_s: f64,
    pub tokens: usize,
}

pub struct Model {
    pub dir: PathBuf,
    pub config: ModelConfig,
    pub head_config: HeadConfig,
    pub backbone: Backbone,
    pub head: JointHead,
    pub lm_head: RowTable,
    pub vision: Option<VisionTower>,
    /// The bundle manifest's `format` (`clef-lut6-v1`, `bf16`, ...); None for a release.
    pub format: Option<String>,
    /// Per-layer MLP down-projection scales of the FP16 programs (LUT-6 bundles; else empty).
    pub down_scales: Vec<f32>,
}

impl Model {
    /// Load a release folder (or a bundle in the same layout).
    pub fn load(dir: &Path) -> Result<Model> {
        let manifest = crate::bundle::check_sizes(dir)?;
        let format = manifest.map(|m| m.format);
        let down_scales = if format.as_deref() == Some(crate::ane::FORMAT) {
            crate::ane::programs::ProgramsFile::load(dir)?.down_scales
        } else {
            Vec::new()
        };
        let config = ModelConfig::from_file(&dir.join("config.json"))?;
        let head_config = HeadConfig::from_file(&dir.join("joint_head_config.json"))?;
        if head_config.hidden_size != config.text_config.hidden_size {
            return Err(ModelError::config(
                dir.join("joint_head_config.json"),
                format!(
                    "head hidden_size {} differs from the backbone's {}",
                    head_config.hidden_size, config.text_config.hidden_size
                ),
            ));
        }
        let mut set = checkpoint::open_backbone(dir)?;
        let backbone = Backbone::take(&mut set, &config)?;
        // `tie_word_embeddings` (top level, as `Qwen3_5ForConditionalGeneration` reads it):
        // a tied checkpoint has no `lm_head` and gathers the embedding rows instead; one that
        // stores an `lm_head` anyway uses it, as transformers does. Untied, `lm_head` must exist.
        let has_lm_head = set.contains("lm_head.weight") || set.contains("lm_head.q4");
        let lm_head = if config.tie_word_embeddings && !has_lm_head {
            // The embedding table itself: shared storage, no copy.
            backbone.embed.clone()
        } else {
            RowTable::take(
                &mut set,
                "lm_head",
                config.text_config.vocab_size,
                config.text_config.hidden_size,
            )?
        };
        let vision = match &config.vision_config {
            Some(vc) => Some(VisionTower::take(&mut set, vc)?),
            None => None,
        };
        set.finish()?;

        let mut hset = TensorSet::new();
        hset.add_file(&dir.join("joint_head.safetensors"))?;
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
            down_scales,
        })
    }

    pub fn hidden(&self) -> usize {
        self.config.text_config.hidden_size
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

    /// Run a prompt to option logits (encode order per question). `cancelled` is polled at
    /// every chunk boundary so a request whose client left stops promptly.
    /// The final-normed hidden rows of a prompt (`[len, hidden]`), for comparing the backbone
    /// with other implementations.
    pub fn hidden_states(&self, prompt: &Prompt, opts: &RunOptions) -> Result<Vec<f32>> {
        let mut out = Vec::with_capacity(prompt.ids.len() * self.hidden());
        self.prefill(prompt, opts, &|| false, &mut |rows, n| {
            out.extend_from_slice(&rows[..n * self.hidden()]);
            Ok(())
        })?;
        Ok(out)
    }

    /// Run the backbone over the whole prompt in the configured order, handing each run of
    /// final-normed rows to `sink` in sequence order.
    fn prefill(
        &self,
        prompt: &Prompt,
        opts: &RunOptions,
        cancelled: &dyn Fn() -> bool,
        sink: &mut dyn FnMut(&[f32], usize) -> Result<()>,
    ) -> Result<Timings> {
        let len = prompt.ids.len();
        if len == 0 || prompt.layout.len != len || prompt.positions.len() != len {
            return Err(ModelError::Input(format!(
                "prompt of {len} ids with {} positions and a layout of {} rows",
                prompt.positions.len(),
                prompt.layout.len
            )));
        }
        let h = self.hidden();
        for m in &prompt.media {
            if m.rows.len() % h != 0 || m.start + m.rows.len() / h > len {
                return Err(ModelError::Input("media rows do not fit the prompt".into()));
            }
        }
        let chunk = opts.chunk_size.max(1);
        let mut timings = Timings {
            tokens: len,
            ..Default::default()
        };
        let mut state = self.backbone.new_state(len);
        let mut scratch = Scratch {
            precision: Precision {
                activations: opts.activations,
                down_scales: self.down_scales.clone(),
                mlp_peaks: None,
            },
            ..Default::default()
        };

        let embed_rows = |start: usize, n: usize, x: &mut [f32]| -> Result<()> {
            self.backbone
                .embed_prompt(prompt.ids, &prompt.media, start, &mut x[..n * h])
        };

        match opts.order {
            PrefillOrder::ChunkMajor => {
                let mut x = vec![0.0f32; chunk * h];
                let mut start = 0;
                while start < len {
                    if cancelled() {
                        return Err(ModelError::Cancelled);
                    }
                    let n = chunk.min(len - start);
                    embed_rows(start, n, &mut x)?;
                    let t0 = Instant::now();
                    self.backbone.forward_chunk(
                        &mut x[..n * h],
                        n,
                        &prompt.positions,
                        &mut state,
                        &mut scratch,
                    )?;
                    timings.backbone_s += t0.elapsed().as_secs_f64();
                    sink(&x, n)?;
                    start += n;
                }
            }
            PrefillOrder::LayerMajor => {
                let mut x = vec![0.0f32; len * h];
                embed_rows(0, len, &mut x)?;
                let t0 = Instant::now();
                for li in 0..self.backbone.layers.len() {
                    let mut start = 0;
                    while start < len {
                        if cancelled() {
                            return Err(ModelError::Cancelled);
                        }
                        let n = chunk.min(len - start);
                        self.backbone.forward_layer(
                            li,
                            &mut x[start * h..(start + n) * h],
                            n,
                            start,
                            &prompt.positions,
                            &mut state,
                            &mut scratch,
                        )?;
                        start += n;
                    }
                    self.backbone.release_layer(li);
                }
                timings.backbone_s += t0.elapsed().as_secs_f64();
                let mut start = 0;
                while start < len {
                    let n = chunk.min(len - start);
                    let rows = &mut x[start * h..(start + n) * h];
                    self.backbone.final_norm_in_place(rows, n, &mut scratch);
                    sink(rows, n)?;
                    start += n;
                }
            }
        }
        Ok(timings)
    }

    pub fn score(
        &self,
        prompt: &Prompt,
        opts: &RunOptions,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<(Vec<Vec<f32>>, Timings)> {
        let mut stream = HeadStream::new(&self.head, &prompt.layout)?;
        let mut head_s = 0.0;
        let mut timings = self.prefill(prompt, opts, cancelled, &mut |rows, n| {
            let t = Instant::now();
            stream.push(rows, n)?;
            head_s += t.elapsed().as_secs_f64();
            Ok(())
        })?;
        timings.head_s += head_s;

        let t2 = Instant::now();
        let inputs = stream.finish()?;
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
        Ok((logits, timings))
    }
}
