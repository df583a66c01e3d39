//! `resize_bicubic` against Pillow's `Image.resize(size, Image.BICUBIC)` on committed data
//! (tests/data/resize, made by tests/data/generate.py). Pixel parity is the claim: every
//! sample must be equal.

mod common;

use clef_media::resize_bicubic;
use common::{data_dir, diff, load_rgb};

#[test]
fn matches_pillow_bicubic_exactly() {
    let dir = data_dir().join("resize");
    let mut cases = 0;
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some((stem, size)) = name
            .strip_suffix(".png")
            .and_then(|n| n.split_once("_out_"))
        else {
            continue;
        };
        let (w, h) = size.split_once('x').unwrap();
        let (w, h): (u32, u32) = (w.parse().unwrap(), h.parse().unwrap());
        let input = load_rgb(dir.join(format!("{stem}_in.png")));
        let expected = load_rgb(&path);
        let got = resize_bicubic(&input, w, h);
        let (max, count) = diff(&got, &expected);
        assert_eq!(
            (max, count),
            (0, 0),
            "{stem} {}x{} -> {w}x{h}: max diff {max}, {count} samples differ",
            input.width(),
            input.height()
        );
        cases += 1;
    }
    assert_eq!(cases, 17, "resize cases found");
}
