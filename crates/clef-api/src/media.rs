//! Images (Workers AI extension) and videos (project extension), validated as far as possible
//! without decoding them: shape, content type, base64 and byte limits. Decoding and pixel
//! limits belong to the media crate.

use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;

use crate::error::ApiError;
use crate::json::{Json, JsonObject};
use crate::limits::Limits;

/// Content types accepted for images (after mapping the `image/jpg` alias).
pub const IMAGE_CONTENT_TYPES: [&str; 3] = ["image/png", "image/jpeg", "image/webp"];

/// Content types accepted for video files (decoded with ffmpeg by the media crate).
pub const VIDEO_CONTENT_TYPES: [&str; 8] = [
    "video/mp4",
    "video/webm",
    "video/quicktime",
    "video/x-matroska",
    "video/x-msvideo",
    "video/mpeg",
    "video/ogg",
    "video/3gpp",
];

/// Frame rate assumed for a frame list without `fps`, as the reference's processor does.
pub const DEFAULT_FRAME_LIST_FPS: f64 = 24.0;

/// One media file: its (normalised, lowercase) content type and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaInput {
    pub content_type: String,
    pub bytes: Vec<u8>,
}

/// A video: a file to decode, or frames with their rate.
#[derive(Debug, Clone, PartialEq)]
pub enum VideoInput {
    File(MediaInput),
    Frames { frames: Vec<MediaInput>, fps: f64 },
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum MediaClass {
    Image,
    Video,
}

impl MediaClass {
    fn accepted(self) -> &'static [&'static str] {
        match self {
            MediaClass::Image => &IMAGE_CONTENT_TYPES,
            MediaClass::Video => &VIDEO_CONTENT_TYPES,
        }
    }
}

/// Parses the `images` field (already known to be present).
pub(crate) fn parse_images(value: &Json, limits: &Limits) -> Result<Vec<MediaInput>, ApiError> {
    let Json::Array(items) = value else {
        return Err(ApiError::structure(format!(
            "images: must be an array, got {}",
            value.type_name()
        )));
    };
    if items.len() > limits.max_images {
        return Err(ApiError::invalid(format!(
            "images: {} images, at most {}",
            items.len(),
            limits.max_images
        )));
    }
    let mut total = 0usize;
    let mut images = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = format!("images[{i}]");
        let image = parse_item(&at, item, MediaClass::Image, limits.max_image_bytes)?;
        total += image.bytes.len();
        if total > limits.max_total_image_bytes {
            return Err(ApiError::invalid(format!(
                "images: {total} bytes of images in total, at most {}",
                limits.max_total_image_bytes
            )));
        }
        images.push(image);
    }
    Ok(images)
}

/// Parses the `videos` field (already known to be present and enabled).
pub(crate) fn parse_videos(value: &Json, limits: &Limits) -> Result<Vec<VideoInput>, ApiError> {
    let Json::Array(items) = value else {
        return Err(ApiError::structure(format!(
            "videos: must be an array, got {}",
            value.type_name()
        )));
    };
    if items.len() > limits.max_videos {
        return Err(ApiError::invalid(format!(
            "videos: {} videos, at most {}",
            items.len(),
            limits.max_videos
        )));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| parse_video(&format!("videos[{i}]"), item, limits))
        .collect()
}

fn parse_video(at: &str, item: &Json, limits: &Limits) -> Result<VideoInput, ApiError> {
    match item {
        Json::Array(frames) => Ok(VideoInput::Frames {
            frames: parse_frames(at, frames, limits)?,
            fps: DEFAULT_FRAME_LIST_FPS,
        }),
        Json::Object(fields) if fields.contains_key("frames") => {
            if let Some(unknown) = fields.keys().find(|k| *k != "frames" && *k != "fps") {
                return Err(ApiError::invalid(format!(
                    "{at}.{unknown}: unknown field; a frame list has only frames and fps"
                )));
            }
            let Some(Json::Array(frames)) = fields.get("frames") else {
                return Err(ApiError::structure(format!(
                    "{at}.frames: must be an array of images"
                )));
            };
            let fps = match fields.get("fps") {
                None | Some(Json::Null) => DEFAULT_FRAME_LIST_FPS,
                Some(Json::Number(n)) => {
                    let fps = n.as_f64();
                    if !(fps.is_finite() && fps > 0.0) {
                        return Err(ApiError::invalid(format!(
                            "{at}.fps: must be a positive number, got {}",
                            n.as_str()
                        )));
                    }
                    fps
                }
                Some(other) => {
                    return Err(ApiError::structure(format!(
                        "{at}.fps: must be a number, got {}",
                        other.type_name()
                    )))
                }
            };
            Ok(VideoInput::Frames {
                frames: parse_frames(at, frames, limits)?,
                fps,
            })
        }
        other => Ok(VideoInput::File(parse_item(
            at,
            other,
            MediaClass::Video,
            limits.max_video_bytes,
        )?)),
    }
}

fn parse_frames(at: &str, frames: &[Json], limits: &Limits) -> Result<Vec<MediaInput>, ApiError> {
    if frames.is_empty() {
        return Err(ApiError::invalid(format!(
            "{at}: a frame list needs at least one frame"
        )));
    }
    if frames.len() > limits.max_video_frames {
        return Err(ApiError::invalid(format!(
            "{at}: {} frames, at most {}",
            frames.len(),
            limits.max_video_frames
        )));
    }
    let mut total = 0usize;
    let mut parsed = Vec::with_capacity(frames.len());
    for (j, frame) in frames.iter().enumerate() {
        let frame = parse_item(
            &format!("{at}[{j}]"),
            frame,
            MediaClass::Image,
            limits.max_image_bytes,
        )?;
        total += frame.bytes.len();
        if total > limits.max_video_bytes {
            return Err(ApiError::invalid(format!(
                "{at}: {total} bytes of frames in total, at most {}",
                limits.max_video_bytes
            )));
        }
        parsed.push(frame);
    }
    Ok(parsed)
}

/// A data-URL string or a `{content_type, base64}` object.
fn parse_item(
    at: &str,
    item: &Json,
    class: MediaClass,
    max_bytes: usize,
) -> Result<MediaInput, ApiError> {
    let (content_type, payload) = match item {
        Json::String(url) => parse_data_url(at, url)?,
        Json::Object(fields) => parse_object(at, fields)?,
        other => {
            return Err(ApiError::structure(format!(
                "{at}: must be a data URL string or an object {{content_type, base64}}, got {}",
                other.type_name()
            )))
        }
    };
    let content_type = normalise_content_type(&content_type);
    if !class.accepted().contains(&content_type.as_str()) {
        return Err(ApiError::invalid(format!(
            "{at}: content type {content_type:?} is not supported; expected one of {}",
            class.accepted().join(", ")
        )));
    }
    let bytes = decode_base64(at, payload, max_bytes)?;
    Ok(MediaInput {
        content_type,
        bytes,
    })
}

fn parse_data_url<'a>(at: &str, url: &'a str) -> Result<(String, &'a str), ApiError> {
    let scheme_end = url.find(':').unwrap_or(0);
    let scheme = url[..scheme_end].to_ascii_lowercase();
    if scheme != "data" {
        if matches!(scheme.as_str(), "http" | "https" | "file" | "ftp") {
            return Err(ApiError::invalid(format!(
                "{at}: remote URLs are not fetched; send the file inline as a data URL \
                 (data:<type>;base64,...) or as {{content_type, base64}}"
            )));
        }
        return Err(ApiError::invalid(format!(
            "{at}: must be a data URL (data:<type>;base64,...)"
        )));
    }
    let rest = &url[scheme_end + 1..];
    let Some((header, payload)) = rest.split_once(',') else {
        return Err(ApiError::invalid(format!(
            "{at}: data URL has no ',' before its data"
        )));
    };
    let mut parts = header.split(';');
    let content_type = parts.next().unwrap_or("").trim().to_owned();
    if !parts.any(|p| p.trim().eq_ignore_ascii_case("base64")) {
        return Err(ApiError::invalid(format!(
            "{at}: data URL must be base64-encoded (data:<type>;base64,...)"
        )));
    }
    Ok((content_type, payload))
}

fn parse_object<'a>(at: &str, fields: &'a JsonObject) -> Result<(String, &'a str), ApiError> {
    let text = |key: &str| -> Result<&'a str, ApiError> {
        match fields.get(key) {
            Some(Json::String(s)) => Ok(s),
            Some(other) => Err(ApiError::structure(format!(
                "{at}.{key}: must be a string, got {}",
                other.type_name()
            ))),
            None => Err(ApiError::structure(format!("{at}.{key}: required"))),
        }
    };
    let content_type = text("content_type")?;
    let payload = text("base64")?;
    if let Some(unknown) = fields
        .keys()
        .find(|k| *k != "content_type" && *k != "base64")
    {
        return Err(ApiError::invalid(format!(
            "{at}.{unknown}: unknown field; a media object has only content_type and base64"
        )));
    }
    Ok((content_type.to_owned(), payload))
}

fn normalise_content_type(raw: &str) -> String {
    let lower = raw.trim().to_ascii_lowercase();
    match lower.as_str() {
        "image/jpg" => "image/jpeg".to_owned(),
        _ => lower,
    }
}

/// Standard alphabet; padding optional (some clients strip it).
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Decodes base64 (ASCII whitespace ignored, as MIME-wrapped payloads contain it), refusing a
/// payload over `max_bytes` before decoding it.
fn decode_base64(at: &str, payload: &str, max_bytes: usize) -> Result<Vec<u8>, ApiError> {
    let owned;
    let compact = if payload.bytes().any(|b| b.is_ascii_whitespace()) {
        owned = payload
            .bytes()
            .filter(|b| !b.is_ascii_whitespace())
            .collect::<Vec<u8>>();
        &owned[..]
    } else {
        payload.as_bytes()
    };
    let unpadded = compact.len() - compact.iter().rev().take(2).filter(|&&b| b == b'=').count();
    let decoded_len = unpadded / 4 * 3 + (unpadded % 4).saturating_sub(1);
    if decoded_len > max_bytes {
        return Err(ApiError::invalid(format!(
            "{at}: {decoded_len} bytes, at most {max_bytes}"
        )));
    }
    if decoded_len == 0 {
        return Err(ApiError::invalid(format!("{at}: the file is empty")));
    }
    BASE64
        .decode(compact)
        .map_err(|e| ApiError::invalid(format!("{at}: invalid base64 ({e})")))
}
