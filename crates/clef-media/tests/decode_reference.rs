//! `decode_image` against what Pillow/transformers make of the same files
//! (tests/data/decode, made by tests/data/generate.py with Pillow 12.2.0).

mod common;

use clef_media::{decode_image, decode_image_with, AlphaMode, MediaError, MediaLimits};
use common::{data_dir, diff, load_rgb, read};

fn check(file: &str, content_type: &str, expected: &str, alpha: AlphaMode) -> (u8, usize) {
    let dir = data_dir().join("decode");
    let got = decode_image_with(
        content_type,
        &read(dir.join(file)),
        &MediaLimits::default(),
        alpha,
    )
    .unwrap_or_else(|e| panic!("{file}: {e}"));
    diff(&got, &load_rgb(dir.join(expected)))
}

#[test]
fn png_alpha_composited_onto_white_like_convert_to_rgb() {
    for (file, expected) in [
        ("rgba.png", "rgba_rgb.png"),
        ("la.png", "la_rgb.png"),
        ("gray.png", "gray_rgb.png"),
        ("palette_trns.png", "palette_trns_rgb.png"),
    ] {
        assert_eq!(
            check(file, "image/png", expected, AlphaMode::CompositeOnWhite),
            (0, 0),
            "{file}"
        );
    }
}

#[test]
fn png_alpha_discarded_like_pil_convert_rgb() {
    for (file, expected) in [("rgba.png", "rgba_drop.png"), ("la.png", "la_drop.png")] {
        assert_eq!(
            check(file, "image/png", expected, AlphaMode::Discard),
            (0, 0),
            "{file}"
        );
    }
}

#[test]
fn webp_lossless_with_alpha_is_exact() {
    assert_eq!(
        check(
            "lossless_alpha.webp",
            "image/webp",
            "lossless_alpha_rgb.png",
            AlphaMode::CompositeOnWhite
        ),
        (0, 0)
    );
}

/// Lossy formats decode to Pillow's bytes exactly: image-webp reproduces libwebp, and JPEG goes
/// through libjpeg-turbo's decoder (mozjpeg), as Pillow's does.
#[test]
fn lossy_formats_decode_exactly_like_pillow() {
    for (file, ct, expected) in [
        ("photo420.jpg", "image/jpeg", "photo420_rgb.png"),
        ("photo422.jpg", "image/jpeg", "photo422_rgb.png"),
        ("photo444.jpg", "image/jpg", "photo444_rgb.png"),
        ("lossy.webp", "image/webp", "lossy_rgb.png"),
    ] {
        assert_eq!(
            check(file, ct, expected, AlphaMode::CompositeOnWhite),
            (0, 0),
            "{file}"
        );
    }
}

/// The layouts where another decoder's rounding shows (tests/data/jpeg_modes.py, Pillow 13.0):
/// subsampled chroma at odd sizes, progressive scans, greyscale. All exact.
#[test]
fn jpeg_layouts_decode_exactly_like_pillow() {
    for name in [
        "jpeg_420_odd",
        "jpeg_422_odd",
        "jpeg_progressive",
        "jpeg_gray",
    ] {
        assert_eq!(
            check(
                &format!("{name}.jpg"),
                "image/jpeg",
                &format!("{name}_rgb.png"),
                AlphaMode::CompositeOnWhite
            ),
            (0, 0),
            "{name}"
        );
    }
}

/// CMYK: libjpeg's CMYK output read as Adobe-inverted, then Pillow's integer CMYK -> RGB.
#[test]
fn cmyk_jpeg_decodes_exactly_like_pillow() {
    assert_eq!(
        check(
            "jpeg_cmyk.jpg",
            "image/jpeg",
            "jpeg_cmyk_rgb.png",
            AlphaMode::CompositeOnWhite
        ),
        (0, 0)
    );
}

/// Pillow refuses a JPEG whose data ends early ("image file is truncated"), even when only
/// the end-of-image marker is missing; libjpeg alone would grey out the rest and carry on.
#[test]
fn truncated_jpegs_are_refused_like_pillow() {
    let dir = data_dir().join("decode");
    let whole = read(dir.join("jpeg_420_odd.jpg"));
    let cut_scan = read(dir.join("jpeg_truncated.jpg"));
    for (what, bytes) in [
        ("cut mid-scan", cut_scan),
        ("no end marker", whole[..whole.len() - 2].to_vec()),
        ("cut by 10 bytes", whole[..whole.len() - 10].to_vec()),
    ] {
        let err = decode_image("image/jpeg", &bytes, &MediaLimits::default()).unwrap_err();
        assert!(matches!(err, MediaError::Decode(_)), "{what}: {err:?}");
        assert_eq!((err.status(), err.code()), (422, 5012), "{what}");
    }
    assert!(decode_image("image/jpeg", &whole, &MediaLimits::default()).is_ok());
}

#[test]
fn exif_orientation_is_applied() {
    let dir = data_dir().join("decode");
    let got = decode_image(
        "image/jpeg",
        &read(dir.join("exif6.jpg")),
        &MediaLimits::default(),
    )
    .unwrap();
    let expected = load_rgb(dir.join("exif6_rgb.png"));
    assert_eq!(got.dimensions(), (32, 48));
    assert_eq!(diff(&got, &expected), (0, 0));
}

#[test]
fn animated_images_are_refused() {
    let dir = data_dir().join("decode");
    let limits = MediaLimits::default();
    for (file, ct) in [
        ("animated.png", "image/png"),
        ("animated.webp", "image/webp"),
    ] {
        let err = decode_image(ct, &read(dir.join(file)), &limits).unwrap_err();
        assert!(matches!(err, MediaError::Animated), "{file}: {err}");
        assert_eq!((err.status(), err.code()), (422, 5012));
    }
}

/// model.md §7.1 step 1: "convert to RGB (transparent images are composited onto white by
/// transformers' `convert_to_rgb`)". `convert_to_rgb` works on Pillow's modes: 16-bit greyscale
/// is `I;16`, whose RGB(A) conversion clips to 255; an RGB PNG with a tRNS colour key is mode
/// `RGB` and is returned unchanged (no compositing); low-bit greyscale keeps the raw tRNS value,
/// compared against the 8-bit-scaled samples. (tests/data/png_modes.py made the files.)
#[test]
fn png_modes_convert_like_pillow() {
    for name in [
        "gray16",
        "rgb8_trns",
        "rgb16_trns",
        "gray2_trns",
        "gray4_trns",
        "gray8_trns",
    ] {
        assert_eq!(
            check(
                &format!("png_{name}.png"),
                "image/png",
                &format!("png_{name}_rgb.png"),
                AlphaMode::CompositeOnWhite
            ),
            (0, 0),
            "{name}"
        );
    }
}
