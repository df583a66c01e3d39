//! PNG colour types through the whole engine: a PNG must give exactly the answer of the RGB
//! image the reference makes of it (model.md §7.1 step 1: "Decode; convert to RGB (transparent
//! images are composited onto white by transformers' `convert_to_rgb`)", applied to the mode
//! Pillow opens the file in). The expected RGB files were made with Pillow by
//! crates/clef-media/tests/data/png_modes.py.

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

fn logits(e: &Engine, png: &[u8]) -> Vec<Vec<f32>> {
    let body = format!(
        r#"{{"model":"clef","state":"A picture.","images":["data:image/png;base64,{}"],"questions":{{"dark":{{"type":"noul","instructions":"Is the picture dark?"}},"tone":{{"type":"choice","instructions":"Which tone?","criteria":{{"white":"mostly white","grey":"grey","black":"mostly black"}}}}}}}}"#,
        b64(png)
    );
    let req = e.parse(body.as_bytes()).unwrap();
    e.decide(&req, &DecideOptions::default()).unwrap().logits
}

#[test]
fn png_modes_answer_like_their_pillow_rgb() {
    let e = Engine::load(
        &root().join("tests/fixtures/models/tiny-a"),
        EngineConfig {
            limits: Limits::workers(),
            ..Default::default()
        },
    )
    .unwrap();
    let data = root().join("crates/clef-media/tests/data/decode");
    // 16-bit grey (Pillow I;16: clipped at 255, not the high byte); RGB with a tRNS key
    // (Pillow mode RGB: the key is ignored); 2-bit grey with a raw tRNS key.
    for name in ["gray16", "rgb8_trns", "rgb16_trns", "gray2_trns"] {
        let png = std::fs::read(data.join(format!("png_{name}.png"))).unwrap();
        let rgb = std::fs::read(data.join(format!("png_{name}_rgb.png"))).unwrap();
        assert_eq!(logits(&e, &png), logits(&e, &rgb), "{name}");
    }
}
