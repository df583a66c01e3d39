//! Shared by the `serve_*` integration tests: start the real `clef serve` binary on an
//! ephemeral loopback port, talk HTTP/1.1 to it over a plain socket (so tests control every
//! byte, disconnects included), and check responses the way client libraries do (api.md §10).
#![allow(dead_code)] // each test binary uses a different part of this module

use clef_api::{parse_json, Json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

pub fn tiny_a() -> PathBuf {
    fixtures().join("models/tiny-a")
}

/// A running `clef serve` process; killed when dropped.
pub struct Server {
    child: Option<Child>,
    pub addr: SocketAddr,
    pub log: PathBuf,
    _dir: tempfile::TempDir,
}

pub struct Options<'a> {
    pub model: PathBuf,
    pub args: Vec<&'a str>,
    pub threads: usize,
    pub wait_ready: bool,
    /// Environment variables set for the server (after the developer's own are removed).
    pub env: Vec<(&'a str, String)>,
}

impl Default for Options<'_> {
    fn default() -> Self {
        Options {
            model: tiny_a(),
            args: vec![],
            threads: 1,
            wait_ready: true,
            env: vec![],
        }
    }
}

impl Server {
    /// tiny-a with these extra `serve` flags, ready to answer.
    pub fn start(args: &[&str]) -> Server {
        Server::with(Options {
            args: args.to_vec(),
            ..Default::default()
        })
    }

    pub fn with(opts: Options) -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = dir.path().join("server.log");
        let log_file = std::fs::File::create(&log).expect("log file");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_clef"));
        cmd.arg("--threads")
            .arg(opts.threads.to_string())
            .arg("serve")
            .arg("--model")
            .arg(&opts.model)
            .args(["--addr", "127.0.0.1:0", "--log-format", "json"])
            .args(&opts.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log_file);
        // The developer's own settings must not leak into the tests; `CLEF_ISA` is kept, as the
        // golden suites run once per instruction set (.ci/run) and the server must too.
        for (key, _) in std::env::vars() {
            if (key.starts_with("CLEF_") && key != "CLEF_ISA") || key == "RUST_LOG" {
                cmd.env_remove(key);
            }
        }
        for (key, value) in &opts.env {
            cmd.env(key, value);
        }
        let mut child = cmd.spawn().expect("spawn clef serve");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let first = lines.next().and_then(|l| l.ok());
            let _ = tx.send(first);
            // Keep draining so the server never blocks on a full pipe.
            for _ in lines {}
        });
        let line = rx.recv_timeout(Duration::from_secs(30)).ok().flatten();
        let Some(addr) = line
            .as_deref()
            .and_then(|l| l.strip_prefix("listening on "))
            .and_then(|a| a.trim().parse().ok())
        else {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "server did not report its address (got {line:?}); log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        };
        let server = Server {
            child: Some(child),
            addr,
            log,
            _dir: dir,
        };
        if opts.wait_ready {
            server.wait_ready();
        }
        server
    }

    pub fn wait_ready(&self) {
        let t0 = Instant::now();
        loop {
            if let Ok(r) = try_send(self.addr, &Req::get("/readyz")) {
                if r.status == 200 {
                    return;
                }
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "server not ready after 30 s; log:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, |c| c.id())
    }

    pub fn send(&self, req: &Req) -> Resp {
        send(self.addr, req)
    }

    pub fn post(&self, path: &str, body: &[u8]) -> Resp {
        self.send(&Req::post(path, body))
    }

    pub fn metrics(&self) -> Metrics {
        let r = self.send(&Req::get("/metrics"));
        assert_eq!(r.status, 200);
        Metrics(String::from_utf8(r.body).expect("metrics are UTF-8"))
    }

    /// Poll `/metrics` until `pred` holds (panics after `limit`).
    pub fn wait_metrics(
        &self,
        limit: Duration,
        what: &str,
        pred: impl Fn(&Metrics) -> bool,
    ) -> Metrics {
        let t0 = Instant::now();
        loop {
            let m = self.metrics();
            if pred(&m) {
                return m;
            }
            assert!(
                t0.elapsed() < limit,
                "timed out waiting for {what}; metrics:\n{}",
                m.0
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The instruction set the server's kernels run on, from its "model loaded; ready" line.
    pub fn kernels_isa(&self) -> Option<String> {
        self.log_text().lines().find_map(|line| {
            let json = parse_json(line.as_bytes()).ok()?;
            let line = json.as_object()?;
            if line.get("message")?.as_str()? != "model loaded; ready" {
                return None;
            }
            Some(line.get("isa")?.as_str()?.to_string())
        })
    }

    /// Fails unless the server runs on the level `CLEF_ISA` asks for (when it is set), the check
    /// [`clef_testkit::isa::under_test`] makes in the test process itself.
    pub fn assert_isa_under_test(&self) {
        let ours = clef_testkit::isa::under_test();
        assert_eq!(
            self.kernels_isa().as_deref(),
            Some(ours.level()),
            "the server's kernels; log:\n{}",
            self.log_text()
        );
    }

    /// Resident set size of the server process, from /proc.
    pub fn rss_bytes(&self) -> u64 {
        self.proc_status_bytes("VmRSS:")
    }

    /// The most the server process has ever had resident (the kernel's high-water mark).
    pub fn peak_rss_bytes(&self) -> u64 {
        self.proc_status_bytes("VmHWM:")
    }

    fn proc_status_bytes(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("/proc/<pid>/status");
        let line = status
            .lines()
            .find(|l| l.starts_with(field))
            .unwrap_or_else(|| panic!("{field} line"));
        let kib: u64 = line
            .split_whitespace()
            .nth(1)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{field} value"));
        kib * 1024
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid().to_string())
            .status()
            .expect("run kill")
            .success();
        assert!(ok, "kill -{sig} failed");
    }

    /// Wait for the process to exit on its own.
    pub fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let t0 = Instant::now();
        let child = self.child.as_mut().expect("child");
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                self.child = None;
                return status;
            }
            assert!(t0.elapsed() < limit, "server did not exit within {limit:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The Prometheus text of `/metrics`.
pub struct Metrics(pub String);

impl Metrics {
    /// The value of the sample whose name-and-labels part equals `series`, 0 when absent.
    /// The value of one series (`name` or `name{labels}`). A series of a declared metric that
    /// has not been written yet reads 0 (Prometheus counters with labels appear at their first
    /// increment); a metric the exposition does not declare at all (renamed, removed) fails,
    /// so that `== 0.0` can never pass on a name that no longer exists.
    pub fn value(&self, series: &str) -> f64 {
        let family = series.split('{').next().unwrap_or(series);
        let declared = self.0.lines().any(|l| {
            l.strip_prefix("# TYPE ")
                .and_then(|rest| rest.split_whitespace().next())
                .is_some_and(|name| name == family)
        });
        assert!(declared, "metric {family} is not exposed:\n{}", self.0);
        self.0
            .lines()
            .filter(|l| !l.starts_with('#'))
            .find_map(|l| {
                let (name, v) = l.rsplit_once(' ')?;
                (name == series).then(|| v.parse().ok()).flatten()
            })
            .unwrap_or(0.0)
    }

    pub fn requests(&self, route: &str, status: u16) -> u64 {
        self.value(&format!(
            "clef_requests_total{{route=\"{route}\",status=\"{status}\"}}"
        )) as u64
    }

    /// Every `clef_requests_total` sample as (route, status, count).
    pub fn all_requests(&self) -> Vec<(String, u16, u64)> {
        self.0
            .lines()
            .filter_map(|l| l.strip_prefix("clef_requests_total{route=\""))
            .filter_map(|l| {
                let (route, rest) = l.split_once("\",status=\"")?;
                let (status, rest) = rest.split_once("\"} ")?;
                Some((route.to_owned(), status.parse().ok()?, rest.parse().ok()?))
            })
            .collect()
    }
}

/// One HTTP/1.1 request.
#[derive(Clone)]
pub struct Req {
    pub method: &'static str,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Send the body with `Transfer-Encoding: chunked` instead of `Content-Length`.
    pub chunked: bool,
}

impl Req {
    pub fn get(path: &str) -> Req {
        Req {
            method: "GET",
            path: path.to_owned(),
            headers: vec![],
            body: vec![],
            chunked: false,
        }
    }

    pub fn post(path: &str, body: &[u8]) -> Req {
        Req {
            method: "POST",
            path: path.to_owned(),
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_vec(),
            chunked: false,
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Req {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    fn head_bytes(&self) -> Vec<u8> {
        let mut head = format!(
            "{} {} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n",
            self.method, self.path
        );
        for (k, v) in &self.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        if self.chunked {
            head.push_str("transfer-encoding: chunked\r\n");
        } else if self.method != "GET" || !self.body.is_empty() {
            head.push_str(&format!("content-length: {}\r\n", self.body.len()));
        }
        head.push_str("\r\n");
        head.into_bytes()
    }

    fn body_bytes(&self) -> Vec<u8> {
        if !self.chunked {
            return self.body.clone();
        }
        let mut out = Vec::with_capacity(self.body.len() + 64);
        for chunk in self.body.chunks(64 * 1024) {
            out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
            out.extend_from_slice(chunk);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"0\r\n\r\n");
        out
    }
}

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as order-preserving JSON.
    pub fn json(&self) -> Json {
        parse_json(&self.body).unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.text()))
    }
}

/// Send and read the whole response (the server closes the connection after it).
pub fn send(addr: SocketAddr, req: &Req) -> Resp {
    try_send(addr, req).unwrap_or_else(|e| panic!("{} {}: {e}", req.method, req.path))
}

pub fn try_send(addr: SocketAddr, req: &Req) -> std::io::Result<Resp> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(120)))?;
    stream.write_all(&req.head_bytes())?;
    let body = req.body_bytes();
    if body.len() <= 1 << 20 {
        stream.write_all(&body)?;
    } else {
        // A server may answer (413) before reading a large body: write from another thread
        // so the response is read either way.
        let mut writer = stream.try_clone()?;
        std::thread::spawn(move || {
            let _ = writer.write_all(&body);
        });
    }
    read_response(&mut stream)
}

/// Send the request and return the open socket without reading (to disconnect on purpose).
pub fn send_and_hold(addr: SocketAddr, req: &Req) -> TcpStream {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.write_all(&req.head_bytes()).expect("write head");
    stream.write_all(&req.body_bytes()).expect("write body");
    stream
}

pub fn read_response(stream: &mut TcpStream) -> std::io::Result<Resp> {
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    parse_response(&raw).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("malformed response: {:?}", String::from_utf8_lossy(&raw)),
        )
    })
}

fn parse_response(raw: &[u8]) -> Option<Resp> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next()?;
    let status: u16 = status_line.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let rest = &raw[end + 4..];
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    let body = if chunked {
        let mut body = Vec::new();
        let mut at = 0;
        loop {
            let line_end = at + rest[at..].windows(2).position(|w| w == b"\r\n")?;
            let size =
                usize::from_str_radix(std::str::from_utf8(&rest[at..line_end]).ok()?.trim(), 16)
                    .ok()?;
            at = line_end + 2;
            if size == 0 {
                break;
            }
            body.extend_from_slice(rest.get(at..at + size)?);
            at += size + 2;
        }
        body
    } else {
        let len = headers
            .iter()
            .find(|(k, _)| k == "content-length")
            .and_then(|(_, v)| v.parse::<usize>().ok())
            .unwrap_or(rest.len());
        rest.get(..len)?.to_vec()
    };
    Some(Resp {
        status,
        headers,
        body,
    })
}

/// A golden fixture: its request exactly as written (order kept) and its reference answer.
pub struct Golden {
    pub name: String,
    pub request: Json,
    pub request_text: String,
    pub response: Json,
    pub max_length: usize,
    pub input_ids: usize,
    /// The reference's unrounded probabilities: per question id, per option id.
    pub probabilities: Vec<(String, Vec<(String, f64)>)>,
}

pub fn golden(name: &str) -> Golden {
    golden_of("tiny-a", name)
}

pub fn golden_of(model: &str, name: &str) -> Golden {
    let path = fixtures()
        .join("golden")
        .join(model)
        .join(format!("{name}.json"));
    let text = std::fs::read(&path).expect("golden file");
    let json = parse_json(&text).expect("golden JSON");
    let obj = json.as_object().expect("golden object");
    let request = obj.get("request").expect("request").clone();
    let number = |k: &str| {
        obj.get(k)
            .and_then(|v| v.as_number())
            .and_then(|n| n.as_u64())
            .expect(k) as usize
    };
    Golden {
        name: name.to_owned(),
        request_text: request.to_json_string(),
        request,
        response: obj.get("response").expect("response").clone(),
        max_length: number("max_length"),
        input_ids: obj
            .get("input_ids")
            .and_then(|v| v.as_array())
            .map_or(0, |a| a.len()),
        probabilities: unrounded_probabilities(obj),
    }
}

/// `question_ids`, `option_ids` and `probabilities` of a golden file, zipped after checking
/// that their lengths agree.
fn unrounded_probabilities(obj: &clef_api::JsonObject) -> Vec<(String, Vec<(String, f64)>)> {
    let list = |k: &str| obj.get(k).and_then(Json::as_array).expect(k).to_vec();
    let (qids, options, probs) = (
        list("question_ids"),
        list("option_ids"),
        list("probabilities"),
    );
    assert_eq!(qids.len(), options.len(), "question_ids vs option_ids");
    assert_eq!(qids.len(), probs.len(), "question_ids vs probabilities");
    qids.iter()
        .zip(options.iter().zip(&probs))
        .map(|(q, (o, p))| {
            let (o, p) = (o.as_array().expect("options"), p.as_array().expect("probs"));
            assert_eq!(o.len(), p.len(), "options vs probabilities of {q:?}");
            let pairs = o
                .iter()
                .zip(p)
                .map(|(o, p)| {
                    let id = o.as_str().expect("option id").to_string();
                    (id, p.as_number().expect("probability").as_f64())
                })
                .collect();
            (q.as_str().expect("question id").to_string(), pairs)
        })
        .collect()
}

/// The response the reference would give at full precision, from its unrounded probabilities:
/// the golden's rounded response with every answer's number recomputed (`noul` is p(true), a
/// score is the expected level, confidence is p_max: the reference's policy). Each recomputed
/// number is checked to round to the golden's, so the formulas here are the reference's.
pub fn unrounded_response(g: &Golden) -> Json {
    let answers = g
        .response
        .as_object()
        .and_then(|o| o.get("answers"))
        .and_then(Json::as_object)
        .unwrap_or_else(|| panic!("{}: no answers", g.name));
    assert_eq!(answers.len(), g.probabilities.len(), "{}: answers", g.name);
    let recompute = |path: &[String], rounded: f64| -> Option<f64> {
        let [first, qid, key, rest @ ..] = path else {
            return None;
        };
        if first != "answers" {
            return None;
        }
        let probs = &g
            .probabilities
            .iter()
            .find(|(q, _)| q == qid)
            .unwrap_or_else(|| panic!("{}: no probabilities for {qid}", g.name))
            .1;
        let p = |id: &str| {
            probs
                .iter()
                .find(|(o, _)| o == id)
                .unwrap_or_else(|| panic!("{}: {qid} has no option {id}", g.name))
                .1
        };
        let value = match (key.as_str(), rest) {
            ("noul", []) => p("true"),
            ("confidence", []) => probs.iter().map(|(_, v)| *v).fold(f64::MIN, f64::max),
            ("score", []) => probs
                .iter()
                .map(|(o, v)| o.parse::<f64>().expect("a score level") * v)
                .sum(),
            ("probabilities", [id]) => p(id),
            _ => panic!("{}: unexpected number at {path:?}", g.name),
        };
        assert!(
            (value - rounded).abs() <= 5e-5 + 1e-6,
            "{}: {path:?}: {value} does not round to the golden's {rounded}",
            g.name
        );
        Some(value)
    };
    map_numbers(&g.response, &mut Vec::new(), &recompute)
}

/// `json` with each number replaced by `f(path, value)` where that is `Some`.
fn map_numbers(
    json: &Json,
    path: &mut Vec<String>,
    f: &dyn Fn(&[String], f64) -> Option<f64>,
) -> Json {
    match json {
        Json::Number(n) => f(path, n.as_f64())
            .map(|v| Json::from_f64(v).expect("finite"))
            .unwrap_or_else(|| json.clone()),
        Json::Object(o) => Json::Object(clef_api::JsonObject::from_unique(
            o.iter()
                .map(|(k, v)| {
                    path.push(k.to_string());
                    let mapped = map_numbers(v, path, f);
                    path.pop();
                    (k.to_string(), mapped)
                })
                .collect(),
        )),
        Json::Array(a) => Json::Array(
            a.iter()
                .enumerate()
                .map(|(i, v)| {
                    path.push(i.to_string());
                    let mapped = map_numbers(v, path, f);
                    path.pop();
                    mapped
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

pub fn golden_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures().join("golden/tiny-a"))
        .expect("golden dir")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .filter(|n| n != "manifest")
        .collect();
    names.sort();
    names
}

/// Equal JSON with object keys in the same order; numbers within `tol` (the reference's
/// float32 probabilities and ours differ by up to 1e-4 before rounding to 4 decimals).
pub fn same_json(a: &Json, b: &Json, tol: f64, path: &str) -> Result<(), String> {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => {
            let (x, y) = (x.as_f64(), y.as_f64());
            if (x - y).abs() <= tol {
                Ok(())
            } else {
                Err(format!("{path}: {x} vs {y}"))
            }
        }
        (Json::Object(x), Json::Object(y)) => {
            let kx: Vec<&str> = x.keys().collect();
            let ky: Vec<&str> = y.keys().collect();
            if kx != ky {
                return Err(format!("{path}: keys {kx:?} vs {ky:?}"));
            }
            x.iter().try_for_each(|(k, v)| {
                let w = y.get(k).ok_or_else(|| format!("{path}.{k}: missing"))?;
                same_json(v, w, tol, &format!("{path}.{k}"))
            })
        }
        (Json::Array(x), Json::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .try_for_each(|(i, (p, q))| same_json(p, q, tol, &format!("{path}[{i}]"))),
        _ if a == b => Ok(()),
        _ => Err(format!(
            "{path}: {} vs {}",
            a.to_json_string(),
            b.to_json_string()
        )),
    }
}

/// Asserts the failure envelope of api.md §6 with this status and code, and the headers every
/// response carries.
pub fn assert_failure(r: &Resp, status: u16, code: u64) {
    assert_eq!(r.status, status, "body: {}", r.text());
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_request_id(r);
    let body = r.json();
    let o = body.as_object().expect("envelope object");
    assert_eq!(
        o.keys().collect::<Vec<_>>(),
        ["result", "success", "errors", "messages"],
        "{}",
        r.text()
    );
    assert!(o.get("result").is_some_and(Json::is_null));
    assert_eq!(o.get("success"), Some(&Json::Bool(false)));
    assert_eq!(
        o.get("messages").and_then(Json::as_array).map(|a| a.len()),
        Some(0)
    );
    let errors = o.get("errors").and_then(Json::as_array).expect("errors");
    assert_eq!(errors.len(), 1);
    let e = errors[0].as_object().expect("error object");
    assert_eq!(
        e.get("code")
            .and_then(Json::as_number)
            .and_then(|n| n.as_u64()),
        Some(code),
        "{}",
        r.text()
    );
    let message = e.get("message").and_then(Json::as_str).expect("message");
    assert!(!message.is_empty());
    if status == 429 || status == 503 {
        let retry: u64 = r
            .header("retry-after")
            .and_then(|v| v.parse().ok())
            .expect("Retry-After on 429/503");
        assert!(retry >= 1);
    }
}

pub fn error_message(r: &Resp) -> String {
    let body = r.json();
    body.as_object()
        .and_then(|o| o.get("errors"))
        .and_then(Json::as_array)
        .and_then(|a| a.first())
        .and_then(Json::as_object)
        .and_then(|e| e.get("message"))
        .and_then(Json::as_str)
        .unwrap_or_default()
        .to_owned()
}

pub fn assert_request_id(r: &Resp) {
    let id = r.header("x-request-id").expect("x-request-id");
    assert!(!id.is_empty());
    assert_eq!(r.header("cf-ai-req-id"), Some(id));
}

fn num(v: &Json) -> f64 {
    v.as_number().map(|n| n.as_f64()).expect("a number")
}

/// A client written against Cloudflare's documented response shape (api.md §10): every check
/// listed there, applied to a response body for `request` (`envelope`: the Workers AI shape).
pub fn check_client_contract(request: &Json, resp: &Resp, envelope: bool) {
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.header("content-type"), Some("application/json"));
    let body = resp.json();
    let result = if envelope {
        let o = body.as_object().expect("envelope");
        assert_eq!(o.get("success"), Some(&Json::Bool(true)));
        assert_eq!(
            o.get("errors").and_then(Json::as_array).map(|a| a.len()),
            Some(0)
        );
        assert!(o.get("messages").and_then(Json::as_array).is_some());
        o.get("result").expect("result").clone()
    } else {
        // A bare body must not look like an envelope.
        assert!(body.as_object().is_some_and(|o| !o.contains_key("success")));
        body
    };
    let r = result.as_object().expect("response object");
    let model = r.get("model").and_then(Json::as_str).expect("model string");
    assert!(!model.is_empty());
    let sent_model = request
        .as_object()
        .and_then(|o| o.get("model"))
        .and_then(Json::as_str);
    assert_eq!(Some(model), sent_model, "model is echoed verbatim");
    let usage = r.get("usage").and_then(Json::as_object).expect("usage");
    for k in ["input_tokens", "output_tokens"] {
        let n = usage.get(k).and_then(Json::as_number).expect(k);
        assert!(
            n.is_integer() && n.as_u64().is_some(),
            "{k} must be a non-negative integer"
        );
    }
    let answers = r
        .get("answers")
        .and_then(Json::as_object)
        .expect("answers object");
    let questions = request
        .as_object()
        .and_then(|o| o.get("questions"))
        .and_then(Json::as_object)
        .expect("request questions");
    assert_eq!(
        answers.keys().collect::<Vec<_>>(),
        questions.keys().collect::<Vec<_>>(),
        "answer ids equal request ids, in order"
    );
    for (id, q) in questions.iter() {
        let q = q.as_object().expect("question");
        let a = answers.get(id).and_then(Json::as_object).expect("answer");
        let qtype = q.get("type").and_then(Json::as_str).expect("type");
        assert_eq!(
            a.get("type").and_then(Json::as_str),
            Some(qtype),
            "{id}: type"
        );
        let fields: Vec<&str> = a.keys().collect();
        let unit = |v: f64, what: &str| {
            assert!(
                v.is_finite() && (0.0..=1.0).contains(&v),
                "{id}.{what} = {v}"
            )
        };
        match qtype {
            "noul" => {
                assert_eq!(fields, ["type", "noul"], "{id}");
                unit(num(a.get("noul").unwrap()), "noul");
            }
            "choice" => {
                assert_eq!(
                    fields,
                    ["type", "choice", "confidence", "probabilities"],
                    "{id}"
                );
                unit(num(a.get("confidence").unwrap()), "confidence");
                let probs = a
                    .get("probabilities")
                    .and_then(Json::as_object)
                    .expect("probabilities");
                let options = q
                    .get("criteria")
                    .and_then(Json::as_object)
                    .expect("criteria");
                assert_eq!(
                    probs.keys().collect::<Vec<_>>(),
                    options.keys().collect::<Vec<_>>(),
                    "{id}: option ids in request order"
                );
                let ps: Vec<f64> = probs.iter().map(|(_, p)| num(p)).collect();
                ps.iter().for_each(|&p| unit(p, "probability"));
                let sum: f64 = ps.iter().sum();
                assert!((sum - 1.0).abs() <= 0.02, "{id}: sum {sum}");
                let choice = a
                    .get("choice")
                    .and_then(Json::as_str)
                    .expect("choice string");
                let chosen = probs.get(choice).map(num).expect("choice is an option");
                let max = ps.iter().copied().fold(f64::MIN, f64::max);
                assert!(
                    chosen >= max - 1e-9,
                    "{id}: choice {choice} holds {chosen}, max {max}"
                );
            }
            "score" => {
                assert_eq!(
                    fields,
                    ["type", "score", "confidence", "legend", "probabilities"],
                    "{id}"
                );
                unit(num(a.get("confidence").unwrap()), "confidence");
                let levels = q.get("criteria").and_then(Json::as_array).expect("levels");
                let keys: Vec<String> = (0..levels.len()).map(|i| i.to_string()).collect();
                let probs = a
                    .get("probabilities")
                    .and_then(Json::as_object)
                    .expect("probabilities");
                let legend = a.get("legend").and_then(Json::as_object).expect("legend");
                assert_eq!(
                    probs.keys().collect::<Vec<_>>(),
                    keys,
                    "{id}: probability keys"
                );
                assert_eq!(legend.keys().collect::<Vec<_>>(), keys, "{id}: legend keys");
                for (i, level) in levels.iter().enumerate() {
                    assert_eq!(legend.get(&i.to_string()), Some(level), "{id}: legend {i}");
                }
                let ps: Vec<f64> = probs.iter().map(|(_, p)| num(p)).collect();
                ps.iter().for_each(|&p| unit(p, "probability"));
                let sum: f64 = ps.iter().sum();
                assert!((sum - 1.0).abs() <= 0.02, "{id}: sum {sum}");
                let expected: f64 = ps.iter().enumerate().map(|(i, p)| i as f64 * p).sum();
                let score = num(a.get("score").unwrap());
                assert!(
                    (score - expected).abs() <= 0.02,
                    "{id}: score {score} vs {expected}"
                );
            }
            other => panic!("{id}: unknown type {other}"),
        }
    }
}

/// A request body whose state is `words` distinct words (about 5 tokens each), so its prefill
/// takes long enough to observe (about 5,000 tokens for 1,000 words).
pub fn long_request(words: usize) -> Vec<u8> {
    let state: Vec<String> = (0..words).map(|i| format!("word{i}")).collect();
    format!(
        r#"{{"model": "clef", "state": "{}", "questions": {{"count": {{"type": "choice", "instructions": "How many?", "criteria": {{"1": "one", "2": "two"}}}}}}}}"#,
        state.join(" ")
    )
    .into_bytes()
}

/// Workers AI path for a model name.
pub fn workers_path(model: &str) -> String {
    format!("/client/v4/accounts/0123abcd/ai/run/@cf/cloudflare/{model}")
}

pub fn workers_short_path(model: &str) -> String {
    format!("/ai/run/@cf/cloudflare/{model}")
}
