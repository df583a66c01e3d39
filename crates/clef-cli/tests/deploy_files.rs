//! The deployment files (docs/deploy.md): the Containerfile, the Kubernetes manifests under
//! deploy/k8s and the settings they give `clef serve`.
//!
//! - The Containerfile is checked statically: it cannot be built where CI runs (no container
//!   registry is reachable for its base images, and the OCI runtime cannot start a container
//!   in this sandbox; docs/deploy.md quotes both errors).
//! - Every `CLEF_*` name in deploy/ and the Containerfile is one `clef serve --help` lists.
//! - The memory arithmetic written in the Deployments' comments adds up and matches their
//!   settings and requests.
//! - The base and every overlay are rendered with `kubectl kustomize` and validated with
//!   `kubernetes-validate --strict` against the Kubernetes schemas (oldest and newest it has);
//!   the two custom resources it has no schema for (Prometheus Operator's ServiceMonitor,
//!   KEDA's ScaledObject) are checked field by field here, with everything that ties the
//!   objects together (selectors, ports, Secret, probes, grace period against the deadline).
//! - The rendered Deployments' environment starts a real `clef serve`, whose `/v1/models` and
//!   `/metrics` must show those settings, and whose `/metrics` must export every series the
//!   autoscaler's query names.
//!
//! `kubectl` comes with this project's machine image; `kubernetes-validate` (PyPI) is installed
//! by .ci/run into target/k8s-venv. Without them the rendering tests are skipped and recorded
//! outside CI and fail under CI (crates/clef-testkit). The HAProxy config is run by
//! tests/scale_out.rs.

mod serve_common;

use serde_json::Value;
use serve_common::{send, Metrics, Options, Req, Server};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn nano() -> PathBuf {
    root().join("tests/fixtures/models/nano")
}

/// The kustomizations that are deployed: the base and each overlay.
fn kustomizations() -> Vec<PathBuf> {
    let mut dirs = vec![root().join("deploy/k8s/base")];
    let overlays = root().join("deploy/k8s/overlays");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&overlays)
        .expect("deploy/k8s/overlays")
        .map(|e| e.unwrap().path())
        .collect();
    found.sort();
    for dir in found {
        assert!(
            dir.join("kustomization.yaml").is_file(),
            "{}: an overlay folder without kustomization.yaml",
            dir.display()
        );
        dirs.push(dir);
    }
    dirs
}

/// Every `CLEF_*` name that `clef serve --help` mentions: the `[env: NAME=]` of each setting
/// (clap's `env =`), and the ones its prose names (`CLEF_LOG`, read by the logger).
fn serve_env_vars() -> BTreeSet<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_clef"))
        .args(["serve", "--help"])
        .output()
        .expect("run clef serve --help");
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    let names = clef_names(&help);
    assert!(
        ["CLEF_MODEL", "CLEF_API_KEY", "CLEF_THREADS", "CLEF_LOG"]
            .iter()
            .all(|n| names.contains(*n)),
        "{names:?}"
    );
    names
}

/// The `CLEF_[A-Z0-9_]+` words of a text.
fn clef_names(text: &str) -> BTreeSet<String> {
    text.match_indices("CLEF_")
        .map(|(i, _)| {
            text[i..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect::<String>()
        })
        .map(|n| n.trim_end_matches('_').to_owned())
        .collect()
}

/// One Containerfile instruction: keyword (upper case) and its arguments, continuation lines
/// joined and comments dropped.
#[derive(Debug)]
struct Instruction {
    keyword: String,
    args: String,
}

fn parse_containerfile(text: &str) -> Vec<Instruction> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && current.is_empty()) {
            continue;
        }
        if let Some(head) = trimmed.strip_suffix('\\') {
            current.push_str(head);
            current.push(' ');
            continue;
        }
        current.push_str(trimmed);
        let (keyword, args) = current.split_once(' ').unwrap_or((current.as_str(), ""));
        out.push(Instruction {
            keyword: keyword.to_ascii_uppercase(),
            args: args.split_whitespace().collect::<Vec<_>>().join(" "),
        });
        current.clear();
    }
    assert!(current.is_empty(), "a continuation line ends the file");
    out
}

/// `KEY=VALUE` pairs of an `ENV` instruction (no quoting is used in ours).
fn env_pairs(args: &str) -> Vec<(String, String)> {
    args.split_whitespace()
        .map(|kv| {
            let (k, v) = kv.split_once('=').expect("ENV KEY=VALUE form");
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

#[test]
fn containerfile_is_multi_stage_non_root_and_uses_real_settings() {
    let text = std::fs::read_to_string(root().join("Containerfile")).expect("Containerfile");
    let all = parse_containerfile(&text);
    let args: Vec<(String, String)> = all
        .iter()
        .filter(|i| i.keyword == "ARG")
        .filter_map(|i| i.args.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let arg = |name: &str| {
        args.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("ARG {name}"))
    };

    // Stages: a build stage on the Rust toolchain, then the runtime stage.
    let froms: Vec<usize> = (0..all.len())
        .filter(|&i| all[i].keyword == "FROM")
        .collect();
    assert_eq!(froms.len(), 2, "two stages: {all:?}");
    assert_eq!(all[froms[0]].args, "${RUST_IMAGE} AS build");
    assert_eq!(all[froms[1]].args, "${RUNTIME_IMAGE} AS runtime");
    let build = &all[froms[0]..froms[1]];
    let runtime = &all[froms[1]..];

    // The toolchain is at least the workspace's rust-version.
    let rust_image = arg("RUST_IMAGE");
    let tag = rust_image
        .rsplit_once(":")
        .map(|(_, t)| t)
        .expect("a tagged rust image");
    let version: Vec<u32> = tag
        .split('-')
        .next()
        .unwrap()
        .split('.')
        .map(|p| p.parse().expect("rust image tag is a version"))
        .collect();
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let wanted: Vec<u32> = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .expect("workspace rust-version")
        .trim_matches('"')
        .split('.')
        .map(|p| p.parse().unwrap())
        .collect();
    assert!(version >= wanted, "{rust_image} older than {wanted:?}");
    assert!(
        rust_image.contains("bookworm"),
        "same Debian as the runtime"
    );
    let runtime_image = arg("RUNTIME_IMAGE");
    assert!(
        runtime_image.contains("debian") && runtime_image.ends_with("-slim"),
        "{runtime_image}"
    );

    // The build stage builds the locked release binary from sources it copies, and those
    // sources include every fixture the binary's crates embed with include_bytes!.
    let copied: Vec<String> = build
        .iter()
        .filter(|i| i.keyword == "COPY")
        .flat_map(|i| {
            let words: Vec<&str> = i.args.split_whitespace().collect();
            words[..words.len() - 1]
                .iter()
                .map(|w| w.to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    for src in &copied {
        assert!(root().join(src).exists(), "COPY {src}: no such path");
    }
    for needed in embedded_paths() {
        assert!(
            copied.iter().any(|c| needed.starts_with(c)),
            "{needed} is embedded by a crate but not copied into the build stage"
        );
    }
    assert!(build.iter().any(|i| i.keyword == "RUN"
        && i.args
            .contains("cargo build --release --locked -p clef-server")));

    // The runtime stage: ffmpeg, the binary from the build stage, a non-root user.
    let run_text: String = runtime
        .iter()
        .filter(|i| i.keyword == "RUN")
        .map(|i| i.args.clone())
        .collect();
    assert!(run_text.contains("apt-get install -y --no-install-recommends ffmpeg"));
    assert!(run_text.contains("rm -rf /var/lib/apt/lists/*"));
    assert!(runtime.iter().any(|i| i.keyword == "COPY"
        && i.args == "--from=build /usr/local/bin/clef-server /usr/local/bin/clef-server"));
    // What else the runtime stage takes from the build stage was copied into it (WORKDIR /src).
    for i in runtime.iter().filter(|i| i.keyword == "COPY") {
        let words: Vec<&str> = i.args.split_whitespace().collect();
        assert_eq!(words[0], "--from=build", "only the build stage: {i:?}");
        if let Some(src) = words[1].strip_prefix("/src/") {
            assert!(
                copied.iter().any(|c| src.starts_with(c.as_str())) && root().join(src).exists(),
                "{src} is not in the build stage"
            );
        }
    }
    // The toy model the image carries (for trying it without a model; the nano overlay).
    let (_, image_nano) = containerfile_facts();
    assert!(image_nano.starts_with("/usr/share/clef/"), "{image_nano}");
    let users: Vec<&Instruction> = runtime.iter().filter(|i| i.keyword == "USER").collect();
    assert_eq!(users.len(), 1);
    let uid = users[0].args.split(':').next().unwrap();
    assert!(
        uid.parse::<u32>().is_ok_and(|u| u != 0),
        "USER must be a numeric non-root uid (Kubernetes runAsNonRoot checks a number): {uid}"
    );
    assert!(run_text.contains(&format!("--uid {uid}")));
    let last_user = all.iter().rposition(|i| i.keyword == "USER").unwrap();
    assert!(
        !all[last_user..].iter().any(|i| i.keyword == "RUN"),
        "nothing runs as root after USER"
    );

    // Settings from the environment: every CLEF_* name is one `clef serve` reads.
    let known = serve_env_vars();
    let env: Vec<(String, String)> = runtime
        .iter()
        .filter(|i| i.keyword == "ENV")
        .flat_map(|i| env_pairs(&i.args))
        .collect();
    for (k, _) in env.iter().filter(|(k, _)| k.starts_with("CLEF_")) {
        assert!(known.contains(k), "ENV {k} is not a clef serve setting");
    }
    let get = |k: &str| {
        env.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("ENV {k}"))
    };
    // The model is mounted read-only at the documented path.
    assert_eq!(get("CLEF_MODEL"), "/models/clef");
    let deploy_md = std::fs::read_to_string(root().join("docs/deploy.md")).expect("docs/deploy.md");
    assert!(deploy_md.contains("/models/clef:ro"));
    // Listening on every interface, on the exposed port.
    let addr = get("CLEF_ADDR");
    let port = addr.strip_prefix("0.0.0.0:").expect("all interfaces");
    let exposed: Vec<&str> = runtime
        .iter()
        .filter(|i| i.keyword == "EXPOSE")
        .map(|i| i.args.as_str())
        .collect();
    assert_eq!(exposed, [port]);
    assert_eq!(
        get("TMPDIR"),
        "/tmp",
        "the only place written to (video temp files)"
    );

    // Shutdown and start.
    let stop: Vec<&str> = all
        .iter()
        .filter(|i| i.keyword == "STOPSIGNAL")
        .map(|i| i.args.as_str())
        .collect();
    assert_eq!(stop, ["SIGTERM"]);
    let entry: Vec<&str> = runtime
        .iter()
        .filter(|i| i.keyword == "ENTRYPOINT")
        .map(|i| i.args.as_str())
        .collect();
    // the server binary, whose settings are `clef serve`'s (crates/clef-server/tests/server_binary.rs)
    assert_eq!(entry, [r#"["/usr/local/bin/clef-server"]"#], "exec form");
    assert!(!all.iter().any(|i| i.keyword == "CMD"));
    assert!(
        !all.iter().any(|i| i.keyword == "HEALTHCHECK"),
        "see its comment"
    );

    // The build context leaves out the build outputs.
    let ignore = std::fs::read_to_string(root().join(".containerignore")).unwrap();
    assert!(ignore.lines().any(|l| l.trim() == "target"));
}

/// Repository paths that crates' sources embed (`include_bytes!`/`include_str!` reaching out
/// of the crate), relative to the root.
fn embedded_paths() -> Vec<String> {
    let mut out = Vec::new();
    let crates = root().join("crates");
    for krate in std::fs::read_dir(&crates).unwrap() {
        let src = krate.unwrap().path().join("src");
        walk(&src, &mut |file| {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            for part in text
                .split("include_bytes!(\"")
                .chain(text.split("include_str!(\""))
                .skip(1)
            {
                let Some((rel, _)) = part.split_once('"') else {
                    continue;
                };
                if !rel.starts_with("../") {
                    continue;
                }
                let joined = file.parent().unwrap().join(rel);
                let Ok(abs) = joined.canonicalize() else {
                    continue;
                };
                let root = root().canonicalize().unwrap();
                if let Ok(r) = abs.strip_prefix(&root) {
                    if !r.starts_with("crates") {
                        out.push(r.to_string_lossy().into_owned());
                    }
                }
            }
        });
    }
    out
}

fn walk(dir: &Path, f: &mut dyn FnMut(&Path)) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let p = entry.unwrap().path();
        if p.is_dir() {
            walk(&p, f);
        } else if p.extension().is_some_and(|e| e == "rs") {
            f(&p);
        }
    }
}

#[test]
fn deploy_files_use_real_settings() {
    let known = serve_env_vars();
    let mut seen = BTreeSet::new();
    let mut files = vec![root().join("Containerfile")];
    walk_files(&root().join("deploy"), &mut |file| {
        files.push(file.to_path_buf())
    });
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        for name in clef_names(&text) {
            // The HAProxy config's own variables (addresses given by whoever runs it).
            if name.starts_with("CLEF_LB_") || name.starts_with("CLEF_REPLICA_") {
                continue;
            }
            assert!(
                known.contains(&name),
                "{}: {name} is not a clef serve setting",
                file.display()
            );
            seen.insert(name);
        }
    }
    // The scan found the names it must (a broken scan would pass on nothing).
    for name in [
        "CLEF_API_KEY",
        "CLEF_MODEL",
        "CLEF_DEADLINE",
        "CLEF_STATE_CACHE_MIB",
    ] {
        assert!(seen.contains(name), "{name} not found in deploy/: {seen:?}");
    }
}

fn walk_files(dir: &Path, f: &mut dyn FnMut(&Path)) {
    for entry in std::fs::read_dir(dir).expect("deploy/") {
        let p = entry.unwrap().path();
        if p.is_dir() {
            walk_files(&p, f);
        } else {
            f(&p);
        }
    }
}

/// One item of a Deployment's memory arithmetic comment, in MiB.
#[derive(Debug)]
struct Item {
    label: String,
    mib: f64,
    /// Its figure's precision: half a unit of the last decimal written, in MiB.
    slack: f64,
}

/// The `Memory, per replica` comment of a Deployment (or patch) file: its items (lines
/// `#   label ... N.NN GiB` or `N MiB`), its total and the request it rounds up to.
fn memory_arithmetic(text: &str) -> (Vec<Item>, Item, String) {
    let mut lines = text
        .lines()
        .skip_while(|l| !l.contains("Memory, per replica"))
        .skip(1);
    let mut items = Vec::new();
    for line in lines.by_ref() {
        let Some(body) = line.strip_prefix("#   ") else {
            panic!("the memory comment ends before its total: {line:?}")
        };
        if body.starts_with(' ') {
            continue; // how the item above was found
        }
        let (body, request) = match body.split_once(" -> ") {
            Some((b, r)) => (b, Some(r.trim().to_owned())),
            None => (body, None),
        };
        let words: Vec<&str> = body.split_whitespace().collect();
        let (number, unit) = (words[words.len() - 2], words[words.len() - 1]);
        let scale = match unit {
            "GiB" => 1024.0,
            "MiB" => 1.0,
            other => panic!("unit {other} in {line:?}"),
        };
        let decimals = number.split_once('.').map_or(0, |(_, d)| d.len());
        let item = Item {
            label: words[..words.len() - 2].join(" "),
            mib: number.parse::<f64>().expect(line) * scale,
            slack: 0.5 * 10f64.powi(-(decimals as i32)) * scale,
        };
        if item.label == "total" {
            return (items, item, request.expect("total -> the request"));
        }
        items.push(item);
    }
    panic!("no memory arithmetic comment")
}

/// The `value:` of `- name: NAME` in a manifest's text.
fn env_value(text: &str, name: &str) -> Option<String> {
    let mut lines = text.lines();
    lines.find(|l| l.trim() == format!("- name: {name}"))?;
    let value = lines.next()?.trim().strip_prefix("value:")?.trim();
    Some(value.trim_matches('"').to_owned())
}

/// `20Gi` or `256Mi` in MiB.
fn quantity_mib(q: &str) -> f64 {
    if let Some(g) = q.strip_suffix("Gi") {
        g.parse::<f64>().unwrap() * 1024.0
    } else if let Some(m) = q.strip_suffix("Mi") {
        m.parse().unwrap()
    } else {
        panic!("memory quantity {q}")
    }
}

#[test]
fn memory_arithmetic_adds_up_and_matches_the_settings() {
    for file in [
        "deploy/k8s/base/deployment.yaml",
        "deploy/k8s/overlays/nano/deployment.yaml",
    ] {
        let text = std::fs::read_to_string(root().join(file)).expect(file);
        let (items, total, request) = memory_arithmetic(&text);
        assert!(items.len() >= 5, "{file}: {items:?}");
        let sum: f64 = items.iter().map(|i| i.mib).sum();
        let slack: f64 = items.iter().map(|i| i.slack).sum::<f64>() + total.slack;
        assert!(
            (sum - total.mib).abs() <= slack,
            "{file}: the items add up to {sum} MiB, the total says {} MiB",
            total.mib
        );
        // The total fits in the request and limit that the file sets, with under 25% spare.
        let memory: BTreeSet<&str> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("memory: "))
            .collect();
        assert_eq!(memory, BTreeSet::from([request.as_str()]), "{file}");
        let requested = quantity_mib(&request);
        assert!(
            total.mib <= requested && total.mib >= 0.75 * requested,
            "{file}: {} MiB in a {request} request",
            total.mib
        );
        // The items that are memory settings (`CLEF_*_MIB`) say what the file sets.
        for item in &items {
            for name in clef_names(&item.label)
                .into_iter()
                .filter(|n| n.ends_with("_MIB"))
            {
                let set: f64 = env_value(&text, &name)
                    .unwrap_or_else(|| panic!("{file}: {name} is not set"))
                    .parse()
                    .unwrap();
                assert!(
                    (set - item.mib).abs() <= item.slack,
                    "{file}: {} says {} MiB, {name} is {set}",
                    item.label,
                    item.mib
                );
            }
        }
        // Sums written out in the comment (`a GB + b GB = c GB`) are right.
        for line in text.lines().take_while(|l| l.starts_with('#')) {
            let Some((terms, result)) = line.split_once(" = ") else {
                continue;
            };
            let gb = |s: &str| -> Option<f64> {
                s.split_whitespace()
                    .collect::<Vec<_>>()
                    .windows(2)
                    .filter(|w| w[1] == "GB")
                    .map(|w| w[0].parse::<f64>().ok())
                    .collect::<Option<Vec<f64>>>()
                    .map(|v| v.iter().sum())
            };
            if let (Some(a), Some(b)) = (gb(terms), gb(result)) {
                assert!((a - b).abs() < 0.015, "{file}: {line}");
            }
        }
    }
}

/// The programs that render and validate the manifests, or `None` when the test is skipped.
struct K8sTools {
    kubectl: PathBuf,
    validate: PathBuf,
    /// The Python that runs kubernetes-validate: it has PyYAML, which reads the rendered YAML.
    python: PathBuf,
}

fn k8s_tools(test: &str) -> Option<K8sTools> {
    // .ci/run installs kubernetes-validate into target/k8s-venv; a developer may not have that
    // folder on PATH.
    let mut path = std::env::var_os("PATH").unwrap_or_default();
    path.push(":");
    path.push(root().join("target/k8s-venv/bin"));
    let programs = ["kubectl", "kubernetes-validate"];
    let found: Option<Vec<PathBuf>> = programs
        .iter()
        .map(|p| clef_testkit::tools::find_on_path(p, &path))
        .collect();
    let found = match found {
        Some(f) => f,
        None => clef_testkit::tools::require(test, &programs)?,
    };
    // Its Python: the venv's own beside it, else the script's `#!` interpreter (pip writes a
    // `/bin/sh` launcher instead when the path is long, hence the venv first).
    let sibling = found[1].with_file_name("python3");
    let script = std::fs::read_to_string(&found[1]).unwrap_or_default();
    let python = if sibling.is_file() {
        sibling
    } else {
        script
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("#!"))
            .map(|l| PathBuf::from(l.trim()))
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().contains("python"))
            })
            .unwrap_or_else(|| PathBuf::from("python3"))
    };
    Some(K8sTools {
        kubectl: found[0].clone(),
        validate: found[1].clone(),
        python,
    })
}

fn run(cmd: &mut Command, input: Option<&str>) -> (bool, String, String) {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let mut stdin = child.stdin.take().unwrap();
    if let Some(text) = input {
        std::io::Write::write_all(&mut stdin, text.as_bytes()).unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

impl K8sTools {
    /// `kubectl kustomize DIR`: the YAML that `kubectl apply -k DIR` would send.
    fn render(&self, dir: &Path) -> String {
        let (ok, out, err) = run(Command::new(&self.kubectl).arg("kustomize").arg(dir), None);
        assert!(ok, "kubectl kustomize {}: {err}", dir.display());
        out
    }

    /// The objects of a YAML stream.
    fn objects(&self, yaml: &str) -> Vec<Value> {
        let script = "import json, sys, yaml\n\
                      json.dump([d for d in yaml.safe_load_all(sys.stdin) if d], sys.stdout)";
        let (ok, out, err) = run(Command::new(&self.python).args(["-c", script]), Some(yaml));
        assert!(ok, "reading YAML with {}: {err}", self.python.display());
        match serde_json::from_str(&out).expect("JSON from PyYAML") {
            Value::Array(v) => v,
            other => panic!("{other}"),
        }
    }

    /// `kubernetes-validate --strict` of a YAML file against one Kubernetes version: whether
    /// it passed, the kinds it had no schema for, and its report.
    fn validate(&self, file: &Path, version: &str) -> (bool, BTreeSet<String>, String) {
        let (ok, out, err) = run(
            Command::new(&self.validate)
                .args(["--strict", "-k", version])
                .arg(file),
            None,
        );
        let report = format!("{out}{err}");
        let unknown = report
            .lines()
            .filter_map(|l| l.split_once("Couldn't find schema for kind "))
            .map(|(_, rest)| rest.split_whitespace().next().unwrap().to_owned())
            .collect();
        (ok, unknown, report)
    }
}

/// The oldest and newest Kubernetes versions whose schemas kubernetes-validate 1.37.0 has.
const K8S_VERSIONS: [&str; 2] = ["1.25.0", "1.37.0"];

#[test]
fn manifests_validate_against_the_kubernetes_schemas() {
    let test = "deploy_files::manifests_validate_against_the_kubernetes_schemas";
    let Some(tools) = k8s_tools(test) else { return };
    let dir = tempfile::tempdir().unwrap();
    for kdir in kustomizations() {
        let rendered = dir.path().join("rendered.yaml");
        let yaml = tools.render(&kdir);
        std::fs::write(&rendered, &yaml).unwrap();
        // The custom resources kubernetes-validate has no schema for: exactly those that
        // manifests_hold_together checks by hand.
        let custom: BTreeSet<String> = tools
            .objects(&yaml)
            .iter()
            .filter(|o| !built_in(o))
            .map(|o| o["kind"].as_str().unwrap().to_owned())
            .collect();
        for version in K8S_VERSIONS {
            let (ok, unknown, report) = tools.validate(&rendered, version);
            assert!(ok, "{} against {version}:\n{report}", kdir.display());
            assert_eq!(unknown, custom, "{}:\n{report}", kdir.display());
            assert!(
                custom.is_subset(&BTreeSet::from([
                    "ServiceMonitor".to_owned(),
                    "ScaledObject".to_owned()
                ])),
                "a custom resource without checks: {custom:?}"
            );
        }
        // The validator does reject what a cluster would: a misspelled field fails.
        let broken = dir.path().join("broken.yaml");
        assert!(yaml.contains("readOnlyRootFilesystem"));
        std::fs::write(
            &broken,
            yaml.replace("readOnlyRootFilesystem", "readOnlyRootFilesytem"),
        )
        .unwrap();
        let (ok, _, report) = tools.validate(&broken, K8S_VERSIONS[1]);
        assert!(
            !ok && report.contains("readOnlyRootFilesytem"),
            "a misspelled field passed:\n{report}"
        );
    }
    // The examples of what is created out of band.
    for example in ["secret.example.yaml", "model-pvc.example.yaml"] {
        let file = root().join("deploy/k8s/base").join(example);
        let (ok, unknown, report) = tools.validate(&file, K8S_VERSIONS[1]);
        assert!(ok && unknown.is_empty(), "{example}:\n{report}");
    }
}

/// Whether an object's API group is one of Kubernetes' own: the core group (`v1`), a group
/// without a dot (`apps/v1`, `policy/v1`) or one under `k8s.io` (`networking.k8s.io/v1`).
/// Custom resources' groups are domain names (`keda.sh`, `monitoring.coreos.com`).
fn built_in(o: &Value) -> bool {
    match o["apiVersion"].as_str().unwrap().split_once('/') {
        None => true,
        Some((group, _)) => !group.contains('.') || group.ends_with(".k8s.io"),
    }
}

fn find<'a>(objects: &'a [Value], kind: &str) -> Option<&'a Value> {
    let mut of_kind = objects.iter().filter(|o| o["kind"] == kind);
    let first = of_kind.next();
    assert!(of_kind.next().is_none(), "more than one {kind}");
    first
}

fn object<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    find(objects, kind).unwrap_or_else(|| panic!("no {kind}"))
}

fn str_of<'a>(v: &'a Value, what: &str) -> &'a str {
    v.as_str().unwrap_or_else(|| panic!("{what}: {v}"))
}

/// `labels` holds every pair of `selector`.
fn selects(selector: &Value, labels: &Value) -> bool {
    let selector = selector.as_object().expect("a selector");
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The container's environment: name -> the literal value, or the reference's JSON.
fn env_of(container: &Value) -> BTreeMap<String, Value> {
    container["env"]
        .as_array()
        .expect("env")
        .iter()
        .map(|e| {
            let name = str_of(&e["name"], "env name").to_owned();
            let value = if e.get("value").is_some() {
                e["value"].clone()
            } else {
                e["valueFrom"].clone()
            };
            (name, value)
        })
        .collect()
}

fn number(v: &Value, what: &str) -> f64 {
    match v {
        Value::Number(n) => n.as_f64().unwrap(),
        Value::String(s) => s.parse().unwrap_or_else(|_| panic!("{what}: {s}")),
        other => panic!("{what}: {other}"),
    }
}

/// The Containerfile's `USER` uid and its runtime stage's copy of the nano model.
fn containerfile_facts() -> (u64, String) {
    let text = std::fs::read_to_string(root().join("Containerfile")).unwrap();
    let all = parse_containerfile(&text);
    let user = all.iter().rfind(|i| i.keyword == "USER").expect("USER");
    let uid = user.args.split(':').next().unwrap().parse().unwrap();
    let nano = all
        .iter()
        .find_map(|i| {
            (i.keyword == "COPY")
                .then(|| {
                    i.args
                        .strip_prefix("--from=build /src/tests/fixtures/models/nano ")
                })
                .flatten()
        })
        .expect("the runtime stage copies the nano model");
    (uid, nano.to_owned())
}

#[test]
fn manifests_hold_together() {
    let test = "deploy_files::manifests_hold_together";
    let Some(tools) = k8s_tools(test) else { return };
    let (uid, image_nano) = containerfile_facts();
    for kdir in kustomizations() {
        let at = kdir.display().to_string();
        let objects = tools.objects(&tools.render(&kdir));
        let namespace = str_of(&object(&objects, "Namespace")["metadata"]["name"], "ns");
        for o in objects.iter().filter(|o| o["kind"] != "Namespace") {
            assert_eq!(o["metadata"]["namespace"], namespace, "{at}: {o}");
        }

        // The Deployment, its pods and the objects that select them.
        let deployment = object(&objects, "Deployment");
        let name = str_of(&deployment["metadata"]["name"], "name");
        let spec = &deployment["spec"];
        let pod = &spec["template"]["spec"];
        let pod_labels = &spec["template"]["metadata"]["labels"];
        assert!(
            selects(&spec["selector"]["matchLabels"], pod_labels),
            "{at}"
        );
        for c in pod["topologySpreadConstraints"].as_array().expect("spread") {
            assert!(
                selects(&c["labelSelector"]["matchLabels"], pod_labels),
                "{at}"
            );
        }
        assert_eq!(
            spec["strategy"]["rollingUpdate"]["maxUnavailable"], 0,
            "{at}"
        );
        let service = object(&objects, "Service");
        assert!(selects(&service["spec"]["selector"], pod_labels), "{at}");
        let pdb = object(&objects, "PodDisruptionBudget");
        assert!(
            selects(&pdb["spec"]["selector"]["matchLabels"], pod_labels),
            "{at}"
        );
        assert_eq!(pdb["spec"]["maxUnavailable"], 1, "{at}");

        let containers = pod["containers"].as_array().unwrap();
        assert_eq!(containers.len(), 1, "{at}");
        let c = &containers[0];
        let env = env_of(c);

        // Ports: the Service, the probes and the container agree on `http`.
        let port_name = str_of(&service["spec"]["ports"][0]["name"], "service port");
        assert_eq!(service["spec"]["ports"][0]["targetPort"], port_name, "{at}");
        let container_ports: Vec<&Value> = c["ports"].as_array().unwrap().iter().collect();
        assert_eq!(container_ports.len(), 1, "{at}");
        assert_eq!(container_ports[0]["name"], port_name, "{at}");
        let listen_port = str_of(&env["CLEF_ADDR"], "CLEF_ADDR")
            .strip_prefix("0.0.0.0:")
            .expect("CLEF_ADDR listens on every interface")
            .parse::<u64>()
            .unwrap();
        assert_eq!(container_ports[0]["containerPort"], listen_port, "{at}");
        for (probe, path) in [
            ("startupProbe", "/readyz"),
            ("readinessProbe", "/readyz"),
            ("livenessProbe", "/healthz"),
        ] {
            let get = &c[probe]["httpGet"];
            assert_eq!(get["path"], path, "{at}: {probe}");
            assert_eq!(get["port"], port_name, "{at}: {probe}");
        }

        // Security: the image's non-root user, nothing writable but /tmp.
        let psc = &pod["securityContext"];
        assert_eq!(psc["runAsNonRoot"], true, "{at}");
        assert_eq!(psc["runAsUser"], uid, "{at}: the Containerfile's USER");
        assert_eq!(psc["seccompProfile"]["type"], "RuntimeDefault", "{at}");
        let csc = &c["securityContext"];
        assert_eq!(csc["readOnlyRootFilesystem"], true, "{at}");
        assert_eq!(csc["allowPrivilegeEscalation"], false, "{at}");
        assert_eq!(
            csc["capabilities"]["drop"],
            serde_json::json!(["ALL"]),
            "{at}"
        );
        let volumes: BTreeMap<&str, &Value> = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| (str_of(&v["name"], "volume"), v))
            .collect();
        let mounts: BTreeMap<&str, &Value> = c["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| (str_of(&m["mountPath"], "mountPath"), m))
            .collect();
        let tmp = mounts.get("/tmp").expect("/tmp mounted");
        assert!(
            volumes[str_of(&tmp["name"], "tmp")]
                .get("emptyDir")
                .is_some(),
            "{at}"
        );
        let model = str_of(&env["CLEF_MODEL"], "CLEF_MODEL");
        if let Some(m) = mounts.get(model) {
            // The model volume: the claim, read-only twice over.
            assert_eq!(m["readOnly"], true, "{at}");
            let claim = &volumes[str_of(&m["name"], "model")]["persistentVolumeClaim"];
            assert_eq!(claim["readOnly"], true, "{at}");
            assert_eq!(
                claim["claimName"], "clef-model",
                "{at}: model-pvc.example.yaml"
            );
        } else {
            // No volume: the model the image carries.
            assert_eq!(
                model, image_nano,
                "{at}: CLEF_MODEL is neither mounted nor in the image"
            );
        }
        for (path, m) in &mounts {
            assert!(
                *path == "/tmp" || m["readOnly"] == true,
                "{at}: {path} is writable"
            );
        }

        // Settings from the environment: the key from the Secret, one thread per core.
        assert_eq!(
            env["CLEF_API_KEY"]["secretKeyRef"],
            serde_json::json!({"name": "clef-api-key", "key": "api-key"}),
            "{at}"
        );
        let threads = &env["CLEF_THREADS"]["resourceFieldRef"];
        assert_eq!(threads["resource"], "requests.cpu", "{at}");
        assert_eq!(threads["containerName"], c["name"], "{at}");
        let resources = &c["resources"];
        assert_eq!(
            resources["requests"], resources["limits"],
            "{at}: Guaranteed QoS"
        );

        // Shutdown: the preStop sleep, then every request accepted before SIGTERM ends within
        // the deadline, then 5 s for computations whose client left; all within the grace.
        let sleep = c["lifecycle"]["preStop"]["exec"]["command"]
            .as_array()
            .expect("preStop exec");
        assert_eq!(sleep[0], "/bin/sleep", "{at}");
        let pre_stop = number(&sleep[1], "preStop");
        let deadline = number(&env["CLEF_DEADLINE"], "CLEF_DEADLINE");
        let grace = number(&pod["terminationGracePeriodSeconds"], "grace");
        assert!(
            grace > pre_stop + deadline + 5.0,
            "{at}: grace {grace} s <= preStop {pre_stop} + deadline {deadline} + 5"
        );
        // The startup probe allows at least a minute before a restart.
        let startup = &c["startupProbe"];
        assert!(
            number(&startup["periodSeconds"], "period")
                * number(&startup["failureThreshold"], "failures")
                >= 30.0,
            "{at}"
        );

        // The Ingress: affinity on x-clef-session, timeouts above the deadline.
        let ingress = object(&objects, "Ingress");
        let ann = &ingress["metadata"]["annotations"];
        assert_eq!(
            ann["nginx.ingress.kubernetes.io/upstream-hash-by"],
            "$http_x_clef_session"
        );
        for t in ["proxy-read-timeout", "proxy-send-timeout"] {
            let v = number(&ann[format!("nginx.ingress.kubernetes.io/{t}")], t);
            assert!(v > deadline, "{at}: {t} {v} <= deadline {deadline}");
        }
        let backend = &ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"];
        assert_eq!(backend["name"], service["metadata"]["name"], "{at}");
        assert_eq!(backend["port"]["name"], port_name, "{at}");

        // The custom resources kubernetes-validate cannot check (present in the base; the nano
        // overlay removes them for bare clusters).
        if let Some(sm) = find(&objects, "ServiceMonitor") {
            assert_eq!(sm["apiVersion"], "monitoring.coreos.com/v1", "{at}");
            assert!(
                selects(
                    &sm["spec"]["selector"]["matchLabels"],
                    &service["metadata"]["labels"]
                ),
                "{at}: the ServiceMonitor selects no Service"
            );
            let endpoints = sm["spec"]["endpoints"].as_array().expect("endpoints");
            assert_eq!(endpoints.len(), 1, "{at}");
            let ep = &endpoints[0];
            assert_eq!(ep["port"], port_name, "{at}");
            assert_eq!(ep["path"], "/metrics", "{at}");
            // /metrics is behind the API key: the scrape sends the Deployment's.
            assert_eq!(ep["authorization"]["type"], "Bearer", "{at}");
            assert_eq!(
                ep["authorization"]["credentials"], env["CLEF_API_KEY"]["secretKeyRef"],
                "{at}"
            );
            for d in ["interval", "scrapeTimeout"] {
                let v = str_of(&ep[d], d);
                assert!(
                    v.ends_with('s') && v[..v.len() - 1].parse::<u32>().is_ok(),
                    "{v}"
                );
            }
        }
        if let Some(so) = find(&objects, "ScaledObject") {
            assert_eq!(so["apiVersion"], "keda.sh/v1alpha1", "{at}");
            let s = &so["spec"];
            assert_eq!(s["scaleTargetRef"]["apiVersion"], deployment["apiVersion"]);
            assert_eq!(s["scaleTargetRef"]["kind"], "Deployment", "{at}");
            assert_eq!(s["scaleTargetRef"]["name"], name, "{at}");
            let (min, max) = (
                number(&s["minReplicaCount"], "min"),
                number(&s["maxReplicaCount"], "max"),
            );
            // With the PDB's one disruption at a time, at least two replicas still answer.
            assert!(min >= 3.0 && min <= max, "{at}: {min}..{max}");
            assert_eq!(number(&spec["replicas"], "replicas"), min, "{at}");
            let triggers = s["triggers"].as_array().expect("triggers");
            assert_eq!(triggers.len(), 1, "{at}");
            let t = &triggers[0];
            assert_eq!(t["type"], "prometheus", "{at}");
            let m = &t["metadata"];
            assert!(str_of(&m["serverAddress"], "serverAddress").starts_with("http"));
            assert!(number(&m["threshold"], "threshold") > 0.0, "{at}");
            // The query sums the replicas' series of this Service: the labels Prometheus
            // gives targets found through the ServiceMonitor.
            let query = str_of(&m["query"], "query");
            let series: Vec<&str> = query
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| w.starts_with("clef_"))
                .collect();
            assert!(!series.is_empty(), "{query}");
            let selector = format!(
                "{{namespace=\"{namespace}\",service=\"{}\"}}",
                str_of(&service["metadata"]["name"], "service")
            );
            for s in &series {
                assert!(query.contains(&format!("{s}{selector}")), "{query}");
            }
            // (The series are checked against a real server's /metrics in
            // deployment_env_configures_a_real_server.)
        }
    }
}

/// The Deployment's container environment as the kubelet would give it, with `key` for the
/// Secret's value and `threads` for the CPU request.
fn pod_env(deployment: &Value, key: &str) -> Vec<(String, String)> {
    let c = &deployment["spec"]["template"]["spec"]["containers"][0];
    env_of(c)
        .into_iter()
        .map(|(name, v)| {
            let value = match &v {
                Value::String(s) => s.clone(),
                _ if v.get("secretKeyRef").is_some() => key.to_owned(),
                _ if v.get("resourceFieldRef").is_some() => "1".to_owned(),
                other => panic!("{name}: {other}"),
            };
            (name, value)
        })
        .collect()
}

#[test]
fn deployment_env_configures_a_real_server() {
    let test = "deploy_files::deployment_env_configures_a_real_server";
    let Some(tools) = k8s_tools(test) else { return };
    let key = "deploy-files-test-key";
    for kdir in kustomizations() {
        let at = kdir.display().to_string();
        let objects = tools.objects(&tools.render(&kdir));
        let env = pod_env(object(&objects, "Deployment"), key);
        let get = |name: &str| {
            env.iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
                .unwrap_or_else(|| panic!("{at}: {name}"))
        };
        // The server runs the committed nano model on an ephemeral loopback port: the test
        // harness gives --model and --addr, which take precedence over CLEF_MODEL and
        // CLEF_ADDR; every other setting comes from the manifest.
        let server = Server::with(Options {
            model: nano(),
            env: env.iter().map(|(k, v)| (k.as_str(), v.clone())).collect(),
            ..Default::default()
        });
        let auth = format!("Bearer {key}");
        assert_eq!(
            send(server.addr, &Req::get("/v1/models")).status,
            401,
            "{at}"
        );
        let models = send(
            server.addr,
            &Req::get("/v1/models").header("authorization", &auth),
        );
        assert_eq!(models.status, 200, "{at}");
        let models: Value = serde_json::from_str(&models.text()).unwrap();
        let clef = &models["data"][0]["clef"];
        assert_eq!(
            clef["state_cache"]["budget_mib"].to_string(),
            get("CLEF_STATE_CACHE_MIB"),
            "{at}"
        );
        assert_eq!(
            clef["max_context"].to_string(),
            get("CLEF_MAX_CONTEXT"),
            "{at}"
        );
        let metrics = send(
            server.addr,
            &Req::get("/metrics").header("authorization", &auth),
        );
        assert_eq!(metrics.status, 200, "{at}");
        let metrics = Metrics(metrics.text());
        let setting = |name: &str| get(name).parse::<f64>().unwrap();
        assert_eq!(
            metrics.value("clef_concurrency"),
            setting("CLEF_CONCURRENCY")
        );
        // Admitted at once: those computing plus those waiting.
        assert_eq!(
            metrics.value("clef_queue_capacity"),
            setting("CLEF_CONCURRENCY") + setting("CLEF_QUEUE_DEPTH")
        );
        assert_eq!(
            metrics.value("clef_body_budget_bytes"),
            setting("CLEF_BODY_BUDGET_MIB") * 1048576.0
        );
        // Every series the autoscaler's query reads is one the server exports (Metrics::value
        // fails on an undeclared metric).
        if let Some(so) = find(&objects, "ScaledObject") {
            let query = str_of(&so["spec"]["triggers"][0]["metadata"]["query"], "query");
            let names: BTreeSet<&str> = query
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| w.starts_with("clef_"))
                .collect();
            for name in names {
                metrics.value(name);
            }
        }
        // And it answers, with the key.
        let body = br#"{"model": "clef", "state": "Checkout fails for every customer.",
            "questions": {"urgent": {"type": "noul", "instructions": "Is this urgent?"}}}"#;
        let answer = send(
            server.addr,
            &Req::post("/v1/systemone", body).header("authorization", &auth),
        );
        assert_eq!(answer.status, 200, "{at}: {}", answer.text());
    }
}
