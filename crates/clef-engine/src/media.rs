//! A request's images and videos, decoded, resized and cut into patch rows, plus the token
//! layout the encoder needs to place them (api.md §2.3–2.4, model.md §7).

use clef_api::{ApiError, Request, VideoInput};
use clef_encode::{ImageLayout, MediaLayout, VideoGroup, VideoLayout};
use clef_media::{
    Cancel, FoundTools, MediaError, MediaLimits, PatchGrid, ProcessorConfig, VisionInput,
};
use sha2::{Digest, Sha256};

use crate::error::EngineError;

/// Every media item of a request, images first then videos (the order of the prompt's media
/// piece and of the vision tower's outputs).
pub struct PreparedMedia {
    pub layout: MediaLayout,
    pub inputs: Vec<VisionInput>,
}

impl PreparedMedia {
    pub fn is_empty(&self) -> bool {
        self.inputs.is_empty()
    }

    /// Per item, its patch grid.
    pub fn grids(&self) -> Vec<PatchGrid> {
        self.inputs.iter().map(|i| i.grid).collect()
    }
}

/// SHA-256 of a request's media as the prompt takes it: every image, then every video, each
/// with its kind, content type and bytes (a frame list's rate and every frame), lengths
/// included so that no two different lists hash the same input. `None` without media.
pub fn media_digest(req: &Request) -> Option<[u8; 32]> {
    if !req.has_media() {
        return None;
    }
    let mut h = Sha256::new();
    let item = |h: &mut Sha256, kind: &[u8], content_type: &str, bytes: &[u8]| {
        h.update(kind);
        h.update((content_type.len() as u64).to_le_bytes());
        h.update(content_type.as_bytes());
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    h.update((req.images.len() as u64).to_le_bytes());
    for image in &req.images {
        item(&mut h, b"image", &image.content_type, &image.bytes);
    }
    h.update((req.videos.len() as u64).to_le_bytes());
    for video in &req.videos {
        match video {
            VideoInput::File(file) => item(&mut h, b"video file", &file.content_type, &file.bytes),
            VideoInput::Frames { frames, fps } => {
                h.update(b"video frames");
                h.update(fps.to_bits().to_le_bytes());
                h.update((frames.len() as u64).to_le_bytes());
                for f in frames {
                    item(&mut h, b"frame", &f.content_type, &f.bytes);
                }
            }
        }
    }
    Some(h.finalize().into())
}

pub fn media_error(e: MediaError) -> ApiError {
    ApiError::new(e.status(), e.code(), e.to_string())
}

/// The programs video files are read with, as found once at start-up; `Err` says why video
/// files are refused (frame lists need no program).
pub type VideoSupport = Result<FoundTools, String>;

/// Find `ffmpeg` and `ffprobe` for [`VideoSupport`]: the given paths, else `PATH`.
pub fn locate_video_tools(
    ffmpeg: Option<&std::path::Path>,
    ffprobe: Option<&std::path::Path>,
) -> VideoSupport {
    clef_media::VideoTools::locate(ffmpeg, ffprobe).map_err(|e| match e {
        MediaError::ToolMissing { program } => format!(
            "`{program}` was not found {} at start-up (install ffmpeg, or pass --{program} PATH)",
            if ffmpeg.is_some() || ffprobe.is_some() {
                "where given or on PATH"
            } else {
                "on PATH"
            }
        ),
        other => format!("{other} at start-up"),
    })
}

/// Decode and patchify every image and video of `req`; video files with `tools`' programs.
pub fn prepare_media(
    req: &Request,
    cfg: &ProcessorConfig,
    limits: &MediaLimits,
    tools: &VideoSupport,
) -> Result<PreparedMedia, ApiError> {
    prepare_media_with_cancel(req, cfg, limits, tools, Cancel::never()).map_err(|e| match e {
        EngineError::Refused(e) => e,
        // never cancelled, and media preparation has no internal errors of its own
        other => ApiError::new(500, 5012, other.to_string()),
    })
}

/// [`prepare_media`] polling `cancel` (the request's own predicate) before every item and
/// inside every long step of clef-media; a cancelled preparation is
/// [`EngineError::Cancelled`], never an error of the media.
pub fn prepare_media_with_cancel(
    req: &Request,
    cfg: &ProcessorConfig,
    limits: &MediaLimits,
    tools: &VideoSupport,
    cancel: Cancel,
) -> Result<PreparedMedia, EngineError> {
    let mut layout = MediaLayout::default();
    let mut inputs = Vec::with_capacity(req.images.len() + req.videos.len());
    for (i, image) in req.images.iter().enumerate() {
        let p = clef_media::prepare_image_with_cancel(
            &image.content_type,
            &image.bytes,
            cfg,
            limits,
            cancel,
        )
        .map_err(|e| refusal(e, &format!("images[{i}]")))?;
        layout.images.push(ImageLayout {
            merged_tokens: p.merged_tokens,
        });
        inputs.push(p.input);
    }
    for (i, video) in req.videos.iter().enumerate() {
        let p = match video {
            VideoInput::Frames { frames, fps } => {
                let frames: Vec<(&str, &[u8])> = frames
                    .iter()
                    .map(|f| (f.content_type.as_str(), f.bytes.as_slice()))
                    .collect();
                clef_media::prepare_video_frames_with_cancel(&frames, *fps, cfg, limits, cancel)
            }
            VideoInput::File(file) => match tools {
                Ok(found) => clef_media::prepare_video_file_with_cancel(
                    &found.tools,
                    &file.content_type,
                    &file.bytes,
                    cfg,
                    limits,
                    cancel,
                ),
                Err(reason) => Err(MediaError::VideoFilesUnsupported {
                    reason: reason.clone(),
                }),
            },
        }
        .map_err(|e| refusal(e, &format!("videos[{i}]")))?;
        layout.videos.push(VideoLayout {
            groups: p
                .groups
                .iter()
                .map(|g| VideoGroup {
                    seconds: g.seconds,
                    merged_tokens: g.merged_tokens,
                })
                .collect(),
        });
        inputs.push(p.input);
    }
    Ok(PreparedMedia { layout, inputs })
}

/// A media error as the engine reports it: the caller's cancellation stays a cancellation;
/// anything else is the item's wire error, prefixed with its place in the request.
fn refusal(e: MediaError, path: &str) -> EngineError {
    match e {
        MediaError::Cancelled => EngineError::Cancelled,
        e => EngineError::Refused(prefix(media_error(e), path)),
    }
}

fn prefix(mut e: ApiError, path: &str) -> ApiError {
    e.message = format!("{path}: {}", e.message);
    e
}
