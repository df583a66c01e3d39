//! PNG colour types and JPEG layouts through the whole engine: a file must give exactly the
//! answer of the RGB image the reference makes of it (model.md §7.1 step 1: "Decode; convert to RGB (transparent
//! images are composited onto white by transformers' `convert_to_rgb`)", applied to the mode
//! Pillow opens the file in). The expected RGB files were made with Pillow by
//! crates/clef-media/tests/data/png_modes.py and jpeg_modes.py.

use clef_api::Limits;
use clef_engine::{DecideOptions, Engine, EngineConfig};
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn logits(e: &Engine, content_type: &str, bytes: &[u8]) -> Vec<Vec<f32>> {
    let body = format!(
        r#"{{"model":"clef","state":"A picture.","images":["data:{};base64,{}"],"questions":{{"dark":{{"type":"noul","instructions":"Is the picture dark?"}},"tone":{{"type":"choice","instructions":"Which tone?","criteria":{{"white":"mostly white","grey":"grey","black":"mostly black"}}}}}}}}"#,
        content_type,
        b64(bytes)
    );
    let req = e.parse(body.as_bytes()).unwrap();
    e.decide(&req, &DecideOptions::default()).unwrap().logits
}

fn engine() -> Engine {
    Engine::load(
        &root().join("tests/fixtures/models/tiny-a"),
        EngineConfig {
            limits: Limits::workers(),
            ..Default::default()
        },
    )
    .unwrap()
}

fn data() -> PathBuf {
    root().join("crates/clef-media/tests/data/decode")
}

#[test]
fn png_modes_answer_like_their_pillow_rgb() {
    let e = engine();
    let data = data();
    // 16-bit grey (Pillow I;16: clipped at 255, not the high byte); RGB with a tRNS key
    // (Pillow mode RGB: the key is ignored); 2-bit grey with a raw tRNS key.
    for name in ["gray16", "rgb8_trns", "rgb16_trns", "gray2_trns"] {
        let png = std::fs::read(data.join(format!("png_{name}.png"))).unwrap();
        let rgb = std::fs::read(data.join(format!("png_{name}_rgb.png"))).unwrap();
        assert_eq!(
            logits(&e, "image/png", &png),
            logits(&e, "image/png", &rgb),
            "{name}"
        );
    }
}

/// Pillow decodes JPEG with libjpeg-turbo; so does the engine, so the answers are identical,
/// including the chroma edge of odd sizes, progressive scans, greyscale and CMYK.
#[test]
fn jpegs_answer_like_their_pillow_rgb() {
    let e = engine();
    let data = data();
    for name in [
        "jpeg_420_odd",
        "jpeg_422_odd",
        "jpeg_progressive",
        "jpeg_gray",
        "jpeg_cmyk",
    ] {
        let jpg = std::fs::read(data.join(format!("{name}.jpg"))).unwrap();
        let rgb = std::fs::read(data.join(format!("{name}_rgb.png"))).unwrap();
        assert_eq!(
            logits(&e, "image/jpeg", &jpg),
            logits(&e, "image/png", &rgb),
            "{name}"
        );
    }
}
