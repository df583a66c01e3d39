//! The joint schema head (model.md §5): routes option queries through the prompt's memory,
//! builds one field per question, lets the fields attend to each other and to the memory, and
//! scores every option. Runs in f32 with the stored (bf16) weights widened on the fly.

pub mod layout;
pub mod mha;
pub mod stream;

use crate::checkpoint::TensorSet;
use crate::config::HeadConfig;
use crate::error::{ModelError, Result};
use crate::linear::Linear;
use crate::tensor::Tensor;
use clef_kernels::{gelu_erf_in_place, layer_norm, sigmoid, softmax_in_place};
use layout::SchemaLayout;
use mha::Mha;
use stream::HeadInputs;

const LN_EPS: f32 = 1e-5;

/// LayerNorm parameters (weight, bias).
pub struct Norm(pub Vec<f32>, pub Vec<f32>);

impl Norm {
    pub(crate) fn take(set: &mut TensorSet, prefix: &str, dim: usize) -> Result<Self> {
        Ok(Norm(
            set.take(&format!("{prefix}.weight"), &[dim])?.to_f32()?,
            set.take(&format!("{prefix}.bias"), &[dim])?.to_f32()?,
        ))
    }

    fn apply(&self, x: &[f32], dim: usize) -> Vec<f32> {
        let mut y = vec![0.0; x.len()];
        layer_norm(x, dim, &self.0, &self.1, LN_EPS, &mut y);
        y
    }
}

/// Linear → GELU → Linear, both with bias.
struct FeedForward {
    up: Linear,
    down: Linear,
}

impl FeedForward {
    fn apply(&self, x: &[f32], n: usize) -> Result<Vec<f32>> {
        let mut hdn = self.up.apply(x, n)?;
        gelu_erf_in_place(&mut hdn);
        self.down.apply(&hdn, n)
    }
}

struct RoutingLayer {
    query_norm: Norm,
    memory_norm: Norm,
    ff_norm: Norm,
    attention: Mha,
    ff: FeedForward,
}

struct JointLayer {
    norm1: Norm,
    norm2: Norm,
    norm3: Norm,
    self_attn: Mha,
    cross_attn: Mha,
    ff: FeedForward,
}

pub struct JointHead {
    cfg: HeadConfig,
    pub(crate) hidden_norm: Norm,
    pub(crate) memory_projection: Linear,
    question_projection: Linear,
    option_question_projection: Linear,
    global_projection: Linear,
    option_context_projection: Linear,
    option_lexical_projection: Linear,
    type_embedding: Vec<f32>,
    routing: Vec<RoutingLayer>,
    joint: Vec<JointLayer>,
    option_summary_norm: Norm,
    field_norm: Norm,
    option_norm: Norm,
    scorer_hidden: Linear,
    scorer_out: Linear,
    /// exp(min(prior_logit_scale, ln 100)), exp(min(joint_logit_scale, ln 100)), σ(residual_gate).
    prior_scale: f32,
    joint_scale: f32,
    gate: f32,
}

fn scalar(set: &mut TensorSet, name: &str) -> Result<f32> {
    let t: Tensor = set.take(name, &[])?;
    t.to_f32()?
        .first()
        .copied()
        .ok_or_else(|| ModelError::Input(format!("scalar `{name}` is empty")))
}

impl JointHead {
    pub fn take(set: &mut TensorSet, cfg: &HeadConfig) -> Result<Self> {
        let (h, w, f) = (cfg.hidden_size, cfg.width, cfg.feedforward);
        let proj = |set: &mut TensorSet, name: &str| {
            Linear::take(set, &format!("{name}_projection"), w, h, false)
        };
        let ff = |set: &mut TensorSet, up: &str, down: &str| -> Result<FeedForward> {
            Ok(FeedForward {
                up: Linear::take(set, up, f, w, true)?,
                down: Linear::take(set, down, w, f, true)?,
            })
        };
        let mut routing = Vec::new();
        for i in 0..cfg.routing_layers {
            let p = format!("evidence_layers.{i}");
            routing.push(RoutingLayer {
                query_norm: Norm::take(set, &format!("{p}.query_norm"), w)?,
                memory_norm: Norm::take(set, &format!("{p}.memory_norm"), w)?,
                ff_norm: Norm::take(set, &format!("{p}.feedforward_norm"), w)?,
                attention: Mha::take(set, &format!("{p}.attention"), w, cfg.heads)?,
                ff: ff(
                    set,
                    &format!("{p}.feedforward.0"),
                    &format!("{p}.feedforward.3"),
                )?,
            });
        }
        let mut joint = Vec::new();
        for i in 0..cfg.layers {
            let p = format!("layers.{i}");
            joint.push(JointLayer {
                norm1: Norm::take(set, &format!("{p}.norm1"), w)?,
                norm2: Norm::take(set, &format!("{p}.norm2"), w)?,
                norm3: Norm::take(set, &format!("{p}.norm3"), w)?,
                self_attn: Mha::take(set, &format!("{p}.self_attn"), w, cfg.heads)?,
                cross_attn: Mha::take(set, &format!("{p}.multihead_attn"), w, cfg.heads)?,
                ff: ff(set, &format!("{p}.linear1"), &format!("{p}.linear2"))?,
            });
        }
        let ln100 = 100f32.ln();
        Ok(JointHead {
            hidden_norm: Norm::take(set, "hidden_norm", h)?,
            memory_projection: proj(set, "memory")?,
            question_projection: proj(set, "question")?,
            option_question_projection: proj(set, "option_question")?,
            global_projection: proj(set, "global")?,
            option_context_projection: proj(set, "option_context")?,
            option_lexical_projection: proj(set, "option_lexical")?,
            type_embedding: set.take("type_embedding.weight", &[3, w])?.to_f32()?,
            routing,
            joint,
            option_summary_norm: Norm::take(set, "option_summary_norm", w)?,
            field_norm: Norm::take(set, "field_norm", w)?,
            option_norm: Norm::take(set, "option_norm", w)?,
            scorer_hidden: Linear::take(set, "residual_scorer.0", w, 4 * w, true)?,
            scorer_out: Linear::take(set, "residual_scorer.3", 1, w, true)?,
            prior_scale: scalar(set, "prior_logit_scale")?.min(ln100).exp(),
            joint_scale: scalar(set, "joint_logit_scale")?.min(ln100).exp(),
            gate: sigmoid(scalar(set, "residual_gate")?),
            cfg: cfg.clone(),
        })
    }

    pub fn hidden(&self) -> usize {
        self.cfg.hidden_size
    }

    pub fn width(&self) -> usize {
        self.cfg.width
    }

    pub fn config(&self) -> &HeadConfig {
        &self.cfg
    }

    /// Option logits per question, options in encode order. `lexical` holds ℓ_o for every
    /// option (`[options, hidden]`, mean of raw `lm_head` rows of the option's tokens).
    pub fn forward(
        &self,
        layout: &SchemaLayout,
        inp: &HeadInputs,
        lexical: &[f32],
    ) -> Result<Vec<Vec<f32>>> {
        let (h, w) = (self.hidden(), self.width());
        let l = layout.len;
        let nq = layout.questions.len();
        let n = layout.num_options();
        let owner: Vec<usize> = layout
            .questions
            .iter()
            .enumerate()
            .flat_map(|(qi, q)| std::iter::repeat_n(qi, q.options.len()))
            .collect();

        // Option queries z_o = W_oc c_o + W_ol ℓ_o + W_oq u_q(o).
        let mut z = self.option_context_projection.apply(&inp.option_means, n)?;
        let lex = self.option_lexical_projection.apply(lexical, n)?;
        let uq_rows: Vec<f32> = owner
            .iter()
            .flat_map(|&qi| inp.question_means[qi * h..(qi + 1) * h].iter().copied())
            .collect();
        let qctx = self.option_question_projection.apply(&uq_rows, n)?;
        for ((zv, a), b) in z.iter_mut().zip(&lex).zip(&qctx) {
            *zv = (*zv + a) + b;
        }

        // Routing: every option attends to the (normalised) memory independently.
        for r in &self.routing {
            let mn = r.memory_norm.apply(&inp.memory, w);
            let (k, v) = r.attention.keys_values(&mn, l)?;
            drop(mn);
            let zq = r.query_norm.apply(&z, w);
            let att = r.attention.attend(&zq, n, &k, &v, l)?;
            add(&mut z, &att);
            let ffo = r.ff.apply(&r.ff_norm.apply(&z, w), n)?;
            add(&mut z, &ffo);
        }

        // Field initialisation per question.
        let b = self.question_projection.apply(&inp.question_means, nq)?;
        let gproj = self.global_projection.apply(&inp.last, 1)?;
        let mut summaries = vec![0.0f32; nq * w];
        let mut first = 0;
        let inv_sqrt_w = 1.0 / (w as f32).sqrt();
        for (qi, q) in layout.questions.iter().enumerate() {
            let bq = &b[qi * w..(qi + 1) * w];
            let rows = &z[first * w..(first + q.options.len()) * w];
            let mut att: Vec<f32> = rows
                .chunks_exact(w)
                .map(|zo| dot(zo, bq) * inv_sqrt_w)
                .collect();
            softmax_in_place(&mut att);
            let s = &mut summaries[qi * w..(qi + 1) * w];
            for (a, zo) in att.iter().zip(rows.chunks_exact(w)) {
                for (sv, zv) in s.iter_mut().zip(zo) {
                    *sv += a * zv;
                }
            }
            first += q.options.len();
        }
        let summaries = self.option_summary_norm.apply(&summaries, w);
        let mut fields = vec![0.0f32; nq * w];
        for (qi, q) in layout.questions.iter().enumerate() {
            let te = &self.type_embedding[q.type_id * w..(q.type_id + 1) * w];
            for j in 0..w {
                let i = qi * w + j;
                fields[i] = ((b[i] + summaries[i]) + gproj[j]) + te[j];
            }
        }

        // Joint layers: questions attend to each other, then to the raw memory.
        for jl in &self.joint {
            let x = jl.norm1.apply(&fields, w);
            let (k, v) = jl.self_attn.keys_values(&x, nq)?;
            let sa = jl.self_attn.attend(&x, nq, &k, &v, nq)?;
            add(&mut fields, &sa);
            let x = jl.norm2.apply(&fields, w);
            let (k, v) = jl.cross_attn.keys_values(&inp.memory, l)?;
            let ca = jl.cross_attn.attend(&x, nq, &k, &v, l)?;
            add(&mut fields, &ca);
            let ffo = jl.ff.apply(&jl.norm3.apply(&fields, w), nq)?;
            add(&mut fields, &ffo);
        }
        let f = self.field_norm.apply(&fields, w);

        // Scoring.
        let opt = self.option_norm.apply(&z, w);
        let mut pairs = vec![0.0f32; n * 4 * w];
        for (o, &qi) in owner.iter().enumerate() {
            let fq = &f[qi * w..(qi + 1) * w];
            let oo = &opt[o * w..(o + 1) * w];
            let row = &mut pairs[o * 4 * w..(o + 1) * 4 * w];
            row[..w].copy_from_slice(fq);
            row[w..2 * w].copy_from_slice(oo);
            for j in 0..w {
                row[2 * w + j] = fq[j] * oo[j];
                row[3 * w + j] = (fq[j] - oo[j]).abs();
            }
        }
        let mut hid = self.scorer_hidden.apply(&pairs, n)?;
        gelu_erf_in_place(&mut hid);
        let resid = self.scorer_out.apply(&hid, n)?;

        let g = &inp.last;
        let mut logits = Vec::with_capacity(nq);
        for (qi, q) in layout.questions.iter().enumerate() {
            let uq = &inp.question_means[qi * h..(qi + 1) * h];
            let anchor: Vec<f32> =
                normalize(&uq.iter().zip(g).map(|(a, b)| a + b).collect::<Vec<_>>());
            let fq = &f[qi * w..(qi + 1) * w];
            let fnorm = norm(fq).max(1e-8);
            let mut ql = Vec::with_capacity(q.options.len());
            for (o, _) in owner.iter().enumerate().filter(|(_, &ow)| ow == qi) {
                let lo = normalize(&lexical[o * h..(o + 1) * h]);
                let prior = self.prior_scale * dot(&lo, &anchor);
                let oo = &opt[o * w..(o + 1) * w];
                let cos = dot(fq, oo) / (fnorm * norm(oo).max(1e-8));
                let joint = self.joint_scale * cos + resid[o];
                ql.push(prior + self.gate * joint);
            }
            logits.push(ql);
        }
        Ok(logits)
    }
}

fn add(a: &mut [f32], b: &[f32]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn norm(a: &[f32]) -> f32 {
    dot(a, a).sqrt()
}

/// `F.normalize`: x / max(‖x‖, 1e-12).
fn normalize(a: &[f32]) -> Vec<f32> {
    let n = norm(a).max(1e-12);
    a.iter().map(|v| v / n).collect()
}
