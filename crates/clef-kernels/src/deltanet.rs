//! Gated DeltaNet core (model.md §3.2 steps 6–9): the per-head state recurrence
//! `S ← α (I − β k kᵀ) S + β k vᵀ`, `o = Sᵀ q`, in f32.
//!
//! Shapes (callers pass consistent lengths; checked up front, a mismatch panics):
//! q, k `[n, k_heads, dk]` (L2-normalised, q already scaled by dk^-1/2); v `[n, v_heads, dv]`;
//! g (log decay, ≤ 0) and beta `[n, v_heads]`; state `[v_heads, dk, dv]` carried in and out;
//! out `[n, v_heads, dv]`. Value head h reads key head `h / (v_heads / k_heads)`.

use crate::error::KernelError;
use crate::gemm::small::{Mat, SmallGemm};
use crate::gemm::TileKernel;
use crate::isa::Isa;
use rayon::prelude::*;

/// Head counts and sizes of one DeltaNet layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeltaNetDims {
    pub k_heads: usize,
    pub v_heads: usize,
    pub dk: usize,
    pub dv: usize,
}

impl DeltaNetDims {
    fn group(&self) -> usize {
        assert!(
            self.k_heads > 0 && self.v_heads.is_multiple_of(self.k_heads),
            "v_heads must be a positive multiple of k_heads"
        );
        self.v_heads / self.k_heads
    }
}

fn check_lengths(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    g: &[f32],
    beta: &[f32],
    n: usize,
    dims: &DeltaNetDims,
    state: &[f32],
    out: &[f32],
) {
    let DeltaNetDims {
        k_heads,
        v_heads,
        dk,
        dv,
    } = *dims;
    dims.group();
    assert_eq!(q.len(), n * k_heads * dk, "q length");
    assert_eq!(k.len(), n * k_heads * dk, "k length");
    assert_eq!(v.len(), n * v_heads * dv, "v length");
    assert_eq!(g.len(), n * v_heads, "g length");
    assert_eq!(beta.len(), n * v_heads, "beta length");
    assert_eq!(state.len(), v_heads * dk * dv, "state length");
    assert_eq!(out.len(), n * v_heads * dv, "out length");
}

/// The fast form: the chunked algorithm of §3.2 step 9 (chunks of [`CHUNK`] tokens) as small
/// dense products, parallel over value heads on the current rayon pool. Equals
/// [`gated_delta_rule_recurrent`] up to f32 rounding. `g` must be ≤ 0 (a decay), as the
/// recurrence defines it.
pub fn gated_delta_rule(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    g: &[f32],
    beta: &[f32],
    n: usize,
    dims: &DeltaNetDims,
    state: &mut [f32],
    out: &mut [f32],
) {
    let kernel = TileKernel::for_isa(Isa::detect())
        .or_else(|| TileKernel::for_isa(Isa::Scalar))
        .expect("the scalar kernel is always available");
    chunked(kernel, q, k, v, g, beta, n, dims, state, out);
}

/// [`gated_delta_rule`] on an explicitly chosen instruction set (tests, benchmarks).
pub fn gated_delta_rule_with_isa(
    isa: Isa,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    g: &[f32],
    beta: &[f32],
    n: usize,
    dims: &DeltaNetDims,
    state: &mut [f32],
    out: &mut [f32],
) -> Result<(), KernelError> {
    let kernel = TileKernel::for_isa(isa).ok_or(KernelError::IsaUnavailable(isa))?;
    chunked(kernel, q, k, v, g, beta, n, dims, state, out);
    Ok(())
}

/// Tokens per chunk (transformers and FLA use 64 too; any value gives the same result).
pub const CHUNK: usize = 64;

fn chunked(
    kernel: TileKernel,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    g: &[f32],
    beta: &[f32],
    n: usize,
    dims: &DeltaNetDims,
    state: &mut [f32],
    out: &mut [f32],
) {
    check_lengths(q, k, v, g, beta, n, dims, state, out);
    let DeltaNetDims {
        v_heads, dk, dv, ..
    } = *dims;
    if n == 0 || v_heads == 0 || dk == 0 || dv == 0 {
        return;
    }
    let inputs = Inputs {
        q,
        k,
        v,
        g,
        beta,
        n,
        dims: *dims,
    };
    let per_head: Vec<Vec<f32>> = state
        .par_chunks_mut(dk * dv)
        .enumerate()
        .map_init(
            || ChunkScratch::new(kernel),
            |scratch, (h, s)| {
                let mut o = vec![0.0f32; n * dv];
                let mut t0 = 0;
                while t0 < n {
                    let c = CHUNK.min(n - t0);
                    scratch.chunk(&inputs, h, t0, c, s, &mut o[t0 * dv..(t0 + c) * dv]);
                    t0 += c;
                }
                o
            },
        )
        .collect();
    out.par_chunks_mut(v_heads * dv)
        .enumerate()
        .for_each(|(t, row)| {
            for (h, o) in per_head.iter().enumerate() {
                row[h * dv..(h + 1) * dv].copy_from_slice(&o[t * dv..(t + 1) * dv]);
            }
        });
}

struct Inputs<'a> {
    q: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
    g: &'a [f32],
    beta: &'a [f32],
    n: usize,
    dims: DeltaNetDims,
}

/// Per-worker buffers for one chunk of one head.
struct ChunkScratch {
    gemm: SmallGemm,
    gamma: Vec<f32>,
    k_t: Vec<f32>,
    kk: Vec<f32>,
    qk: Vec<f32>,
    t_inv: Vec<f32>,
    rhs_v: Vec<f32>,
    rhs_k: Vec<f32>,
    u: Vec<f32>,
    wy_neg: Vec<f32>,
    q_g: Vec<f32>,
    k_decay_t: Vec<f32>,
    tail: Vec<f32>,
    decay: Vec<f32>,
}

impl ChunkScratch {
    fn new(kernel: TileKernel) -> ChunkScratch {
        ChunkScratch {
            gemm: SmallGemm::new(kernel),
            gamma: Vec::new(),
            k_t: Vec::new(),
            kk: Vec::new(),
            qk: Vec::new(),
            t_inv: Vec::new(),
            rhs_v: Vec::new(),
            rhs_k: Vec::new(),
            u: Vec::new(),
            wy_neg: Vec::new(),
            q_g: Vec::new(),
            k_decay_t: Vec::new(),
            tail: Vec::new(),
            decay: Vec::new(),
        }
    }

    /// Advances head `h` over tokens `t0..t0 + c`: writes their outputs to `o` (`[c × dv]`)
    /// and replaces `s` (`[dk × dv]`) by the state after the chunk.
    fn chunk(&mut self, x: &Inputs, h: usize, t0: usize, c: usize, s: &mut [f32], o: &mut [f32]) {
        let DeltaNetDims {
            k_heads,
            v_heads,
            dk,
            dv,
        } = x.dims;
        let kh = h / (v_heads / k_heads);
        let ldk = k_heads * dk;
        let ldv = v_heads * dv;
        let k_rows = &x.k[(t0 * k_heads + kh) * dk..];
        let q_rows = &x.q[(t0 * k_heads + kh) * dk..];
        let v_rows = &x.v[(t0 * v_heads + h) * dv..];
        let beta = |r: usize| x.beta[(t0 + r) * v_heads + h];
        debug_assert!(t0 + c <= x.n);

        // γ_r = Σ_{s ≤ r} g_s
        resize(&mut self.gamma, c);
        let mut acc = 0.0f32;
        for r in 0..c {
            acc += x.g[(t0 + r) * v_heads + h];
            self.gamma[r] = acc;
        }
        let gamma = &self.gamma;
        // D[r,s] = exp(γ_r − γ_s) on and below the diagonal (masked before exponentiating).
        resize(&mut self.decay, c * c);
        for r in 0..c {
            for (s_, d) in self.decay[r * c..r * c + r + 1].iter_mut().enumerate() {
                *d = (gamma[r] - gamma[s_]).exp();
            }
        }
        let decay = &self.decay;

        // Kᵀ [dk × c], the vector operand of K·Kᵀ and Q·Kᵀ.
        resize(&mut self.k_t, dk * c);
        for r in 0..c {
            for (i, &kv) in k_rows[r * ldk..r * ldk + dk].iter().enumerate() {
                self.k_t[i * c + r] = kv;
            }
        }
        resize(&mut self.kk, c * c);
        resize(&mut self.qk, c * c);
        let k_mat = Mat {
            data: k_rows,
            ld: ldk,
        };
        let kt_mat = Mat {
            data: &self.k_t,
            ld: c,
        };
        self.gemm
            .run(c, c, dk, k_mat, kt_mat, &mut self.kk, c, false);
        self.gemm.run(
            c,
            c,
            dk,
            Mat {
                data: q_rows,
                ld: ldk,
            },
            kt_mat,
            &mut self.qk,
            c,
            false,
        );

        // T = (I + A)⁻¹ with A[r,s] = β_r (k_r·k_s) D[r,s] for s < r, by forward substitution
        // row by row: T_r = e_r − Σ_{j<r} A[r,j] T_j (rows of T are zero right of the diagonal).
        resize(&mut self.t_inv, c * c);
        for r in 0..c {
            let (done, rest) = self.t_inv.split_at_mut(r * c);
            let row = &mut rest[..c];
            row.fill(0.0);
            row[r] = 1.0;
            let br = beta(r);
            for j in 0..r {
                let a = br * self.kk[r * c + j] * decay[r * c + j];
                if a != 0.0 {
                    for (t, &tj) in row[..=j].iter_mut().zip(&done[j * c..j * c + j + 1]) {
                        *t -= a * tj;
                    }
                }
            }
        }

        // U = T·(β ⊙ V)  [c × dv];  −Wy = T·(−β ⊙ e^γ ⊙ K)  [c × dk].
        resize(&mut self.rhs_v, c * dv);
        resize(&mut self.rhs_k, c * dk);
        for r in 0..c {
            let br = beta(r);
            let scale = -br * gamma[r].exp();
            for (d, &vv) in self.rhs_v[r * dv..(r + 1) * dv]
                .iter_mut()
                .zip(&v_rows[r * ldv..r * ldv + dv])
            {
                *d = br * vv;
            }
            for (d, &kv) in self.rhs_k[r * dk..(r + 1) * dk]
                .iter_mut()
                .zip(&k_rows[r * ldk..r * ldk + dk])
            {
                *d = scale * kv;
            }
        }
        resize(&mut self.u, c * dv);
        resize(&mut self.wy_neg, c * dk);
        let t_mat = Mat {
            data: &self.t_inv,
            ld: c,
        };
        self.gemm.run(
            c,
            dv,
            c,
            t_mat,
            Mat {
                data: &self.rhs_v,
                ld: dv,
            },
            &mut self.u,
            dv,
            false,
        );
        self.gemm.run(
            c,
            dk,
            c,
            t_mat,
            Mat {
                data: &self.rhs_k,
                ld: dk,
            },
            &mut self.wy_neg,
            dk,
            false,
        );

        // V′ = U − Wy·S₀, in place in U.
        let s_mat = Mat { data: s, ld: dv };
        let wy_mat = Mat {
            data: &self.wy_neg,
            ld: dk,
        };
        self.gemm
            .run(c, dv, dk, wy_mat, s_mat, &mut self.u, dv, true);
        let v_new = Mat {
            data: &self.u,
            ld: dv,
        };

        // O = (Q ⊙ e^γ)·S₀ + ((Q·Kᵀ) ⊙ D)·V′, D lower-triangular including the diagonal.
        resize(&mut self.q_g, c * dk);
        for r in 0..c {
            let scale = gamma[r].exp();
            for (d, &qv) in self.q_g[r * dk..(r + 1) * dk]
                .iter_mut()
                .zip(&q_rows[r * ldk..r * ldk + dk])
            {
                *d = scale * qv;
            }
        }
        self.gemm.run(
            c,
            dv,
            dk,
            Mat {
                data: &self.q_g,
                ld: dk,
            },
            s_mat,
            o,
            dv,
            false,
        );
        for r in 0..c {
            for s_ in 0..c {
                let p = &mut self.qk[r * c + s_];
                *p = if s_ <= r { *p * decay[r * c + s_] } else { 0.0 };
            }
        }
        self.gemm.run(
            c,
            dv,
            c,
            Mat {
                data: &self.qk,
                ld: c,
            },
            v_new,
            o,
            dv,
            true,
        );

        // S = e^{γ_c}·S₀ + (K ⊙ e^{γ_c − γ})ᵀ·V′
        let last = gamma[c - 1];
        resize(&mut self.tail, c);
        for (t, &gr) in self.tail.iter_mut().zip(gamma.iter()) {
            *t = (last - gr).exp();
        }
        resize(&mut self.k_decay_t, dk * c);
        for (dst, src) in self
            .k_decay_t
            .chunks_exact_mut(c)
            .zip(self.k_t.chunks_exact(c))
        {
            for ((d, &kv), &f) in dst.iter_mut().zip(src).zip(&self.tail) {
                *d = kv * f;
            }
        }
        let total = last.exp();
        for sv in s.iter_mut() {
            *sv *= total;
        }
        let kd = Mat {
            data: &self.k_decay_t,
            ld: c,
        };
        self.gemm.run(dk, dv, c, kd, v_new, s, dv, true);
    }
}

fn resize(buf: &mut Vec<f32>, len: usize) {
    buf.clear();
    buf.resize(len, 0.0);
}

/// The reference twin: token by token, head by head, exactly the recurrence of §3.2 step 8.
pub fn gated_delta_rule_recurrent(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    g: &[f32],
    beta: &[f32],
    n: usize,
    dims: &DeltaNetDims,
    state: &mut [f32],
    out: &mut [f32],
) {
    check_lengths(q, k, v, g, beta, n, dims, state, out);
    let DeltaNetDims {
        k_heads,
        v_heads,
        dk,
        dv,
    } = *dims;
    let group = dims.group();
    let mut u = vec![0.0f32; dv];
    for h in 0..v_heads {
        let kh = h / group;
        let s = &mut state[h * dk * dv..(h + 1) * dk * dv];
        for t in 0..n {
            let qt = &q[(t * k_heads + kh) * dk..][..dk];
            let kt = &k[(t * k_heads + kh) * dk..][..dk];
            let vt = &v[(t * v_heads + h) * dv..][..dv];
            let alpha = g[t * v_heads + h].exp();
            let b = beta[t * v_heads + h];
            for x in s.iter_mut() {
                *x *= alpha;
            }
            // u = β (v − Sᵀ k)
            u.fill(0.0);
            for (i, &ki) in kt.iter().enumerate() {
                for (uj, &sij) in u.iter_mut().zip(&s[i * dv..(i + 1) * dv]) {
                    *uj += sij * ki;
                }
            }
            for (uj, &vj) in u.iter_mut().zip(vt) {
                *uj = b * (vj - *uj);
            }
            // S += k ⊗ u
            for (i, &ki) in kt.iter().enumerate() {
                for (sij, &uj) in s[i * dv..(i + 1) * dv].iter_mut().zip(&u) {
                    *sij += ki * uj;
                }
            }
            // o = Sᵀ q
            let o = &mut out[(t * v_heads + h) * dv..][..dv];
            o.fill(0.0);
            for (i, &qi) in qt.iter().enumerate() {
                for (oj, &sij) in o.iter_mut().zip(&s[i * dv..(i + 1) * dv]) {
                    *oj += sij * qi;
                }
            }
        }
    }
}
