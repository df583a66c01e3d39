//! Image pipeline: decode → RGB → smart_resize → Pillow bicubic → patchify (model.md §7.1).

use image::RgbImage;

use crate::cancel::Cancel;
use crate::config::ProcessorConfig;
use crate::decode::{decode_image_cancellable, AlphaMode};
use crate::error::MediaError;
use crate::limits::MediaLimits;
use crate::patchify::{image_patches, VisionInput};
use crate::resize::resize_bicubic_with_cancel;
use crate::smart_resize::smart_resize;
use crate::source::EncodedMedia;

/// An image ready for the vision tower.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedImage {
    pub input: VisionInput,
    /// `<|image_pad|>` tokens it costs: `t·h·w / merge²` (= h′·w′ / 1024 for Clef).
    pub merged_tokens: usize,
}

/// The `(height, width)` an image of `height × width` is resized to: smart_resize with the
/// processor's factor and `size.shortest_edge` as minimum, and as maximum the smaller of the
/// server's `max_image_pixels` and the processor's `size.longest_edge`.
pub fn image_target_size(
    height: usize,
    width: usize,
    cfg: &ProcessorConfig,
    limits: &MediaLimits,
) -> Result<(usize, usize), MediaError> {
    let c = &cfg.image;
    if !c.do_resize {
        return Ok((height, width));
    }
    smart_resize(
        height,
        width,
        c.factor(),
        c.min_pixels,
        limits.max_image_pixels.min(c.max_pixels),
    )
}

/// Decodes, resizes and patchifies one image (`content_type` as declared by the client).
pub fn prepare_image(
    content_type: &str,
    bytes: &[u8],
    cfg: &ProcessorConfig,
    limits: &MediaLimits,
) -> Result<PreparedImage, MediaError> {
    prepare_image_with_cancel(content_type, bytes, cfg, limits, Cancel::never())
}

/// [`prepare_image`], polling `cancel` before and after decoding, between a JPEG's scans, and
/// inside resizing and patchify. PNG and WebP decoding is not interrupted; every decode's cost
/// is bounded up front (pixels, and for JPEG pixels × scans, see [`MediaLimits`]).
pub fn prepare_image_with_cancel(
    content_type: &str,
    bytes: &[u8],
    cfg: &ProcessorConfig,
    limits: &MediaLimits,
    cancel: Cancel,
) -> Result<PreparedImage, MediaError> {
    cancel.check()?;
    let img = decode_image_cancellable(
        content_type,
        bytes,
        limits,
        AlphaMode::CompositeOnWhite,
        cancel,
    )?;
    cancel.check()?;
    prepare_decoded(&img, cfg, limits, cancel)
}

/// [`prepare_image`] for an already decoded RGB image.
pub fn prepare_decoded_image(
    img: &RgbImage,
    cfg: &ProcessorConfig,
    limits: &MediaLimits,
) -> Result<PreparedImage, MediaError> {
    prepare_decoded(img, cfg, limits, Cancel::never())
}

fn prepare_decoded(
    img: &RgbImage,
    cfg: &ProcessorConfig,
    limits: &MediaLimits,
    cancel: Cancel,
) -> Result<PreparedImage, MediaError> {
    let (h, w) = image_target_size(img.height() as usize, img.width() as usize, cfg, limits)?;
    let input = if (h, w) == (img.height() as usize, img.width() as usize) {
        image_patches(img, &cfg.image, cancel)?
    } else {
        let resized = resize_bicubic_with_cancel(img, dim(w)?, dim(h)?, cancel)?;
        image_patches(&resized, &cfg.image, cancel)?
    };
    let merged_tokens = input.grid.merged_tokens(cfg.image.merge_size);
    Ok(PreparedImage {
        input,
        merged_tokens,
    })
}

pub(crate) fn dim(v: usize) -> Result<u32, MediaError> {
    u32::try_from(v).map_err(|_| MediaError::ResizeBounds {
        height: v as u64,
        width: v as u64,
        reason: "target side does not fit in 32 bits".into(),
    })
}

/// All images of a request, in order, after the count and total-bytes checks of api.md §2.2.
pub fn prepare_images(
    items: &[EncodedMedia],
    cfg: &ProcessorConfig,
    limits: &MediaLimits,
) -> Result<Vec<PreparedImage>, MediaError> {
    if items.len() > limits.max_images {
        return Err(MediaError::TooMany {
            what: "images",
            count: items.len(),
            limit: limits.max_images,
        });
    }
    let total: u64 = items.iter().map(|m| m.bytes.len() as u64).sum();
    if total > limits.max_total_image_bytes {
        return Err(MediaError::TooManyBytes {
            what: "images in total",
            bytes: total,
            limit: limits.max_total_image_bytes,
        });
    }
    items
        .iter()
        .map(|m| prepare_image(&m.content_type, &m.bytes, cfg, limits))
        .collect()
}
