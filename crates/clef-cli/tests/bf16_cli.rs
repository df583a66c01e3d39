//! The bf16 products (`--matmul bf16`) as a user runs them: on a CPU with AMX, the fidelity
//! bars of the issue that introduced them on the trained nano model (its 300 labelled eval
//! questions and its golden requests: every top-1 answer the same as the release's exact path,
//! max |dp| ≤ 0.005); everywhere, the refusals: a bundle without bf16 weights, and a CPU (or a
//! `CLEF_ISA` level) without a bf16 matrix unit, each named in the error.

mod cli_common;

use clef_kernels::Kernels;
use cli_common::{clef, fixtures, golden_records, s, text};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn nano() -> PathBuf {
    fixtures().join("models/nano")
}

fn bf16_runs_here() -> bool {
    Kernels::detected().bf16_unit().is_some()
}

/// `clef eval` of nano in bf16 against nano's exact path; the summary's comparison.
fn against_exact(records: &Path, out: &Path) -> Value {
    let o = clef(&[
        "eval",
        "--profile",
        "reference",
        "--truncate",
        "--matmul",
        "bf16",
        "--model",
        s(&nano()),
        "--reference",
        s(&nano()),
        "--reference-matmul",
        "exact",
        "--records",
        s(records),
        "--out",
        s(out),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    summary["compare"].clone()
}

fn assert_faithful(c: &Value, questions: u64) {
    assert_eq!(c["questions"].as_u64(), Some(questions), "{c}");
    assert_eq!(c["agree"].as_u64(), Some(questions), "{c}");
    let max = c["max_abs_dp"].as_f64().unwrap();
    assert!(max <= 5e-3, "max |dp| {max}");
    // The activations were rounded: the answers are not the exact path's bits.
    assert!(max > 0.0, "bf16 gave the exact path's probabilities");
}

#[test]
fn nano_in_bf16_keeps_every_answer_of_the_exact_path() {
    if !bf16_runs_here() {
        eprintln!("no bf16 matrix unit here: the refusal is tested instead");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let c = against_exact(
        &fixtures().join("records/nano_eval.jsonl"),
        &root.path().join("eval"),
    );
    assert_faithful(&c, 300);
    let records = golden_records("nano", root.path());
    let c = against_exact(&records, &root.path().join("golden"));
    let n = c["questions"].as_u64().unwrap();
    assert!(n >= 10, "{c}");
    assert_faithful(&c, n);
}

fn decide(env: &[(&str, &str)], matmul: &str, model: &Path) -> std::process::Output {
    let request = fixtures().join("golden/nano/n00000_routing.json");
    Command::new(env!("CARGO_BIN_EXE_clef"))
        .envs(env.iter().copied())
        .args(["--threads", "2", "decide", "--matmul", matmul, "--model"])
        .arg(s(model))
        .arg(s(&request))
        .output()
        .unwrap()
}

#[test]
fn bf16_where_it_cannot_run_is_refused_by_name() {
    let lower = clef_kernels::cpu::Level::available()
        .into_iter()
        .rev()
        .find(|l| {
            Kernels::named(l.name)
                .map(|k| k.bf16_unit().is_none())
                .unwrap_or(false)
        })
        .expect("the scalar level has no bf16 unit");
    let o = decide(&[("CLEF_ISA", lower.name)], "bf16", &nano());
    assert!(!o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("--matmul bf16 needs a bf16 unit") && t.contains(lower.name),
        "{t}"
    );
    if !bf16_runs_here() {
        let o = decide(&[], "bf16", &nano());
        assert!(!o.status.success(), "{}", text(&o));
        assert!(text(&o).contains("amx-bf16"), "{}", text(&o));
    }
}

#[test]
fn bf16_on_a_bundle_without_bf16_weights_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let bundle = root.path().join("nano-f16");
    let o = clef(&[
        "convert",
        "--format",
        "f16",
        "--from",
        s(&nano()),
        "--to",
        s(&bundle),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let o = decide(&[], "bf16", &bundle);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("--matmul bf16 needs weights stored in bf16"),
        "{}",
        text(&o)
    );
}

#[test]
fn bench_names_the_mode_and_its_unit() {
    if !bf16_runs_here() {
        return;
    }
    let o = clef(&[
        "bench",
        "--model",
        s(&nano()),
        "--tokens",
        "64",
        "--json",
        "--matmul",
        "bf16",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["matmul"], "bf16");
    assert_eq!(v["bf16_isa"], Kernels::detected().bf16_unit().unwrap());
    assert_eq!(v["chunk"], 512);
    assert!(v["bf16_peak_gflops"].as_f64().unwrap() > 0.0);
    assert!(v["linears"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l["bf16"] == true));
}
