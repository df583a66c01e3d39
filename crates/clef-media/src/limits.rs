//! Server-side bounds on media, checked before any pixel buffer is allocated.

use std::time::Duration;

/// Limits on images and videos (api.md §2.2–2.4, model.md §7.6). Every number is a server
/// setting; [`MediaLimits::default`] gives the `workers` profile.
#[derive(Debug, Clone, PartialEq)]
pub struct MediaLimits {
    /// Images per request (4).
    pub max_images: usize,
    /// Encoded bytes per image, after base64 decoding (4 MiB).
    pub max_image_bytes: u64,
    /// Encoded bytes of all images of a request together (8 MiB).
    pub max_total_image_bytes: u64,
    /// Width × height as declared by the file, per image or frame (16,000,000).
    pub max_pixels_decoded: u64,
    /// Resize budget per image (server default 1,048,576; the effective bound is also capped by
    /// the processor's `size.longest_edge`).
    pub max_image_pixels: u64,
    /// Frames per video after sampling, or in a frame list (64).
    pub max_video_frames: usize,
    /// Pixels per video frame after resizing (65,536).
    pub max_video_frame_pixels: u64,
    /// Target sampling rate of video files, frames per second (2.0).
    pub video_sample_fps: f64,
    /// Encoded bytes per video file, or of all frames of a frame list together (8 MiB).
    pub max_video_bytes: u64,
    /// Duration of a video file (300 s).
    pub max_video_seconds: f64,
    /// Wall-clock bound on all ffprobe/ffmpeg work for one video (30 s). The decoding run gets
    /// less when its work is small (docs/media.md, *Cancellation and work bounds*).
    pub video_decode_timeout: Duration,
    /// Scans per JPEG (100): ten times libjpeg's default progressive script (10 scans for
    /// colour), several times what mozjpeg's scan optimisation writes; only hand-made or
    /// hostile files carry more. libjpeg reads the whole image once per scan.
    pub max_jpeg_scans: u64,
    /// Scans × pixels per JPEG (1,024,000,000: 64 scans of the largest accepted image, about
    /// 0.5–1.3 s of libjpeg on one core), so that a large image gets fewer scans than a small one.
    pub max_jpeg_scan_pixels: u64,
    /// Pixels ffmpeg decodes for one video file: the frames up to the last sampled one times
    /// the frame size (4,000,000,000: about 2,000 frames of 1080p, 67 s at 30 fps; 4,300 of
    /// 720p). At the ~1.5·10⁸ px/s measured on the shared 2-core machine that is about the
    /// 30 s `video_decode_timeout`, so a video that could not finish in time is refused
    /// up front instead of holding the compute slot until the deadline.
    pub max_video_decode_pixels: u64,
}

impl Default for MediaLimits {
    fn default() -> Self {
        MediaLimits {
            max_images: 4,
            max_image_bytes: 4 * 1024 * 1024,
            max_total_image_bytes: 8 * 1024 * 1024,
            max_pixels_decoded: 16_000_000,
            max_image_pixels: 1_048_576,
            max_video_frames: 64,
            max_video_frame_pixels: 65_536,
            video_sample_fps: 2.0,
            max_video_bytes: 8 * 1024 * 1024,
            max_video_seconds: 300.0,
            video_decode_timeout: Duration::from_secs(30),
            max_jpeg_scans: 100,
            max_jpeg_scan_pixels: 1_024_000_000,
            max_video_decode_pixels: 4_000_000_000,
        }
    }
}
