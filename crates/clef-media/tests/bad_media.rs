//! Bad images get the right typed error (422/5012), never a panic; oversized dimensions are
//! refused from the header before pixels are allocated.

use std::io::Cursor;

use clef_media::{
    decode_image, prepare_image, probe_image, MediaError, MediaLimits, ProcessorConfig,
};
use image::{ImageFormat, RgbImage};
use proptest::prelude::*;

fn encode(img: &RgbImage, format: ImageFormat) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, format).unwrap();
    out.into_inner()
}

fn sample(w: u32, h: u32) -> RgbImage {
    RgbImage::from_fn(w, h, |x, y| {
        image::Rgb([(x * 7) as u8, (y * 13) as u8, (x ^ y) as u8])
    })
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A valid small PNG whose IHDR is rewritten to declare `w × h` (CRC fixed up), i.e. a
/// decompression bomb's header in front of a tiny payload.
fn png_declaring(w: u32, h: u32) -> Vec<u8> {
    let mut png = encode(&sample(8, 8), ImageFormat::Png);
    // signature (8) + length (4) + "IHDR" (4), then width, height.
    png[16..20].copy_from_slice(&w.to_be_bytes());
    png[20..24].copy_from_slice(&h.to_be_bytes());
    let crc = crc32(&png[12..29]);
    png[29..33].copy_from_slice(&crc.to_be_bytes());
    png
}

/// A valid small baseline JPEG whose SOF0 declares `w × h`.
fn jpeg_declaring(w: u16, h: u16) -> Vec<u8> {
    let mut jpg = encode(&sample(8, 8), ImageFormat::Jpeg);
    let sof = jpg
        .windows(2)
        .position(|m| m == [0xFF, 0xC0])
        .expect("SOF0");
    jpg[sof + 5..sof + 7].copy_from_slice(&h.to_be_bytes());
    jpg[sof + 7..sof + 9].copy_from_slice(&w.to_be_bytes());
    jpg
}

/// A lossless WebP whose VP8L header declares 16383 × 16383. (16384, the format's maximum,
/// is misread as 0 by image-webp 0.2.4, `(1 + header) & 0x3FFF`; that is refused as empty.)
fn webp_declaring_max() -> Vec<u8> {
    let mut webp = encode(&sample(8, 8), ImageFormat::WebP);
    let vp8l = webp
        .windows(4)
        .position(|m| m == b"VP8L")
        .expect("VP8L chunk");
    let at = vp8l + 8;
    assert_eq!(webp[at], 0x2f);
    let mut bits = u32::from_le_bytes(webp[at + 1..at + 5].try_into().unwrap());
    bits = (bits & !0x0FFF_FFFF) | 0x3FFE | (0x3FFE << 14);
    webp[at + 1..at + 5].copy_from_slice(&bits.to_le_bytes());
    webp
}

fn limits() -> MediaLimits {
    MediaLimits::default()
}

#[test]
fn decompression_bombs_are_refused_from_the_header() {
    for (name, bytes, ct) in [
        (
            "png 100000x100000",
            png_declaring(100_000, 100_000),
            "image/png",
        ),
        ("png 4001x4000", png_declaring(4001, 4000), "image/png"),
        (
            "jpeg 65535x65535",
            jpeg_declaring(65_535, 65_535),
            "image/jpeg",
        ),
        ("webp 16383x16383", webp_declaring_max(), "image/webp"),
    ] {
        let err = decode_image(ct, &bytes, &limits()).unwrap_err();
        assert!(
            matches!(err, MediaError::TooManyPixels { .. }),
            "{name}: {err}"
        );
        assert_eq!((err.status(), err.code()), (422, 5012));
        assert!(matches!(
            probe_image(ct, &bytes, &limits()),
            Err(MediaError::TooManyPixels { .. })
        ));
    }
    // 16,000,000 pixels exactly pass the header check (the limit is on the product).
    assert_eq!(
        probe_image("image/png", &png_declaring(4000, 4000), &limits())
            .unwrap()
            .width,
        4000
    );
}

#[test]
fn content_type_must_match_the_bytes() {
    let png = encode(&sample(8, 8), ImageFormat::Png);
    let jpg = encode(&sample(8, 8), ImageFormat::Jpeg);
    let err = decode_image("image/jpeg", &png, &limits()).unwrap_err();
    assert!(
        matches!(err, MediaError::ContentTypeMismatch { .. }),
        "{err}"
    );
    assert!(matches!(
        decode_image("image/webp", &jpg, &limits()),
        Err(MediaError::ContentTypeMismatch { .. })
    ));
    assert!(matches!(
        decode_image("image/gif", &png, &limits()),
        Err(MediaError::UnsupportedContentType(_))
    ));
    let gif = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;".to_vec();
    assert!(matches!(
        decode_image("image/png", &gif, &limits()),
        Err(MediaError::ContentTypeMismatch { .. })
    ));
    // image/jpg is an alias, and content types are case-insensitive.
    assert!(decode_image("image/jpg", &jpg, &limits()).is_ok());
    assert!(decode_image("IMAGE/PNG", &png, &limits()).is_ok());
}

#[test]
fn corrupt_and_truncated_bytes_are_decode_errors() {
    let png = encode(&sample(40, 30), ImageFormat::Png);
    let jpg = encode(&sample(40, 30), ImageFormat::Jpeg);
    let webp = encode(&sample(40, 30), ImageFormat::WebP);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("image/png", Vec::new()),
        ("image/png", b"\x89PNG\r\n\x1a\ngarbage".to_vec()),
        ("image/png", png[..png.len() / 2].to_vec()),
        ("image/jpeg", jpg[..20].to_vec()),
        ("image/webp", webp[..webp.len() - 10].to_vec()),
        ("image/png", b"not an image at all".to_vec()),
    ];
    for (ct, bytes) in cases {
        let err = decode_image(ct, &bytes, &limits()).unwrap_err();
        assert!(
            matches!(err, MediaError::Decode(_)),
            "{ct} {} bytes: {err:?}",
            bytes.len()
        );
        assert_eq!(err.status(), 422);
    }
}

#[test]
fn byte_limit_and_aspect_ratio() {
    let png = encode(&sample(40, 30), ImageFormat::Png);
    let small = MediaLimits {
        max_image_bytes: png.len() as u64 - 1,
        ..limits()
    };
    assert!(matches!(
        decode_image("image/png", &png, &small),
        Err(MediaError::TooManyBytes { .. })
    ));
    let strip = encode(&sample(300, 1), ImageFormat::Png);
    let err =
        prepare_image("image/png", &strip, &ProcessorConfig::default(), &limits()).unwrap_err();
    assert!(matches!(err, MediaError::AspectRatio { .. }), "{err}");
    assert_eq!(err.status(), 422);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512), ct in 0usize..3) {
        let ct = ["image/png", "image/jpeg", "image/webp"][ct];
        let _ = decode_image(ct, &bytes, &limits());
    }

    #[test]
    fn mutated_images_never_panic(pos in 0usize..4096, val in any::<u8>(), fmt in 0usize..3, cut in 0usize..4096) {
        let (format, ct) = [
            (ImageFormat::Png, "image/png"),
            (ImageFormat::Jpeg, "image/jpeg"),
            (ImageFormat::WebP, "image/webp"),
        ][fmt];
        let mut bytes = encode(&sample(24, 16), format);
        let n = bytes.len();
        bytes[pos % n] = val;
        bytes.truncate(n - cut % (n / 2));
        if let Ok(img) = decode_image(ct, &bytes, &limits()) {
            prop_assert!(img.width() > 0 && img.height() > 0);
        }
    }
}
