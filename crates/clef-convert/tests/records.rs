//! Calibration records as `clef eval` reads them (crates/clef-convert/src/records.rs): the first
//! N usable records, media records kept for the vision tower (or skipped and counted when the
//! release has none), the request profile and truncation rule `clef eval` takes, and unusable
//! records named by line or skipped and counted.

use clef_api::Profile;
use clef_convert::records::{read_records, RecordRules};
use clef_engine::Engine;
use std::path::{Path, PathBuf};

fn tiny_a() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/models/tiny-a")
}

fn record(id: &str, state: &str, instructions: serde_json::Value) -> String {
    serde_json::json!({"id": id, "request": {"model": "clef", "state": state,
        "questions": {"q": {"type": "noul", "instructions": instructions}}}})
    .to_string()
}

fn text_records(n: usize) -> String {
    (0..n)
        .map(|i| {
            record(
                &format!("calib-{i}"),
                &format!("Ticket {i} is late."),
                "Late?".into(),
            )
        })
        .map(|l| l + "\n")
        .collect()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn engine(rules: &RecordRules) -> Engine {
    Engine::load(&tiny_a(), rules.engine_config()).unwrap()
}

#[test]
fn the_first_usable_records_media_kept_or_skipped_and_repeats_named() {
    let root = tempfile::tempdir().unwrap();
    let rules = RecordRules::default();
    let mut engine = engine(&rules);
    let png = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";
    let media = serde_json::json!({"id": "img", "request": {"model": "clef", "state": "look",
        "images": [png], "questions": {"q": {"type": "noul", "instructions": "Red?"}}}});
    let mut text = text_records(4);
    text.push_str(&format!("{media}\n"));
    for id in ["more-0", "more-1"] {
        text.push_str(&(record(id, "Another ticket.", "Late?".into()) + "\n"));
    }
    text.push_str(&text_records(1));
    let path = write(root.path(), "c.jsonl", &text);
    // line 8 repeats an id: only reached when more records are wanted
    let set = read_records(&engine, &path, 5, &rules).unwrap();
    assert_eq!((set.records.len(), set.skipped_media.len()), (5, 0));
    let media: Vec<bool> = set.records.iter().map(|r| r.has_media()).collect();
    assert_eq!(media, [false, false, false, false, true]);
    let lines: Vec<usize> = set.records.iter().map(|r| r.line).collect();
    assert_eq!(lines, [1, 2, 3, 4, 5]);
    assert_eq!(
        set.tokens,
        set.records.iter().map(|r| r.ids.len()).sum::<usize>()
    );
    let e = read_records(&engine, &path, 100, &rules)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("line 8") && e.contains("calib-0"), "{e}");
    let refused = write(
        root.path(),
        "r.jsonl",
        "{\"id\": \"x\", \"request\": {\"model\": \"clef\", \"state\": \"s\", \"questions\": {}}}\n",
    );
    let e = read_records(&engine, &refused, 10, &rules)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("line 1 (record `x`)"), "{e}");
    // without a vision tower: the text records, the media one named; the limit counts usable
    // records, so the one after the image is read too
    engine.model_mut().take_vision();
    let set = read_records(&engine, &path, 5, &rules).unwrap();
    assert_eq!(set.records.len(), 5);
    assert_eq!(set.skipped_media, ["img"]);
    assert_eq!(set.records[4].line, 6);
}

/// What `clef eval --profile reference` accepts (`instructions: null` falls back to the
/// question id there), `--profile reference` accepts here; the workers profile refuses it,
/// naming the line.
#[test]
fn the_profile_decides_what_a_record_may_say() {
    let root = tempfile::tempdir().unwrap();
    let mut text = text_records(2);
    text.push_str(&(record("open", "Is this late?", serde_json::Value::Null) + "\n"));
    let path = write(root.path(), "c.jsonl", &text);
    let workers = RecordRules::default();
    let e = read_records(&engine(&workers), &path, 10, &workers)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("line 3 (record `open`)"), "{e}");
    assert!(e.contains("--skip-invalid"), "{e}");
    let reference = RecordRules {
        profile: Profile::Reference,
        ..Default::default()
    };
    let set = read_records(&engine(&reference), &path, 10, &reference).unwrap();
    assert_eq!(set.records.len(), 3);
    assert!(set.skipped_invalid.is_empty());
}

/// Unusable lines (not JSON, a refused request, an oversize state without truncation) stop the
/// reading with their line named, or under `skip_invalid` are skipped and listed; `truncate`
/// keeps the oversize state, cut to the context.
#[test]
fn unusable_records_stop_or_are_skipped_and_oversize_states_are_cut_on_request() {
    let root = tempfile::tempdir().unwrap();
    let long_state = "the ticket is late again and again ".repeat(4000);
    let text = [
        record("a", "first", "Late?".into()),
        "{not json".to_string(),
        serde_json::json!({"id": "empty", "request": {"model": "clef", "state": "s",
            "questions": {}}})
        .to_string(),
        record("long", &long_state, "Late?".into()),
        record("b", "last", "Late?".into()),
    ]
    .join("\n");
    let path = write(root.path(), "c.jsonl", &text);
    let strict = RecordRules::default();
    let e = read_records(&engine(&strict), &path, 10, &strict)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("line 2:") && e.contains("not a JSON object"),
        "{e}"
    );

    let skip = RecordRules {
        skip_invalid: true,
        ..Default::default()
    };
    let set = read_records(&engine(&skip), &path, 10, &skip).unwrap();
    let ids: Vec<&str> = set.records.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
    let skipped: Vec<(usize, Option<&str>)> = set
        .skipped_invalid
        .iter()
        .map(|s| (s.line, s.id.as_deref()))
        .collect();
    assert_eq!(
        skipped,
        [(2, None), (3, Some("empty")), (4, Some("long"))],
        "{:?}",
        set.skipped_invalid
    );
    assert!(
        set.skipped_invalid[2].reason.contains("token"),
        "{:?}",
        set.skipped_invalid[2]
    );
    let manifest = skip.describe(set.skipped_invalid.len(), set.skipped_media.len());
    assert_eq!(manifest["skipped_invalid"], 3);
    assert_eq!(manifest["profile"], "workers");

    let cut = RecordRules {
        truncate: true,
        skip_invalid: true,
        ..Default::default()
    };
    let engine = engine(&cut);
    let set = read_records(&engine, &path, 10, &cut).unwrap();
    let ids: Vec<&str> = set.records.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["a", "long", "b"]);
    assert_eq!(set.records[1].ids.len(), engine.limits().max_context);
}
