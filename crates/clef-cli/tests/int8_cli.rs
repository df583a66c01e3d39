//! The integer matrix products (`--matmul int8`) as a user runs them, with the fidelity bars of
//! the issue that introduced them, on the trained nano model (its 300 labelled eval questions)
//! and on the golden requests of the committed checkpoints (text, images, video):
//!
//! - a q8 bundle on its default (int8) path against the BF16 release: every top-1 answer the
//!   same, max |dp| ≤ 0.005 on nano_eval (q8_cli.rs);
//! - a ternary bundle, int8 against the same bundle's exact path: at most one flip in 300 and
//!   mean KL ≤ 1e-3 (nano_eval);
//! - on the golden requests with images and video (run on nano): no flip outside near-ties,
//!   mean KL ≤ 1e-3 (their max |dp| is reported: the 0.005 bar does not hold there, see
//!   docs/performance.md);
//! - `--matmul int8` on a release is refused with a clear error.

mod cli_common;

use cli_common::{clef, fixtures, golden_records, s, text};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn convert(args: &[&str], from: &Path, to: &Path) {
    let mut all = vec!["convert"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--from", s(from), "--to", s(to)]);
    let o = clef(&all);
    assert!(o.status.success(), "{}", text(&o));
}

/// `clef eval` of `model` against `reference` (extra arguments appended); the summary's
/// comparison.
fn compare(model: &Path, reference: &Path, records: &Path, out: &Path, extra: &[&str]) -> Value {
    let mut args = vec![
        "eval",
        "--profile",
        "reference",
        "--truncate",
        "--model",
        s(model),
        "--reference",
        s(reference),
        "--records",
        s(records),
        "--out",
        s(out),
    ];
    args.extend_from_slice(extra);
    let o = clef(&args);
    assert!(o.status.success(), "{}", text(&o));
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    summary["compare"].clone()
}

fn counts(c: &Value) -> (u64, u64, f64, f64) {
    (
        c["questions"].as_u64().unwrap(),
        c["agree"].as_u64().unwrap(),
        c["max_abs_dp"].as_f64().unwrap(),
        c["mean_kl"].as_f64().unwrap(),
    )
}

fn nano() -> PathBuf {
    fixtures().join("models/nano")
}

/// Questions that disagree although the reference's top two are at least 0.02 apart.
fn clear_flips(c: &Value) -> Vec<Value> {
    c["disagreements"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| !d["near_tie"].as_bool().unwrap())
        .cloned()
        .collect()
}

/// The tiny-a golden requests (text, JSON, images, video) run on nano: its backbone is trained,
/// so answers are stable under small perturbations, which tiny-a's random weights are not (its
/// q8 bundle flips 4 of 67 answers even on the exact path).
fn media_records(dir: &Path) -> PathBuf {
    golden_records("tiny-a", dir)
}

#[test]
fn q8_on_the_integer_path_answers_as_the_release_does() {
    let root = tempfile::tempdir().unwrap();
    let bundle = root.path().join("nano-q8");
    convert(&["--format", "q8"], &nano(), &bundle);

    // (The 300 labelled questions, q8 on its default integer path against the release, are
    // q8_cli.rs's test.)
    // Text, images and video: no answer flips unless the reference itself is a near-tie.
    let media = media_records(root.path());
    let c = compare(&bundle, &nano(), &media, &root.path().join("media"), &[]);
    let (n, agree, max_dp, kl) = counts(&c);
    eprintln!(
        "media requests: q8 int8 vs release: {agree}/{n}, max |dp| {max_dp:.2e}, KL {kl:.2e}"
    );
    assert!(clear_flips(&c).is_empty(), "{}", c["disagreements"]);
    assert!(kl <= 1e-3, "mean KL {kl}");
    // These requests are tiny-a's, far from what nano was trained on, and move more than
    // nano's own (docs/performance.md, "Rotated inputs"): 7-bit activations on every linear
    // reached 0.026 here; with DeltaNet out_proj and MLP down_proj on rotated inputs 8.2e-3.
    // The integer path has the same bits on every machine, so this bound guards the rotation.
    assert!(max_dp <= 0.01, "max |dp| {max_dp}");
    // The default path of a q8 bundle is the integer one, which rounds activations: close to
    // the release, not identical to it.
    assert!(max_dp > 0.0, "the integer path did not run");
    let same = compare(
        &bundle,
        &bundle,
        &media,
        &root.path().join("modes"),
        &["--matmul", "exact", "--reference-matmul", "int8"],
    );
    assert!(
        counts(&same).2 > 0.0,
        "--matmul exact did not change the path"
    );
}

#[test]
fn ternary_integer_path_agrees_with_its_exact_path() {
    let root = tempfile::tempdir().unwrap();
    let calib = fixtures().join("records/nano_calib.jsonl");
    let bundle = root.path().join("nano-ternary");
    convert(
        &["--format", "ternary", "--calib", s(&calib)],
        &nano(),
        &bundle,
    );
    let exact = ["--reference-matmul", "exact"];
    let records = fixtures().join("records/nano_eval.jsonl");
    let c = compare(
        &bundle,
        &bundle,
        &records,
        &root.path().join("eval"),
        &exact,
    );
    let (n, agree, max_dp, kl) = counts(&c);
    eprintln!("nano_eval: ternary int8 vs exact: {agree}/{n}, max |dp| {max_dp:.2e}, KL {kl:.2e}");
    assert_eq!(n, 300);
    assert!(agree >= 299, "{}", c["disagreements"]);
    assert!(kl <= 1e-3, "mean KL {kl}");
    assert!(max_dp > 0.0, "the integer path did not run");

    let media = media_records(root.path());
    let c = compare(&bundle, &bundle, &media, &root.path().join("media"), &exact);
    let (n, agree, max_dp, kl) = counts(&c);
    eprintln!(
        "media requests: ternary int8 vs exact: {agree}/{n}, max |dp| {max_dp:.2e}, KL {kl:.2e}"
    );
    assert!(clear_flips(&c).is_empty(), "{}", c["disagreements"]);
    assert!(kl <= 1e-3, "mean KL {kl}");
}

#[test]
fn int8_on_a_release_is_refused_by_name() {
    let root = tempfile::tempdir().unwrap();
    let request = root.path().join("request.json");
    std::fs::write(
        &request,
        r#"{"model": "clef", "state": "My card was charged twice.", "questions": {"refund": {"type": "noul", "instructions": "Refund?"}}}"#,
    )
    .unwrap();
    let o = clef(&[
        "decide",
        "--matmul",
        "int8",
        "--model",
        s(&nano()),
        s(&request),
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("--matmul int8 needs integer weights"),
        "{}",
        text(&o)
    );
    let o = clef(&[
        "decide",
        "--matmul",
        "exact",
        "--model",
        s(&nano()),
        s(&request),
    ]);
    assert!(o.status.success(), "{}", text(&o));
}

/// `clef bench` of a q8 bundle (default int8 path) at `CLEF_ISA=isa` (none: detected), with
/// `extra` arguments: the chunk it reports.
fn bench_chunk(bundle: &Path, isa: Option<&str>, extra: &[&str]) -> u64 {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_clef"));
    cmd.args(["--threads", "2", "bench", "--model", s(bundle)])
        .args(["--tokens", "16", "--json", "--warmup", "0"])
        .args(extra);
    if let Some(isa) = isa {
        cmd.env("CLEF_ISA", isa);
    }
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["matmul"], "int8");
    v["chunk"].as_u64().unwrap()
}

#[test]
fn the_default_chunk_follows_the_integer_tile() {
    use clef_kernels::cpu::Family;
    use clef_kernels::Kernels;
    let root = tempfile::tempdir().unwrap();
    let bundle = root.path().join("nano-q8");
    convert(&["--format", "q8"], &nano(), &bundle);
    // The matrix unit's tiles want 512-row calls; the vector tiles keep 128.
    let amx = Kernels::detected().implementation(Family::Int8Tile) == "amx";
    assert_eq!(bench_chunk(&bundle, None, &[]), if amx { 512 } else { 128 });
    if cfg!(target_arch = "x86_64") {
        assert_eq!(bench_chunk(&bundle, Some("avx2"), &[]), 128);
    }
    assert_eq!(bench_chunk(&bundle, None, &["--chunk", "40"]), 40);
}
