//! The chunked form of the Gated DeltaNet (model.md §3.2 step 9) as small dense products: the
//! fast path of [`super`].

use super::{check_lengths, DeltaNetDims, CHUNK};
use crate::cpu::Kernels;
use crate::float_env::flushing_denormals;
use crate::gemm::small::{pack_right, Left, Mat, Right, SmallGemm};
use crate::scratch;
use crate::vexp::exp_in_place;
use rayon::prelude::*;
use std::cell::RefCell;

pub(super) fn chunked(
    kt: &'static Kernels,
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
    let inputs = ChunkInputs {
        q,
        k,
        v,
        g,
        beta,
        n,
        dims: *dims,
    };
    // Head-major outputs [v_heads][n][dv], so that each head owns a contiguous chunk.
    let mut per_head = scratch::take(v_heads * n * dv);
    state
        .par_chunks_mut(dk * dv)
        .zip(per_head.par_chunks_mut(n * dv))
        .enumerate()
        .for_each(|(h, (s, o))| {
            // Strong decays make denormals; flushing them keeps the scan off the slow path
            // (crate::float_env).
            flushing_denormals(|| {
                with_chunk_scratch(kt, |scratch| {
                    let mut t0 = 0;
                    while t0 < n {
                        let c = CHUNK.min(n - t0);
                        scratch.chunk(&inputs, h, t0, c, s, &mut o[t0 * dv..(t0 + c) * dv]);
                        t0 += c;
                    }
                })
            })
        });
    out.par_chunks_mut(v_heads * dv)
        .enumerate()
        .for_each(|(t, row)| {
            for (h, dst) in row.chunks_exact_mut(dv).enumerate() {
                dst.copy_from_slice(&per_head[(h * n + t) * dv..(h * n + t + 1) * dv]);
            }
        });
    scratch::give(per_head);
}

thread_local! {
    /// Each worker keeps its chunk buffers between calls (they are the same size every layer).
    static CHUNK_SCRATCH: RefCell<Option<ChunkScratch>> = const { RefCell::new(None) };
}

fn with_chunk_scratch(kt: &'static Kernels, f: impl FnOnce(&mut ChunkScratch)) {
    CHUNK_SCRATCH.with(|cell| {
        let mut slot = cell.borrow_mut();
        let scratch = match slot.as_mut() {
            Some(s) if std::ptr::eq(s.kt, kt) => s,
            _ => slot.insert(ChunkScratch::new(kt)),
        };
        f(scratch)
    })
}

/// The scan's inputs, shared by every head's chunks.
pub(crate) struct ChunkInputs<'a> {
    q: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
    g: &'a [f32],
    beta: &'a [f32],
    n: usize,
    dims: DeltaNetDims,
}

/// Per-worker buffers for one chunk of one head, and the kernel table they run with.
pub(crate) struct ChunkScratch {
    kt: &'static Kernels,
    gemm: SmallGemm,
    gamma: Vec<f32>,
    decay: Vec<f32>,
    tail: Vec<f32>,
    k_t: Vec<f32>,
    s_packed: Vec<f32>,
    v_packed: Vec<f32>,
    kk: Vec<f32>,
    qk: Vec<f32>,
    t_inv: Vec<f32>,
    rhs_v: Vec<f32>,
    rhs_k: Vec<f32>,
    u: Vec<f32>,
    wy_neg: Vec<f32>,
    q_g: Vec<f32>,
    k_decay: Vec<f32>,
}

impl ChunkScratch {
    fn new(kt: &'static Kernels) -> ChunkScratch {
        ChunkScratch {
            kt,
            gemm: SmallGemm::new(kt.f32_tile),
            gamma: Vec::new(),
            decay: Vec::new(),
            tail: Vec::new(),
            k_t: Vec::new(),
            s_packed: Vec::new(),
            v_packed: Vec::new(),
            kk: Vec::new(),
            qk: Vec::new(),
            t_inv: Vec::new(),
            rhs_v: Vec::new(),
            rhs_k: Vec::new(),
            u: Vec::new(),
            wy_neg: Vec::new(),
            q_g: Vec::new(),
            k_decay: Vec::new(),
        }
    }

    /// Advances head `h` over tokens `t0..t0 + c`: writes their outputs to `o` (`[c × dv]`)
    /// and replaces `s` (`[dk × dv]`) by the state after the chunk (§3.2 step 9).
    fn chunk(
        &mut self,
        x: &ChunkInputs,
        h: usize,
        t0: usize,
        c: usize,
        s: &mut [f32],
        o: &mut [f32],
    ) {
        // The element-wise loops around the products (decays, the triangular inverse, the
        // scalings) are compiled per level (`crate::x86::compiled`) so that they vectorise as
        // widely as the tiles.
        let run = self.kt.delta_chunk;
        // SAFETY: the table's functions run on this CPU.
        unsafe { run(self, x, h, t0, c, s, o) }
    }

    #[inline(always)]
    fn body(
        &mut self,
        x: &ChunkInputs,
        h: usize,
        t0: usize,
        c: usize,
        s: &mut [f32],
        o: &mut [f32],
    ) {
        let DeltaNetDims {
            k_heads,
            v_heads,
            dk,
            dv,
            ..
        } = x.dims;
        let kh = x.dims.key_head(h);
        let (ldk, ldv) = (k_heads * dk, v_heads * dv);
        let k_rows = &x.k[(t0 * k_heads + kh) * dk..];
        let q_rows = &x.q[(t0 * k_heads + kh) * dk..];
        let v_rows = &x.v[(t0 * v_heads + h) * dv..];
        let beta = |r: usize| x.beta[(t0 + r) * v_heads + h];
        debug_assert!(t0 + c <= x.n);
        let mp = self.gemm.kernel().mp;

        // γ_r = Σ_{s ≤ r} g_s; D[r,s] = exp(γ_r − γ_s) on and below the diagonal (masked
        // before exponentiating); tail_r = exp(γ_c − γ_r).
        resize(&mut self.gamma, c);
        let mut acc = 0.0f32;
        for r in 0..c {
            acc += x.g[(t0 + r) * v_heads + h];
            self.gamma[r] = acc;
        }
        let gamma = &self.gamma;
        resize(&mut self.decay, c * c);
        for r in 0..c {
            for (s_, d) in self.decay[r * c..=r * c + r].iter_mut().enumerate() {
                *d = gamma[r] - gamma[s_];
            }
            exp_in_place(self.kt, &mut self.decay[r * c..=r * c + r]);
        }
        let last = gamma[c - 1];
        resize(&mut self.tail, c);
        for (t, &gr) in self.tail.iter_mut().zip(gamma.iter()) {
            *t = last - gr;
        }
        exp_in_place(self.kt, &mut self.tail);
        let decay = &self.decay;

        // Kᵀ [dk × c] packed once for K·Kᵀ and Q·Kᵀ; S₀ packed once for −Wy·S₀ and
        // (Q ⊙ e^γ)·S₀.
        resize(&mut self.k_t, c.div_ceil(mp) * dk * mp);
        for r in 0..c {
            let (p, lane) = (r / mp, r % mp);
            for (i, &kv) in k_rows[r * ldk..r * ldk + dk].iter().enumerate() {
                self.k_t[(p * dk + i) * mp + lane] = kv;
            }
        }
        let k_t = Right::Packed(&self.k_t);
        resize(&mut self.kk, c * c);
        resize(&mut self.qk, c * c);
        let k_left = Left::Rows(Mat {
            data: k_rows,
            ld: ldk,
        });
        let q_left = Left::Rows(Mat {
            data: q_rows,
            ld: ldk,
        });
        self.gemm.run(c, c, dk, k_left, k_t, &mut self.kk, c, false);
        self.gemm.run(c, c, dk, q_left, k_t, &mut self.qk, c, false);
        pack_right(mp, dk, dv, Mat { data: s, ld: dv }, &mut self.s_packed);
        let s0 = Right::Packed(&self.s_packed);

        // T = (I + A)⁻¹ with A[r,s] = β_r (k_r·k_s) D[r,s] for s < r, by forward substitution
        // row by row: T_r = e_r − Σ_{j<r} A[r,j] T_j (rows of T are zero right of the diagonal).
        resize(&mut self.t_inv, c * c);
        for r in 0..c {
            let (done, rest) = self.t_inv.split_at_mut(r * c);
            let row = &mut rest[..c];
            row[r] = 1.0;
            let br = beta(r);
            for j in 0..r {
                let a = br * self.kk[r * c + j] * decay[r * c + j];
                if a != 0.0 {
                    for (t, &tj) in row[..=j].iter_mut().zip(&done[j * c..=j * c + j]) {
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
            let v_src = &v_rows[r * ldv..r * ldv + dv];
            for (d, &vv) in self.rhs_v[r * dv..(r + 1) * dv].iter_mut().zip(v_src) {
                *d = br * vv;
            }
            let k_src = &k_rows[r * ldk..r * ldk + dk];
            for (d, &kv) in self.rhs_k[r * dk..(r + 1) * dk].iter_mut().zip(k_src) {
                *d = scale * kv;
            }
        }
        resize(&mut self.u, c * dv);
        resize(&mut self.wy_neg, c * dk);
        let t_left = Left::Rows(Mat {
            data: &self.t_inv,
            ld: c,
        });
        let rhs_v = Right::Rows(Mat {
            data: &self.rhs_v,
            ld: dv,
        });
        let rhs_k = Right::Rows(Mat {
            data: &self.rhs_k,
            ld: dk,
        });
        self.gemm
            .run(c, dv, c, t_left, rhs_v, &mut self.u, dv, false);
        self.gemm
            .run(c, dk, c, t_left, rhs_k, &mut self.wy_neg, dk, false);

        // V′ = U − Wy·S₀, in place in U, then packed for its two uses.
        let wy_left = Left::Rows(Mat {
            data: &self.wy_neg,
            ld: dk,
        });
        self.gemm.run(c, dv, dk, wy_left, s0, &mut self.u, dv, true);
        pack_right(
            mp,
            c,
            dv,
            Mat {
                data: &self.u,
                ld: dv,
            },
            &mut self.v_packed,
        );
        let v_new = Right::Packed(&self.v_packed);

        // O = (Q ⊙ e^γ)·S₀ + ((Q·Kᵀ) ⊙ D)·V′, D lower-triangular including the diagonal.
        resize(&mut self.q_g, c * dk);
        for r in 0..c {
            let scale = gamma[r].exp();
            let q_src = &q_rows[r * ldk..r * ldk + dk];
            for (d, &qv) in self.q_g[r * dk..(r + 1) * dk].iter_mut().zip(q_src) {
                *d = scale * qv;
            }
        }
        let qg_left = Left::Rows(Mat {
            data: &self.q_g,
            ld: dk,
        });
        self.gemm.run(c, dv, dk, qg_left, s0, o, dv, false);
        for r in 0..c {
            let row = &mut self.qk[r * c..(r + 1) * c];
            for (p, &d) in row[..=r].iter_mut().zip(&decay[r * c..=r * c + r]) {
                *p *= d;
            }
            row[r + 1..].fill(0.0);
        }
        let p_left = Left::Rows(Mat {
            data: &self.qk,
            ld: c,
        });
        self.gemm.run(c, dv, c, p_left, v_new, o, dv, true);

        // S = e^{γ_c}·S₀ + (K ⊙ e^{γ_c − γ})ᵀ·V′. The scaled K, row-major [c × ldp], is the
        // transpose of the left operand; rows padded to whole tiles let the kernel read it in
        // place.
        let ldp = dk.next_multiple_of(self.gemm.kernel().mr);
        resize(&mut self.k_decay, c * ldp);
        for r in 0..c {
            let f = self.tail[r];
            let k_src = &k_rows[r * ldk..r * ldk + dk];
            for (d, &kv) in self.k_decay[r * ldp..r * ldp + dk].iter_mut().zip(k_src) {
                *d = kv * f;
            }
        }
        let total = last.exp();
        for sv in s.iter_mut() {
            *sv *= total;
        }
        let kd_left = Left::Cols(Mat {
            data: &self.k_decay,
            ld: ldp,
        });
        self.gemm.run(dk, dv, c, kd_left, v_new, s, dv, true);
    }
}

/// One chunk of one head (see `ChunkScratch::chunk`): the kernel table's portable entry,
/// compiled per level by `crate::x86::compiled`.
#[inline(always)]
pub(crate) fn chunk_body(
    w: &mut ChunkScratch,
    x: &ChunkInputs,
    h: usize,
    t0: usize,
    c: usize,
    s: &mut [f32],
    o: &mut [f32],
) {
    w.body(x, h, t0, c, s, o)
}

fn resize(buf: &mut Vec<f32>, len: usize) {
    buf.clear();
    buf.resize(len, 0.0);
}
