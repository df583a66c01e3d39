//! Gated DeltaNet core (model.md §3.2 steps 6–9): the per-head state recurrence
//! `S ← α (I − β k kᵀ) S + β k vᵀ`, `o = Sᵀ q`, in f32.
//!
//! Shapes (callers pass consistent lengths; checked up front, a mismatch panics):
//! q, k `[n, k_heads, dk]` (L2-normalised, q already scaled by dk^-1/2); v `[n, v_heads, dv]`;
//! g (log decay, ≤ 0) and beta `[n, v_heads]`; state `[v_heads, dk, dv]` carried in and out;
//! out `[n, v_heads, dv]`. Value head h reads key head [`DeltaNetDims::key_head`]: `h / r` in
//! the release's grouped order (r = v_heads / k_heads), `h mod k_heads` in the tiled order
//! llama.cpp's GGUF files store (model.md §3.7).

pub(crate) mod chunked;

use crate::cpu::Kernels;
use chunked::chunked;

/// Head counts and sizes of one DeltaNet layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeltaNetDims {
    pub k_heads: usize,
    pub v_heads: usize,
    pub dk: usize,
    pub dv: usize,
    /// How value heads are ordered against key heads.
    pub order: HeadOrder,
}

/// The order of a DeltaNet layer's value heads (everything indexed by value head: the V part
/// of the projections, z, a, b, the conv's V channels, `out_proj`'s inputs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HeadOrder {
    /// The r value heads of key head j are `j·r .. j·r + r` (the release, transformers).
    #[default]
    Grouped,
    /// Value head h belongs to key head `h mod k_heads` (llama.cpp's GGUF files, which store
    /// the heads so for ggml's broadcast; model.md §3.7).
    Tiled,
}

impl DeltaNetDims {
    /// The key head value head `h` reads.
    #[inline]
    pub fn key_head(&self, h: usize) -> usize {
        match self.order {
            HeadOrder::Grouped => h / (self.v_heads / self.k_heads),
            HeadOrder::Tiled => h % self.k_heads,
        }
    }

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
        ..
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
    chunked(Kernels::detected(), q, k, v, g, beta, n, dims, state, out);
}

/// [`gated_delta_rule`] with the kernel table `kt` (tests, benchmarks).
pub fn gated_delta_rule_with(
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
    chunked(kt, q, k, v, g, beta, n, dims, state, out);
}

/// Tokens per chunk (transformers and FLA use 64 too; any value gives the same result).
pub const CHUNK: usize = 64;

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
        ..
    } = *dims;
    dims.group();
    let mut u = vec![0.0f32; dv];
    for h in 0..v_heads {
        let kh = dims.key_head(h);
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
