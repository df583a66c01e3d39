//! The one error type of the crate, carrying the HTTP status and Workers AI code it maps to.

use thiserror::Error;

/// Why an image or video was refused or could not be processed.
///
/// Everything caused by the media itself (bad bytes, wrong type, too large, animated, too long,
/// unsupported codec) is a 422 with Workers AI code 5012 (api.md §7). A missing or broken
/// `ffmpeg`/`ffprobe` or a temp-file failure is the server's fault: 500/5012. A video whose
/// decoding overruns the configured deadline is reported as 408/3007 (processing deadline).
#[derive(Debug, Error)]
pub enum MediaError {
    /// The JSON item is not a data URL string or a `{content_type, base64}` object.
    #[error("invalid media item: {0}")]
    InvalidItem(String),
    /// `http:`, `https:`, `file:` and other non-`data:` URLs are never fetched.
    #[error("remote media URLs are not accepted; send a data URL or {{content_type, base64}}")]
    RemoteUrl,
    /// A content type this server does not decode (e.g. `image/gif`, `video/x-msvideo`).
    #[error("unsupported content type {0:?}")]
    UnsupportedContentType(String),
    /// The declared content type does not match what the bytes are.
    #[error("content type {declared:?} does not match the data, which is {actual}")]
    ContentTypeMismatch { declared: String, actual: String },
    /// The base64 payload does not decode.
    #[error("invalid base64 data: {0}")]
    Base64(String),
    /// Too many images or frames in one request.
    #[error("too many {what}: {count} (at most {limit})")]
    TooMany {
        what: &'static str,
        count: usize,
        limit: usize,
    },
    /// Encoded bytes over a limit (per item or in total).
    #[error("{what} is {bytes} bytes, over the limit of {limit}")]
    TooManyBytes {
        what: &'static str,
        bytes: u64,
        limit: u64,
    },
    /// Declared dimensions over the decoded-pixel limit (checked from the header, before decoding).
    #[error("image of {width}x{height} pixels is over the limit of {limit} pixels")]
    TooManyPixels { width: u64, height: u64, limit: u64 },
    /// Zero-sized image or frame.
    #[error("image has an empty dimension ({width}x{height})")]
    EmptyImage { width: u64, height: u64 },
    /// Aspect ratio over 200, refused by the processor's resize rule (model.md §7.1).
    #[error("absolute aspect ratio must be at most 200, got {height}x{width}")]
    AspectRatio { height: u64, width: u64 },
    /// The resize rule cannot produce a size within the configured bounds.
    #[error("cannot resize {height}x{width}: {reason}")]
    ResizeBounds {
        height: u64,
        width: u64,
        reason: String,
    },
    /// Animated PNG or WebP.
    #[error("animated images are not accepted")]
    Animated,
    /// The bytes are corrupt or use a feature the decoder does not support.
    #[error("cannot decode image: {0}")]
    Decode(String),
    /// Frames of one video differ in size.
    #[error("all frames of a video must have the same size: frame {index} is {width}x{height}, frame 0 is {first_width}x{first_height}")]
    FrameSizeMismatch {
        index: usize,
        width: u32,
        height: u32,
        first_width: u32,
        first_height: u32,
    },
    /// A frame rate that is not a positive finite number.
    #[error("invalid frame rate {0}")]
    InvalidFps(f64),
    /// Video longer than `max_video_seconds`.
    #[error("video is {seconds:.3} s long, over the limit of {limit} s")]
    VideoTooLong { seconds: f64, limit: f64 },
    /// The container has no video stream, or its codec is not on the allow list.
    #[error("unsupported video: {0}")]
    UnsupportedCodec(String),
    /// ffprobe/ffmpeg could not read the video.
    #[error("cannot decode video: {0}")]
    VideoDecode(String),
    /// A required external program is not installed.
    #[error(
        "video decoding needs `{program}`, which was not found on this server (install ffmpeg)"
    )]
    ToolMissing { program: String },
    /// Video files cannot be read on this server: its video programs were not found (or did not
    /// run) at start-up. The request asks for something this server does not do: a 422.
    #[error("video files are not supported on this server: {reason}")]
    VideoFilesUnsupported { reason: String },
    /// An external program failed for a reason that is not the input's fault.
    #[error("`{program}` failed: {message}")]
    ToolFailed { program: String, message: String },
    /// A JPEG with more scans than allowed: libjpeg re-reads the whole image for every scan, so
    /// the scan count (alone, and times the pixel count) bounds the decoding work. Counted from
    /// the markers before libjpeg sees the file.
    #[error("the JPEG has {scans} scans ({width}x{height} pixels); at most {limit} are accepted for this size (at most {max_scans} scans, and scans x pixels at most {max_scan_pixels})")]
    TooManyScans {
        scans: u64,
        width: u32,
        height: u32,
        limit: u64,
        max_scans: u64,
        max_scan_pixels: u64,
    },
    /// Decoding a video file would decode more pixels than allowed (every frame up to the last
    /// sampled one is decoded).
    #[error("decoding this video means decoding {frames} frames of {width}x{height} pixels ({pixels} pixels), over the limit of {limit} decoded pixels per video")]
    TooMuchVideoWork {
        frames: u64,
        width: u32,
        height: u32,
        pixels: u64,
        limit: u64,
    },
    /// The caller's cancellation predicate said stop (client gone, deadline passed, shutdown).
    /// Callers that pass a predicate report this as their own cancellation, not as an error
    /// of the media; the status below is only a fallback.
    #[error("media preparation was cancelled")]
    Cancelled,
    /// Decoding took longer than the configured deadline.
    #[error("video decoding exceeded the deadline of {seconds} s")]
    Timeout { seconds: f64 },
    /// Local I/O (temp files, pipes).
    #[error("media I/O error: {0}")]
    Io(String),
    /// `processor_config.json` is missing, unreadable or inconsistent.
    #[error("invalid processor config: {0}")]
    Config(String),
}

impl MediaError {
    /// HTTP status this error maps to (api.md §7).
    pub fn status(&self) -> u16 {
        match self {
            MediaError::ToolMissing { .. }
            | MediaError::ToolFailed { .. }
            | MediaError::Io(_)
            | MediaError::Config(_) => 500,
            MediaError::Timeout { .. } | MediaError::Cancelled => 408,
            _ => 422,
        }
    }

    /// Workers AI error code (api.md §7): 5012 for validation and internal failures, 3007 for
    /// an overrun deadline.
    pub fn code(&self) -> u32 {
        match self {
            MediaError::Timeout { .. } | MediaError::Cancelled => 3007,
            _ => 5012,
        }
    }
}

impl From<std::io::Error> for MediaError {
    fn from(e: std::io::Error) -> Self {
        MediaError::Io(e.to_string())
    }
}
