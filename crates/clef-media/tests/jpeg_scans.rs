//! The JPEG scan bound: a progressive file with more scans than the limit is refused from its
//! markers (422, naming the limit) before libjpeg decodes anything, fast; a file at the limit
//! still decodes. Fixtures and how they were made: tests/fixtures/media/README.md.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clef_media::{decode_image, prepare_image, probe_image, MediaError, MediaLimits};

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/media")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn thousand_scan_progressive_jpeg_is_refused_quickly() {
    // 4000x4000, 1,000 refinement scans in 100 KB: 8-20 s of libjpeg if it were decoded
    let bytes = fixture("progressive_1000scans.jpg");
    let limits = MediaLimits::default();
    let cfg = clef_media::ProcessorConfig::default();
    let t0 = Instant::now();
    let err = prepare_image("image/jpeg", &bytes, &cfg, &limits).unwrap_err();
    let took = t0.elapsed();
    match &err {
        MediaError::TooManyScans {
            scans,
            width,
            height,
            limit,
            ..
        } => {
            assert_eq!((*scans, *width, *height), (1000, 4000, 4000));
            // 1,024,000,000 scan-pixels / 16,000,000 pixels
            assert_eq!(*limit, 64);
        }
        other => panic!("expected TooManyScans, got {other}"),
    }
    assert_eq!((err.status(), err.code()), (422, 5012));
    let msg = err.to_string();
    assert!(msg.contains("1000 scans") && msg.contains("64"), "{msg}");
    // the refusal reads markers only (a debug build walks 100 KB in well under a millisecond)
    assert!(took < Duration::from_secs(1), "took {took:?}");
    // the header-only check refuses it too (frame lists probe every frame before decoding)
    assert!(matches!(
        probe_image("image/jpeg", &bytes, &limits),
        Err(MediaError::TooManyScans { .. })
    ));
}

#[test]
fn scan_limit_boundary_on_a_small_image() {
    let limits = MediaLimits::default();
    // 64x64: the pixel product allows far more, so max_jpeg_scans (100) decides
    let at = fixture("small_100scans.jpg");
    let img = decode_image("image/jpeg", &at, &limits).expect("100 scans decode");
    assert_eq!(img.dimensions(), (64, 64));
    let over = fixture("small_101scans.jpg");
    match decode_image("image/jpeg", &over, &limits) {
        Err(MediaError::TooManyScans { scans, limit, .. }) => {
            assert_eq!((scans, limit), (101, 100))
        }
        other => panic!("expected TooManyScans, got {other:?}"),
    }
    // the limits are settings: a server may allow more
    let generous = MediaLimits {
        max_jpeg_scans: 101,
        ..MediaLimits::default()
    };
    assert!(decode_image("image/jpeg", &over, &generous).is_ok());
}

#[test]
fn pixels_times_scans_bounds_large_images() {
    // the same 100-scan file is refused when scans x pixels may not exceed 64x64x99
    let at = fixture("small_100scans.jpg");
    let tight = MediaLimits {
        max_jpeg_scan_pixels: 64 * 64 * 99,
        ..MediaLimits::default()
    };
    match decode_image("image/jpeg", &at, &tight) {
        Err(MediaError::TooManyScans { scans, limit, .. }) => assert_eq!((scans, limit), (100, 99)),
        other => panic!("expected TooManyScans, got {other:?}"),
    }
}
