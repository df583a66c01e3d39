//! 2-D rotary embedding of the vision blocks (model.md §7.3 step 3): half the rotary
//! frequencies read the patch row, half the patch column; rotate_half over the whole head.

pub struct VisionRope {
    inv_freq: Vec<f32>,
    head_dim: usize,
}

impl VisionRope {
    pub fn new(head_dim: usize) -> Self {
        let dim = head_dim / 2;
        let inv_freq = (0..dim / 2)
            .map(|j| {
                let e = (2 * j) as f32 / dim as f32;
                1.0f32 / (10000f64.powf(e as f64) as f32)
            })
            .collect();
        VisionRope { inv_freq, head_dim }
    }

    /// cos/sin `[n, head_dim/2]` for patches at (row, col).
    pub fn tables(&self, coords: &[(u32, u32)]) -> (Vec<f32>, Vec<f32>) {
        let half = self.head_dim / 2;
        let mut cos = Vec::with_capacity(coords.len() * half);
        let mut sin = Vec::with_capacity(coords.len() * half);
        for &(r, c) in coords {
            for p in [r, c] {
                for &f in &self.inv_freq {
                    let a = p as f32 * f;
                    cos.push((a as f64).cos() as f32);
                    sin.push((a as f64).sin() as f32);
                }
            }
        }
        (cos, sin)
    }

    /// Rotate q or k rows `[n, heads, head_dim]` in place.
    pub fn apply(&self, x: &mut [f32], n: usize, heads: usize, cos: &[f32], sin: &[f32]) {
        let d = self.head_dim;
        let half = d / 2;
        for r in 0..n {
            let c = &cos[r * half..(r + 1) * half];
            let s = &sin[r * half..(r + 1) * half];
            for h in 0..heads {
                let v = &mut x[(r * heads + h) * d..(r * heads + h + 1) * d];
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
