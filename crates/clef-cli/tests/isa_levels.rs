//! `CLEF_ISA` in the binary: a level this architecture does not know, or one this CPU lacks,
//! stops every command before it does any work, naming the value and the levels there are.

mod cli_common;

use cli_common::{fixtures, s, text};
use std::process::Command;

/// `clef decide` on nano's first golden request under `CLEF_ISA=value`.
fn decide_under(value: &str) -> std::process::Output {
    let f = fixtures();
    Command::new(env!("CARGO_BIN_EXE_clef"))
        .env("CLEF_ISA", value)
        .args(["--threads", "2", "decide", "--model"])
        .arg(s(&f.join("models/nano")))
        .arg(s(&f.join("golden/nano/n00000_routing.json")))
        .output()
        .unwrap()
}

#[test]
fn an_unknown_level_is_refused_by_name() {
    // `avx3` exists nowhere; `sve2x` neither; `neon` is an Arm level, unknown on x86-64 (and an
    // x86 name is unknown on Arm).
    let foreign = if cfg!(target_arch = "x86_64") {
        "neon"
    } else {
        "avx2"
    };
    for value in ["avx3", "sve2x", foreign] {
        let out = decide_under(value);
        assert_eq!(out.status.code(), Some(2), "{value}: {}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(value) && err.contains("scalar"),
            "{value}: {err}"
        );
        assert!(out.stdout.is_empty(), "no answer under {value}");
    }
}

#[test]
fn a_level_this_cpu_lacks_is_refused_naming_what_is_missing() {
    let Some(level) = clef_kernels::cpu::Level::all()
        .iter()
        .find(|l| !l.on_this_cpu())
    else {
        eprintln!("this CPU has every level of its architecture: nothing to refuse");
        return;
    };
    let out = decide_under(level.name);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("lacks"), "{err}");
}

#[test]
fn every_available_level_answers() {
    for level in clef_kernels::cpu::Level::available() {
        let out = decide_under(&level.name.to_uppercase());
        assert!(out.status.success(), "{}: {}", level.name, text(&out));
    }
    // an empty value means no lowering
    assert!(decide_under("").status.success());
}
