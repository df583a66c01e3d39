//! Media items as they arrive in a request: data URLs or `{content_type, base64}` objects
//! (api.md §2.3, §2.4). Sizes are checked before base64 decoding allocates.

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;
use serde_json::Value;

use crate::error::MediaError;
use crate::limits::MediaLimits;

/// One encoded media payload: the declared content type and the decoded bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedMedia {
    pub content_type: String,
    pub bytes: Vec<u8>,
}

/// One entry of the `videos` extension.
#[derive(Debug, Clone, PartialEq)]
pub enum VideoItem {
    /// A video file (MP4, WebM, MOV), decoded with ffprobe/ffmpeg.
    File(EncodedMedia),
    /// A list of still frames with their frame rate (24 when not given, as the reference assumes).
    Frames { frames: Vec<EncodedMedia>, fps: f64 },
}

/// Frame rate the reference assumes for a bare list of frames.
pub const DEFAULT_FRAME_LIST_FPS: f64 = 24.0;

/// Upper bound of the decoded size of `len` base64 characters.
fn decoded_len_bound(len: usize) -> u64 {
    (len as u64).div_ceil(4) * 3
}

/// Decodes standard base64 (padding optional, ASCII whitespace ignored), refusing before any
/// allocation when the result could exceed `max_bytes`.
pub fn decode_base64(
    text: &str,
    max_bytes: u64,
    what: &'static str,
) -> Result<Vec<u8>, MediaError> {
    let bound = decoded_len_bound(text.len());
    if bound > max_bytes {
        // The bound may overestimate by padding and whitespace; decode only when it is close.
        let compact = text
            .bytes()
            .filter(|b| !b.is_ascii_whitespace() && *b != b'=')
            .count() as u64;
        let exact = compact * 3 / 4;
        if exact > max_bytes {
            return Err(MediaError::TooManyBytes {
                what,
                bytes: exact,
                limit: max_bytes,
            });
        }
    }
    let cleaned: String;
    let input = if text.bytes().any(|b| b.is_ascii_whitespace()) {
        cleaned = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
        cleaned.as_str()
    } else {
        text
    };
    // Lenient like Python's `base64.decodebytes`: padding optional, stray low bits ignored.
    let engine = GeneralPurpose::new(
        &alphabet::STANDARD,
        GeneralPurposeConfig::new()
            .with_decode_padding_mode(DecodePaddingMode::Indifferent)
            .with_decode_allow_trailing_bits(true),
    );
    engine
        .decode(input)
        .map_err(|e| MediaError::Base64(e.to_string()))
}

/// Splits `data:<type>;base64,<payload>` (scheme case-insensitive). Non-`data:` strings are
/// refused as remote URLs; data URLs without `;base64` are refused as invalid.
pub fn parse_data_url(
    url: &str,
    max_bytes: u64,
    what: &'static str,
) -> Result<EncodedMedia, MediaError> {
    let url = url.trim_start();
    // `get` rather than slicing: the fifth byte may fall inside a multi-byte character.
    let rest = match (url.get(..5), url.get(5..)) {
        (Some(scheme), Some(rest)) if scheme.eq_ignore_ascii_case("data:") => rest,
        _ => return Err(MediaError::RemoteUrl),
    };
    let Some((header, payload)) = rest.split_once(',') else {
        return Err(MediaError::InvalidItem(
            "data URL has no ',' before its payload".into(),
        ));
    };
    let mut parts = header.split(';');
    let content_type = parts.next().unwrap_or("").trim().to_string();
    if !parts.any(|p| p.trim().eq_ignore_ascii_case("base64")) {
        return Err(MediaError::InvalidItem(
            "data URL must be base64-encoded (';base64,')".into(),
        ));
    }
    let bytes = decode_base64(payload, max_bytes, what)?;
    Ok(EncodedMedia {
        content_type,
        bytes,
    })
}

/// An image item: a data URL string or `{"content_type": …, "base64": …}`.
pub fn parse_image_item(item: &Value, limits: &MediaLimits) -> Result<EncodedMedia, MediaError> {
    parse_encoded(item, limits.max_image_bytes, "image")
}

fn parse_encoded(
    item: &Value,
    max_bytes: u64,
    what: &'static str,
) -> Result<EncodedMedia, MediaError> {
    match item {
        Value::String(s) => parse_data_url(s, max_bytes, what),
        Value::Object(map) => {
            let field = |name: &str| match map.get(name) {
                Some(Value::String(s)) => Ok(s.as_str()),
                Some(_) => Err(MediaError::InvalidItem(format!(
                    "`{name}` must be a string"
                ))),
                None => Err(MediaError::InvalidItem(format!("`{name}` is required"))),
            };
            let content_type = field("content_type")?;
            let payload = field("base64")?;
            if let Some(extra) = map.keys().find(|k| *k != "content_type" && *k != "base64") {
                return Err(MediaError::InvalidItem(format!("unknown field `{extra}`")));
            }
            let bytes = decode_base64(payload, max_bytes, what)?;
            Ok(EncodedMedia {
                content_type: content_type.to_string(),
                bytes,
            })
        }
        _ => Err(MediaError::InvalidItem(format!(
            "{what} must be a data URL string or an object {{content_type, base64}}"
        ))),
    }
}

/// The `images` array: at most `max_images` items, each within `max_image_bytes` (checked before
/// its base64 is decoded), all together within `max_total_image_bytes`.
pub fn parse_images(
    items: &[Value],
    limits: &MediaLimits,
) -> Result<Vec<EncodedMedia>, MediaError> {
    if items.len() > limits.max_images {
        return Err(MediaError::TooMany {
            what: "images",
            count: items.len(),
            limit: limits.max_images,
        });
    }
    let mut total = 0u64;
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let media = parse_encoded(item, limits.max_image_bytes, "image")?;
        total += media.bytes.len() as u64;
        if total > limits.max_total_image_bytes {
            return Err(MediaError::TooManyBytes {
                what: "images in total",
                bytes: total,
                limit: limits.max_total_image_bytes,
            });
        }
        out.push(media);
    }
    Ok(out)
}

/// One entry of `videos`: a video file (data URL string or `{content_type, base64}` whose type
/// is `video/*`), a bare array of image items (24 fps), or `{"frames": [...], "fps": N}`.
pub fn parse_video_item(item: &Value, limits: &MediaLimits) -> Result<VideoItem, MediaError> {
    match item {
        Value::Array(frames) => Ok(VideoItem::Frames {
            frames: parse_frames(frames, limits)?,
            fps: DEFAULT_FRAME_LIST_FPS,
        }),
        Value::Object(map) if map.contains_key("frames") => {
            if let Some(extra) = map.keys().find(|k| *k != "frames" && *k != "fps") {
                return Err(MediaError::InvalidItem(format!("unknown field `{extra}`")));
            }
            let Some(Value::Array(frames)) = map.get("frames") else {
                return Err(MediaError::InvalidItem("`frames` must be an array".into()));
            };
            let fps = match map.get("fps") {
                None | Some(Value::Null) => DEFAULT_FRAME_LIST_FPS,
                Some(v) => v
                    .as_f64()
                    .ok_or_else(|| MediaError::InvalidItem("`fps` must be a number".into()))?,
            };
            if !(fps.is_finite() && fps > 0.0) {
                return Err(MediaError::InvalidFps(fps));
            }
            Ok(VideoItem::Frames {
                frames: parse_frames(frames, limits)?,
                fps,
            })
        }
        _ => Ok(VideoItem::File(parse_encoded(
            item,
            limits.max_video_bytes,
            "video",
        )?)),
    }
}

fn parse_frames(items: &[Value], limits: &MediaLimits) -> Result<Vec<EncodedMedia>, MediaError> {
    if items.is_empty() {
        return Err(MediaError::InvalidItem(
            "a frame list needs at least one frame".into(),
        ));
    }
    if items.len() > limits.max_video_frames {
        return Err(MediaError::TooMany {
            what: "video frames",
            count: items.len(),
            limit: limits.max_video_frames,
        });
    }
    let mut total = 0u64;
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let frame = parse_encoded(item, limits.max_image_bytes, "video frame")?;
        total += frame.bytes.len() as u64;
        if total > limits.max_video_bytes {
            return Err(MediaError::TooManyBytes {
                what: "video frames in total",
                bytes: total,
                limit: limits.max_video_bytes,
            });
        }
        out.push(frame);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn data_url_forms() {
        let m = parse_data_url("DATA:image/png;base64,aGVsbG8=", 100, "image").unwrap();
        assert_eq!(
            (m.content_type.as_str(), m.bytes.as_slice()),
            ("image/png", &b"hello"[..])
        );
        let m = parse_data_url("data:image/png;base64,aGVs\nbG8", 100, "image").unwrap();
        assert_eq!(m.bytes, b"hello");
        assert!(matches!(
            parse_data_url("https://x/y.png", 100, "image"),
            Err(MediaError::RemoteUrl)
        ));
        assert!(matches!(
            parse_data_url("file:///etc/passwd", 100, "image"),
            Err(MediaError::RemoteUrl)
        ));
        assert!(matches!(
            parse_data_url("data:image/png,abc", 100, "image"),
            Err(MediaError::InvalidItem(_))
        ));
        assert!(matches!(
            parse_data_url("data:image/png;base64,@@@@", 100, "image"),
            Err(MediaError::Base64(_))
        ));
    }

    #[test]
    fn non_ascii_prefixes_do_not_panic() {
        assert!(matches!(
            parse_data_url("ab😀xyz", 100, "image"),
            Err(MediaError::RemoteUrl)
        ));
        assert!(matches!(
            parse_data_url("dat😀", 100, "image"),
            Err(MediaError::RemoteUrl)
        ));
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_strings_never_panic(s in "\\PC{0,40}", prefix in 0usize..3) {
            let s = [String::new(), "data:image/png;base64,".to_string(), "data:".to_string()][prefix].clone() + &s;
            let _ = parse_data_url(&s, 64, "image");
            let _ = decode_base64(&s, 64, "image");
            let _ = parse_image_item(&serde_json::Value::String(s), &MediaLimits::default());
        }
    }

    #[test]
    fn size_is_refused_before_decoding() {
        let big = "A".repeat(4000);
        assert!(matches!(
            decode_base64(&big, 2000, "image"),
            Err(MediaError::TooManyBytes { bytes: 3000, .. })
        ));
        assert_eq!(decode_base64(&big, 3000, "image").unwrap().len(), 3000);
    }

    #[test]
    fn object_items_and_counts() {
        let limits = MediaLimits {
            max_image_bytes: 5,
            max_total_image_bytes: 8,
            ..MediaLimits::default()
        };
        let item = json!({"content_type": "image/png", "base64": "aGVsbG8="});
        assert_eq!(parse_image_item(&item, &limits).unwrap().bytes, b"hello");
        assert!(parse_image_item(&json!({"content_type": "image/png"}), &limits).is_err());
        assert!(parse_image_item(&json!(42), &limits).is_err());
        let two = vec![item.clone(), item.clone()];
        assert!(matches!(
            parse_images(&two, &limits),
            Err(MediaError::TooManyBytes {
                what: "images in total",
                ..
            })
        ));
        let five = vec![item; 5];
        assert!(matches!(
            parse_images(&five, &limits),
            Err(MediaError::TooMany { count: 5, .. })
        ));
    }

    #[test]
    fn video_item_forms() {
        let limits = MediaLimits::default();
        let frame = json!("data:image/png;base64,aGVsbG8=");
        match parse_video_item(&json!([frame, frame]), &limits).unwrap() {
            VideoItem::Frames { frames, fps } => assert_eq!((frames.len(), fps), (2, 24.0)),
            other => panic!("{other:?}"),
        }
        match parse_video_item(&json!({"frames": [frame], "fps": 10}), &limits).unwrap() {
            VideoItem::Frames { fps, .. } => assert_eq!(fps, 10.0),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse_video_item(&json!({"frames": [frame], "fps": 0}), &limits),
            Err(MediaError::InvalidFps(_))
        ));
        assert!(matches!(
            parse_video_item(&json!("data:video/mp4;base64,aGVsbG8="), &limits).unwrap(),
            VideoItem::File(_)
        ));
        let many = json!(vec![frame; 65]);
        assert!(matches!(
            parse_video_item(&many, &limits),
            Err(MediaError::TooMany { .. })
        ));
    }
}
