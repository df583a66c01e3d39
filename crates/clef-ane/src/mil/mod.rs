//! MIL text of the LUT-6 text programs (formats.md §2.6–2.8), written from the model config,
//! `text/tensors.json` (blob offsets) and the program partition.
//!
//! Each program maps the residual stream `x` `[1, 128, hidden]` (FP16) to `y`; weights are
//! `constexpr_lut_to_dense` ops (LUT-6) or blob constants (FP16) in `weight.bin`. The op graphs:
//!
//! - **MLP**: zero-centred RMSNorm, gate/up `linear`, SiLU, product, × the layer's down scale,
//!   down `linear`, ÷ the scale, residual add.
//! - **DeltaNet**: RMSNorm; `in_proj_qkv`; causal depthwise `conv` over the carried conv state
//!   concatenated in front (the next state gathered at `conv_tail`); SiLU; split; per-head L2
//!   norm; key heads tiled to value heads; gates (β = σ(b), g = −exp(A_log)·softplus(a +
//!   dt_bias)), both × `valid` so padding rows leave the state alone; the chunked delta rule of
//!   model.md §3.2 over the whole 128-row call, with (I + A)⁻¹ computed as the product
//!   Π_j (I + (−A)^(2^j)), exact because A is strictly lower triangular (nilpotent); gated
//!   RMSNorm; `out_proj`; residual add.
//! - **Attention**: RMSNorm; `q_proj` split per head into query and gate; q/k norms; partial
//!   rotary from CPU-computed `rope_cos`/`rope_sin` (M-RoPE positions); keys and values of the
//!   chunk appended to the bucket's KV buffer; grouped-query scores + additive `mask`; softmax;
//!   probabilities × 16 before the product with V, ÷ 16 after; sigmoid output gate; `o_proj`;
//!   residual add. The chunk's own keys and values are outputs for the CPU to store.
//!
//! These texts cannot be compiled here (hand-written MIL is accepted only by Apple's compiler
//! through unofficial paths); their structure is tested against the blob file.

pub mod writer;

use super::bundle::{StoredAs, TensorsFile};
use super::plan::{Part, CHUNK_TOKENS};
use super::programs::{conv_dim, IoTensor, ProgramEntry, ProgramsFile};
use crate::numerics::ATTENTION_PROB_SCALE;
use clef_model::backbone::PREFIX;
use clef_model::config::{ModelConfig, TextConfig};
use writer::{program_text, Arg, MilWriter, Ty, Var};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MilError {
    #[error("tensor `{0}` is not in text/tensors.json")]
    MissingTensor(String),
    #[error("tensor `{name}` has shape {found:?}, the program needs {expected:?}")]
    Shape {
        name: String,
        found: Vec<usize>,
        expected: Vec<usize>,
    },
    #[error("program {0}: {1}")]
    Program(usize, String),
}

type Result<T> = std::result::Result<T, MilError>;

use Arg::{Tuple, V};

fn fp16(shape: &[usize]) -> Ty {
    Ty::tensor("fp16", shape)
}

struct Emitter<'a> {
    t: &'a TextConfig,
    rot: usize,
    tensors: &'a TensorsFile,
    w: MilWriter,
}

impl Emitter<'_> {
    fn entry(&self, name: &str, shape: &[usize]) -> Result<StoredAs> {
        let e = self
            .tensors
            .get(name)
            .ok_or_else(|| MilError::MissingTensor(name.to_string()))?;
        if e.shape != shape {
            return Err(MilError::Shape {
                name: name.into(),
                found: e.shape.clone(),
                expected: shape.to_vec(),
            });
        }
        Ok(e.stored)
    }

    /// An FP16 constant tensor from the blob file.
    fn const_tensor(&mut self, name: &str, shape: &[usize], hint: &str) -> Result<Var> {
        match self.entry(name, shape)? {
            StoredAs::Fp16 { blob } => Ok(self.w.blob(hint, fp16(shape), blob)),
            StoredAs::Lut6 { .. } => Err(MilError::Shape {
                name: format!("{name} (stored as LUT-6, used as a constant)"),
                found: shape.to_vec(),
                expected: shape.to_vec(),
            }),
        }
    }

    /// A linear weight `[rows, cols]`: a LUT expansion or an FP16 constant.
    fn weight(&mut self, name: &str, rows: usize, cols: usize, hint: &str) -> Result<Var> {
        match self.entry(name, &[rows, cols])? {
            StoredAs::Lut6 { indices, lut } => {
                Ok(self.w.lut_weight(hint, rows, cols, indices, lut))
            }
            StoredAs::Fp16 { blob } => Ok(self.w.blob(hint, fp16(&[rows, cols]), blob)),
        }
    }

    fn linear(&mut self, x: &Var, name: &str, rows: usize, hint: &str) -> Result<Var> {
        let mut shape = x.shape();
        let cols = shape.pop().unwrap_or(0);
        let w = self.weight(name, rows, cols, &format!("w_{hint}"))?;
        shape.push(rows);
        Ok(self.w.op(
            hint,
            None,
            fp16(&shape),
            "linear",
            &[("x", V(x)), ("weight", V(&w))],
        ))
    }

    fn binary(&mut self, op: &str, hint: &str, a: &Var, b: &Var, shape: &[usize]) -> Var {
        self.w
            .op(hint, None, fp16(shape), op, &[("x", V(a)), ("y", V(b))])
    }

    fn unary(&mut self, op: &str, hint: &str, x: &Var) -> Var {
        let shape = x.shape();
        self.w.op(hint, None, fp16(&shape), op, &[("x", V(x))])
    }

    fn scale(&mut self, x: &Var, s: f32, hint: &str) -> Var {
        let c = self.w.f16(&format!("{hint}_s"), s);
        let shape = x.shape();
        self.binary("mul", hint, x, &c, &shape)
    }

    fn reshape(&mut self, x: &Var, shape: &[usize], hint: &str) -> Var {
        let s = self.w.ints(
            &format!("{hint}_shape"),
            &shape.iter().map(|&d| d as i64).collect::<Vec<_>>(),
        );
        self.w.op(
            hint,
            None,
            fp16(shape),
            "reshape",
            &[("x", V(x)), ("shape", V(&s))],
        )
    }

    fn transpose(&mut self, x: &Var, perm: &[usize], hint: &str) -> Var {
        let xs = x.shape();
        let shape: Vec<usize> = perm.iter().map(|&p| xs[p]).collect();
        let p = self.w.ints(
            &format!("{hint}_perm"),
            &perm.iter().map(|&d| d as i64).collect::<Vec<_>>(),
        );
        self.w.op(
            hint,
            None,
            fp16(&shape),
            "transpose",
            &[("x", V(x)), ("perm", V(&p))],
        )
    }

    fn slice(&mut self, x: &Var, begin: &[usize], size: &[usize], hint: &str) -> Var {
        let b = self.w.ints(
            &format!("{hint}_begin"),
            &begin.iter().map(|&d| d as i64).collect::<Vec<_>>(),
        );
        let s = self.w.ints(
            &format!("{hint}_size"),
            &size.iter().map(|&d| d as i64).collect::<Vec<_>>(),
        );
        self.w.op(
            hint,
            None,
            fp16(size),
            "slice_by_size",
            &[("x", V(x)), ("begin", V(&b)), ("size", V(&s))],
        )
    }

    fn concat(&mut self, parts: &[&Var], axis: usize, hint: &str) -> Var {
        let mut shape = parts[0].shape();
        shape[axis] = parts.iter().map(|p| p.shape()[axis]).sum();
        let a = self.w.int(&format!("{hint}_axis"), axis as i64);
        let il = self.w.boolean(&format!("{hint}_interleave"), false);
        self.w.op(
            hint,
            None,
            fp16(&shape),
            "concat",
            &[
                ("values", Tuple(parts.to_vec())),
                ("axis", V(&a)),
                ("interleave", V(&il)),
            ],
        )
    }

    fn reduce(&mut self, op: &str, x: &Var, hint: &str) -> Var {
        let mut shape = x.shape();
        if let Some(last) = shape.last_mut() {
            *last = 1;
        }
        let axes = self.w.ints(&format!("{hint}_axes"), &[-1]);
        let keep = self.w.boolean(&format!("{hint}_keep"), true);
        self.w.op(
            hint,
            None,
            fp16(&shape),
            op,
            &[("x", V(x)), ("axes", V(&axes)), ("keep_dims", V(&keep))],
        )
    }

    fn rsqrt(&mut self, x: &Var, eps: f32, hint: &str) -> Var {
        let e = self.w.f16(&format!("{hint}_eps"), eps);
        let shape = x.shape();
        self.w.op(
            hint,
            None,
            fp16(&shape),
            "rsqrt",
            &[("x", V(x)), ("epsilon", V(&e))],
        )
    }

    fn matmul(&mut self, a: &Var, b: &Var, tx: bool, ty: bool, hint: &str) -> Var {
        let (sa, sb) = (a.shape(), b.shape());
        let r = sa.len();
        let m = if tx { sa[r - 1] } else { sa[r - 2] };
        let n = if ty { sb[r - 2] } else { sb[r - 1] };
        let mut shape = sa.clone();
        shape[r - 2] = m;
        shape[r - 1] = n;
        let ftx = self.w.boolean(&format!("{hint}_tx"), tx);
        let fty = self.w.boolean(&format!("{hint}_ty"), ty);
        self.w.op(
            hint,
            None,
            fp16(&shape),
            "matmul",
            &[
                ("x", V(a)),
                ("y", V(b)),
                ("transpose_x", V(&ftx)),
                ("transpose_y", V(&fty)),
            ],
        )
    }

    /// Zero-centred RMSNorm over the last axis: x · rsqrt(mean(x²) + eps) · (1 + w).
    fn rms_norm(&mut self, x: &Var, weight: &str, hint: &str) -> Result<Var> {
        let shape = x.shape();
        let dim = *shape.last().unwrap_or(&0);
        let w = self.const_tensor(weight, &[dim], &format!("{hint}_w"))?;
        let sq = self.binary("mul", &format!("{hint}_sq"), x, x, &shape);
        let ms = self.reduce("reduce_mean", &sq, &format!("{hint}_ms"));
        let r = self.rsqrt(&ms, self.t.rms_norm_eps as f32, &format!("{hint}_r"));
        let n = self.binary("mul", &format!("{hint}_n"), x, &r, &shape);
        let one = self.w.f16(&format!("{hint}_one"), 1.0);
        let w1 = self.binary("add", &format!("{hint}_w1"), &w, &one, &[dim]);
        Ok(self.binary("mul", hint, &n, &w1, &shape))
    }

    fn layer_name(l: usize, rest: &str) -> String {
        format!("{PREFIX}.layers.{l}.{rest}")
    }

    fn mlp(&mut self, x: &Var, l: usize, down_scale: f32) -> Result<Var> {
        let t = self.t;
        let (h, inter) = (t.hidden_size, t.intermediate_size);
        let xn = self.rms_norm(
            x,
            &Self::layer_name(l, "post_attention_layernorm.weight"),
            &format!("l{l}_post_norm"),
        )?;
        let g = self.linear(
            &xn,
            &Self::layer_name(l, "mlp.gate_proj.weight"),
            inter,
            &format!("l{l}_gate"),
        )?;
        let u = self.linear(
            &xn,
            &Self::layer_name(l, "mlp.up_proj.weight"),
            inter,
            &format!("l{l}_up"),
        )?;
        let sg = self.unary("silu", &format!("l{l}_silu"), &g);
        let shape = g.shape();
        let hmid = self.binary("mul", &format!("l{l}_swiglu"), &sg, &u, &shape);
        // the down-projection input is scaled up (≤ 16×) to keep small values out of FP16's
        // subnormal range, and the output scaled back (formats.md §2.8)
        let hs = self.scale(&hmid, down_scale, &format!("l{l}_down_in"));
        let d = self.linear(
            &hs,
            &Self::layer_name(l, "mlp.down_proj.weight"),
            h,
            &format!("l{l}_down"),
        )?;
        let ds = self.scale(&d, 1.0 / down_scale, &format!("l{l}_down_out"));
        let shape = x.shape();
        Ok(self.binary("add", &format!("l{l}_mlp_res"), x, &ds, &shape))
    }

    fn deltanet(
        &mut self,
        x: &Var,
        l: usize,
        inputs: &[Var],
        outputs: &mut Vec<String>,
    ) -> Result<Var> {
        let t = self.t;
        let n = CHUNK_TOKENS;
        let (hk, hv, dk, dv) = (
            t.linear_num_key_heads,
            t.linear_num_value_heads,
            t.linear_key_head_dim,
            t.linear_value_head_dim,
        );
        let (key_dim, value_dim, c) = (hk * dk, hv * dv, conv_dim(t));
        let k = t.linear_conv_kernel_dim;
        let r = hv / hk.max(1);
        let find = |name: &str| -> Result<Var> {
            inputs
                .iter()
                .find(|v| v.name == name)
                .cloned()
                .ok_or_else(|| MilError::Program(l, format!("missing input {name}")))
        };
        let conv_state = find(&format!("conv_state_{l}"))?;
        let ssm = find(&format!("ssm_state_{l}"))?;
        let valid = find("valid")?;
        let conv_tail = find("conv_tail")?;
        let p = |s: &str| format!("l{l}_{s}");
        let name = |s: &str| Self::layer_name(l, &format!("linear_attn.{s}"));

        let xn = self.rms_norm(
            x,
            &Self::layer_name(l, "input_layernorm.weight"),
            &p("in_norm"),
        )?;
        let mixed = self.linear(&xn, &name("in_proj_qkv.weight"), c, &p("qkv"))?;
        let mixed_t = self.transpose(&mixed, &[0, 2, 1], &p("qkv_t"));
        let ext = self.concat(&[&conv_state, &mixed_t], 2, &p("conv_in"));
        let cw = self.const_tensor(&name("conv1d.weight"), &[c, 1, k], &p("conv_w"))?;
        let strides = self.w.ints(&p("conv_strides"), &[1]);
        let pad_type = self.w.string(&p("conv_pad_type"), "valid");
        let pad = self.w.ints(&p("conv_pad"), &[0, 0]);
        let dil = self.w.ints(&p("conv_dilations"), &[1]);
        let groups = self.w.int(&p("conv_groups"), c as i64);
        let cv = self.w.op(
            &p("conv"),
            None,
            fp16(&[1, c, n]),
            "conv",
            &[
                ("x", V(&ext)),
                ("weight", V(&cw)),
                ("strides", V(&strides)),
                ("pad_type", V(&pad_type)),
                ("pad", V(&pad)),
                ("dilations", V(&dil)),
                ("groups", V(&groups)),
            ],
        );
        let axis = self.w.int(&p("tail_axis"), 2);
        let vi = self.w.boolean(&p("tail_validate"), false);
        let out_name = format!("conv_state_{l}_out");
        self.w.op(
            &out_name,
            Some(&out_name),
            fp16(&[1, c, k - 1]),
            "gather",
            &[
                ("x", V(&ext)),
                ("indices", V(&conv_tail)),
                ("axis", V(&axis)),
                ("validate_indices", V(&vi)),
            ],
        );
        outputs.push(out_name);
        let act = self.unary("silu", &p("conv_act"), &cv);
        let act_t = self.transpose(&act, &[0, 2, 1], &p("conv_act_t"));
        let q0 = self.slice(&act_t, &[0, 0, 0], &[1, n, key_dim], &p("q"));
        let k0 = self.slice(&act_t, &[0, 0, key_dim], &[1, n, key_dim], &p("k"));
        let v0 = self.slice(&act_t, &[0, 0, 2 * key_dim], &[1, n, value_dim], &p("v"));

        // per-head L2 normalisation; q also scaled by dk^-1/2; key heads tiled to value heads
        let heads = |this: &mut Self, v: &Var, which: &str, scale: Option<f32>| -> Var {
            let v4 = this.reshape(v, &[1, n, hk, dk], &p(&format!("{which}4")));
            let sq = this.binary("mul", &p(&format!("{which}_sq")), &v4, &v4, &[1, n, hk, dk]);
            let ss = this.reduce("reduce_sum", &sq, &p(&format!("{which}_ss")));
            let rr = this.rsqrt(&ss, 1e-6, &p(&format!("{which}_rn")));
            let mut vn = this.binary("mul", &p(&format!("{which}_l2")), &v4, &rr, &[1, n, hk, dk]);
            if let Some(s) = scale {
                vn = this.scale(&vn, s, &p(&format!("{which}_scaled")));
            }
            let v5 = this.reshape(&vn, &[1, n, hk, 1, dk], &p(&format!("{which}5")));
            let reps = this
                .w
                .ints(&p(&format!("{which}_reps")), &[1, 1, 1, r as i64, 1]);
            let vt = this.w.op(
                &p(&format!("{which}_tiled")),
                None,
                fp16(&[1, n, hk, r, dk]),
                "tile",
                &[("x", V(&v5)), ("reps", V(&reps))],
            );
            let vh = this.reshape(&vt, &[1, n, hv, dk], &p(&format!("{which}_heads")));
            this.transpose(&vh, &[0, 2, 1, 3], &p(&format!("{which}_h")))
        };
        let q_h = heads(self, &q0, "q", Some(1.0 / (dk as f32).sqrt()));
        let k_h = heads(self, &k0, "k", None);
        let v4 = self.reshape(&v0, &[1, n, hv, dv], &p("v4"));
        let v_h = self.transpose(&v4, &[0, 2, 1, 3], &p("v_h"));

        let z = self.linear(&xn, &name("in_proj_z.weight"), value_dim, &p("z"))?;
        let b = self.linear(&xn, &name("in_proj_b.weight"), hv, &p("b"))?;
        let a = self.linear(&xn, &name("in_proj_a.weight"), hv, &p("a"))?;
        let beta0 = self.unary("sigmoid", &p("beta0"), &b);
        let beta1 = self.binary("mul", &p("beta"), &beta0, &valid, &[1, n, hv]);
        let dtb = self.const_tensor(&name("dt_bias"), &[hv], &p("dt_bias"))?;
        let ad = self.binary("add", &p("a_dt"), &a, &dtb, &[1, n, hv]);
        let sp = self.unary("softplus", &p("softplus"), &ad);
        let alog = self.const_tensor(&name("A_log"), &[hv], &p("a_log"))?;
        let ea = self.unary("exp", &p("a_exp"), &alog);
        let nea = self.scale(&ea, -1.0, &p("neg_a"));
        let g0 = self.binary("mul", &p("g0"), &sp, &nea, &[1, n, hv]);
        let g1 = self.binary("mul", &p("g"), &g0, &valid, &[1, n, hv]);
        let head_major = |this: &mut Self, v: &Var, which: &str| -> Var {
            let v4 = this.reshape(v, &[1, n, hv, 1], &p(&format!("{which}4")));
            this.transpose(&v4, &[0, 2, 1, 3], &p(&format!("{which}_h")))
        };
        let beta_h = head_major(self, &beta1, "beta");
        let g_h = head_major(self, &g1, "g");

        // chunked delta rule over the call's n rows
        let cax = self.w.int(&p("cumsum_axis"), 2);
        let cex = self.w.boolean(&p("cumsum_exclusive"), false);
        let crev = self.w.boolean(&p("cumsum_reverse"), false);
        let gamma = self.w.op(
            &p("gamma"),
            None,
            fp16(&[1, hv, n, 1]),
            "cumsum",
            &[
                ("x", V(&g_h)),
                ("axis", V(&cax)),
                ("exclusive", V(&cex)),
                ("reverse", V(&crev)),
            ],
        );
        let gamma_row = self.transpose(&gamma, &[0, 1, 3, 2], &p("gamma_row"));
        let diff = self.binary("sub", &p("gamma_diff"), &gamma, &gamma_row, &[1, hv, n, n]);
        let fshape = self.w.ints(&p("ones_shape"), &[n as i64, n as i64]);
        let one = self.w.f16(&p("one"), 1.0);
        let ones = self.w.op(
            &p("ones"),
            None,
            fp16(&[n, n]),
            "fill",
            &[("shape", V(&fshape)), ("value", V(&one))],
        );
        let band = |this: &mut Self, lower: i64, upper: i64, which: &str| -> Var {
            let lo = this.w.int(&p(&format!("{which}_lower")), lower);
            let up = this.w.int(&p(&format!("{which}_upper")), upper);
            this.w.op(
                &p(which),
                None,
                fp16(&[n, n]),
                "band_part",
                &[("x", V(&ones)), ("lower", V(&lo)), ("upper", V(&up))],
            )
        };
        let tri = band(self, -1, 0, "tri");
        let eye = band(self, 0, 0, "eye");
        // mask before exponentiating: −60,000 above the diagonal → exp = 0
        let above = self.binary("sub", &p("above0"), &tri, &one, &[n, n]);
        let big = self.scale(&above, 60_000.0, &p("above"));
        let dm = self.binary("add", &p("decay_log"), &diff, &big, &[1, hv, n, n]);
        let dmat = self.unary("exp", &p("decay"), &dm);
        let kk = self.matmul(&k_h, &k_h, false, true, &p("kk"));
        let kkd = self.binary("mul", &p("kk_decay"), &kk, &dmat, &[1, hv, n, n]);
        let a0 = self.binary("mul", &p("a_full"), &kkd, &beta_h, &[1, hv, n, n]);
        let strict = self.binary("sub", &p("strict"), &tri, &eye, &[n, n]);
        let am = self.binary("mul", &p("a_strict"), &a0, &strict, &[1, hv, n, n]);
        // (I + A)⁻¹ = Π_{j ≥ 0} (I + (−A)^(2^j)): A is nilpotent of index ≤ n
        let mut pw = self.scale(&am, -1.0, &p("neg_a_pow"));
        let mut tinv = self.binary("add", &p("t_inv"), &eye, &pw, &[1, hv, n, n]);
        let mut span = 2;
        while span < n {
            pw = self.matmul(&pw, &pw, false, false, &p("neg_a_pow"));
            let f = self.binary("add", &p("t_factor"), &eye, &pw, &[1, hv, n, n]);
            tinv = self.matmul(&tinv, &f, false, false, &p("t_inv"));
            span *= 2;
        }
        let bv = self.binary("mul", &p("beta_v"), &v_h, &beta_h, &[1, hv, n, dv]);
        let u = self.matmul(&tinv, &bv, false, false, &p("u"));
        let eg = self.unary("exp", &p("exp_gamma"), &gamma);
        let bk = self.binary("mul", &p("beta_k"), &k_h, &beta_h, &[1, hv, n, dk]);
        let bke = self.binary("mul", &p("beta_k_decay"), &bk, &eg, &[1, hv, n, dk]);
        let wy = self.matmul(&tinv, &bke, false, false, &p("wy"));
        let ws = self.matmul(&wy, &ssm, false, false, &p("wy_s"));
        let vp = self.binary("sub", &p("v_new"), &u, &ws, &[1, hv, n, dv]);
        let qe = self.binary("mul", &p("q_decay"), &q_h, &eg, &[1, hv, n, dk]);
        let o1 = self.matmul(&qe, &ssm, false, false, &p("o_state"));
        let qk = self.matmul(&q_h, &k_h, false, true, &p("qk"));
        let qkd = self.binary("mul", &p("qk_decay"), &qk, &dmat, &[1, hv, n, n]);
        let o2 = self.matmul(&qkd, &vp, false, false, &p("o_chunk"));
        let o = self.binary("add", &p("o"), &o1, &o2, &[1, hv, n, dv]);
        let gn = self.slice(&gamma, &[0, 0, n - 1, 0], &[1, hv, 1, 1], &p("gamma_last"));
        let egn = self.unary("exp", &p("exp_gamma_last"), &gn);
        let s0 = self.binary("mul", &p("state_decay"), &ssm, &egn, &[1, hv, dk, dv]);
        let gd = self.binary("sub", &p("gamma_rest"), &gn, &gamma, &[1, hv, n, 1]);
        let dec = self.unary("exp", &p("exp_gamma_rest"), &gd);
        let kd = self.binary("mul", &p("k_decay"), &k_h, &dec, &[1, hv, n, dk]);
        let kv = self.matmul(&kd, &vp, true, false, &p("kv"));
        let out_name = format!("ssm_state_{l}_out");
        self.w.op(
            &out_name,
            Some(&out_name),
            fp16(&[1, hv, dk, dv]),
            "add",
            &[("x", V(&s0)), ("y", V(&kv))],
        );
        outputs.push(out_name);

        // gated RMSNorm per value head (plain weight), then out_proj
        let ot = self.transpose(&o, &[0, 2, 1, 3], &p("o_t"));
        let osq = self.binary("mul", &p("o_sq"), &ot, &ot, &[1, n, hv, dv]);
        let oms = self.reduce("reduce_mean", &osq, &p("o_ms"));
        let orr = self.rsqrt(&oms, t.rms_norm_eps as f32, &p("o_r"));
        let on = self.binary("mul", &p("o_n"), &ot, &orr, &[1, n, hv, dv]);
        let nw = self.const_tensor(&name("norm.weight"), &[dv], &p("o_norm_w"))?;
        let onw = self.binary("mul", &p("o_nw"), &on, &nw, &[1, n, hv, dv]);
        let z4 = self.reshape(&z, &[1, n, hv, dv], &p("z4"));
        let sz = self.unary("silu", &p("z_silu"), &z4);
        let og = self.binary("mul", &p("o_gated"), &onw, &sz, &[1, n, hv, dv]);
        let o2d = self.reshape(&og, &[1, n, value_dim], &p("o_flat"));
        let out = self.linear(
            &o2d,
            &name("out_proj.weight"),
            t.hidden_size,
            &p("out_proj"),
        )?;
        let shape = x.shape();
        Ok(self.binary("add", &p("mixer_res"), x, &out, &shape))
    }

    fn attention(
        &mut self,
        x: &Var,
        l: usize,
        bucket: usize,
        inputs: &[Var],
        outputs: &mut Vec<String>,
    ) -> Result<Var> {
        let t = self.t;
        let n = CHUNK_TOKENS;
        let (hq, hkv, d) = (t.num_attention_heads, t.num_key_value_heads, t.head_dim);
        let g = hq / hkv.max(1);
        let rot = self.rot;
        let find = |name: &str| -> Result<Var> {
            inputs
                .iter()
                .find(|v| v.name == name)
                .cloned()
                .ok_or_else(|| MilError::Program(l, format!("missing input {name}")))
        };
        let (k_cache, v_cache) = (find("k_cache")?, find("v_cache")?);
        let (cos, sin, mask) = (find("rope_cos")?, find("rope_sin")?, find("mask")?);
        let p = |s: &str| format!("l{l}_{s}");
        let name = |s: &str| Self::layer_name(l, &format!("self_attn.{s}"));

        let xn = self.rms_norm(
            x,
            &Self::layer_name(l, "input_layernorm.weight"),
            &p("in_norm"),
        )?;
        let per_head = if t.attn_output_gate { 2 * d } else { d };
        let qg = self.linear(&xn, &name("q_proj.weight"), hq * per_head, &p("q_proj"))?;
        let qg4 = self.reshape(&qg, &[1, n, hq, per_head], &p("q_proj4"));
        let q = self.slice(&qg4, &[0, 0, 0, 0], &[1, n, hq, d], &p("q"));
        let gate = if t.attn_output_gate {
            Some(self.slice(&qg4, &[0, 0, 0, d], &[1, n, hq, d], &p("gate")))
        } else {
            None
        };
        let qn = self.rms_norm(&q, &name("q_norm.weight"), &p("q_norm"))?;
        let k = self.linear(&xn, &name("k_proj.weight"), hkv * d, &p("k_proj"))?;
        let k4 = self.reshape(&k, &[1, n, hkv, d], &p("k4"));
        let kn = self.rms_norm(&k4, &name("k_norm.weight"), &p("k_norm"))?;
        let v = self.linear(&xn, &name("v_proj.weight"), hkv * d, &p("v_proj"))?;
        let v4 = self.reshape(&v, &[1, n, hkv, d], &p("v4"));

        // partial rotary (NeoX halves) on the first `rot` dims of each head
        let rotary = |this: &mut Self, v: &Var, heads: usize, which: &str| -> Var {
            let rs = this.slice(
                v,
                &[0, 0, 0, 0],
                &[1, n, heads, rot],
                &p(&format!("{which}_rot")),
            );
            let rest = this.slice(
                v,
                &[0, 0, 0, rot],
                &[1, n, heads, d - rot],
                &p(&format!("{which}_pass")),
            );
            let x1 = this.slice(
                &rs,
                &[0, 0, 0, 0],
                &[1, n, heads, rot / 2],
                &p(&format!("{which}_x1")),
            );
            let x2 = this.slice(
                &rs,
                &[0, 0, 0, rot / 2],
                &[1, n, heads, rot / 2],
                &p(&format!("{which}_x2")),
            );
            let nx2 = this.scale(&x2, -1.0, &p(&format!("{which}_nx2")));
            let rh = this.concat(&[&nx2, &x1], 3, &p(&format!("{which}_rot_half")));
            let c = this.binary(
                "mul",
                &p(&format!("{which}_cos")),
                &rs,
                &cos,
                &[1, n, heads, rot],
            );
            let s = this.binary(
                "mul",
                &p(&format!("{which}_sin")),
                &rh,
                &sin,
                &[1, n, heads, rot],
            );
            let rr = this.binary(
                "add",
                &p(&format!("{which}_rotated")),
                &c,
                &s,
                &[1, n, heads, rot],
            );
            this.concat(&[&rr, &rest], 3, &p(&format!("{which}_rope")))
        };
        let qr = rotary(self, &qn, hq, "q");
        let kr = rotary(self, &kn, hkv, "k");
        let q_h = self.transpose(&qr, &[0, 2, 1, 3], &p("q_h"));
        let perm = self.w.ints(&p("kv_perm"), &[0, 2, 1, 3]);
        let k_new = self.w.op(
            "k_new",
            Some("k_new"),
            fp16(&[1, hkv, n, d]),
            "transpose",
            &[("x", V(&kr)), ("perm", V(&perm))],
        );
        let v_new = self.w.op(
            "v_new",
            Some("v_new"),
            fp16(&[1, hkv, n, d]),
            "transpose",
            &[("x", V(&v4)), ("perm", V(&perm))],
        );
        outputs.push(k_new.name.clone());
        outputs.push(v_new.name.clone());
        let keys = bucket + n;
        let kall = self.concat(&[&k_cache, &k_new], 2, &p("keys"));
        let vall = self.concat(&[&v_cache, &v_new], 2, &p("values"));
        let group = |this: &mut Self, v: &Var, which: &str| -> Var {
            let v5 = this.reshape(v, &[1, hkv, 1, keys, d], &p(&format!("{which}5")));
            let reps = this
                .w
                .ints(&p(&format!("{which}_reps")), &[1, 1, g as i64, 1, 1]);
            let vt = this.w.op(
                &p(&format!("{which}_tiled")),
                None,
                fp16(&[1, hkv, g, keys, d]),
                "tile",
                &[("x", V(&v5)), ("reps", V(&reps))],
            );
            this.reshape(&vt, &[1, hq, keys, d], &p(&format!("{which}_gqa")))
        };
        let kg = group(self, &kall, "keys");
        let vg = group(self, &vall, "values");
        let sc = self.matmul(&q_h, &kg, false, true, &p("scores"));
        let scs = self.scale(&sc, 1.0 / (d as f32).sqrt(), &p("scores_scaled"));
        let scm = self.binary("add", &p("scores_masked"), &scs, &mask, &[1, hq, n, keys]);
        let ax = self.w.int(&p("softmax_axis"), -1);
        let pr = self.w.op(
            &p("probs"),
            None,
            fp16(&[1, hq, n, keys]),
            "softmax",
            &[("x", V(&scm)), ("axis", V(&ax))],
        );
        // probabilities ×16 before the product with V, ÷16 after (formats.md §2.8)
        let p16 = self.scale(&pr, ATTENTION_PROB_SCALE, &p("probs_x16"));
        let ctx = self.matmul(&p16, &vg, false, false, &p("context"));
        let ctx1 = self.scale(&ctx, 1.0 / ATTENTION_PROB_SCALE, &p("context_scaled"));
        let ct = self.transpose(&ctx1, &[0, 2, 1, 3], &p("context_t"));
        let gated = match &gate {
            Some(gv) => {
                let sg = self.unary("sigmoid", &p("gate_sigmoid"), gv);
                self.binary("mul", &p("gated"), &ct, &sg, &[1, n, hq, d])
            }
            None => ct,
        };
        let flat = self.reshape(&gated, &[1, n, hq * d], &p("context_flat"));
        let o = self.linear(&flat, &name("o_proj.weight"), t.hidden_size, &p("o_proj"))?;
        let shape = x.shape();
        Ok(self.binary("add", &p("mixer_res"), x, &o, &shape))
    }
}

fn input_var(io: &IoTensor) -> Var {
    let dtype = if io.dtype == "int32" { "int32" } else { "fp16" };
    Var {
        name: io.name.clone(),
        ty: Ty::tensor(dtype, &io.shape),
    }
}

/// The MIL text of one program.
pub fn emit_program(
    cfg: &ModelConfig,
    tensors: &TensorsFile,
    entry: &ProgramEntry,
) -> Result<String> {
    let t = &cfg.text_config;
    let inputs: Vec<Var> = entry.inputs.iter().map(input_var).collect();
    let mut e = Emitter {
        t,
        rot: cfg.text_rotary_dim(),
        tensors,
        w: MilWriter::default(),
    };
    let mut x = inputs
        .first()
        .filter(|v| v.name == "x")
        .cloned()
        .ok_or_else(|| {
            MilError::Program(entry.program.index, "the first input must be x".into())
        })?;
    let mut outputs = vec!["y".to_string()];
    for s in &entry.program.steps {
        x = match s.part {
            Part::Mlp => {
                let scale = entry
                    .down_scales
                    .iter()
                    .find(|d| d.layer == s.layer)
                    .map_or(1.0, |d| d.scale);
                e.mlp(&x, s.layer, scale)?
            }
            Part::Deltanet => e.deltanet(&x, s.layer, &inputs, &mut outputs)?,
            Part::Attention => {
                let bucket = entry.program.context.ok_or_else(|| {
                    MilError::Program(
                        entry.program.index,
                        "attention without a context bucket".into(),
                    )
                })?;
                e.attention(&x, s.layer, bucket, &inputs, &mut outputs)?
            }
        };
    }
    let shape = x.shape();
    e.w.op("y", Some("y"), fp16(&shape), "identity", &[("x", V(&x))]);
    // outputs in the order programs.json lists them
    let listed: Vec<&str> = entry.outputs.iter().map(|o| o.name.as_str()).collect();
    let mut have = outputs.clone();
    have.sort();
    let mut want: Vec<String> = listed.iter().map(|s| s.to_string()).collect();
    want.sort();
    if have != want {
        return Err(MilError::Program(
            entry.program.index,
            format!("emitted outputs {outputs:?}, programs.json lists {listed:?}"),
        ));
    }
    Ok(program_text(&inputs, &e.w.finish(), &listed))
}

/// Every program's file (relative to the bundle) and MIL text.
pub fn emit_all(
    cfg: &ModelConfig,
    tensors: &TensorsFile,
    programs: &ProgramsFile,
) -> Result<Vec<(String, String)>> {
    programs
        .programs
        .iter()
        .map(|p| Ok((p.file.clone(), emit_program(cfg, tensors, p)?)))
        .collect()
}

/// Checks every blob reference of a program text against the blob file: the path is the
/// bundle's weight file, the offset is a metadata record, and the record's dtype and element
/// count match the declared tensor type. Returns the number of references.
pub fn check_blob_references(
    text: &str,
    blobs: &clef_formats::coreml::BlobFile,
) -> std::result::Result<usize, String> {
    use clef_formats::coreml::MilDType;
    let refs = writer::blob_references(text);
    for r in &refs {
        if r.path != super::MIL_WEIGHT_PATH {
            return Err(format!(
                "reference to {} instead of {}",
                r.path,
                super::MIL_WEIGHT_PATH
            ));
        }
        let want = match r.dtype.as_str() {
            "uint6" => MilDType::UInt6,
            "fp16" => MilDType::Float16,
            "fp32" => MilDType::Float32,
            "uint8" => MilDType::UInt8,
            other => return Err(format!("unexpected blob dtype {other}")),
        };
        let b = blobs
            .blob_at(r.offset)
            .map_err(|e| format!("offset {}: {e}", r.offset))?;
        let count: u64 = r.shape.iter().map(|&d| d as u64).product();
        if b.dtype != want || b.element_count() != count {
            return Err(format!(
                "offset {}: blob holds {} {:?}, the program declares {:?} {:?}",
                r.offset,
                b.element_count(),
                b.dtype,
                r.dtype,
                r.shape
            ));
        }
    }
    Ok(refs.len())
}

/// Checks every program text against the bundle's `weight.bin` (memory-mapped: the 27B file is
/// 17 GB) with [`check_blob_references`]; returns the number of references and of blobs.
pub fn check_bundle_programs(
    dir: &std::path::Path,
    texts: &[(String, String)],
) -> std::result::Result<(usize, u32), String> {
    let path = dir.join(super::WEIGHT_BIN);
    let file = std::fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    // SAFETY: a read-only mapping of a bundle file; every access below is bounds-checked by
    // the blob reader.
    let map =
        unsafe { memmap2::Mmap::map(&file) }.map_err(|e| format!("{}: {e}", path.display()))?;
    let blobs = clef_formats::coreml::BlobFile::parse(&map)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut refs = 0;
    for (name, text) in texts {
        refs += check_blob_references(text, &blobs).map_err(|e| format!("{name}: {e}"))?;
    }
    Ok((refs, blobs.count()))
}
