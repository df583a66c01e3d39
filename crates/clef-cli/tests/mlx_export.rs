//! `clef export --mlx` checked by real MLX (PyPI `mlx[cpu]` and `mlx-lm`, pinned in `.ci/run`,
//! which makes the venv `target/mlx-venv`; `CLEF_MLX_PYTHON` names another interpreter): the
//! exported nano and tiny-a folders load strictly in mlx-lm with their adapters, every
//! quantized module dequantizes in MLX to the weights the bundle's bytes define, and the
//! adapters MLX applies are the bundle's (`tests/mlx/check_export.py`, which decodes the bundle
//! independently of clef.rs). Without the interpreter the test is skipped, and fails under CI.

mod cli_common;

use cli_common::{clef, fixtures, s, text};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn mlx_python() -> Option<PathBuf> {
    let p = std::env::var_os("CLEF_MLX_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/mlx-venv/bin/python"));
    p.is_file().then_some(p)
}

/// Converts `model` to a ternary bundle (round to nearest: no calibration needed), exports it
/// for MLX and runs the checker; its report.
fn export_and_check(python: &Path, model: &str, root: &Path) -> Value {
    let bundle = root.join(format!("{model}-ternary"));
    let mlx = root.join(format!("{model}-mlx"));
    let from = fixtures().join("models").join(model);
    let o = clef(&[
        "convert",
        "--format",
        "ternary",
        "--method",
        "rtn",
        "--from",
        s(&from),
        "--to",
        s(&bundle),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let o = clef(&["export", "--mlx", s(&bundle), s(&mlx)]);
    assert!(o.status.success(), "{}", text(&o));
    let o = Command::new(python)
        .arg(workspace().join("tests/mlx/check_export.py"))
        .arg(&mlx)
        .arg(&bundle)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{model}: {}", text(&o));
    serde_json::from_str(report.trim().lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{model}: {e}: {report}"))
}

#[test]
fn mlx_loads_the_export_and_dequantizes_it_exactly() {
    let Some(python) = mlx_python() else {
        clef_testkit::tools::cannot_run(
            "mlx_loads_the_export_and_dequantizes_it_exactly",
            "no MLX interpreter (target/mlx-venv: `.ci/run` makes it; or set CLEF_MLX_PYTHON)",
        );
        return;
    };
    let root = tempfile::tempdir().unwrap();
    for model in ["nano", "tiny-a"] {
        let r = export_and_check(&python, model, root.path());
        eprintln!("{model}: {r}");
        let counts = &r["counts"];
        let quantized = counts["ternary"].as_u64().unwrap() + counts["4bit"].as_u64().unwrap();
        // Every backbone linear but in_proj_a/b, plus embed_tokens (and lm_head when it is not
        // tied) is quantized: dozens, never none.
        assert!(quantized > 10, "{model}: {quantized} quantized modules");
        assert!(
            counts["adapters"].as_u64().unwrap() > 0,
            "{model}: no adapters"
        );
        assert_eq!(r["worst"]["ternary"], 0.0, "{model}");
        assert!(r["worst"]["4bit_ulps"].as_f64().unwrap() <= 1.0, "{model}");
        assert_eq!(r["worst"]["adapters"], 0.0, "{model}");
        assert!(r["failures"].as_array().unwrap().is_empty(), "{model}: {r}");
    }
}
