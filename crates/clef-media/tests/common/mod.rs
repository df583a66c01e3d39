//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

use clef_media::RgbImage;

pub fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

pub fn read(path: impl Into<PathBuf>) -> Vec<u8> {
    let path = path.into();
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Loads a committed PNG as RGB with the image crate (test-side only, independent of the
/// crate's own decoder path).
pub fn load_rgb(path: impl Into<PathBuf>) -> RgbImage {
    let bytes = read(path);
    image::load_from_memory_with_format(&bytes, image::ImageFormat::Png)
        .expect("valid PNG")
        .to_rgb8()
}

/// (max |a − b| over all samples, number of differing samples).
pub fn diff(a: &RgbImage, b: &RgbImage) -> (u8, usize) {
    assert_eq!(a.dimensions(), b.dimensions(), "sizes differ");
    let mut max = 0u8;
    let mut count = 0usize;
    for (x, y) in a.as_raw().iter().zip(b.as_raw()) {
        let d = x.abs_diff(*y);
        max = max.max(d);
        count += (d > 0) as usize;
    }
    (max, count)
}
