//! Video container types: declared content type versus the bytes' magic numbers.

use crate::decode::essence;
use crate::error::MediaError;

/// Container families accepted for video files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Container {
    /// ISO base media / QuickTime (`video/mp4`, `video/quicktime`). One family: the two types
    /// are used interchangeably by clients, so either is accepted for either brand.
    IsoMedia,
    /// Matroska / WebM (`video/webm`).
    WebM,
}

impl Container {
    pub fn from_content_type(content_type: &str) -> Result<Container, MediaError> {
        match essence(content_type).as_str() {
            "video/mp4" | "video/quicktime" => Ok(Container::IsoMedia),
            "video/webm" => Ok(Container::WebM),
            _ => Err(MediaError::UnsupportedContentType(content_type.to_string())),
        }
    }

    /// ffmpeg demuxer forced for this container, so ffmpeg never guesses a format (a playlist
    /// or an image sequence hiding behind a video content type is refused instead of opened).
    pub fn demuxer(self) -> &'static str {
        match self {
            Container::IsoMedia => "mov",
            Container::WebM => "matroska",
        }
    }

    /// File extension for the temp file.
    pub fn extension(self) -> &'static str {
        match self {
            Container::IsoMedia => "mp4",
            Container::WebM => "webm",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Container::IsoMedia => "an MP4/QuickTime file",
            Container::WebM => "a WebM/Matroska file",
        }
    }
}

/// The container the bytes are, from their first box / EBML header.
fn sniff(bytes: &[u8]) -> Option<Container> {
    if bytes.starts_with(&[0x1A, 0x45, 0xDF, 0xA3]) {
        return Some(Container::WebM);
    }
    if bytes.len() >= 8 {
        let kind = &bytes[4..8];
        // `ftyp` first in MP4 and modern MOV; old QuickTime files may open with other atoms.
        if [&b"ftyp"[..], b"moov", b"mdat", b"wide", b"free", b"skip"].contains(&kind) {
            return Some(Container::IsoMedia);
        }
    }
    None
}

/// Checks that the declared type is a supported video type and matches the bytes.
pub fn check_container(content_type: &str, bytes: &[u8]) -> Result<Container, MediaError> {
    let declared = Container::from_content_type(content_type)?;
    match sniff(bytes) {
        Some(actual) if actual == declared => Ok(declared),
        Some(actual) => Err(MediaError::ContentTypeMismatch {
            declared: content_type.to_string(),
            actual: actual.name().to_string(),
        }),
        None => Err(MediaError::VideoDecode("unrecognised video data".into())),
    }
}
