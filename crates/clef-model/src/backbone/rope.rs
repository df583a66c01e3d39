//! Partial, interleaved multimodal rotary embedding of the gated attention layers
//! (model.md §3.3 and §7.5). Only the first `rotary_dim` dimensions of each head rotate, in
//! NeoX pairing (i with i + rotary_dim/2); each frequency reads its position from the T, H or
//! W axis. For text all three axes agree, which reduces to ordinary rotary.

use crate::config::ModelConfig;

/// Absolute 3-axis rotary positions of a whole sequence.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Positions {
    pub t: Vec<u32>,
    pub h: Vec<u32>,
    pub w: Vec<u32>,
}

impl Positions {
    /// Text-only sequence: position i on every axis.
    pub fn text(len: usize) -> Self {
        let p: Vec<u32> = (0..len as u32).collect();
        Positions {
            t: p.clone(),
            h: p.clone(),
            w: p,
        }
    }

    /// Positions of a prompt with media (transformers' `get_rope_index`, model.md §7.5): text
    /// rows advance all axes together; a vision group of `mh × mw` merged rows starting at
    /// row `start` sits at (p, p + row, p + col), after which p advances by max(mh, mw).
    /// `groups` must be sorted by start and not overlap.
    pub fn with_media(len: usize, groups: &[(usize, usize, usize)]) -> Result<Self, String> {
        let mut pos = Positions {
            t: Vec::with_capacity(len),
            h: Vec::with_capacity(len),
            w: Vec::with_capacity(len),
        };
        let mut p: u32 = 0;
        let mut row = 0;
        for &(start, mh, mw) in groups {
            if start < row || start + mh * mw > len {
                return Err(format!(
                    "vision group at row {start} overlaps or leaves the prompt"
                ));
            }
            while row < start {
                pos.push(p, p, p);
                p += 1;
                row += 1;
            }
            for r in 0..mh as u32 {
                for c in 0..mw as u32 {
                    pos.push(p, p + r, p + c);
                }
            }
            p += mh.max(mw) as u32;
            row += mh * mw;
        }
        while row < len {
            pos.push(p, p, p);
            p += 1;
            row += 1;
        }
        Ok(pos)
    }

    fn push(&mut self, t: u32, h: u32, w: u32) {
        self.t.push(t);
        self.h.push(h);
        self.w.push(w);
    }

    pub fn len(&self) -> usize {
        self.t.len()
    }

    pub fn is_empty(&self) -> bool {
        self.t.is_empty()
    }
}

pub struct Rope {
    inv_freq: Vec<f32>,
    /// Axis (0 = T, 1 = H, 2 = W) each frequency reads its position from.
    axis: Vec<u8>,
    rotary_dim: usize,
}

impl Rope {
    pub fn new(cfg: &ModelConfig) -> Self {
        let rotary_dim = cfg.text_rotary_dim();
        let half = rotary_dim / 2;
        let base = cfg.rope_theta();
        // Mirror the reference's float32 arithmetic: exponent 2i/dim in f32, the power rounded
        // to f32, then its reciprocal in f32.
        let inv_freq = (0..half)
            .map(|i| {
                let e = (2 * i) as f32 / rotary_dim as f32;
                let p = base.powf(e as f64) as f32;
                1.0f32 / p
            })
            .collect();
        // Always interleaved: `mrope_interleaved: false` is refused when the config is read
        // (transformers and llama.cpp interleave Qwen3.5 whatever the flag says).
        let axis = interleaved_axes(half, &cfg.mrope_section());
        Rope {
            inv_freq,
            axis,
            rotary_dim,
        }
    }

    pub fn rotary_dim(&self) -> usize {
        self.rotary_dim
    }

    /// cos and sin tables `[n, rotary_dim/2]` for sequence rows `start..start+n`.
    pub fn tables(&self, pos: &Positions, start: usize, n: usize) -> (Vec<f32>, Vec<f32>) {
        let half = self.rotary_dim / 2;
        let mut cos = Vec::with_capacity(n * half);
        let mut sin = Vec::with_capacity(n * half);
        for r in start..start + n {
            let p = [pos.t[r], pos.h[r], pos.w[r]];
            for (f, &inv) in self.inv_freq.iter().enumerate() {
                // The reference forms the angle as one f32 product.
                let angle = inv * p[self.axis[f] as usize] as f32;
                cos.push((angle as f64).cos() as f32);
                sin.push((angle as f64).sin() as f32);
            }
        }
        (cos, sin)
    }

    /// Rotate the first `rotary_dim` dims of every head of `x` ([n, heads, head_dim]).
    pub fn apply(
        &self,
        x: &mut [f32],
        n: usize,
        heads: usize,
        head_dim: usize,
        cos: &[f32],
        sin: &[f32],
    ) {
        let half = self.rotary_dim / 2;
        for r in 0..n {
            let c = &cos[r * half..(r + 1) * half];
            let s = &sin[r * half..(r + 1) * half];
            for h in 0..heads {
                let base = (r * heads + h) * head_dim;
                let v = &mut x[base..base + self.rotary_dim];
                for i in 0..half {
                    let a = v[i];
                    let b = v[i + half];
                    v[i] = a * c[i] - b * s[i];
                    v[i + half] = b * c[i] + a * s[i];
                }
            }
        }
    }
}

/// transformers' interleaved layout: T everywhere, then H at 1, 4, 7, … below 3·sections[1]
/// and W at 2, 5, 8, … below 3·sections[2].
fn interleaved_axes(half: usize, sections: &[usize]) -> Vec<u8> {
    let mut axis = vec![0u8; half];
    for (dim, offset) in [(1usize, 1usize), (2, 2)] {
        let Some(&sec) = sections.get(dim) else {
            continue;
        };
        let mut i = offset;
        while i < (3 * sec).min(half) {
            axis[i] = dim as u8;
            i += 3;
        }
    }
    axis
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaved_matches_release_pattern() {
        let axes = interleaved_axes(32, &[11, 11, 10]);
        let count = |a: u8| axes.iter().filter(|&&x| x == a).count();
        assert_eq!((count(0), count(1), count(2)), (11, 11, 10));
        assert_eq!(&axes[..6], &[0, 1, 2, 0, 1, 2]);
        assert_eq!(axes[30], 0);
        assert_eq!(axes[31], 1);
    }

    #[test]
    fn media_positions_follow_the_worked_example() {
        // model.md §7.5: 6 text tokens, then a 2×3 merged image, then text.
        let p = Positions::with_media(8, &[(6, 0, 0)]).unwrap();
        assert_eq!(p.t, vec![0, 1, 2, 3, 4, 5, 6, 7]);
        let p = Positions::with_media(13, &[(6, 2, 3)]).unwrap();
        assert_eq!(&p.t[6..12], &[6; 6]);
        assert_eq!(&p.h[6..12], &[6, 6, 6, 7, 7, 7]);
        assert_eq!(&p.w[6..12], &[6, 7, 8, 6, 7, 8]);
        assert_eq!((p.t[12], p.h[12], p.w[12]), (9, 9, 9));
    }

    #[test]
    fn interleaved_tiny_sections() {
        assert_eq!(interleaved_axes(4, &[2, 1, 1]), vec![0, 1, 2, 0]);
    }
}
