//! The vision tower and media placement against the reference: the debug tensors of
//! `a24_image_long_text` give the exact pixel rows and the merger output.

mod common;

use clef_model::checkpoint::safetensors_file;
use clef_model::vision::{VisionGrid, VisionItem};
use clef_model::{MediaRows, Model, Positions, Prompt, RunOptions};
use common::*;

fn debug_tensor(name: &str, tensor: &str) -> (Vec<usize>, Vec<f32>) {
    let f = safetensors_file::open(&fixtures().join("golden/tiny-a/debug").join(name)).unwrap();
    let t = f.tensors.into_iter().find(|t| t.name == tensor).unwrap();
    (t.shape.clone(), t.to_f32().unwrap())
}

fn golden_positions(g: &Golden) -> Positions {
    let p = &g.json["media"]["position_ids"];
    let axis = |i: usize| -> Vec<u32> {
        p[i].as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect()
    };
    Positions {
        t: axis(0),
        h: axis(1),
        w: axis(2),
    }
}

#[test]
fn tower_and_placement_match_a24() {
    let model = Model::load(&fixtures().join("models/tiny-a")).unwrap();
    let tower = model.vision().unwrap();
    let (shape, pixels) = debug_tensor("a24_image_long_text.safetensors", "pixel_values");
    let (_, expected) = debug_tensor("a24_image_long_text.safetensors", "vision_output.images");
    let g = load_golden(&fixtures().join("golden/tiny-a/a24_image_long_text.json"));
    let grid = &g.json["media"]["image_grid_thw"][0];
    let grid = VisionGrid {
        t: grid[0].as_u64().unwrap() as usize,
        h: grid[1].as_u64().unwrap() as usize,
        w: grid[2].as_u64().unwrap() as usize,
    };
    assert_eq!(shape[0], grid.patches());
    let out = tower
        .forward(
            &[VisionItem {
                pixels: &pixels,
                grid,
            }],
            1024,
        )
        .unwrap();
    assert_eq!(out[0].len(), expected.len(), "vision output length");
    let worst = out[0]
        .iter()
        .zip(&expected)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    let scale = expected.iter().map(|v| v.abs()).fold(0.0f32, f32::max);
    eprintln!("vision output max abs diff {worst:.2e} (max |value| {scale:.2})");
    assert!(
        worst <= 1e-4 * scale.max(1.0),
        "vision output differs by {worst}"
    );

    // The merged rows replace the image pads; positions follow get_rope_index.
    let offset = g.json["media"]["token_offset"].as_u64().unwrap() as usize;
    let types: Vec<u64> = g.json["media"]["mm_token_type_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    let first_pad = types.iter().position(|&t| t == 1).unwrap();
    assert!(first_pad > offset);
    let merged = grid.patches() / 4;
    let positions = golden_positions(&g);
    let ours = Positions::with_media(g.ids.len(), &[(first_pad, grid.h / 2, grid.w / 2)]).unwrap();
    assert_eq!(ours, positions);
    let prompt = Prompt {
        cut: None,
        ids: &g.ids,
        positions,
        media: vec![MediaRows {
            start: first_pad,
            rows: out[0].clone(),
        }],
        layout: g.layout.clone(),
    };
    assert_eq!(prompt.media[0].rows.len() / 64, merged);
    let (logits, _) = model
        .score(&prompt, &RunOptions::default(), &|| false)
        .unwrap();
    let probs: Vec<Vec<f64>> = logits.iter().map(|l| softmax(l)).collect();
    let dp = max_abs_dp(&probs, &g.probabilities);
    eprintln!("a24 max |dp| = {dp:.2e}");
    assert!(dp <= 1e-4);
}

#[test]
fn slab_packing_does_not_change_outputs() {
    let model = Model::load(&fixtures().join("models/tiny-a")).unwrap();
    let tower = model.vision().unwrap();
    let (_, pixels) = debug_tensor("a24_image_long_text.safetensors", "pixel_values");
    let grid = VisionGrid { t: 1, h: 6, w: 8 };
    // Three items: the image, a two-group "video" made of it twice, and the image again.
    let video: Vec<f32> = pixels.iter().chain(pixels.iter()).copied().collect();
    let items = [
        VisionItem {
            pixels: &pixels,
            grid,
        },
        VisionItem {
            pixels: &video,
            grid: VisionGrid { t: 2, ..grid },
        },
        VisionItem {
            pixels: &pixels,
            grid,
        },
    ];
    let packed = tower.forward(&items, 1024).unwrap();
    for (i, it) in items.iter().enumerate() {
        let alone = tower.forward(std::slice::from_ref(it), 48).unwrap();
        assert_eq!(packed[i].len(), alone[0].len(), "item {i}: output length");
        let d = packed[i]
            .iter()
            .zip(&alone[0])
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(d <= 1e-5, "item {i}: packed vs alone differ by {d}");
    }
    // Both temporal groups of the "video" see only themselves: equal halves.
    let half = packed[1].len() / 2;
    let d = packed[1][..half]
        .iter()
        .zip(&packed[1][half..])
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(d <= 1e-5);
}
