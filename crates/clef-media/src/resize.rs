//! Pillow-compatible bicubic resampling of 8-bit RGB images.
//!
//! Reproduces `Image.resize((w, h), Image.BICUBIC)` of Pillow (`libImaging/Resample.c`) bit for
//! bit: a separable convolution with the a = −0.5 cubic kernel whose support is stretched by
//! the downscale factor, weights computed in float64, normalised to sum 1, then converted to
//! 22-bit fixed point; the horizontal pass runs first and its output is rounded and clamped to
//! 8 bits before the vertical pass. An axis whose size does not change is not resampled.
//! The pixel-parity claim is tested against committed Pillow outputs (tests/resize_pillow.rs).

use image::RgbImage;

use crate::cancel::Cancel;
use crate::error::MediaError;

/// Output rows between two polls of the cancellation predicate: a few milliseconds of work
/// even for the widest accepted image, and a negligible cost per poll.
const ROWS_PER_POLL: usize = 32;

/// Fixed-point precision of Pillow's 8-bit resampler: 32 bits minus 8 for the pixel value
/// minus 2 of headroom for the kernel's overshoot.
const PRECISION_BITS: u32 = 32 - 8 - 2;
const CHANNELS: usize = 3;
const BICUBIC_SUPPORT: f64 = 2.0;

fn bicubic(x: f64) -> f64 {
    const A: f64 = -0.5;
    let x = x.abs();
    if x < 1.0 {
        ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        (((x - 5.0) * x + 8.0) * x - 4.0) * A
    } else {
        0.0
    }
}

/// Per output sample: the first input index and the fixed-point weights of its window.
struct Taps {
    ksize: usize,
    starts: Vec<usize>,
    counts: Vec<usize>,
    weights: Vec<i32>,
}

impl Taps {
    fn new(in_size: usize, out_size: usize) -> Taps {
        // Pillow computes the box edges as float and the scale in double.
        let in1 = in_size as f32 as f64;
        let scale = in1 / out_size as f64;
        let filterscale = scale.max(1.0);
        let support = BICUBIC_SUPPORT * filterscale;
        let ksize = support.ceil() as usize * 2 + 1;
        let mut starts = Vec::with_capacity(out_size);
        let mut counts = Vec::with_capacity(out_size);
        let mut weights = vec![0i32; out_size * ksize];
        let mut k = vec![0f64; ksize];
        for xx in 0..out_size {
            let center = (xx as f64 + 0.5) * scale;
            let ss = 1.0 / filterscale;
            // C casts truncate toward zero; negative values are clamped to 0 right after.
            let xmin = ((center - support + 0.5) as i64).max(0) as usize;
            let xmax = ((center + support + 0.5) as i64).min(in_size as i64) as usize;
            let count = xmax.saturating_sub(xmin).min(ksize);
            let mut ww = 0.0;
            for (x, kx) in k.iter_mut().enumerate().take(count) {
                let w = bicubic(((x + xmin) as f64 - center + 0.5) * ss);
                *kx = w;
                ww += w;
            }
            let row = &mut weights[xx * ksize..xx * ksize + ksize];
            for (x, out) in row.iter_mut().enumerate().take(count) {
                let w = if ww != 0.0 { k[x] / ww } else { k[x] };
                let scaled = w * (1u32 << PRECISION_BITS) as f64;
                *out = if w < 0.0 {
                    (scaled - 0.5) as i32
                } else {
                    (scaled + 0.5) as i32
                };
            }
            starts.push(xmin);
            counts.push(count);
        }
        Taps {
            ksize,
            starts,
            counts,
            weights,
        }
    }

    fn window(&self, i: usize) -> (usize, &[i32]) {
        let k = &self.weights[i * self.ksize..i * self.ksize + self.counts[i]];
        (self.starts[i], k)
    }
}

#[inline]
fn clip8(acc: i32) -> u8 {
    (acc >> PRECISION_BITS).clamp(0, 255) as u8
}

const ROUND_HALF: i32 = 1 << (PRECISION_BITS - 1);

fn resample_horizontal(
    src: &[u8],
    in_w: usize,
    rows: usize,
    out_w: usize,
    cancel: Cancel,
) -> Result<Vec<u8>, MediaError> {
    let taps = Taps::new(in_w, out_w);
    let mut out = vec![0u8; out_w * rows * CHANNELS];
    for y in 0..rows {
        if y % ROWS_PER_POLL == 0 {
            cancel.check()?;
        }
        let src_row = &src[y * in_w * CHANNELS..(y + 1) * in_w * CHANNELS];
        let out_row = &mut out[y * out_w * CHANNELS..(y + 1) * out_w * CHANNELS];
        for (xx, px) in out_row.chunks_exact_mut(CHANNELS).enumerate() {
            let (start, k) = taps.window(xx);
            let window = &src_row[start * CHANNELS..(start + k.len()) * CHANNELS];
            let mut acc = [ROUND_HALF; CHANNELS];
            for (&w, s) in k.iter().zip(window.chunks_exact(CHANNELS)) {
                acc[0] += s[0] as i32 * w;
                acc[1] += s[1] as i32 * w;
                acc[2] += s[2] as i32 * w;
            }
            px[0] = clip8(acc[0]);
            px[1] = clip8(acc[1]);
            px[2] = clip8(acc[2]);
        }
    }
    Ok(out)
}

fn resample_vertical(
    src: &[u8],
    width: usize,
    in_h: usize,
    out_h: usize,
    cancel: Cancel,
) -> Result<Vec<u8>, MediaError> {
    let taps = Taps::new(in_h, out_h);
    let stride = width * CHANNELS;
    let mut out = vec![0u8; stride * out_h];
    let mut acc = vec![0i32; stride];
    for (yy, out_row) in out.chunks_exact_mut(stride).enumerate() {
        if yy % ROWS_PER_POLL == 0 {
            cancel.check()?;
        }
        let (start, k) = taps.window(yy);
        acc.fill(ROUND_HALF);
        // Row-major accumulation keeps memory access sequential; each output value still sums
        // its taps in the same order as Pillow, and integer sums are exact.
        for (i, &w) in k.iter().enumerate() {
            let src_row = &src[(start + i) * stride..(start + i + 1) * stride];
            for (a, &s) in acc.iter_mut().zip(src_row) {
                *a += s as i32 * w;
            }
        }
        for (o, &a) in out_row.iter_mut().zip(&acc) {
            *o = clip8(a);
        }
    }
    Ok(out)
}

/// Resizes to `width × height` exactly as Pillow's `Image.resize(..., Image.BICUBIC)` does.
///
/// Returns a copy when the size is unchanged. A zero target dimension gives an empty image.
pub fn resize_bicubic(img: &RgbImage, width: u32, height: u32) -> RgbImage {
    // never cancelled, so the only `Err` cannot happen; the fallback keeps this panic-free
    resize_bicubic_with_cancel(img, width, height, Cancel::never())
        .unwrap_or_else(|_| RgbImage::new(width, height))
}

/// [`resize_bicubic`], polling `cancel` every [`ROWS_PER_POLL`] output rows of each pass:
/// `Err(MediaError::Cancelled)` once it says stop.
pub fn resize_bicubic_with_cancel(
    img: &RgbImage,
    width: u32,
    height: u32,
    cancel: Cancel,
) -> Result<RgbImage, MediaError> {
    let (in_w, in_h) = (img.width() as usize, img.height() as usize);
    let (out_w, out_h) = (width as usize, height as usize);
    if out_w == 0 || out_h == 0 || in_w == 0 || in_h == 0 {
        return Ok(RgbImage::new(width, height));
    }
    let mut data: std::borrow::Cow<[u8]> = std::borrow::Cow::Borrowed(img.as_raw().as_slice());
    if out_w != in_w {
        data = resample_horizontal(&data, in_w, in_h, out_w, cancel)?.into();
    }
    if out_h != in_h {
        data = resample_vertical(&data, out_w, in_h, out_h, cancel)?.into();
    }
    // The buffer length is out_w·out_h·3 by construction.
    Ok(RgbImage::from_raw(width, height, data.into_owned())
        .unwrap_or_else(|| RgbImage::new(width, height)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_sum_to_one_in_fixed_point() {
        for (i, o) in [(97, 64), (40, 96), (300, 32), (7, 1), (1, 5)] {
            let t = Taps::new(i, o);
            for xx in 0..o {
                let (_, k) = t.window(xx);
                let sum: i64 = k.iter().map(|&w| w as i64).sum();
                assert!(
                    (sum - (1 << PRECISION_BITS)).abs() <= k.len() as i64,
                    "{i}->{o} at {xx}: {sum}"
                );
            }
        }
    }

    #[test]
    fn constant_image_stays_constant() {
        let img = RgbImage::from_pixel(37, 23, image::Rgb([200, 13, 99]));
        let out = resize_bicubic(&img, 64, 32);
        assert!(out.pixels().all(|p| p.0 == [200, 13, 99]));
    }

    #[test]
    fn cancel_stops_both_passes() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let img = RgbImage::from_fn(300, 200, |x, y| image::Rgb([x as u8, y as u8, 7]));
        let full = resize_bicubic(&img, 97, 131);
        // horizontal pass: 200 rows, 7 polls; vertical: 131 rows, 5 polls
        for stop_after in [0, 3, 7, 9] {
            let polls = AtomicUsize::new(0);
            let check = || polls.fetch_add(1, Ordering::Relaxed) >= stop_after;
            let got = resize_bicubic_with_cancel(&img, 97, 131, Cancel::new(&check));
            assert!(matches!(got, Err(MediaError::Cancelled)), "{stop_after}");
            assert_eq!(polls.load(Ordering::Relaxed), stop_after + 1);
        }
        let never = resize_bicubic_with_cancel(&img, 97, 131, Cancel::never()).unwrap();
        assert_eq!(never, full);
    }

    #[test]
    fn same_size_is_identity() {
        let img = RgbImage::from_fn(5, 4, |x, y| image::Rgb([x as u8 * 40, y as u8 * 50, 7]));
        assert_eq!(resize_bicubic(&img, 5, 4), img);
    }
}
