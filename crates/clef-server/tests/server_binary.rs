//! The `clef-server` binary (what the container image runs): it links neither the converter,
//! the quantizers nor faer; it takes exactly the settings of `clef serve` (the same
//! `ServeArgs`) plus `--threads`; and it answers a request as the engine does, then stops on
//! SIGTERM with status 0.

use clap::Args;
use clef_api::{build_response, parse_request, AnswerOptions, Limits};
use clef_engine::{DecideOptions, Engine, EngineConfig};
use clef_server::cli::ServeArgs;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn nano() -> PathBuf {
    root().join("tests/fixtures/models/nano")
}

/// The package names `cargo tree` lists for the server's normal dependencies, to `depth`.
fn server_dependencies(depth: Option<usize>) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "tree",
        "-p",
        "clef-server",
        "-e",
        "normal",
        "--prefix",
        "none",
    ])
    .arg("--manifest-path")
    .arg(root().join("Cargo.toml"));
    if let Some(depth) = depth {
        cmd.args(["--depth", &depth.to_string()]);
    }
    let out = cmd.output().expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_server_links_no_converter_quantizer_or_faer() {
    let all = server_dependencies(None);
    assert!(
        all.contains("clef-engine") && all.contains("axum"),
        "{all:?}"
    );
    for banned in ["faer", "clef-quant", "clef-convert"] {
        assert!(!all.contains(banned), "clef-server depends on {banned}");
    }
    // It speaks to the engine only: its own clef-* dependencies are clef-api and clef-engine.
    let direct: BTreeSet<String> = server_dependencies(Some(1))
        .into_iter()
        .filter(|name| name.starts_with("clef-") && name != "clef-server")
        .collect();
    assert_eq!(
        direct,
        BTreeSet::from(["clef-api".to_owned(), "clef-engine".to_owned()])
    );
}

/// The names of the `[env: NAME=]` markers of a help text (`[env: NAME]` for a hidden value).
fn env_names(help: &str) -> BTreeSet<String> {
    help.split("[env: ")
        .skip(1)
        .map(|rest| {
            rest.chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect()
        })
        .collect()
}

#[test]
fn the_binary_takes_the_settings_of_clef_serve() {
    let out = Command::new(env!("CARGO_BIN_EXE_clef-server"))
        .arg("--help")
        .output()
        .expect("run clef-server --help");
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    let serve = ServeArgs::augment_args(clap::Command::new("serve"));
    let mut want: BTreeSet<String> = serve
        .get_arguments()
        .filter_map(|a| a.get_env())
        .map(|e| e.to_string_lossy().into_owned())
        .collect();
    want.insert("CLEF_THREADS".into());
    assert_eq!(env_names(&help), want);
    for arg in serve.get_arguments() {
        if let Some(long) = arg.get_long() {
            assert!(help.contains(&format!("--{long}")), "--{long} missing");
        }
    }
    // the routes and the example of `clef serve --help`
    assert!(help.contains("POST /v1/systemone"), "{help}");
}

/// One HTTP/1.1 exchange on a fresh connection: the status and the body.
fn exchange(addr: SocketAddr, head: &str, body: &[u8]) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    write!(
        s,
        "{head}\r\nhost: {addr}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )?;
    s.write_all(body)?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    Ok((status, body))
}

const REQUEST: &str = r#"{"model": "clef", "state": "Checkout has been failing for every customer for the last hour.",
 "questions": {"urgent": {"type": "noul", "instructions": "Is this support request urgent?"}}}"#;

/// What the engine itself answers, formatted as the server's defaults do.
fn engine_answer(model: &Path) -> String {
    let engine = Engine::load(model, EngineConfig::default()).unwrap();
    let req = parse_request(REQUEST.as_bytes(), &Limits::workers()).unwrap();
    let d = engine.decide(&req, &DecideOptions::default()).unwrap();
    build_response(
        &req,
        &d.probabilities_f64(),
        d.encoded.input_ids.len(),
        &AnswerOptions {
            rounding: Some(4),
            ..Default::default()
        },
    )
    .unwrap()
    .to_json_string()
}

#[test]
fn the_binary_answers_as_the_engine_and_stops_on_sigterm() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_clef-server"))
        .args(["--threads", "1", "--addr", "127.0.0.1:0", "--model"])
        .arg(nano())
        .env_remove("CLEF_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn clef-server");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        let _ = tx.send(lines.next().and_then(Result::ok));
        for _ in lines {}
    });
    let line = rx.recv_timeout(Duration::from_secs(30)).ok().flatten();
    let addr: SocketAddr = match line
        .as_deref()
        .and_then(|l| l.strip_prefix("listening on "))
        .and_then(|a| a.trim().parse().ok())
    {
        Some(addr) => addr,
        None => {
            let _ = child.kill();
            panic!("no address reported: {line:?}");
        }
    };
    let t0 = Instant::now();
    while !matches!(exchange(addr, "GET /readyz HTTP/1.1", b""), Ok((200, _))) {
        assert!(t0.elapsed() < Duration::from_secs(60), "not ready");
        std::thread::sleep(Duration::from_millis(20));
    }
    let answered = exchange(
        addr,
        "POST /v1/systemone HTTP/1.1\r\ncontent-type: application/json",
        REQUEST.as_bytes(),
    );
    let stopped = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(stopped.success());
    let status = child.wait().unwrap();
    let (code, body) = answered.unwrap();
    assert_eq!(code, 200, "{body}");
    assert_eq!(body, engine_answer(&nano()));
    assert!(status.success(), "{status:?}");
}
