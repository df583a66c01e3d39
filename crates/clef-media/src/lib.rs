//! clef-media: everything between a request's media bytes and the vision tower's input.
//!
//! - [`decode`]: PNG/JPEG/WebP to RGB with header-first limits (api.md §2.3).
//! - [`smart_resize`]: the Qwen processors' target-size rules (model.md §7.1, §7.6).
//! - [`resize`]: Pillow-compatible integer bicubic resampling.
//! - [`patchify`]: normalised pixel rows in the reference's row order (model.md §7.2).
//! - [`prepare`]: the image pipeline; [`video`]: frame lists and ffmpeg-decoded video files.
//! - [`cancel`]: the caller's stop predicate, polled by every long step.
//! - [`source`]: data URLs and `{content_type, base64}` items; [`config`], [`limits`], [`error`].
//!
//! See docs/media.md for the policies (sampling rule, tolerances, deviations from the reference).

pub mod cancel;
pub mod config;
pub mod decode;
pub mod error;
mod jpeg;
mod jpeg_scans;
pub mod limits;
pub mod patchify;
pub mod prepare;
pub mod resize;
pub mod smart_resize;
pub mod source;
pub mod video;

pub use cancel::Cancel;
pub use config::{PreprocessConfig, ProcessorConfig};
pub use decode::{decode_image, decode_image_with, probe_image, AlphaMode, ImageInfo, ImageKind};
pub use error::MediaError;
pub use image::RgbImage;
pub use limits::MediaLimits;
pub use patchify::{frames_to_patches, image_to_patches, PatchGrid, VisionInput};
pub use prepare::{
    image_target_size, prepare_decoded_image, prepare_image, prepare_image_with_cancel,
    prepare_images, PreparedImage,
};
pub use resize::{resize_bicubic, resize_bicubic_with_cancel};
pub use smart_resize::{smart_resize, smart_resize_video};
pub use source::{
    decode_base64, parse_data_url, parse_image_item, parse_images, parse_video_item, EncodedMedia,
    VideoItem, DEFAULT_FRAME_LIST_FPS,
};
pub use video::{
    prepare_video_file, prepare_video_file_with, prepare_video_file_with_cancel,
    prepare_video_frames, prepare_video_frames_with_cancel, video_frame_target_size, FoundTools,
    PreparedVideo, VideoGroup, VideoTools,
};
