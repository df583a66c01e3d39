//! The media half of the tiny-a golden records: patch rows, grids, token counts and video
//! timestamps against the reference run (tests/fixtures/golden/tiny-a).

mod common;

use std::collections::HashMap;

use clef_media::{
    prepare_image, prepare_video_frames, MediaLimits, PreparedImage, PreparedVideo, ProcessorConfig,
};
use common::{fixtures_dir, read};
use serde_json::Value;

fn config() -> ProcessorConfig {
    ProcessorConfig::from_file(fixtures_dir().join("models/tiny-a/processor_config.json")).unwrap()
}

fn golden(name: &str) -> Value {
    serde_json::from_slice(&read(
        fixtures_dir().join(format!("golden/tiny-a/{name}.json")),
    ))
    .unwrap()
}

fn media_path(rel: &Value) -> std::path::PathBuf {
    fixtures_dir()
        .join("golden/tiny-a")
        .join(rel.as_str().unwrap())
}

#[test]
fn processor_config_of_tiny_a() {
    let cfg = config();
    assert_eq!((cfg.image.min_pixels, cfg.image.max_pixels), (1024, 65536));
    assert_eq!(
        (cfg.video.min_pixels, cfg.video.max_pixels),
        (1024, 262_144)
    );
    assert_eq!(
        (
            cfg.image.patch_size,
            cfg.image.temporal_patch_size,
            cfg.image.merge_size
        ),
        (16, 2, 2)
    );
    assert_eq!(cfg.image.row_len(), 1536);
}

#[test]
fn a24_pixel_values_match_the_reference() {
    let record = golden("a24_image_long_text");
    let png = read(media_path(&record["media_files"]["images"][0]));
    let prepared = prepare_image("image/png", &png, &config(), &MediaLimits::default()).unwrap();

    let st_bytes = read(fixtures_dir().join("golden/tiny-a/debug/a24_image_long_text.safetensors"));
    let st = safetensors::SafeTensors::deserialize(&st_bytes).unwrap();
    let tensor = st.tensor("pixel_values").unwrap();
    assert_eq!(tensor.shape(), &[48, 1536]);
    let expected: Vec<f32> = tensor
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();

    assert_eq!(prepared.input.pixel_rows.len(), expected.len());
    let max = prepared
        .input
        .pixel_rows
        .iter()
        .zip(&expected)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    println!("a24 pixel_values: max |diff| {max:e}");
    assert!(max <= 1e-6, "max |diff| {max}");
    assert_eq!(prepared.merged_tokens, 12);
}

/// Byte-level BPE decoding of the tiny-a vocabulary, enough to read back the media piece.
struct Vocab {
    tokens: HashMap<u64, String>,
}

impl Vocab {
    fn load() -> Vocab {
        let tok: Value =
            serde_json::from_slice(&read(fixtures_dir().join("models/tiny-a/tokenizer.json")))
                .unwrap();
        // GPT-2's byte <-> printable-char table.
        let mut bs: Vec<u32> = (b'!' as u32..=b'~' as u32)
            .chain(0xA1..=0xAC)
            .chain(0xAE..=0xFF)
            .collect();
        let mut cs = bs.clone();
        let mut n = 0;
        for b in 0..256u32 {
            if !bs.contains(&b) {
                bs.push(b);
                cs.push(256 + n);
                n += 1;
            }
        }
        let unbyte: HashMap<char, u8> = cs
            .iter()
            .zip(&bs)
            .map(|(&c, &b)| (char::from_u32(c).unwrap(), b as u8))
            .collect();
        let mut tokens = HashMap::new();
        for (piece, id) in tok["model"]["vocab"].as_object().unwrap() {
            let bytes: Vec<u8> = piece.chars().map(|c| unbyte[&c]).collect();
            tokens.insert(
                id.as_u64().unwrap(),
                String::from_utf8_lossy(&bytes).into_owned(),
            );
        }
        for added in tok["added_tokens"].as_array().unwrap() {
            tokens.insert(
                added["id"].as_u64().unwrap(),
                added["content"].as_str().unwrap().to_string(),
            );
        }
        Vocab { tokens }
    }

    fn decode(&self, ids: &[Value]) -> String {
        ids.iter()
            .map(|id| self.tokens[&id.as_u64().unwrap()].as_str())
            .collect()
    }
}

/// The media piece as encoding.md §7 builds it from our prepared media.
fn media_text(images: &[PreparedImage], videos: &[PreparedVideo]) -> String {
    let mut s = String::new();
    for img in images {
        s += "<|vision_start|>";
        s += &"<|image_pad|>".repeat(img.merged_tokens);
        s += "<|vision_end|>";
    }
    for video in videos {
        s += "<|vision_start|>";
        for g in &video.groups {
            s += &format!("<{:.1} seconds>", g.seconds);
            s += "<|vision_start|>";
            s += &"<|video_pad|>".repeat(g.merged_tokens);
            s += "<|vision_end|>";
        }
        s += "<|vision_end|>";
    }
    s + "\n"
}

#[test]
fn media_pieces_grids_and_timestamps_match_every_media_record() {
    let cfg = config();
    let limits = MediaLimits::default();
    let vocab = Vocab::load();
    let mut checked = 0;
    for name in [
        "a22_image_one",
        "a23_image_two",
        "a24_image_long_text",
        "a25_image_256x128",
        "a26_video",
        "a27_image_and_video",
    ] {
        let record = golden(name);
        let files = &record["media_files"];
        let images: Vec<PreparedImage> = files["images"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|p| {
                        prepare_image("image/png", &read(media_path(p)), &cfg, &limits).unwrap()
                    })
                    .collect()
            })
            .unwrap_or_default();
        let videos: Vec<PreparedVideo> = files["videos"]
            .as_array()
            .map(|vs| {
                vs.iter()
                    .map(|frames| {
                        let bytes: Vec<Vec<u8>> = frames
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|p| read(media_path(p)))
                            .collect();
                        let items: Vec<(&str, &[u8])> =
                            bytes.iter().map(|b| ("image/png", b.as_slice())).collect();
                        prepare_video_frames(&items, 24.0, &cfg, &limits).unwrap()
                    })
                    .collect()
            })
            .unwrap_or_default();

        let media = &record["media"];
        let grid = |g: &clef_media::PatchGrid| serde_json::json!([g.t, g.h, g.w]);
        let image_grids: Vec<Value> = images.iter().map(|i| grid(&i.input.grid)).collect();
        let video_grids: Vec<Value> = videos.iter().map(|v| grid(&v.input.grid)).collect();
        assert_eq!(Value::from(image_grids), media["image_grid_thw"], "{name}");
        assert_eq!(Value::from(video_grids), media["video_grid_thw"], "{name}");

        let offset = media["token_offset"].as_u64().unwrap() as usize;
        let count = media["media_token_count"].as_u64().unwrap() as usize;
        let ids = &record["input_ids"].as_array().unwrap()[offset..offset + count];
        assert_eq!(vocab.decode(ids), media_text(&images, &videos), "{name}");
        checked += 1;
    }
    assert_eq!(checked, 6);
}
