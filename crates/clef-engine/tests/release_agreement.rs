//! A release whose files disagree (config.json's media token ids against tokenizer.json, or
//! processor_config.json's patch geometry against vision_config) is refused at load with a
//! message naming both sides, instead of answering with media placed or cut wrongly.

use clef_engine::{Engine, EngineConfig};
use std::path::{Path, PathBuf};

fn tiny_a() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/models/tiny-a")
}

/// A copy of tiny-a (weights symlinked) with one JSON file edited.
fn edited(file: &str, edit: impl Fn(&mut serde_json::Value)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(tiny_a()).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap();
        if name == file {
            let mut v: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
            edit(&mut v);
            std::fs::write(dir.path().join(name), serde_json::to_vec(&v).unwrap()).unwrap();
        } else {
            std::fs::copy(&p, dir.path().join(name)).unwrap();
        }
    }
    dir
}

fn load_error(dir: &Path) -> String {
    match Engine::load(dir, EngineConfig::default()) {
        Ok(_) => panic!("{} loaded", dir.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_unedited_copy_loads() {
    let dir = edited("config.json", |_| {});
    assert!(Engine::load(dir.path(), EngineConfig::default()).is_ok());
}

#[test]
fn media_token_ids_must_match_the_tokenizer() {
    for (key, token) in [
        ("image_token_id", "<|image_pad|>"),
        ("video_token_id", "<|video_pad|>"),
        ("vision_start_token_id", "<|vision_start|>"),
        ("vision_end_token_id", "<|vision_end|>"),
    ] {
        let dir = edited("config.json", |v| {
            let id = v[key].as_u64().unwrap();
            v[key] = (id + 1).into();
        });
        let msg = load_error(dir.path());
        assert!(
            msg.contains(key) && msg.contains(token) && msg.contains("tokenizer.json"),
            "{msg}"
        );
    }
}

#[test]
fn processor_geometry_must_match_the_vision_tower() {
    for (section, key, value) in [
        ("image_processor", "patch_size", 14),
        ("video_processor", "temporal_patch_size", 1),
        ("image_processor", "merge_size", 3),
    ] {
        let dir = edited("processor_config.json", |v| v[section][key] = value.into());
        let msg = load_error(dir.path());
        assert!(
            msg.contains(section) && msg.contains(key) && msg.contains("vision_config"),
            "{msg}"
        );
    }
}
