//! Still-image decoding: content-type checks, header-first limits, animation refusal, RGB.

use std::io::Cursor;

use image::codecs::jpeg::JpegDecoder;
use image::codecs::png::PngDecoder;
use image::codecs::webp::WebPDecoder;
use image::{DynamicImage, ImageDecoder, Limits, RgbImage};

use crate::cancel::Cancel;
use crate::error::MediaError;
use crate::limits::MediaLimits;

/// Still-image formats the server accepts (api.md §2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageKind {
    Png,
    Jpeg,
    WebP,
}

impl ImageKind {
    /// Parses a declared content type: `image/png`, `image/jpeg` (alias `image/jpg`),
    /// `image/webp`; case-insensitive, parameters after `;` ignored.
    pub fn from_content_type(content_type: &str) -> Result<ImageKind, MediaError> {
        match essence(content_type).as_str() {
            "image/png" => Ok(ImageKind::Png),
            "image/jpeg" | "image/jpg" => Ok(ImageKind::Jpeg),
            "image/webp" => Ok(ImageKind::WebP),
            _ => Err(MediaError::UnsupportedContentType(content_type.to_string())),
        }
    }

    /// The canonical content type.
    pub fn content_type(self) -> &'static str {
        match self {
            ImageKind::Png => "image/png",
            ImageKind::Jpeg => "image/jpeg",
            ImageKind::WebP => "image/webp",
        }
    }
}

/// Lower-cased media type without parameters (`"Image/PNG; x=y"` → `"image/png"`).
pub(crate) fn essence(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// What the bytes are, by their magic numbers; `None` when unrecognised.
fn sniff(bytes: &[u8]) -> Option<&'static str> {
    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n";
    if bytes.starts_with(PNG) {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.len() >= 12 && &bytes[0..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.starts_with(b"BM") {
        Some("image/bmp")
    } else if bytes.starts_with(b"II*\0") || bytes.starts_with(b"MM\0*") {
        Some("image/tiff")
    } else if bytes.len() >= 12 && &bytes[4..8] == b"ftyp" {
        Some("an ISO media file (video or AVIF/HEIC)")
    } else {
        None
    }
}

/// How transparency is turned into RGB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AlphaMode {
    /// Composite onto white, as transformers' `convert_to_rgb` does (PIL `alpha_composite` over
    /// an opaque white background, then `convert("RGB")`). The project's specified behaviour.
    #[default]
    CompositeOnWhite,
    /// Drop the alpha channel, as PIL's `convert("RGB")` does (what transformers' `load_image`
    /// applies to data-URL strings before the processor runs).
    Discard,
}

/// Header facts of an accepted image, read without decoding any pixel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageInfo {
    pub kind: ImageKind,
    /// Width and height after the EXIF orientation is applied.
    pub width: u32,
    pub height: u32,
}

enum AnyDecoder<'a> {
    // Boxed: the PNG decoder's state is several times larger than the others'.
    Png(Box<PngDecoder<Cursor<&'a [u8]>>>),
    Jpeg(JpegDecoder<Cursor<&'a [u8]>>),
    WebP(WebPDecoder<Cursor<&'a [u8]>>),
}

fn decode_err(e: impl std::fmt::Display) -> MediaError {
    MediaError::Decode(e.to_string())
}

/// The chunks of a PNG before its first `IDAT` (or `IEND`): kind and body, the body `None` when
/// the file ends inside it. Stops at the first chunk whose length runs past any sane offset.
fn png_header_chunks(bytes: &[u8]) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
    let mut pos = 8usize;
    std::iter::from_fn(move || {
        let head = bytes.get(pos..pos.checked_add(8)?)?;
        let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let kind = &head[4..8];
        if kind == b"IDAT" || kind == b"IEND" {
            return None;
        }
        let data = pos + 8;
        let body = bytes.get(data..data.saturating_add(len));
        pos = data.checked_add(len)?.checked_add(4)?;
        Some((kind, body))
    })
}

/// The number of frames an APNG's `acTL` chunk declares (chunks before the first `IDAT`).
fn apng_frame_count(bytes: &[u8]) -> Option<u32> {
    png_header_chunks(bytes).find_map(|(kind, body)| match (kind, body) {
        (b"acTL", Some(b)) if b.len() >= 8 => Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]])),
        _ => None,
    })
}

/// Reads the header, checking content type, byte size, animation and pixel count. Nothing
/// proportional to the pixel count is allocated.
fn open<'a>(
    content_type: &str,
    bytes: &'a [u8],
    limits: &MediaLimits,
) -> Result<(ImageInfo, AnyDecoder<'a>), MediaError> {
    let kind = ImageKind::from_content_type(content_type)?;
    if bytes.len() as u64 > limits.max_image_bytes {
        return Err(MediaError::TooManyBytes {
            what: "image",
            bytes: bytes.len() as u64,
            limit: limits.max_image_bytes,
        });
    }
    match sniff(bytes) {
        Some(actual) if actual == kind.content_type() => {}
        Some(actual) => {
            return Err(MediaError::ContentTypeMismatch {
                declared: content_type.to_string(),
                actual: actual.to_string(),
            })
        }
        None => return Err(MediaError::Decode("unrecognised image data".into())),
    }
    let cursor = Cursor::new(bytes);
    let mut decoder = match kind {
        ImageKind::Png => {
            if apng_frame_count(bytes).is_some_and(|n| n > 1) {
                return Err(MediaError::Animated);
            }
            AnyDecoder::Png(Box::new(
                PngDecoder::with_limits(cursor, decoder_limits(limits)).map_err(decode_err)?,
            ))
        }
        ImageKind::Jpeg => AnyDecoder::Jpeg(JpegDecoder::new(cursor).map_err(decode_err)?),
        ImageKind::WebP => {
            let d = WebPDecoder::new(cursor).map_err(decode_err)?;
            if d.has_animation() {
                return Err(MediaError::Animated);
            }
            AnyDecoder::WebP(d)
        }
    };
    let (width, height) = match &decoder {
        AnyDecoder::Png(d) => d.dimensions(),
        AnyDecoder::Jpeg(d) => d.dimensions(),
        AnyDecoder::WebP(d) => d.dimensions(),
    };
    check_pixels(width, height, limits)?;
    if kind == ImageKind::Jpeg {
        // libjpeg's work is pixels × scans: bound it before anything is decoded
        crate::jpeg_scans::check_scans(bytes, width, height, limits)?;
    }
    let orientation = match &mut decoder {
        AnyDecoder::Png(d) => d.orientation(),
        AnyDecoder::Jpeg(d) => d.orientation(),
        AnyDecoder::WebP(d) => d.orientation(),
    }
    .unwrap_or(image::metadata::Orientation::NoTransforms);
    let swaps = matches!(
        orientation,
        image::metadata::Orientation::Rotate90
            | image::metadata::Orientation::Rotate270
            | image::metadata::Orientation::Rotate90FlipH
            | image::metadata::Orientation::Rotate270FlipH
    );
    let (width, height) = if swaps {
        (height, width)
    } else {
        (width, height)
    };
    Ok((
        ImageInfo {
            kind,
            width,
            height,
        },
        decoder,
    ))
}

pub(crate) fn check_pixels(
    width: u32,
    height: u32,
    limits: &MediaLimits,
) -> Result<(), MediaError> {
    if width == 0 || height == 0 {
        return Err(MediaError::EmptyImage {
            width: width as u64,
            height: height as u64,
        });
    }
    if width as u64 * height as u64 > limits.max_pixels_decoded {
        return Err(MediaError::TooManyPixels {
            width: width as u64,
            height: height as u64,
            limit: limits.max_pixels_decoded,
        });
    }
    Ok(())
}

/// Decoder-side limits as a second line of defence behind the header check: sides and the
/// allocation of a 16-bit RGBA buffer of the largest accepted image (plus slack for the
/// decoders' own state).
fn decoder_limits(limits: &MediaLimits) -> Limits {
    let side = u32::try_from(limits.max_pixels_decoded).unwrap_or(u32::MAX);
    let mut l = Limits::default();
    l.max_image_width = Some(side);
    l.max_image_height = Some(side);
    l.max_alloc = Some(
        limits
            .max_pixels_decoded
            .saturating_mul(8)
            .saturating_add(64 << 20),
    );
    l
}

/// Header-only check of an image: returns its format and (oriented) size, or the error
/// [`decode_image`] would give for its type, size or animation.
pub fn probe_image(
    content_type: &str,
    bytes: &[u8],
    limits: &MediaLimits,
) -> Result<ImageInfo, MediaError> {
    open(content_type, bytes, limits).map(|(info, _)| info)
}

/// Decodes a PNG, JPEG or WebP into 8-bit RGB, compositing transparency onto white.
///
/// Checks, in order: content type supported, byte size, the bytes' real format equals the
/// declared one (`image/jpg` = `image/jpeg`), not animated, declared width × height within
/// `max_pixels_decoded` (read from the header, before any pixel buffer exists). The EXIF
/// orientation is applied, as transformers' `load_image` does with `exif_transpose`.
pub fn decode_image(
    content_type: &str,
    bytes: &[u8],
    limits: &MediaLimits,
) -> Result<RgbImage, MediaError> {
    decode_image_with(content_type, bytes, limits, AlphaMode::CompositeOnWhite)
}

/// [`decode_image`] with an explicit treatment of transparency.
pub fn decode_image_with(
    content_type: &str,
    bytes: &[u8],
    limits: &MediaLimits,
    alpha: AlphaMode,
) -> Result<RgbImage, MediaError> {
    decode_image_cancellable(content_type, bytes, limits, alpha, Cancel::never())
}

/// [`decode_image_with`], polling `cancel` between the scans of a JPEG (the format whose
/// decoding cost grows with its scan count). PNG and WebP decoding is not interrupted: its cost
/// is bounded by the pixel limit alone.
pub(crate) fn decode_image_cancellable(
    content_type: &str,
    bytes: &[u8],
    limits: &MediaLimits,
    alpha: AlphaMode,
    cancel: Cancel,
) -> Result<RgbImage, MediaError> {
    let (_, decoder) = open(content_type, bytes, limits)?;
    let dl = decoder_limits(limits);
    let (mut img, orientation) = match decoder {
        AnyDecoder::Png(d) => {
            let (img, orientation) = finish(*d, dl)?;
            (pillow_png_mode(img, png_header(bytes)), orientation)
        }
        AnyDecoder::Jpeg(mut d) => match crate::jpeg::decode(bytes, limits, cancel)? {
            Some(img) => {
                let orientation = d
                    .orientation()
                    .unwrap_or(image::metadata::Orientation::NoTransforms);
                (img, orientation)
            }
            None => finish(d, dl)?,
        },
        AnyDecoder::WebP(d) => finish(d, dl)?,
    };
    img.apply_orientation(orientation);
    Ok(to_rgb(img, alpha))
}

/// What a PNG's header says about its samples: colour type, bit depth and the raw tRNS key of
/// a greyscale or RGB image (chunks before the first `IDAT`).
#[derive(Debug, Clone, Copy, Default)]
struct PngHeader {
    color_type: u8,
    bit_depth: u8,
    has_trns: bool,
    gray_key: Option<u16>,
}

fn png_header(bytes: &[u8]) -> PngHeader {
    let mut h = PngHeader::default();
    for (kind, body) in png_header_chunks(bytes) {
        match (kind, body) {
            (b"IHDR", Some(b)) if b.len() >= 10 => {
                h.bit_depth = b[8];
                h.color_type = b[9];
            }
            (b"tRNS", Some(b)) => {
                h.has_trns = true;
                if h.color_type == 0 && b.len() >= 2 {
                    h.gray_key = Some(u16::from_be_bytes([b[0], b[1]]));
                }
            }
            _ => {}
        }
    }
    h
}

/// Brings the image crate's expansion of a PNG to the mode Pillow opens it in, where the two
/// differ (model.md §7.1: the reference converts Pillow's image with `convert_to_rgb`):
///
/// - RGB with a tRNS colour key: Pillow's mode is `RGB` (the key only in `info`), which
///   `convert_to_rgb` returns unchanged, so the key is ignored rather than composited;
/// - greyscale below 8 bits with tRNS: Pillow scales the samples to 8 bits (`L`) but keeps the
///   raw key, so a pixel is transparent only when its scaled value equals the raw key;
/// - 16-bit greyscale: Pillow's mode `I;16`, whose conversion to RGB(A) clips at 255 instead of
///   keeping the high byte.
fn pillow_png_mode(img: DynamicImage, h: PngHeader) -> DynamicImage {
    match img {
        DynamicImage::ImageRgba8(i) if h.color_type == 2 && h.has_trns => {
            DynamicImage::ImageRgb8(RgbImage::from_fn(i.width(), i.height(), |x, y| {
                let p = i.get_pixel(x, y).0;
                image::Rgb([p[0], p[1], p[2]])
            }))
        }
        DynamicImage::ImageRgba16(i) if h.color_type == 2 && h.has_trns => {
            DynamicImage::ImageRgb16(image::ImageBuffer::from_fn(
                i.width(),
                i.height(),
                |x, y| {
                    let p = i.get_pixel(x, y).0;
                    image::Rgb([p[0], p[1], p[2]])
                },
            ))
        }
        DynamicImage::ImageLumaA8(mut i) if h.color_type == 0 && h.bit_depth < 8 => {
            if let Some(key) = h.gray_key {
                for p in i.pixels_mut() {
                    p.0[1] = if u16::from(p.0[0]) == key { 0 } else { 255 };
                }
            }
            DynamicImage::ImageLumaA8(i)
        }
        DynamicImage::ImageLuma16(i) => DynamicImage::ImageLuma8(image::ImageBuffer::from_fn(
            i.width(),
            i.height(),
            |x, y| image::Luma([clip_i16(i.get_pixel(x, y).0[0])]),
        )),
        DynamicImage::ImageLumaA16(i) if h.color_type == 0 => DynamicImage::ImageLumaA8(
            image::ImageBuffer::from_fn(i.width(), i.height(), |x, y| {
                let p = i.get_pixel(x, y).0;
                image::LumaA([clip_i16(p[0]), (p[1] >> 8) as u8])
            }),
        ),
        other => other,
    }
}

/// Pillow's `I;16` → 8-bit conversion: values above 255 become 255.
fn clip_i16(v: u16) -> u8 {
    v.min(255) as u8
}

fn finish(
    mut d: impl ImageDecoder,
    limits: Limits,
) -> Result<(DynamicImage, image::metadata::Orientation), MediaError> {
    d.set_limits(limits).map_err(decode_err)?;
    let orientation = d
        .orientation()
        .unwrap_or(image::metadata::Orientation::NoTransforms);
    let img = DynamicImage::from_decoder(d).map_err(decode_err)?;
    Ok((img, orientation))
}

/// The reference's conversion to RGB. 16-bit samples keep their high byte, as Pillow does
/// when it opens 16-bit PNGs as 8-bit modes.
fn to_rgb(img: DynamicImage, alpha: AlphaMode) -> RgbImage {
    match img {
        DynamicImage::ImageRgb8(rgb) => rgb,
        DynamicImage::ImageLuma8(l) => RgbImage::from_fn(l.width(), l.height(), |x, y| {
            let v = l.get_pixel(x, y).0[0];
            image::Rgb([v, v, v])
        }),
        DynamicImage::ImageRgba8(rgba) => composite(
            rgba.width(),
            rgba.height(),
            rgba.pixels().map(|p| p.0),
            alpha,
        ),
        DynamicImage::ImageLumaA8(la) => composite(
            la.width(),
            la.height(),
            la.pixels().map(|p| [p.0[0], p.0[0], p.0[0], p.0[1]]),
            alpha,
        ),
        DynamicImage::ImageRgb16(i) => RgbImage::from_fn(i.width(), i.height(), |x, y| {
            let p = i.get_pixel(x, y).0;
            image::Rgb([(p[0] >> 8) as u8, (p[1] >> 8) as u8, (p[2] >> 8) as u8])
        }),
        DynamicImage::ImageLuma16(i) => RgbImage::from_fn(i.width(), i.height(), |x, y| {
            let v = (i.get_pixel(x, y).0[0] >> 8) as u8;
            image::Rgb([v, v, v])
        }),
        DynamicImage::ImageRgba16(i) => composite(
            i.width(),
            i.height(),
            i.pixels().map(|p| p.0.map(|v| (v >> 8) as u8)),
            alpha,
        ),
        DynamicImage::ImageLumaA16(i) => composite(
            i.width(),
            i.height(),
            i.pixels().map(|p| {
                let v = (p.0[0] >> 8) as u8;
                [v, v, v, (p.0[1] >> 8) as u8]
            }),
            alpha,
        ),
        other => other.to_rgb8(),
    }
}

fn composite(
    width: u32,
    height: u32,
    pixels: impl Iterator<Item = [u8; 4]>,
    alpha: AlphaMode,
) -> RgbImage {
    let mut out = Vec::with_capacity(width as usize * height as usize * 3);
    for p in pixels {
        let rgb = match alpha {
            AlphaMode::Discard => [p[0], p[1], p[2]],
            AlphaMode::CompositeOnWhite => over_white(p),
        };
        out.extend_from_slice(&rgb);
    }
    RgbImage::from_raw(width, height, out).unwrap_or_else(|| RgbImage::new(width, height))
}

/// Pillow's `alpha_composite(white, src)` (libImaging/AlphaComposite.c, 7-bit fixed point)
/// specialised to an opaque white destination, where its blend factors reduce to exact
/// multiples of the source alpha.
fn over_white(p: [u8; 4]) -> [u8; 3] {
    const PRECISION_BITS: u32 = 7;
    let a = p[3] as u32;
    if a == 0 {
        return [255, 255, 255];
    }
    let coef1 = a << PRECISION_BITS;
    let coef2 = (255 - a) << PRECISION_BITS;
    let blend = |c: u8| -> u8 {
        let tmp = c as u32 * coef1 + 255 * coef2 + (0x80 << PRECISION_BITS);
        ((((tmp >> 8) + tmp) >> 8) >> PRECISION_BITS) as u8
    };
    [blend(p[0]), blend(p[1]), blend(p[2])]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types() {
        assert_eq!(
            ImageKind::from_content_type("image/JPG").unwrap(),
            ImageKind::Jpeg
        );
        assert_eq!(
            ImageKind::from_content_type(" image/png ; q=1").unwrap(),
            ImageKind::Png
        );
        assert!(matches!(
            ImageKind::from_content_type("image/gif"),
            Err(MediaError::UnsupportedContentType(_))
        ));
    }

    #[test]
    fn over_white_extremes() {
        assert_eq!(over_white([10, 20, 30, 0]), [255, 255, 255]);
        assert_eq!(over_white([10, 20, 30, 255]), [10, 20, 30]);
    }
}
