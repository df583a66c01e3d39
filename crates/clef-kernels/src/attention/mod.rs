//! Softmax attention in f32: causal grouped-query attention for the backbone, bidirectional
//! multi-head attention for the head and the vision tower.
//!
//! Layouts are row-major with heads interleaved per position: q `[n, hq, d]`, k/v `[t, hkv, d]`,
//! out `[n, hq, d]`. Callers pass consistent lengths (checked up front; a mismatch panics).

pub(crate) mod flash;

use crate::cpu::Kernels;
use flash::flash;

fn check(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    nq: usize,
    nk: usize,
    hq: usize,
    hkv: usize,
    d: usize,
    out: &[f32],
) {
    assert!(
        hkv > 0 && hq.is_multiple_of(hkv),
        "hq must be a positive multiple of hkv"
    );
    assert_eq!(q.len(), nq * hq * d, "q length");
    assert_eq!(k.len(), nk * hkv * d, "k length");
    assert_eq!(v.len(), nk * hkv * d, "v length");
    assert_eq!(out.len(), nq * hq * d, "out length");
}

/// Causal GQA attention for the last `n` query positions against `t` keys (`t ≥ n`): query `i`
/// sits at key position `t − n + i` and sees keys `0..=t − n + i`. Query head `i` uses kv head
/// `i / (hq / hkv)`. Scores are `scale · q·k`, softmax in f32.
pub fn causal_attention(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    n: usize,
    t: usize,
    hq: usize,
    hkv: usize,
    d: usize,
    scale: f32,
    out: &mut [f32],
) {
    assert!(t >= n, "t must be at least n");
    check(q, k, v, n, t, hq, hkv, d, out);
    flash(
        Kernels::detected(),
        q,
        k,
        v,
        n,
        t,
        hq,
        hkv,
        d,
        scale,
        Some(t - n),
        out,
    );
}

/// [`causal_attention`] with the kernel table `kt` (tests, benchmarks).
pub fn causal_attention_with(
    kt: &'static Kernels,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    n: usize,
    t: usize,
    hq: usize,
    hkv: usize,
    d: usize,
    scale: f32,
    out: &mut [f32],
) {
    assert!(t >= n, "t must be at least n");
    check(q, k, v, n, t, hq, hkv, d, out);
    flash(kt, q, k, v, n, t, hq, hkv, d, scale, Some(t - n), out);
}

/// The reference twin of [`causal_attention`]: one query row at a time, all scores, softmax,
/// weighted sum.
pub fn causal_attention_scalar(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    n: usize,
    t: usize,
    hq: usize,
    hkv: usize,
    d: usize,
    scale: f32,
    out: &mut [f32],
) {
    assert!(t >= n, "t must be at least n");
    check(q, k, v, n, t, hq, hkv, d, out);
    reference(q, k, v, n, t, hq, hkv, d, scale, Some(t - n), out);
}

/// Bidirectional multi-head attention: q `[nq, h, d]`, k/v `[nk, h, d]`, out `[nq, h, d]`.
pub fn attention(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    nq: usize,
    nk: usize,
    h: usize,
    d: usize,
    scale: f32,
    out: &mut [f32],
) {
    check(q, k, v, nq, nk, h, h, d, out);
    flash(
        Kernels::detected(),
        q,
        k,
        v,
        nq,
        nk,
        h,
        h,
        d,
        scale,
        None,
        out,
    );
}

/// [`attention`] with the kernel table `kt` (tests, benchmarks).
pub fn attention_with(
    kt: &'static Kernels,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    nq: usize,
    nk: usize,
    h: usize,
    d: usize,
    scale: f32,
    out: &mut [f32],
) {
    check(q, k, v, nq, nk, h, h, d, out);
    flash(kt, q, k, v, nq, nk, h, h, d, scale, None, out);
}

/// The reference twin of [`attention`].
pub fn attention_scalar(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    nq: usize,
    nk: usize,
    h: usize,
    d: usize,
    scale: f32,
    out: &mut [f32],
) {
    check(q, k, v, nq, nk, h, h, d, out);
    reference(q, k, v, nq, nk, h, h, d, scale, None, out);
}

/// The twin of the fast paths: one query row at a time, scores for all visible keys, softmax,
/// weighted sum. `causal_offset` is the key position of query 0 when causal.
fn reference(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    nq: usize,
    nk: usize,
    hq: usize,
    hkv: usize,
    d: usize,
    scale: f32,
    causal_offset: Option<usize>,
    out: &mut [f32],
) {
    let group = hq / hkv;
    let mut scores = vec![0.0f32; nk];
    for i in 0..nq {
        let visible = match causal_offset {
            Some(offset) => (offset + i + 1).min(nk),
            None => nk,
        };
        for h in 0..hq {
            let kvh = h / group;
            let qi = &q[(i * hq + h) * d..][..d];
            for (j, s) in scores[..visible].iter_mut().enumerate() {
                let kj = &k[(j * hkv + kvh) * d..][..d];
                let dot: f32 = qi.iter().zip(kj).map(|(a, b)| a * b).sum();
                *s = dot * scale;
            }
            crate::activation::softmax_in_place(&mut scores[..visible]);
            let o = &mut out[(i * hq + h) * d..][..d];
            o.fill(0.0);
            for (j, &p) in scores[..visible].iter().enumerate() {
                let vj = &v[(j * hkv + kvh) * d..][..d];
                for (ov, &vv) in o.iter_mut().zip(vj) {
                    *ov += p * vv;
                }
            }
        }
    }
}
