//! The Qwen processors' target-size rules (model.md §7.1, transformers' `smart_resize`).
//!
//! Written to reproduce the Python arithmetic exactly: float64 division, `round` with halves
//! to even, `math.floor`/`math.ceil`, `int()` truncation.

use crate::error::MediaError;

const MAX_ASPECT_RATIO: f64 = 200.0;

fn checked_dims(h: usize, w: usize) -> Result<(f64, f64), MediaError> {
    if h == 0 || w == 0 {
        return Err(MediaError::EmptyImage {
            width: w as u64,
            height: h as u64,
        });
    }
    let (hf, wf) = (h as f64, w as f64);
    if hf.max(wf) / hf.min(wf) > MAX_ASPECT_RATIO {
        return Err(MediaError::AspectRatio {
            height: h as u64,
            width: w as u64,
        });
    }
    Ok((hf, wf))
}

fn bounds_error(h: usize, w: usize, reason: &str) -> MediaError {
    MediaError::ResizeBounds {
        height: h as u64,
        width: w as u64,
        reason: reason.to_string(),
    }
}

/// Target `(height, width)` of an image: both multiples of `factor`, area brought into
/// `[min_pixels, max_pixels]` when rounding alone leaves it outside (model.md §7.1).
///
/// As in the reference, the upscaling branch may exceed `max_pixels` for extreme aspect
/// ratios of tiny images (the ceilings add up); callers that need a hard cap check the result.
pub fn smart_resize(
    h: usize,
    w: usize,
    factor: usize,
    min_pixels: u64,
    max_pixels: u64,
) -> Result<(usize, usize), MediaError> {
    if factor == 0 {
        return Err(bounds_error(h, w, "factor must be positive"));
    }
    let (hf, wf) = checked_dims(h, w)?;
    let f = factor as f64;
    let mut h_bar = (hf / f).round_ties_even() * f;
    let mut w_bar = (wf / f).round_ties_even() * f;
    if h_bar * w_bar > max_pixels as f64 {
        let beta = (hf * wf / max_pixels as f64).sqrt();
        h_bar = f.max((hf / beta / f).floor() * f);
        w_bar = f.max((wf / beta / f).floor() * f);
    } else if h_bar * w_bar < min_pixels as f64 {
        let beta = (min_pixels as f64 / (hf * wf)).sqrt();
        h_bar = (hf * beta / f).ceil() * f;
        w_bar = (wf * beta / f).ceil() * f;
    }
    to_usize(h, w, h_bar, w_bar)
}

/// Target `(height, width)` of every frame of a video, as transformers' `Qwen3VLVideoProcessor`
/// computes it: the bounds apply to the `t·h·w` volume of the clip, and the per-frame budget is
/// capped the way qwen-vl-utils does (`cap_pixels_per_frame`: at most 768 merge blocks or an
/// even share of `max_pixels` per frame, at least 1.05 × `min_pixels`).
pub fn smart_resize_video(
    num_frames: usize,
    h: usize,
    w: usize,
    temporal_factor: usize,
    factor: usize,
    min_pixels: u64,
    max_pixels: u64,
) -> Result<(usize, usize), MediaError> {
    if factor == 0 || temporal_factor == 0 {
        return Err(bounds_error(h, w, "factor must be positive"));
    }
    if num_frames < temporal_factor {
        // The reference raises here; a shorter clip is padded to one temporal patch first, so
        // the budget is computed for the padded length.
        return smart_resize_video(
            temporal_factor,
            h,
            w,
            temporal_factor,
            factor,
            min_pixels,
            max_pixels,
        );
    }
    if h == 0 || w == 0 {
        return Err(MediaError::EmptyImage {
            width: w as u64,
            height: h as u64,
        });
    }
    let frame_cap = 768 * (factor as u64) * (factor as u64);
    let per_frame = (max_pixels / num_frames as u64)
        .min(frame_cap)
        .max((min_pixels as f64 * 1.05) as u64);
    let max_pixels = per_frame * num_frames as u64;

    let f = factor as f64;
    let (mut hf, mut wf) = (h as f64, w as f64);
    if hf < f || wf < f {
        let scale = (f / hf).max(f / wf);
        hf = (hf * scale).trunc();
        wf = (wf * scale).trunc();
    }
    let (hs, ws) = (hf as usize, wf as usize);
    let (hf, wf) = checked_dims(hs, ws)?;
    let t = num_frames as f64;
    let tf = temporal_factor as f64;
    let mut h_bar = (hf / f).round_ties_even() * f;
    let mut w_bar = (wf / f).round_ties_even() * f;
    let t_bar = (t / tf).round_ties_even() * tf;
    if t_bar * h_bar * w_bar > max_pixels as f64 {
        let beta = (t * hf * wf / max_pixels as f64).sqrt();
        h_bar = f.max((hf / beta / f).floor() * f);
        w_bar = f.max((wf / beta / f).floor() * f);
    } else if t_bar * h_bar * w_bar < min_pixels as f64 {
        let beta = (min_pixels as f64 / (t * hf * wf)).sqrt();
        h_bar = (hf * beta / f).ceil() * f;
        w_bar = (wf * beta / f).ceil() * f;
    }
    to_usize(h, w, h_bar, w_bar)
}

fn to_usize(h: usize, w: usize, h_bar: f64, w_bar: f64) -> Result<(usize, usize), MediaError> {
    // Sides of a few hundred thousand pixels at most (aspect ≤ 200 and area bounded), so these
    // are exact; the guard keeps absurd configurations from wrapping.
    if !(h_bar >= 1.0 && w_bar >= 1.0 && h_bar < 1e9 && w_bar < 1e9) {
        return Err(bounds_error(h, w, "target size out of range"));
    }
    Ok((h_bar as usize, w_bar as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn already_aligned_sizes_stay() {
        assert_eq!(smart_resize(128, 96, 32, 1024, 65536).unwrap(), (128, 96));
        assert_eq!(smart_resize(256, 128, 32, 1024, 65536).unwrap(), (256, 128));
    }

    #[test]
    fn rounding_is_half_to_even() {
        // 48/32 = 1.5 -> 2, 80/32 = 2.5 -> 2, 112/32 = 3.5 -> 4
        assert_eq!(smart_resize(48, 80, 32, 0, u64::MAX).unwrap(), (64, 64));
        assert_eq!(smart_resize(112, 80, 32, 0, u64::MAX).unwrap(), (128, 64));
    }

    #[test]
    fn downscale_branch_matches_python() {
        // Python: smart_resize(3000, 4000, 32, 65536, 1048576) -> (864, 1152)
        assert_eq!(
            smart_resize(3000, 4000, 32, 65536, 1_048_576).unwrap(),
            (864, 1152)
        );
        // Python: smart_resize(1080, 1920, 32, 65536, 65536) -> (192, 320)
        assert_eq!(
            smart_resize(1080, 1920, 32, 65536, 65536).unwrap(),
            (192, 320)
        );
    }

    #[test]
    fn upscale_branch_matches_python() {
        // Python: smart_resize(10, 1900, 32, 65536, 1048576) -> (32, 3552)
        assert_eq!(
            smart_resize(10, 1900, 32, 65536, 1_048_576).unwrap(),
            (32, 3552)
        );
        // Python: smart_resize(100, 100, 32, 65536, 1048576) -> (256, 256)
        assert_eq!(
            smart_resize(100, 100, 32, 65536, 1_048_576).unwrap(),
            (256, 256)
        );
    }

    #[test]
    fn clamped_side_may_exceed_max() {
        // Python: smart_resize(3453, 18, 32, 1024, 4096) -> (864, 32): the short side is
        // floored to 0 then raised to the factor, and the area (27648) is over max_pixels.
        assert_eq!(smart_resize(3453, 18, 32, 1024, 4096).unwrap(), (864, 32));
    }

    #[test]
    fn aspect_ratio_over_200_refused() {
        assert!(matches!(
            smart_resize(1, 201, 32, 0, u64::MAX),
            Err(MediaError::AspectRatio { .. })
        ));
        assert!(smart_resize(1, 200, 32, 1024, u64::MAX).is_ok());
        assert!(matches!(
            smart_resize(0, 5, 32, 0, 10),
            Err(MediaError::EmptyImage { .. })
        ));
    }

    #[test]
    fn video_rule_uses_the_volume() {
        // tiny-a video processor: size {1024, 262144}; 4 frames of 64x96 stay as they are.
        assert_eq!(
            smart_resize_video(4, 64, 96, 2, 32, 1024, 262_144).unwrap(),
            (64, 96)
        );
        // Python (transformers' rule with the per-frame cap): 2 frames of 512x512 -> (352, 352)
        assert_eq!(
            smart_resize_video(2, 512, 512, 2, 32, 1024, 262_144).unwrap(),
            (352, 352)
        );
    }

    proptest::proptest! {
        #[test]
        fn results_are_aligned_and_within_max_when_downscaling(
            h in 1usize..6000, w in 1usize..6000, max in 4096u64..2_000_000
        ) {
            let min = 1024u64.min(max);
            match smart_resize(h, w, 32, min, max) {
                Ok((th, tw)) => {
                    proptest::prop_assert!(th % 32 == 0 && tw % 32 == 0 && th >= 32 && tw >= 32);
                    let rounded = ((h as f64 / 32.0).round_ties_even() * (w as f64 / 32.0).round_ties_even()) * 1024.0;
                    // The reference floors each side at `factor`, so a thin image whose short
                    // side is clamped may exceed `max` (see `clamped_side_may_exceed_max`).
                    if rounded > max as f64 && th > 32 && tw > 32 {
                        proptest::prop_assert!((th * tw) as u64 <= max);
                    }
                }
                Err(e) => {
                    let is_aspect = matches!(e, MediaError::AspectRatio { .. });
                    proptest::prop_assert!(is_aspect, "{}", e);
                }
            }
        }
    }
}
