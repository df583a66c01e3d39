//! The learned position table of the vision tower, resampled bilinearly (align_corners) from
//! its square grid to each image's patch grid, as transformers' `fast_pos_embed_interpolate`
//! does, including its float32 `linspace` and weight arithmetic.

/// torch.linspace(start, end, steps) in float32: the first half counts up from `start`, the
/// second half down from `end`, which makes the last value exactly `end`.
pub fn linspace_f32(start: f32, end: f32, steps: usize) -> Vec<f32> {
    match steps {
        0 => vec![],
        1 => vec![start],
        _ => {
            let step = (end - start) / (steps - 1) as f32;
            let half = steps / 2;
            (0..steps)
                .map(|i| {
                    if i < half {
                        start + step * i as f32
                    } else {
                        end - step * (steps - 1 - i) as f32
                    }
                })
                .collect()
        }
    }
}

/// Position embeddings for a `gh × gw` patch grid in row-major patch order, `[gh*gw, dim]`.
/// `table` is `[side*side, dim]`.
pub fn interpolate(table: &[f32], side: usize, dim: usize, gh: usize, gw: usize) -> Vec<f32> {
    let hs = linspace_f32(0.0, (side - 1) as f32, gh);
    let ws = linspace_f32(0.0, (side - 1) as f32, gw);
    let taps = |v: f32| -> (usize, usize, f32) {
        let f = v as usize; // truncation, like `.int()`
        let c = (f + 1).min(side - 1);
        (f, c, v - f as f32)
    };
    let mut out = vec![0.0f32; gh * gw * dim];
    for (r, &hv) in hs.iter().enumerate() {
        let (hf, hc, dh) = taps(hv);
        for (c, &wv) in ws.iter().enumerate() {
            let (wf, wc, dw) = taps(wv);
            let idx = [
                hf * side + wf,
                hf * side + wc,
                hc * side + wf,
                hc * side + wc,
            ];
            let wts = [
                (1.0 - dh) * (1.0 - dw),
                (1.0 - dh) * dw,
                dh * (1.0 - dw),
                dh * dw,
            ];
            let o = &mut out[(r * gw + c) * dim..(r * gw + c + 1) * dim];
            for (k, (&i, &wt)) in idx.iter().zip(&wts).enumerate() {
                let row = &table[i * dim..(i + 1) * dim];
                for (ov, tv) in o.iter_mut().zip(row) {
                    if k == 0 {
                        *ov = tv * wt;
                    } else {
                        *ov += tv * wt;
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linspace_ends_exactly() {
        let v = linspace_f32(0.0, 47.0, 7);
        assert_eq!(v[0], 0.0);
        assert_eq!(v[6], 47.0);
        assert_eq!(linspace_f32(0.0, 3.0, 1), vec![0.0]);
    }

    #[test]
    fn identity_grid_reproduces_table() {
        let side = 4;
        let dim = 3;
        let table: Vec<f32> = (0..side * side * dim).map(|i| i as f32 * 0.5).collect();
        assert_eq!(interpolate(&table, side, dim, side, side), table);
    }
}
