//! Stopping and resuming `clef convert --format ternary`, as a user would: the process killed
//! with SIGKILL in the middle of the work and run again with `--resume` gives the same bundle,
//! byte for byte, as a run never stopped (GPTQ on nano, layer by layer; round-to-nearest on
//! tiny-b, linear by linear); a run stopped with SIGTERM leaves nothing behind unless it was
//! asked to keep its work, and a resume under other settings is refused.

#![cfg(unix)]

mod cli_common;

use cli_common::{clef, fixtures, s, text};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn args(model: &str, to: &Path, extra: &[impl AsRef<str>]) -> Vec<String> {
    let mut v: Vec<String> = [
        "convert",
        "--format",
        "ternary",
        "--from",
        s(&fixtures().join("models").join(model)),
        "--to",
        s(to),
    ]
    .map(String::from)
    .to_vec();
    v.extend(extra.iter().map(|a| a.as_ref().to_string()));
    v
}

/// GPTQ on the first `records` of nano's calibration records.
fn gptq_with(records: usize) -> Vec<String> {
    let calib = fixtures().join("records/nano_calib.jsonl");
    [
        "--calib",
        s(&calib),
        "--calib-records",
        &records.to_string(),
    ]
    .map(String::from)
    .to_vec()
}

fn gptq() -> Vec<String> {
    gptq_with(12)
}

fn run(args: &[String]) -> Output {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    clef(&args)
}

fn partial(to: &Path) -> PathBuf {
    to.with_file_name(format!(
        ".{}.partial",
        to.file_name().unwrap().to_string_lossy()
    ))
}

/// Finished units in the journal of the conversion writing `to`.
fn units_done(to: &Path) -> usize {
    std::fs::read_to_string(partial(to).join("journal.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|j| j["done"].as_array().map(Vec::len))
        .unwrap_or(0)
}

/// Starts the conversion, waits until its journal lists `units` finished units, then sends
/// `signal` (`KILL` or `TERM`) at once, in the middle of the next unit.
fn stop_after(args: &[String], to: &Path, units: usize, signal: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_clef"))
        .args(["--threads", "2"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while units_done(to) < units {
        if child.try_wait().unwrap().is_some() {
            let o = child.wait_with_output().unwrap();
            panic!("finished before {units} units: {}", text(&o));
        }
        assert!(t0.elapsed() < Duration::from_secs(600), "no progress");
        std::thread::sleep(Duration::from_millis(2));
    }
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-s", signal, &pid])
        .status()
        .unwrap()
        .success());
    let o = child.wait_with_output().unwrap();
    assert!(!o.status.success(), "stopped: {}", text(&o));
    o
}

/// Every file of a bundle folder, by relative path.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

fn assert_same_bundle(a: &Path, b: &Path) {
    let (fa, fb) = (files(a), files(b));
    let names = |f: &[(String, Vec<u8>)]| f.iter().map(|x| x.0.clone()).collect::<Vec<_>>();
    assert_eq!(names(&fa), names(&fb));
    for ((name, x), (_, y)) in fa.iter().zip(&fb) {
        assert!(x == y, "{name} differs");
    }
}

/// Only the finished bundles are left in `root`: no partial folder.
fn nothing_else_in(root: &Path, bundles: &[&str]) {
    let mut left: Vec<String> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, bundles);
}

#[test]
fn nano_gptq_killed_mid_layer_resumes_to_the_same_bytes() {
    let root = tempfile::tempdir().unwrap();
    let reference = root.path().join("a-reference");
    let o = run(&args("nano", &reference, &gptq()));
    assert!(o.status.success(), "{}", text(&o));

    // killed after the embedding table and two layers, in the middle of the third
    let resumed = root.path().join("b-resumed");
    let stop = stop_after(&args("nano", &resumed, &gptq()), &resumed, 3, "KILL");
    assert!(!resumed.exists(), "{}", text(&stop));
    assert!(partial(&resumed).join("journal.json").is_file());
    let mut again = args("nano", &resumed, &gptq());
    again.push("--resume".into());
    let o = run(&again);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("ternary [resuming]"), "{}", text(&o));
    assert_same_bundle(&reference, &resumed);

    // a resume under other settings is refused and keeps the work; a run without --resume
    // clears it and starts over
    let other = root.path().join("c-other");
    stop_after(&args("nano", &other, &gptq()), &other, 2, "KILL");
    let mut changed = args("nano", &other, &gptq_with(8));
    changed.push("--resume".into());
    let o = run(&changed);
    assert!(!o.status.success());
    assert!(text(&o).contains("other settings"), "{}", text(&o));
    assert!(partial(&other).join("journal.json").is_file());
    let o = run(&args("nano", &other, &gptq()));
    assert!(o.status.success(), "{}", text(&o));
    assert!(!text(&o).contains("resuming"), "{}", text(&o));
    assert_same_bundle(&reference, &other);
    nothing_else_in(root.path(), &["a-reference", "b-resumed", "c-other"]);
}

#[test]
fn tiny_b_stopped_with_or_without_resume() {
    let root = tempfile::tempdir().unwrap();
    let rtn = ["--method", "rtn"];
    let reference = root.path().join("a-reference");
    let o = run(&args("tiny-b", &reference, &rtn));
    assert!(o.status.success(), "{}", text(&o));

    // SIGTERM without --resume: nothing left behind
    let plain = root.path().join("b-plain");
    let o = stop_after(&args("tiny-b", &plain, &rtn), &plain, 4, "TERM");
    assert!(text(&o).contains("nothing was left behind"), "{}", text(&o));
    nothing_else_in(root.path(), &["a-reference"]);

    // SIGTERM with --resume: the work stays, and two more stops later (one of them SIGKILL)
    // the bundle is the one a single run makes
    let kept = root.path().join("c-kept");
    let mut resume = args("tiny-b", &kept, &rtn);
    resume.push("--resume".into());
    let o = stop_after(&resume, &kept, 4, "TERM");
    assert!(text(&o).contains("--resume continues it"), "{}", text(&o));
    let done = units_done(&kept);
    assert!(done >= 4);
    stop_after(&resume, &kept, done + 5, "KILL");
    let o = run(&resume);
    assert!(o.status.success(), "{}", text(&o));
    assert_same_bundle(&reference, &kept);
    nothing_else_in(root.path(), &["a-reference", "c-kept"]);
}
