//! Bit-for-bit replay of `clef decide --raw` on every golden record (tiny-a, nano and the
//! second checkpoint tiny-b), against outputs stored from an earlier build
//! (`tests/fixtures/raw/<isa>/`, written by `bench/seams_identity.sh`). A refactor that is meant
//! to change nothing a user sees must give the same bytes: the same logits and probabilities to
//! the last bit, the same ids, the same response. Every kernel level this CPU has is replayed
//! (`CLEF_ISA` lowers the choice). Two stored sets cover them: `scalar` (the portable tile
//! multiplies and adds separately) and `avx2`, the outputs of every vector level (`avx2`,
//! `avxvnni`, `avx512`, `amx`): their tiles run each output as one fused multiply-add chain in
//! the same order, whatever the vector width, so they give the same bits (the AMX tiles run
//! only the int8 and bf16 modes, which a release's default exact path does not use). On Arm64
//! the NEON f32 tile runs the same chains, so `neon`, `dotprod` and `i8mm` replay the `avx2`
//! set too: an Arm machine answers with the x86 vector levels' bits.
//!
//! Cross-compiled, the binary runs under the emulator named by `CLEF_TEST_RUNNER` (e.g.
//! `qemu-aarch64 -cpu max -L /usr/aarch64-linux-gnu`, as `.ci/run` sets it).

mod cli_common;

use cli_common::{fixtures, text};
use std::path::PathBuf;
use std::process::Command;

/// The model and request file behind a stored output's name (`<model>_<record>.json`).
fn source(name: &str) -> (PathBuf, PathBuf) {
    let (model, record) = name.split_once('_').expect("<model>_<record>");
    let f = fixtures();
    let request = match (model, record) {
        ("tiny-b", "multi_media") => f.join("reference/tiny-b/multi_media.json"),
        ("tiny-b", r) => f.join(format!("golden/tiny-a/{r}.json")),
        (m, r) => f.join(format!("golden/{m}/{r}.json")),
    };
    (f.join("models").join(model), request)
}

/// The `clef` binary, under `CLEF_TEST_RUNNER` when one is given.
fn clef_command() -> Command {
    let exe = env!("CARGO_BIN_EXE_clef");
    match std::env::var("CLEF_TEST_RUNNER") {
        Ok(runner) if !runner.trim().is_empty() => {
            let mut words = runner.split_whitespace();
            let mut cmd = Command::new(words.next().unwrap_or_default());
            cmd.args(words).arg(exe);
            cmd
        }
        _ => Command::new(exe),
    }
}

/// Replays the stored set `stored` under the kernel level `isa`.
fn replay(isa: &str, stored: &str) {
    let dir = fixtures().join("raw").join(stored);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    // every golden record of the three models is stored
    for (model, count) in [("tiny-a", 27), ("nano", 10), ("tiny-b", 3)] {
        let n = names
            .iter()
            .filter(|n| n.starts_with(&format!("{model}_")))
            .count();
        assert_eq!(n, count, "{isa}: stored outputs of {model}");
    }
    let mut differing = Vec::new();
    for name in &names {
        let (model, request) = source(name.trim_end_matches(".json"));
        assert!(
            request.is_file(),
            "{name}: no request {}",
            request.display()
        );
        let out = clef_command()
            .env("CLEF_ISA", isa)
            .args(["--threads", "2", "decide", "--raw", "--model"])
            .arg(&model)
            .arg(&request)
            .output()
            .unwrap();
        assert!(out.status.success(), "{name}: {}", text(&out));
        let want = std::fs::read(dir.join(name)).unwrap();
        if out.stdout != want {
            differing.push(name.clone());
        }
    }
    assert!(
        differing.is_empty(),
        "{isa}: {} of {} raw outputs differ from the stored ones: {differing:?}",
        differing.len(),
        names.len()
    );
}

#[test]
fn scalar_outputs_are_bit_identical() {
    replay("scalar", "scalar");
}

/// A vector level's outputs, or a note when this CPU lacks it.
fn replay_vector_level(isa: &str) {
    if let Err(e) = clef_kernels::Kernels::named(isa) {
        eprintln!("{e}: its outputs cannot be replayed here");
        return;
    }
    replay(isa, "avx2");
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::replay_vector_level;

    #[test]
    fn avx2_outputs_are_bit_identical() {
        replay_vector_level("avx2");
    }

    #[test]
    fn avxvnni_outputs_are_bit_identical() {
        replay_vector_level("avxvnni");
    }

    #[test]
    fn avx512_outputs_are_bit_identical() {
        replay_vector_level("avx512");
    }

    #[test]
    fn amx_outputs_are_bit_identical() {
        replay_vector_level("amx");
    }
}

#[cfg(target_arch = "aarch64")]
mod aarch64 {
    use super::replay_vector_level;

    #[test]
    fn neon_outputs_are_bit_identical() {
        replay_vector_level("neon");
    }

    #[test]
    fn dotprod_outputs_are_bit_identical() {
        replay_vector_level("dotprod");
    }

    #[test]
    fn i8mm_outputs_are_bit_identical() {
        replay_vector_level("i8mm");
    }
}

/// Every level this architecture knows is one of the replays above.
#[test]
fn every_level_is_replayed() {
    let replayed: &[&str] = if cfg!(target_arch = "aarch64") {
        &["scalar", "neon", "dotprod", "i8mm"]
    } else {
        &["scalar", "avx2", "avxvnni", "avx512", "amx"]
    };
    for level in clef_kernels::cpu::Level::all() {
        assert!(
            replayed.contains(&level.name),
            "no replay for {}",
            level.name
        );
    }
}
