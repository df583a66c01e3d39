//! Videos: frame lists (the reference's form) and video files decoded with ffmpeg.

mod container;
mod ffmpeg;
mod process;
pub mod sampling;

use std::time::{Duration, Instant};

use image::RgbImage;

pub use container::{check_container, Container};
pub use ffmpeg::{FoundTools, VideoTools, ALLOWED_CODECS};

use crate::cancel::Cancel;
use crate::config::{PreprocessConfig, ProcessorConfig};
use crate::decode::{decode_image_cancellable, probe_image, AlphaMode};
use crate::error::MediaError;
use crate::limits::MediaLimits;
use crate::patchify::{frame_patches, VisionInput};
use crate::prepare::dim;
use crate::resize::resize_bicubic_with_cancel;
use crate::smart_resize::{smart_resize, smart_resize_video};

/// One temporal group (frame pair) of a video as the prompt shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct VideoGroup {
    /// Mean presentation time of the group's first and last frame, in seconds; the encoder
    /// prints it as `<{seconds:.1} seconds>` (Rust's `{:.1}` rounds like Python's `{:.1f}`).
    pub seconds: f64,
    /// `<|video_pad|>` tokens of the group: `h·w / merge²`.
    pub merged_tokens: usize,
}

/// A video ready for the vision tower.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedVideo {
    pub input: VisionInput,
    /// One entry per temporal group, in order (`input.grid.t` of them).
    pub groups: Vec<VideoGroup>,
    /// Time of every frame used, in seconds, before the count was made even.
    pub frame_seconds: Vec<f64>,
}

impl PreparedVideo {
    /// All `<|video_pad|>` tokens of the video.
    pub fn merged_tokens(&self) -> usize {
        self.groups.iter().map(|g| g.merged_tokens).sum()
    }
}

/// Size every frame of a `num_frames`-frame video of `height × width` is resized to.
///
/// First the reference's video rule ([`smart_resize_video`] with the video processor's bounds
/// over the clip's volume); if a frame would still exceed `max_video_frame_pixels`, the image
/// rule with that per-frame cap instead (this project's bound, model.md §7.6). A size that
/// cannot be brought under the cap (aspect ratios near 200 on tiny frames) is refused.
pub fn video_frame_target_size(
    num_frames: usize,
    height: usize,
    width: usize,
    cfg: &PreprocessConfig,
    limits: &MediaLimits,
) -> Result<(usize, usize), MediaError> {
    if !cfg.do_resize {
        return Ok((height, width));
    }
    let factor = cfg.factor();
    let (h, w) = smart_resize_video(
        num_frames,
        height,
        width,
        cfg.temporal_patch_size,
        factor,
        cfg.min_pixels,
        cfg.max_pixels,
    )?;
    let cap = limits.max_video_frame_pixels;
    if (h * w) as u64 <= cap {
        return Ok((h, w));
    }
    let (h, w) = smart_resize(height, width, factor, cfg.min_pixels.min(cap), cap)?;
    if (h * w) as u64 > cap {
        return Err(MediaError::ResizeBounds {
            height: height as u64,
            width: width as u64,
            reason: format!("no size of multiples of {factor} px within {cap} pixels per frame"),
        });
    }
    Ok((h, w))
}

/// Patchifies resized frames and computes the per-group timestamps and token counts.
///
/// Group `g` covers frames `g·T … g·T+T−1` (the last frame repeated to fill the final group);
/// its time is the mean of its first and last frame's time, as the reference's
/// `_calculate_timestamps` computes it.
fn assemble(
    frames: &[RgbImage],
    times: Vec<f64>,
    cfg: &PreprocessConfig,
    cancel: Cancel,
) -> Result<PreparedVideo, MediaError> {
    let input = frame_patches(frames, cfg, cancel)?;
    let tp = cfg.temporal_patch_size;
    let last = times.len().saturating_sub(1);
    let per_group = input.grid.merged_tokens_per_group(cfg.merge_size);
    let groups = (0..input.grid.t)
        .map(|g| {
            let first = times.get(g * tp).copied().unwrap_or(0.0);
            let end = times
                .get((g * tp + tp - 1).min(last))
                .copied()
                .unwrap_or(first);
            VideoGroup {
                seconds: (first + end) / 2.0,
                merged_tokens: per_group,
            }
        })
        .collect();
    Ok(PreparedVideo {
        input,
        groups,
        frame_seconds: times,
    })
}

/// A video given as a list of still frames (`(content_type, bytes)` each) shown at `fps`
/// frames per second (24 when the request gives none, as the reference assumes).
///
/// All frames are checked from their headers first (type, bytes, pixels, equal sizes), then
/// decoded and resized one at a time with the video processor's bounds.
pub fn prepare_video_frames(
    frames: &[(&str, &[u8])],
    fps: f64,
    cfg: &ProcessorConfig,
    limits: &MediaLimits,
) -> Result<PreparedVideo, MediaError> {
    prepare_video_frames_with_cancel(frames, fps, cfg, limits, Cancel::never())
}

/// [`prepare_video_frames`], polling `cancel` between frames and inside resizing and patchify.
pub fn prepare_video_frames_with_cancel(
    frames: &[(&str, &[u8])],
    fps: f64,
    cfg: &ProcessorConfig,
    limits: &MediaLimits,
    cancel: Cancel,
) -> Result<PreparedVideo, MediaError> {
    if !(fps.is_finite() && fps > 0.0) {
        return Err(MediaError::InvalidFps(fps));
    }
    if frames.is_empty() {
        return Err(MediaError::InvalidItem(
            "a video needs at least one frame".into(),
        ));
    }
    if frames.len() > limits.max_video_frames {
        return Err(MediaError::TooMany {
            what: "video frames",
            count: frames.len(),
            limit: limits.max_video_frames,
        });
    }
    let total: u64 = frames.iter().map(|(_, b)| b.len() as u64).sum();
    if total > limits.max_video_bytes {
        return Err(MediaError::TooManyBytes {
            what: "video frames in total",
            bytes: total,
            limit: limits.max_video_bytes,
        });
    }
    let mut size = None;
    for (index, (content_type, bytes)) in frames.iter().enumerate() {
        let info = probe_image(content_type, bytes, limits)?;
        match size {
            None => size = Some((info.width, info.height)),
            Some((w, h)) if (w, h) != (info.width, info.height) => {
                return Err(MediaError::FrameSizeMismatch {
                    index,
                    width: info.width,
                    height: info.height,
                    first_width: w,
                    first_height: h,
                })
            }
            Some(_) => {}
        }
    }
    let Some((width, height)) = size else {
        return Err(MediaError::InvalidItem(
            "a video needs at least one frame".into(),
        ));
    };
    let vcfg = &cfg.video;
    let (th, tw) =
        video_frame_target_size(frames.len(), height as usize, width as usize, vcfg, limits)?;
    let mut resized = Vec::with_capacity(frames.len());
    for (content_type, bytes) in frames {
        cancel.check()?;
        let img = decode_image_cancellable(
            content_type,
            bytes,
            limits,
            AlphaMode::CompositeOnWhite,
            cancel,
        )?;
        resized.push(fit(img, th, tw, cancel)?);
    }
    let times = (0..frames.len()).map(|i| i as f64 / fps).collect();
    assemble(&resized, times, vcfg, cancel)
}

fn fit(img: RgbImage, h: usize, w: usize, cancel: Cancel) -> Result<RgbImage, MediaError> {
    if (img.height() as usize, img.width() as usize) == (h, w) {
        Ok(img)
    } else {
        resize_bicubic_with_cancel(&img, dim(w)?, dim(h)?, cancel)
    }
}

/// A video file (MP4, MOV or WebM), decoded with the system's `ffprobe`/`ffmpeg`.
///
/// Steps, all within `limits.video_decode_timeout`: container type checked against the bytes;
/// bytes written to a private temp file; ffprobe reads the first video stream's codec (must be
/// in [`ALLOWED_CODECS`]), size (within `max_pixels_decoded`), rotation and duration (within
/// `max_video_seconds`), then its packet times; frames are chosen by
/// [`sampling::choose_frames`]; ffmpeg decodes only those, as raw RGB, which are rotated for
/// display, resized with [`video_frame_target_size`] and patchified. Group times are the
/// frames' presentation times relative to the first frame.
pub fn prepare_video_file(
    content_type: &str,
    bytes: &[u8],
    cfg: &ProcessorConfig,
    limits: &MediaLimits,
) -> Result<PreparedVideo, MediaError> {
    prepare_video_file_with(&VideoTools::default(), content_type, bytes, cfg, limits)
}

/// [`prepare_video_file`] with explicit program locations.
pub fn prepare_video_file_with(
    tools: &VideoTools,
    content_type: &str,
    bytes: &[u8],
    cfg: &ProcessorConfig,
    limits: &MediaLimits,
) -> Result<PreparedVideo, MediaError> {
    prepare_video_file_with_cancel(tools, content_type, bytes, cfg, limits, Cancel::never())
}

/// [`prepare_video_file_with`], polling `cancel` while ffprobe/ffmpeg run (a cancelled run's
/// child is killed and reaped), between decoded frames and inside resizing and patchify.
///
/// The decoding work is bounded before ffmpeg starts: the frames it must decode (every frame up
/// to the last sampled one) times the frame size must be within `max_video_decode_pixels`, and
/// the ffmpeg run gets a deadline derived from that work ([`decode_deadline`]).
pub fn prepare_video_file_with_cancel(
    tools: &VideoTools,
    content_type: &str,
    bytes: &[u8],
    cfg: &ProcessorConfig,
    limits: &MediaLimits,
    cancel: Cancel,
) -> Result<PreparedVideo, MediaError> {
    cancel.check()?;
    let container = Container::from_content_type(content_type)?;
    if bytes.len() as u64 > limits.max_video_bytes {
        return Err(MediaError::TooManyBytes {
            what: "video",
            bytes: bytes.len() as u64,
            limit: limits.max_video_bytes,
        });
    }
    check_container(content_type, bytes)?;
    let dir = tempfile::Builder::new().prefix("clef-video-").tempdir()?;
    let path = dir.path().join(format!("input.{}", container.extension()));
    std::fs::write(&path, bytes)?;
    let timeout = limits.video_decode_timeout;
    let session = ffmpeg::Session {
        tools,
        path: &path,
        container,
        deadline: Instant::now() + timeout,
        timeout,
        cancel,
    };

    let info = session.stream_info()?;
    if !ALLOWED_CODECS.contains(&info.codec.as_str()) {
        return Err(MediaError::UnsupportedCodec(format!(
            "codec {:?} is not accepted (accepted: {})",
            info.codec,
            ALLOWED_CODECS.join(", ")
        )));
    }
    crate::decode::check_pixels(info.width, info.height, limits)?;
    if let Some(d) = info.duration {
        if d > limits.max_video_seconds {
            return Err(MediaError::VideoTooLong {
                seconds: d,
                limit: limits.max_video_seconds,
            });
        }
    }
    let times = session.packet_times(limits)?;
    let (Some(&t0), Some(&t_last)) = (times.first(), times.last()) else {
        return Err(MediaError::VideoDecode(
            "the video stream has no frames".into(),
        ));
    };
    if t_last - t0 > limits.max_video_seconds {
        return Err(MediaError::VideoTooLong {
            seconds: t_last - t0,
            limit: limits.max_video_seconds,
        });
    }
    let chosen = sampling::choose_frames(&times, limits.video_sample_fps, limits.max_video_frames);
    let Some(&last_chosen) = chosen.iter().max() else {
        return Err(MediaError::VideoDecode("no frames selected".into()));
    };
    let work = decode_work(last_chosen, info.width, info.height, limits)?;

    let quarter_turns = display_quarter_turns(info.rotation);
    let (shown_w, shown_h) = if quarter_turns % 2 == 1 {
        (info.height, info.width)
    } else {
        (info.width, info.height)
    };
    let vcfg = &cfg.video;
    let (th, tw) = video_frame_target_size(
        chosen.len(),
        shown_h as usize,
        shown_w as usize,
        vcfg,
        limits,
    )?;
    let mut frames = Vec::with_capacity(chosen.len());
    let mut consume = |raw: RgbImage| -> Result<(), MediaError> {
        let shown = match quarter_turns {
            1 => image::imageops::rotate90(&raw),
            2 => image::imageops::rotate180(&raw),
            3 => image::imageops::rotate270(&raw),
            _ => raw,
        };
        frames.push(fit(shown, th, tw, cancel)?);
        Ok(())
    };
    let (deadline, timeout) = decode_deadline(work, session.deadline, timeout);
    let decoding = ffmpeg::Session {
        deadline,
        timeout,
        ..session
    };
    let decoded_times = decoding.extract(&chosen, &info, &mut consume)?;
    let absolute = decoded_times.unwrap_or_else(|| chosen.iter().map(|&i| times[i]).collect());
    assemble(&frames, relative_times(&absolute, t0)?, vcfg, cancel)
}

/// Pixels ffmpeg decodes to reach the frame at presentation index `last_chosen`: every frame
/// up to it (the `select` filter sees them all; `-frames:v` stops ffmpeg right after it).
/// Refused over `max_video_decode_pixels`.
fn decode_work(
    last_chosen: usize,
    width: u32,
    height: u32,
    limits: &MediaLimits,
) -> Result<u64, MediaError> {
    let frames = last_chosen as u64 + 1;
    let pixels = frames.saturating_mul(u64::from(width) * u64::from(height));
    if pixels > limits.max_video_decode_pixels {
        return Err(MediaError::TooMuchVideoWork {
            frames,
            width,
            height,
            pixels,
            limit: limits.max_video_decode_pixels,
        });
    }
    Ok(pixels)
}

/// Fixed allowance of the ffmpeg run (start-up, container parsing, a loaded machine).
const DECODE_BASE: Duration = Duration::from_secs(5);
/// Slowest decoding rate considered healthy, in pixels per second: about a seventh of the
/// ~1.5·10⁸ px/s measured for H.264 on the shared 2-core machine (docs/media.md, *Cost*).
const DECODE_FLOOR_RATE: f64 = 2e7;

/// The ffmpeg run's deadline and its length for the error message: [`DECODE_BASE`] plus the
/// work at [`DECODE_FLOOR_RATE`], never past the whole video's `deadline` (`timeout` long), so
/// that a small video that stalls frees the compute slot long before the overall bound.
fn decode_deadline(work: u64, deadline: Instant, timeout: Duration) -> (Instant, Duration) {
    let allowed = DECODE_BASE + Duration::from_secs_f64(work as f64 / DECODE_FLOOR_RATE);
    let own = Instant::now() + allowed;
    if own < deadline {
        (own, allowed)
    } else {
        (deadline, timeout)
    }
}

/// How far a decoded frame's time may fall before the first packet's and still count as that
/// instant: ffprobe prints times to the microsecond, ffmpeg's `showinfo` to six significant
/// digits (a millisecond at 100 s and more), so a frame can read up to half a millisecond
/// early. Anything earlier is a damaged file.
const TIME_ROUNDING_S: f64 = 1e-3;

/// Frame times relative to the stream's first packet `t0`, never negative: a rounding-sized
/// negative is 0, anything else that is negative or not finite is the file's fault (a 422),
/// not a layout the encoder would refuse as an internal error.
fn relative_times(absolute: &[f64], t0: f64) -> Result<Vec<f64>, MediaError> {
    absolute
        .iter()
        .map(|&t| {
            let r = t - t0;
            if !r.is_finite() {
                Err(MediaError::VideoDecode(format!(
                    "a frame time ({t} s, first packet at {t0} s) is not a number"
                )))
            } else if r >= 0.0 {
                Ok(r)
            } else if r >= -TIME_ROUNDING_S {
                Ok(0.0)
            } else {
                Err(MediaError::VideoDecode(format!(
                    "a frame at {t} s precedes the stream's first packet at {t0} s \
                     (the file is damaged)"
                )))
            }
        })
        .collect()
}

/// Clockwise quarter turns that display the stored frames upright, as ffmpeg's autorotate
/// derives them: the display matrix gives a counter-clockwise angle θ, and the frame is turned
/// by −θ (rounded to the nearest quarter turn).
fn display_quarter_turns(rotation_ccw: f64) -> u32 {
    if !rotation_ccw.is_finite() {
        return 0;
    }
    let clockwise = (-rotation_ccw).rem_euclid(360.0);
    ((clockwise / 90.0).round() as u32) % 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quarter_turns_follow_ffmpeg() {
        assert_eq!(display_quarter_turns(0.0), 0);
        assert_eq!(display_quarter_turns(90.0), 3);
        assert_eq!(display_quarter_turns(-90.0), 1);
        assert_eq!(display_quarter_turns(180.0), 2);
        assert_eq!(display_quarter_turns(-180.0), 2);
        assert_eq!(display_quarter_turns(270.0), 1);
        assert_eq!(display_quarter_turns(f64::NAN), 0);
    }

    #[test]
    fn frame_size_rule_with_cap() {
        let cfg = ProcessorConfig::default().video;
        let limits = MediaLimits::default();
        // 64 frames of 1920x1080 under the default video bounds, then the 65,536-px frame cap.
        let (h, w) = video_frame_target_size(64, 1080, 1920, &cfg, &limits).unwrap();
        assert!(
            (h * w) as u64 <= 65_536 && h % 32 == 0 && w % 32 == 0,
            "{h}x{w}"
        );
        assert_eq!((h, w), smart_resize(1080, 1920, 32, 4096, 65_536).unwrap());
        // Small frames within both bounds are left alone.
        assert_eq!(
            video_frame_target_size(4, 64, 96, &cfg, &limits).unwrap(),
            (64, 96)
        );
    }

    #[test]
    fn decoding_deadline_follows_the_work() {
        let far = Instant::now() + Duration::from_secs(30);
        // 300 frames of 1280x720: 5 s + 276,480,000 px at 2e7 px/s = 18.8 s
        let (at, allowed) = decode_deadline(300 * 1280 * 720, far, Duration::from_secs(30));
        assert!((allowed.as_secs_f64() - 18.824).abs() < 1e-9, "{allowed:?}");
        assert!(at < far);
        // more work than the whole video's deadline allows: that deadline and its length
        let (at, allowed) = decode_deadline(4_000_000_000, far, Duration::from_secs(30));
        assert_eq!((at, allowed), (far, Duration::from_secs(30)));
        // the work bound itself
        let limits = MediaLimits::default();
        assert_eq!(
            decode_work(1999, 1000, 2000, &limits).unwrap(),
            4_000_000_000
        );
        let err = decode_work(2000, 1000, 2000, &limits).unwrap_err();
        assert!(
            matches!(err, MediaError::TooMuchVideoWork { frames: 2001, .. }),
            "{err}"
        );
        assert_eq!(err.status(), 422);
    }

    #[test]
    fn frame_times_are_never_negative() {
        // What a damaged MP4 gave: the first frame 6.45 µs before the first packet.
        let t = relative_times(&[12.345593548, 12.845, 13.345], 12.3456).unwrap();
        assert_eq!(t[0], 0.0);
        assert!((t[1] - 0.4994).abs() < 1e-9 && (t[2] - 0.9994).abs() < 1e-9);
        for bad in [[12.0, 12.5], [f64::NAN, 12.5], [f64::INFINITY, 12.5]] {
            let err = relative_times(&bad, 12.3456).unwrap_err();
            assert!(matches!(err, MediaError::VideoDecode(_)), "{err}");
            assert_eq!(err.status(), 422);
        }
        assert!(relative_times(&[1.0], f64::NAN).is_err());
    }

    #[test]
    fn group_times_are_pair_means() {
        let cfg = ProcessorConfig::default().video;
        let frames: Vec<RgbImage> = (0..5).map(|_| RgbImage::new(32, 32)).collect();
        let times: Vec<f64> = (0..5).map(|i| i as f64 / 24.0).collect();
        let v = assemble(&frames, times, &cfg, Cancel::never()).unwrap();
        let secs: Vec<f64> = v.groups.iter().map(|g| g.seconds).collect();
        // Python: [(a/24 + b/24)/2 for a, b in [(0,1), (2,3), (4,4)]]
        assert_eq!(
            secs,
            vec![
                0.020833333333333332,
                0.10416666666666666,
                0.16666666666666666
            ]
        );
        assert_eq!(v.groups[0].merged_tokens, 1);
        assert_eq!(v.merged_tokens(), 3);
    }
}
