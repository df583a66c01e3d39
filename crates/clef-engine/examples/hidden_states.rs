//! Dump what a request feeds the head and what the backbone computes, to compare clef.rs with
//! another implementation (tests/fixtures/reference/tiny-b/generate.py uses it):
//!
//!     cargo run --release -p clef-engine --example hidden_states -- MODEL_DIR REQUEST.json
//!
//! REQUEST.json is a bare request or a reference fixture holding one under "request" (validated
//! with the reference profile). Prints JSON: `ids`, `types` (mm_token_type_ids), `pixels` (patch
//! rows per media item, images first), `grids` ([t, h, w] patches per item), `images` (how many
//! items are images), `hidden` (final-normed rows, flattened).

use clef_api::{parse_json, Limits, Request};
use clef_encode::Truncation;
use clef_engine::{prepare_media, DecideOptions, Engine, EngineConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, file] = args.as_slice() else {
        return Err("usage: hidden_states MODEL_DIR REQUEST.json".into());
    };
    let cfg = EngineConfig {
        limits: Limits::reference(),
        ..Default::default()
    };
    let engine = Engine::load(std::path::Path::new(dir), cfg)?;
    let json = parse_json(std::fs::read(file)?.as_slice()).map_err(|e| e.message)?;
    let inner = json
        .as_object()
        .and_then(|o| o.get("request"))
        .unwrap_or(&json);
    let req = Request::from_json(inner, engine.limits()).map_err(|e| e.message)?;
    let opts = DecideOptions {
        truncation: Truncation::State,
        ..Default::default()
    };
    let (encoded, hidden) = engine
        .hidden_states(&req, &opts)
        .map_err(|e| e.to_string())?;
    let media = prepare_media(
        &req,
        engine.processor(),
        engine.media_limits(),
        engine.video_support(),
    )
    .map_err(|e| e.message)?;
    let pixels: Vec<&Vec<f32>> = media.inputs.iter().map(|i| &i.pixel_rows).collect();
    let grids: Vec<[usize; 3]> = media
        .inputs
        .iter()
        .map(|i| [i.grid.t, i.grid.h, i.grid.w])
        .collect();
    println!(
        "{}",
        serde_json::json!({
            "ids": encoded.input_ids,
            "types": encoded.token_types(),
            "pixels": pixels,
            "grids": grids,
            "images": media.layout.images.len(),
            "hidden": hidden
        })
    );
    Ok(())
}
