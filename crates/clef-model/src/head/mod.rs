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

/// The name of `[exp(min(prior_logit_scale, ln 100)), exp(min(joint_logit_scale, ln 100)),
/// σ(residual_gate)]` where a file stores these instead of the three scalars (GGUF's
/// `decision.scales`, model.md §5.6).
pub const TRANSFORMED_SCALES: &str = "transformed_scales";

fn scalar(set: &mut TensorSet, name: &str) -> Result<f32> {
    let t: Tensor = set.take(name, &[])?;
    t.to_f32()?
        .first()
        .copied()
        .ok_or_else(|| ModelError::Input(format!("scalar `{name}` is empty")))
}

impl JointHead {
    pub fn take(set: &mut TensorSet, cfg: &HeadConfig) -> Result<Self> {
        check_config(cfg)?;
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
        // The learned scalars, or (a GGUF file) the values they stand for, stored already
        // transformed in the order of the fields below.
        let (prior_scale, joint_scale, gate) = if set.contains(TRANSFORMED_SCALES) {
            let v = set.take(TRANSFORMED_SCALES, &[3])?.to_f32()?;
            (v[0], v[1], v[2])
        } else {
            (
                scalar(set, "prior_logit_scale")?.min(ln100).exp(),
                scalar(set, "joint_logit_scale")?.min(ln100).exp(),
                sigmoid(scalar(set, "residual_gate")?),
            )
        };
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
            prior_scale,
            joint_scale,
            gate,
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
            let zq = r.query_norm.apply(&z, w);
            let att = r.attention.attend_memory(&zq, n, &mn, l)?;
            drop(mn);
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
            let ca = jl.cross_attn.attend_memory(&x, nq, &inp.memory, l)?;
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

/// Values of `joint_head_config.json` the head cannot run with (model.md §2, §5.1): every size
/// must be positive and `width` must split into `heads` equal heads.
fn check_config(cfg: &HeadConfig) -> Result<()> {
    let bad = |m: String| Err(ModelError::Input(format!("joint_head_config.json: {m}")));
    if cfg.hidden_size == 0 || cfg.feedforward == 0 {
        return bad(format!(
            "hidden_size {} and feedforward {} must be positive",
            cfg.hidden_size, cfg.feedforward
        ));
    }
    if cfg.width == 0 || cfg.heads == 0 || !cfg.width.is_multiple_of(cfg.heads) {
        return bad(format!(
            "width {} must be a positive multiple of heads {}",
            cfg.width, cfg.heads
        ));
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn config(heads: usize, width: usize) -> HeadConfig {
        HeadConfig {
            hidden_size: 16,
            width,
            routing_layers: 2,
            layers: 2,
            heads,
            feedforward: 12,
        }
    }

    /// Every tensor of `cfg`'s layout, filled with small deterministic values.
    pub(super) fn tensors(cfg: &HeadConfig, seed: u64) -> TensorSet {
        let mut x = seed;
        let mut next = move || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        };
        let list = crate::layout::head_tensors(cfg).into_iter().map(|e| {
            let n: usize = e.shape.iter().product();
            let values: Vec<f32> = (0..n).map(|_| next()).collect();
            Tensor::from_f32(e.name, e.shape, &values)
        });
        TensorSet::from_tensors(list).unwrap()
    }

    /// model.md §2 / §5.1: `heads` splits `width` into heads of width/heads columns. A value
    /// that cannot do that is refused when the head is built, with a message naming it, not
    /// left to panic (division by zero, mismatched attention shapes) on the first request.
    #[test]
    fn unusable_head_counts_are_refused_by_name() {
        for (heads, width) in [(0, 8), (3, 8), (16, 0)] {
            let cfg = config(heads, width);
            let mut set = tensors(&cfg, 1);
            let err = match JointHead::take(&mut set, &cfg) {
                Ok(_) => panic!("heads {heads}, width {width} accepted"),
                Err(e) => e.to_string(),
            };
            assert!(
                err.contains("heads") && err.contains("width"),
                "heads {heads}, width {width}: {err}"
            );
        }
        let cfg = config(2, 8);
        let mut set = tensors(&cfg, 1);
        JointHead::take(&mut set, &cfg).unwrap();
        set.finish().unwrap();
    }

    // ---- An independent f64 transcription of model.md §5.3, to check the head against. ----

    struct Ref<'a> {
        set: &'a TensorSet,
        w: usize,
        heads: usize,
    }

    fn erf(x: f64) -> f64 {
        // Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7).
        let t = 1.0 / (1.0 + 0.3275911 * x.abs());
        let y = 1.0
            - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t
                + 0.254829592)
                * t
                * (-x * x).exp();
        y.copysign(x)
    }

    fn gelu(x: f64) -> f64 {
        0.5 * x * (1.0 + erf(x / 2f64.sqrt()))
    }

    fn dot64(a: &[f64], b: &[f64]) -> f64 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    fn softmax64(v: &[f64]) -> Vec<f64> {
        let m = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = v.iter().map(|x| (x - m).exp()).collect();
        let s: f64 = e.iter().sum();
        e.iter().map(|x| x / s).collect()
    }

    impl Ref<'_> {
        fn t(&self, name: &str) -> Vec<f64> {
            self.set
                .get(name)
                .unwrap_or_else(|| panic!("{name}"))
                .to_f32()
                .unwrap()
                .into_iter()
                .map(f64::from)
                .collect()
        }

        fn ln(&self, p: &str, x: &[f64]) -> Vec<f64> {
            let (g, b) = (self.t(&format!("{p}.weight")), self.t(&format!("{p}.bias")));
            let n = x.len() as f64;
            let mean = x.iter().sum::<f64>() / n;
            let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
            x.iter()
                .zip(g.iter().zip(&b))
                .map(|(v, (g, b))| (v - mean) / (var + 1e-5).sqrt() * g + b)
                .collect()
        }

        /// `W x (+ b)` with W read as [out, in] from `rows` of the named weight.
        fn lin(
            &self,
            weight: &str,
            bias: Option<&str>,
            rows: std::ops::Range<usize>,
            x: &[f64],
        ) -> Vec<f64> {
            let wt = self.t(weight);
            let inp = x.len();
            let b = bias.map(|b| self.t(b));
            rows.map(|r| dot64(&wt[r * inp..(r + 1) * inp], x) + b.as_ref().map_or(0.0, |b| b[r]))
                .collect()
        }

        fn linear(&self, p: &str, bias: bool, out: usize, x: &[f64]) -> Vec<f64> {
            let b = format!("{p}.bias");
            self.lin(
                &format!("{p}.weight"),
                bias.then_some(b.as_str()),
                0..out,
                x,
            )
        }

        fn ff(&self, up: &str, down: &str, f: usize, x: &[f64]) -> Vec<f64> {
            let h: Vec<f64> = self.linear(up, true, f, x).into_iter().map(gelu).collect();
            self.linear(down, true, self.w, &h)
        }

        /// Pre-norm feed-forward with its residual, row by row: `v + ff(ln(v))`.
        fn residual_ff(
            &self,
            norm: &str,
            (up, down): (&str, &str),
            f: usize,
            rows: &[Vec<f64>],
        ) -> Vec<Vec<f64>> {
            rows.iter()
                .map(|v| add64(v, &self.ff(up, down, f, &self.ln(norm, v))))
                .collect()
        }

        fn mha(&self, p: &str, queries: &[Vec<f64>], keys: &[Vec<f64>]) -> Vec<Vec<f64>> {
            let w = self.w;
            let d = w / self.heads;
            let (wi, bi) = (format!("{p}.in_proj_weight"), format!("{p}.in_proj_bias"));
            let proj =
                |part: usize, x: &[f64]| self.lin(&wi, Some(&bi), part * w..(part + 1) * w, x);
            let k: Vec<Vec<f64>> = keys.iter().map(|x| proj(1, x)).collect();
            let v: Vec<Vec<f64>> = keys.iter().map(|x| proj(2, x)).collect();
            queries
                .iter()
                .map(|x| {
                    let q = proj(0, x);
                    let mut ctx = vec![0.0; w];
                    for h in 0..self.heads {
                        let c = h * d..(h + 1) * d;
                        let scores: Vec<f64> = k
                            .iter()
                            .map(|kr| dot64(&q[c.clone()], &kr[c.clone()]) / (d as f64).sqrt())
                            .collect();
                        for (a, vr) in softmax64(&scores).iter().zip(&v) {
                            for j in c.clone() {
                                ctx[j] += a * vr[j];
                            }
                        }
                    }
                    self.linear(&format!("{p}.out_proj"), true, w, &ctx)
                })
                .collect()
        }
    }

    fn mean_rows(x: &[Vec<f64>], span: &std::ops::Range<usize>) -> Vec<f64> {
        let mut m = vec![0.0; x[0].len()];
        for r in span.clone() {
            for (a, v) in m.iter_mut().zip(&x[r]) {
                *a += v / span.len() as f64;
            }
        }
        m
    }

    fn add64(a: &[f64], b: &[f64]) -> Vec<f64> {
        a.iter().zip(b).map(|(x, y)| x + y).collect()
    }

    fn normalize64(a: &[f64]) -> Vec<f64> {
        let n = dot64(a, a).sqrt().max(1e-12);
        a.iter().map(|v| v / n).collect()
    }

    /// Logits of model.md §5.3, step by step, in f64.
    fn reference_logits(
        r: &Ref,
        cfg: &HeadConfig,
        layout: &SchemaLayout,
        hidden: &[f64],
        lexical: &[f64],
    ) -> Vec<Vec<f64>> {
        let (h, w, f) = (cfg.hidden_size, cfg.width, cfg.feedforward);
        let x: Vec<Vec<f64>> = hidden
            .chunks(h)
            .map(|row| r.ln("hidden_norm", row))
            .collect();
        let mem: Vec<Vec<f64>> = x
            .iter()
            .map(|row| r.linear("memory_projection", false, w, row))
            .collect();
        let g = x[layout.len - 1].clone();
        let mut z = Vec::new();
        let mut owner = Vec::new();
        let mut lex = Vec::new();
        let mut o = 0;
        for (qi, q) in layout.questions.iter().enumerate() {
            let u = mean_rows(&x, &q.span);
            for opt in &q.options {
                let c = mean_rows(&x, &opt.span);
                let l = &lexical[o * h..(o + 1) * h];
                let zo = add64(
                    &add64(
                        &r.linear("option_context_projection", false, w, &c),
                        &r.linear("option_lexical_projection", false, w, l),
                    ),
                    &r.linear("option_question_projection", false, w, &u),
                );
                z.push(zo);
                owner.push(qi);
                lex.push(l.to_vec());
                o += 1;
            }
        }
        for i in 0..cfg.routing_layers {
            let p = format!("evidence_layers.{i}");
            let mn: Vec<Vec<f64>> = mem
                .iter()
                .map(|m| r.ln(&format!("{p}.memory_norm"), m))
                .collect();
            let zq: Vec<Vec<f64>> = z
                .iter()
                .map(|v| r.ln(&format!("{p}.query_norm"), v))
                .collect();
            let att = r.mha(&format!("{p}.attention"), &zq, &mn);
            z = z.iter().zip(&att).map(|(a, b)| add64(a, b)).collect();
            z = r.residual_ff(
                &format!("{p}.feedforward_norm"),
                (&format!("{p}.feedforward.0"), &format!("{p}.feedforward.3")),
                f,
                &z,
            );
        }
        let te = r.t("type_embedding.weight");
        let gp = r.linear("global_projection", false, w, &g);
        let mut fields = Vec::new();
        let mut us = Vec::new();
        for (qi, q) in layout.questions.iter().enumerate() {
            let u = mean_rows(&x, &q.span);
            let b = r.linear("question_projection", false, w, &u);
            let rows: Vec<&Vec<f64>> = z
                .iter()
                .zip(&owner)
                .filter(|(_, &ow)| ow == qi)
                .map(|(v, _)| v)
                .collect();
            let a = softmax64(
                &rows
                    .iter()
                    .map(|v| dot64(v, &b) / (w as f64).sqrt())
                    .collect::<Vec<_>>(),
            );
            let mut s = vec![0.0; w];
            for (ai, v) in a.iter().zip(&rows) {
                for (sv, zv) in s.iter_mut().zip(v.iter()) {
                    *sv += ai * zv;
                }
            }
            let s = r.ln("option_summary_norm", &s);
            let t = &te[q.type_id * w..(q.type_id + 1) * w];
            fields.push(add64(&add64(&add64(&b, &s), &gp), t));
            us.push(u);
        }
        for i in 0..cfg.layers {
            let p = format!("layers.{i}");
            let n1: Vec<Vec<f64>> = fields
                .iter()
                .map(|v| r.ln(&format!("{p}.norm1"), v))
                .collect();
            let sa = r.mha(&format!("{p}.self_attn"), &n1, &n1);
            fields = fields.iter().zip(&sa).map(|(a, b)| add64(a, b)).collect();
            let n2: Vec<Vec<f64>> = fields
                .iter()
                .map(|v| r.ln(&format!("{p}.norm2"), v))
                .collect();
            let ca = r.mha(&format!("{p}.multihead_attn"), &n2, &mem);
            fields = fields.iter().zip(&ca).map(|(a, b)| add64(a, b)).collect();
            fields = r.residual_ff(
                &format!("{p}.norm3"),
                (&format!("{p}.linear1"), &format!("{p}.linear2")),
                f,
                &fields,
            );
        }
        let ln100 = 100f64.ln();
        let prior_scale = r.t("prior_logit_scale")[0].min(ln100).exp();
        let joint_scale = r.t("joint_logit_scale")[0].min(ln100).exp();
        let gate = 1.0 / (1.0 + (-r.t("residual_gate")[0]).exp());
        let mut out = vec![Vec::new(); layout.questions.len()];
        for (o, &qi) in owner.iter().enumerate() {
            let fq = r.ln("field_norm", &fields[qi]);
            let anchor = normalize64(&add64(&us[qi], &g));
            let prior = prior_scale * dot64(&normalize64(&lex[o]), &anchor);
            let oo = r.ln("option_norm", &z[o]);
            let cos = dot64(&fq, &oo)
                / (dot64(&fq, &fq).sqrt().max(1e-8) * dot64(&oo, &oo).sqrt().max(1e-8));
            let mut pair = fq.clone();
            pair.extend_from_slice(&oo);
            pair.extend(fq.iter().zip(&oo).map(|(a, b)| a * b));
            pair.extend(fq.iter().zip(&oo).map(|(a, b)| (a - b).abs()));
            let hid: Vec<f64> = r
                .linear("residual_scorer.0", true, w, &pair)
                .into_iter()
                .map(gelu)
                .collect();
            let resid = r.linear("residual_scorer.3", true, 1, &hid)[0];
            out[qi].push(prior + gate * (joint_scale * cos + resid));
        }
        out
    }

    /// model.md §5.3 end to end (stream + forward) against the f64 transcription above, on a
    /// schema the golden fixtures do not have: a single-option choice, a two-level score, a
    /// nine-option choice whose spans share rows with nothing else, a noul, and spans arriving
    /// across chunk boundaries.
    #[test]
    fn forward_matches_the_spec_transcription() {
        use layout::{OptionLayout, QuestionLayout};
        let cfg = HeadConfig {
            hidden_size: 16,
            width: 12,
            routing_layers: 2,
            layers: 3,
            heads: 3,
            feedforward: 20,
        };
        let (h, len) = (cfg.hidden_size, 64);
        let opt = |s: usize, e: usize| OptionLayout {
            span: s..e,
            token_ids: (s as u32..e as u32).collect(),
        };
        let layout = SchemaLayout {
            len,
            questions: vec![
                QuestionLayout {
                    type_id: 1,
                    span: 2..5,
                    options: vec![opt(5, 7)],
                },
                QuestionLayout {
                    type_id: 2,
                    span: 8..11,
                    options: vec![opt(11, 13), opt(13, 14)],
                },
                QuestionLayout {
                    type_id: 1,
                    span: 15..17,
                    options: (0..9).map(|i| opt(17 + 4 * i, 20 + 4 * i)).collect(),
                },
                QuestionLayout {
                    type_id: 0,
                    span: 54..58,
                    options: vec![opt(58, 60), opt(60, 63)],
                },
            ],
        };
        let mut seed = 99u64;
        let mut next = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
        };
        let hidden: Vec<f32> = (0..len * h).map(|_| next()).collect();
        let lexical: Vec<f32> = (0..layout.num_options() * h).map(|_| next()).collect();

        let head_set = tensors(&cfg, 7);
        let reference = Ref {
            set: &head_set,
            w: cfg.width,
            heads: cfg.heads,
        };
        let want = reference_logits(
            &reference,
            &cfg,
            &layout,
            &hidden.iter().map(|&v| v as f64).collect::<Vec<_>>(),
            &lexical.iter().map(|&v| v as f64).collect::<Vec<_>>(),
        );

        let mut set = tensors(&cfg, 7);
        let head = JointHead::take(&mut set, &cfg).unwrap();
        let mut stream = stream::HeadStream::new(&head, &layout).unwrap();
        for chunk in [0..7, 7..30, 30..31, 31..64] {
            stream
                .push(&hidden[chunk.start * h..chunk.end * h], chunk.len())
                .unwrap();
        }
        let got = head
            .forward(&layout, &stream.finish().unwrap(), &lexical)
            .unwrap();
        assert_eq!(got.len(), want.len());
        for (qi, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.len(), w.len(), "question {qi}");
            for (a, b) in g.iter().zip(w) {
                assert!(
                    (*a as f64 - b).abs() <= 2e-5 * (1.0 + b.abs()),
                    "question {qi}: {g:?} vs {w:?}"
                );
            }
        }
    }
}
