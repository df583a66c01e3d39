//! `clef export --mlx` checked by real MLX (PyPI `mlx[cpu]` and `mlx-lm`, pinned in `.ci/run`,
//! which makes the venv `target/mlx-venv`; `CLEF_MLX_PYTHON` names another interpreter): the
//! exported nano and tiny-a folders load strictly in mlx-lm with their adapters, every
//! quantized module dequantizes in MLX to the weights the bundle's bytes define, and the
//! adapters MLX applies are the bundle's (`tests/mlx/check_export.py`, which decodes the bundle
//! independently of clef.rs), and MLX's own backbone computes the rows clef.rs's exact path does
//! on nano's golden requests (`tests/mlx/backbone_rows.py`). Without the interpreter the tests
//! are skipped, and fail under CI.

mod cli_common;

use clef_api::{parse_json, Limits, Request};
use clef_encode::Truncation;
use clef_engine::{DecideOptions, Engine, EngineConfig};
use clef_model::{MatmulMode, RunOptions};
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

/// The interpreter, or `None` after recording that `test` cannot run (which fails under CI).
fn mlx_python_for(test: &str) -> Option<PathBuf> {
    let python = mlx_python();
    if python.is_none() {
        clef_testkit::tools::cannot_run(
            test,
            "no MLX interpreter (target/mlx-venv: `.ci/run` makes it; or set CLEF_MLX_PYTHON)",
        );
    }
    python
}

/// Converts `model` to a ternary bundle (round to nearest: no calibration needed) and exports
/// it for MLX: (bundle, MLX folder).
fn export(model: &str, root: &Path) -> (PathBuf, PathBuf) {
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
    (bundle, mlx)
}

/// Runs `script` of `tests/mlx/` with `args`; its report (the last line of its output).
fn run_script(python: &Path, script: &str, args: &[&Path]) -> Value {
    let o = Command::new(python)
        .arg(workspace().join("tests/mlx").join(script))
        .args(args)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{script}: {}", text(&o));
    serde_json::from_str(report.trim().lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{script}: {e}: {report}"))
}

/// Exports `model` and runs the checker; its report.
fn export_and_check(python: &Path, model: &str, root: &Path) -> Value {
    let (bundle, mlx) = export(model, root);
    run_script(python, "check_export.py", &[&mlx, &bundle])
}

/// clef.rs's final-normed backbone rows of `bundle` on the exact path (f32 products of the
/// bundle's weights, as MLX multiplies its dequantized ones) for nano's golden requests, in the
/// file `backbone_rows.py` reads.
fn clef_rows(bundle: &Path, out: &Path) {
    let cfg = EngineConfig {
        limits: Limits::reference(),
        run: RunOptions {
            matmul: Some(MatmulMode::Exact),
            ..Default::default()
        },
        ..Default::default()
    };
    let engine = Engine::load(bundle, cfg).unwrap();
    let opts = DecideOptions {
        truncation: Truncation::State,
        ..Default::default()
    };
    let mut requests = Vec::new();
    let golden = fixtures().join("golden/nano");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&golden)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().is_some_and(|n| n != "manifest.json"))
        .collect();
    files.sort();
    for file in files.iter().take(4) {
        let json = parse_json(&std::fs::read(file).unwrap()).unwrap();
        let inner = json.as_object().and_then(|o| o.get("request")).unwrap();
        let req = Request::from_json(inner, engine.limits()).unwrap();
        let (encoded, hidden) = engine.hidden_states(&req, &opts).unwrap();
        requests.push(serde_json::json!({
            "name": file.file_name().unwrap().to_string_lossy(),
            "ids": encoded.input_ids,
            "hidden": hidden,
        }));
    }
    let rows = serde_json::json!({
        "hidden_size": hidden_size(&engine),
        "requests": requests,
    });
    std::fs::write(out, rows.to_string()).unwrap();
}

#[test]
fn mlx_loads_the_export_and_dequantizes_it_exactly() {
    let Some(python) = mlx_python_for("mlx_loads_the_export_and_dequantizes_it_exactly") else {
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

fn hidden_size(engine: &Engine) -> usize {
    engine.model().config().text_config.hidden_size
}

/// MLX's float32 backbone against clef.rs's exact path on nano's rows (values up to about 3.5):
/// with the norm gains exactly `1 + w`, only the two libraries' float32 arithmetic separates
/// them (measured 9.2e-6); as mlx-lm loads the folder, its `sanitize` rounds `1 + w` to bf16
/// (the folder's dtype, as in mlx-lm's own conversions), which moves the rows by up to 2.5e-2.
const EXACT_NORMS_BOUND: f64 = 1e-4;
const AS_LOADED_BOUND: f64 = 0.05;

#[test]
fn mlx_computes_the_backbone_rows_clef_computes() {
    let Some(python) = mlx_python_for("mlx_computes_the_backbone_rows_clef_computes") else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let (bundle, mlx) = export("nano", root.path());
    let rows = root.path().join("rows.json");
    clef_rows(&bundle, &rows);
    let r = run_script(&python, "backbone_rows.py", &[&mlx, &rows]);
    eprintln!("{r}");
    assert_eq!(r["requests"], 4, "{r}");
    assert!(r["gains_set"].as_u64().unwrap() > 0, "{r}");
    assert!(r["largest_value"].as_f64().unwrap() > 1.0, "{r}");
    let exact = r["exact_norms_max_abs_diff"].as_f64().unwrap();
    assert!(
        exact <= EXACT_NORMS_BOUND,
        "MLX and clef.rs differ by {exact}: {r}"
    );
    let loaded = r["as_loaded_max_abs_diff"].as_f64().unwrap();
    assert!(
        loaded <= AS_LOADED_BOUND,
        "MLX as loaded differs by {loaded}: {r}"
    );
}
