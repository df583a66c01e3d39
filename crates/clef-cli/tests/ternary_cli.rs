//! The clef-ternary-v1 commands as a user runs them: `clef convert --format ternary` (GPTQ on
//! calibration records, and the quick mode), `clef verify`, `clef decide` on the bundle, and
//! `clef export --mlx`.

mod cli_common;

use cli_common::{clef, fixtures, s, text};

#[test]
fn convert_verify_decide_and_export() {
    let root = tempfile::tempdir().unwrap();
    let tiny = fixtures().join("models/tiny-a");
    let calib = fixtures().join("records/nano_calib.jsonl");
    let bundle = root.path().join("tiny-ternary");
    let o = clef(&[
        "convert",
        "--format",
        "ternary",
        "--from",
        s(&tiny),
        "--to",
        s(&bundle),
        "--calib",
        s(&calib),
        "--calib-records",
        "16",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("calibration 16 records"), "{}", text(&o));

    // GPTQ needs records; the quick mode does not
    let quick = root.path().join("quick");
    let o = clef(&[
        "convert",
        "--format",
        "ternary",
        "--from",
        s(&tiny),
        "--to",
        s(&quick),
    ]);
    assert!(!o.status.success());
    assert!(text(&o).contains("--calib"), "{}", text(&o));
    let o = clef(&[
        "convert",
        "--format",
        "ternary",
        "--method",
        "rtn",
        "--from",
        s(&tiny),
        "--to",
        s(&quick),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    // stderr is a pipe here: progress comes as plain lines (stage, share, elapsed), then the
    // size report in GB (tiny-a's bundle is well under one)
    let t = text(&o);
    assert!(
        t.contains("ternary [round-to-nearest]: 0.0% of ") && t.contains(" elapsed"),
        "{t}"
    );
    assert!(t.contains("ternary [4-bit tables]: "), "{t}");
    assert!(t.contains("ternary: done in "), "{t}");
    assert!(t.contains("; model.safetensors 0.0"), "{t}");

    let o = clef(&["verify", s(&bundle)]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("clef-ternary-v1"), "{}", text(&o));

    let request = root.path().join("request.json");
    std::fs::write(
        &request,
        r#"{"model": "clef", "state": "My card was charged twice.", "questions": {"team": {"type": "choice", "instructions": "Which team?", "criteria": {"billing": "Money", "technical": "Bugs"}}}}"#,
    )
    .unwrap();
    let o = clef(&["decide", "--model", s(&bundle), s(&request)]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("\"team\""), "{}", text(&o));

    let mlx = root.path().join("mlx");
    let o = clef(&["export", s(&bundle), s(&mlx)]);
    assert!(!o.status.success(), "an export target is required");
    let o = clef(&["export", "--mlx", s(&bundle), s(&mlx)]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(mlx.join("model.safetensors").is_file() && mlx.join("adapters.safetensors").is_file());
    let o = clef(&["export", "--mlx", s(&bundle), s(&mlx)]);
    assert!(!o.status.success(), "refuses to overwrite without --force");
    let o = clef(&["export", "--mlx", "--force", s(&tiny), s(&mlx)]);
    assert!(!o.status.success(), "a release is not a ternary bundle");
}

/// The records a `clef eval --profile reference` run accepts, `clef convert --profile
/// reference` calibrates on (here a record whose instructions are `null`); under the default
/// profile that record stops the conversion with its line named, or with `--skip-invalid` is
/// left out and counted in the summary and the manifest.
#[test]
fn convert_reads_the_records_clef_eval_reads() {
    let root = tempfile::tempdir().unwrap();
    let tiny = fixtures().join("models/tiny-a");
    let nano = std::fs::read_to_string(fixtures().join("records/nano_calib.jsonl")).unwrap();
    let mut records: String = nano.lines().take(3).map(|l| format!("{l}\n")).collect();
    records.push_str(
        &serde_json::json!({"id": "open", "request": {"model": "clef",
            "state": "The parcel arrived two weeks late.",
            "questions": {"late": {"type": "noul", "instructions": null}}}})
        .to_string(),
    );
    let path = root.path().join("records.jsonl");
    std::fs::write(&path, records).unwrap();

    let report = root.path().join("report");
    let o = clef(&[
        "eval",
        "--profile",
        "reference",
        "--model",
        s(&tiny),
        "--records",
        s(&path),
        "--out",
        s(&report),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["records"]["evaluated"], 4, "{summary}");

    let convert = |name: &str, extra: &[&str]| {
        let to = root.path().join(name);
        let mut args = vec!["--calib", s(&path)];
        args.extend_from_slice(extra);
        (convert_ternary(&tiny, &to, &args), to)
    };
    let (o, to) = convert("reference", &["--profile", "reference"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("calibration 4 records"), "{}", text(&o));
    let manifest = std::fs::read_to_string(to.join("manifest.json")).unwrap();
    assert!(
        manifest.contains("\"profile\": \"reference\""),
        "{manifest}"
    );

    let (o, _) = convert("workers", &[]);
    assert!(!o.status.success());
    assert!(text(&o).contains("line 4 (record `open`)"), "{}", text(&o));

    let (o, to) = convert("skipped", &["--skip-invalid"]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("calibration 3 records") && t.contains("1 invalid skipped"),
        "{t}"
    );
    assert!(t.contains("records.jsonl:4 (record `open`)"), "{t}");
    let manifest = std::fs::read_to_string(to.join("manifest.json")).unwrap();
    assert!(manifest.contains("\"skipped_invalid\": 1"), "{manifest}");
}

/// `--recipe`: the card's keys, each defaulting to the card's value, unknown keys refused by
/// name; the card's planned v2 (`down_proj` in `hi_names`) is a recipe change: the MLP
/// down-projections come out as 4-bit affine codes, the manifest says so, and the bundle loads
/// and answers. The card's own string gives the same bytes as no recipe.
#[test]
fn a_recipe_file_chooses_the_recipe() {
    let root = tempfile::tempdir().unwrap();
    let tiny = fixtures().join("models/tiny-a");
    let convert = |name: &str, recipe: Option<&str>| {
        let to = root.path().join(name);
        let path = root.path().join(format!("{name}.json"));
        let mut args = vec!["--method", "rtn"];
        if let Some(text) = recipe {
            std::fs::write(&path, text).unwrap();
            args.extend(["--recipe", s(&path)]);
        }
        (convert_ternary(&tiny, &to, &args), to)
    };
    let (o, _) = convert("typo", Some(r#"{"hi_names": "out_proj", "dmap": 0.02}"#));
    assert!(!o.status.success());
    assert!(text(&o).contains("unknown field `dmap`"), "{}", text(&o));
    let (o, _) = convert("group", Some(r#"{"group": 32}"#));
    assert!(!o.status.success());
    assert!(text(&o).contains("group 32"), "{}", text(&o));

    let (o, plain) = convert("plain", None);
    assert!(o.status.success(), "{}", text(&o));
    let card = r#"{"scale": "mse", "group": 64, "hi_names": "out_proj,q_proj,k_proj,v_proj,o_proj", "hi_bits": 4, "emb_bits": 4, "cloq_rank": 16, "calib": 128, "damp": 0.01}"#;
    let (o, carded) = convert("card", Some(card));
    assert!(o.status.success(), "{}", text(&o));
    let bytes = |dir: &std::path::Path| std::fs::read(dir.join("model.safetensors")).unwrap();
    assert!(
        bytes(&plain) == bytes(&carded),
        "the card's recipe is the default"
    );

    let v2 = r#"{"hi_names": "out_proj,q_proj,k_proj,v_proj,o_proj,down_proj"}"#;
    let (o, bundle) = convert("v2", Some(v2));
    assert!(o.status.success(), "{}", text(&o));
    let header = safetensors_header(&bundle.join("model.safetensors"));
    let down = "model.language_model.layers.0.mlp.down_proj";
    assert!(
        header.contains(&format!("\"{down}.q4\"")),
        "down_proj is 4-bit"
    );
    assert!(!header.contains(&format!("\"{down}.trits\"")));
    assert!(header.contains("model.language_model.layers.0.mlp.up_proj.trits"));
    let manifest = std::fs::read_to_string(bundle.join("manifest.json")).unwrap();
    assert!(
        manifest.contains("\"hi_names\": \"out_proj,q_proj,k_proj,v_proj,o_proj,down_proj\""),
        "{manifest}"
    );
    let o = clef(&["verify", s(&bundle)]);
    assert!(o.status.success(), "{}", text(&o));
    let request = root.path().join("request.json");
    std::fs::write(
        &request,
        r#"{"model": "clef", "state": "My card was charged twice.", "questions": {"refund": {"type": "noul", "instructions": "Refund?"}}}"#,
    )
    .unwrap();
    let o = clef(&["decide", "--model", s(&bundle), s(&request)]);
    assert!(o.status.success(), "{}", text(&o));
    let o = clef(&[
        "convert",
        "--format",
        "lut6",
        "--from",
        s(&tiny),
        "--to",
        s(&root.path().join("lut")),
        "--recipe",
        s(&request),
    ]);
    assert!(!o.status.success());
    assert!(text(&o).contains("--format ternary"), "{}", text(&o));
}

/// `clef convert --format ternary --from FROM --to TO EXTRA...`, run to completion.
fn convert_ternary(
    from: &std::path::Path,
    to: &std::path::Path,
    extra: &[&str],
) -> std::process::Output {
    let mut args = vec![
        "convert",
        "--format",
        "ternary",
        "--from",
        s(from),
        "--to",
        s(to),
    ];
    args.extend_from_slice(extra);
    clef(&args)
}

/// The JSON header of a safetensors file.
fn safetensors_header(path: &std::path::Path) -> String {
    let bytes = std::fs::read(path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    String::from_utf8(bytes[8..8 + n].to_vec()).unwrap()
}
