//! Every row of api.md's error table through the real binary: HTTP status, Workers AI code,
//! the failure envelope and the headers every response carries; auth on and off.
//! (408 and 503 need timing and live in serve_lifecycle.rs.)

mod serve_common;

use serve_common::*;
use std::time::Duration;

const SYSTEMONE: &str = "/v1/systemone";

fn valid() -> String {
    golden("a11_numeric_ids").request_text
}

/// A valid body with one part replaced.
fn body_with(question: &str) -> String {
    format!(r#"{{"model": "clef", "state": "s", "questions": {{{question}}}}}"#)
}

#[test]
fn bad_json_is_400_6003() {
    let server = Server::start(&[]);
    let cases: [&[u8]; 6] = [
        b"{",
        b"not json",
        b"\xff\xfe{}",
        br#"{"model": "clef", "state": "\ud800", "questions": {}}"#,
        b"[1, 2]",
        b"",
    ];
    for body in cases {
        let r = server.post(SYSTEMONE, body);
        assert_failure(&r, 400, 6003);
        // The Workers shape uses the same envelope and codes.
        assert_failure(&server.post(&workers_path("clef"), body), 400, 6003);
    }
}

#[test]
fn structure_failures_are_400_5006() {
    let server = Server::start(&[]);
    let cases = [
        r#"{"state": "s", "questions": {"q": {"type": "noul", "instructions": "i"}}}"#.to_owned(),
        r#"{"model": 5, "state": "s", "questions": {"q": {"type": "noul", "instructions": "i"}}}"#
            .to_owned(),
        r#"{"model": "clef", "questions": {"q": {"type": "noul", "instructions": "i"}}}"#
            .to_owned(),
        r#"{"model": "clef", "state": "s", "questions": []}"#.to_owned(),
        body_with(""),
        body_with(r#""q": 5"#),
        body_with(r#""q": {"type": "poll", "instructions": "i"}"#),
        body_with(r#""q": {"instructions": "i"}"#),
        body_with(r#""q": {"type": "choice", "instructions": "i", "criteria": ["a", "b"]}"#),
        body_with(r#""q": {"type": "score", "instructions": "i", "criteria": {"0": "a"}}"#),
    ];
    for body in cases {
        let r = server.post(SYSTEMONE, body.as_bytes());
        assert_failure(&r, 400, 5006);
    }
}

#[test]
fn model_failures_are_400_7000() {
    let server = Server::start(&[]);
    let body = valid();
    // Not served.
    let other = body.replacen("\"model\":\"clef\"", "\"model\":\"gpt-4o\"", 1);
    assert!(other.contains("gpt-4o"));
    let r = server.post(SYSTEMONE, other.as_bytes());
    assert_failure(&r, 400, 7000);
    assert!(error_message(&r).contains("gpt-4o"));
    // Body and path disagree (both served).
    assert_failure(
        &server.post(&workers_path("clef-flash"), body.as_bytes()),
        400,
        7000,
    );
    assert_failure(
        &server.post(&workers_short_path("clef-flash"), body.as_bytes()),
        400,
        7000,
    );
    // The path names a model that is not served.
    assert_failure(
        &server.post(&workers_path("llama-3"), body.as_bytes()),
        400,
        7000,
    );
    // The sanity case: they agree.
    assert_eq!(
        server.post(&workers_path("clef"), body.as_bytes()).status,
        200
    );
}

#[test]
fn unknown_routes_are_404_7000() {
    let server = Server::start(&[]);
    for path in [
        "/",
        "/v1/chat/completions",
        "/v1/systemone/extra",
        "/ai/models",
    ] {
        assert_failure(&server.send(&Req::get(path)), 404, 7000);
        assert_failure(&server.post(path, valid().as_bytes()), 404, 7000);
    }
    // A known route with the wrong method: 405 in the same envelope.
    assert_failure(&server.send(&Req::get(SYSTEMONE)), 405, 7000);
    // Under `ai/run/` every path is a model path, as on the hosted service: a model this
    // server does not serve is its 400/7000, and GET is the wrong method there.
    for path in [
        "/client/v4/accounts/a/ai/run/@cf/meta/llama",
        "/ai/run/@cf/meta/llama",
    ] {
        assert_failure(&server.post(path, valid().as_bytes()), 400, 7000);
        assert_failure(&server.send(&Req::get(path)), 405, 7000);
    }
}

#[test]
fn value_failures_are_422_5012() {
    let server = Server::start(&["--no-video"]);
    let noul = r#""type": "noul", "instructions": "i""#;
    let many: Vec<String> = (0..65).map(|i| format!(r#""q{i}": {{{noul}}}"#)).collect();
    let options: Vec<String> = (0..256).map(|i| format!(r#""o{i}": "d""#)).collect();
    let levels: Vec<String> = (0..11).map(|i| format!(r#""l{i}""#)).collect();
    let png = "data:image/png;base64,iVBORw0KGgo=";
    let cases = [
        body_with(&many.join(",")),
        body_with(&format!(r#""has space": {{{noul}}}"#)),
        body_with(&format!(r#""{}": {{{noul}}}"#, "x".repeat(101))),
        body_with(r#""q": {"type": "noul", "instructions": ""}"#),
        body_with(r#""q": {"type": "noul", "instructions": "i", "prior": 0.5}"#),
        body_with(&format!(
            r#""q": {{"type": "choice", "instructions": "i", "criteria": {{{}}}}}"#,
            options.join(",")
        )),
        body_with(&format!(
            r#""q": {{"type": "score", "instructions": "i", "criteria": [{}]}}"#,
            levels.join(",")
        )),
        body_with(r#""q": {"type": "choice", "instructions": "i", "criteria": {"only": "one"}}"#),
        format!(r#"{{"model": "clef", "state": 1e400, "questions": {{"q": {{{noul}}}}}}}"#),
        format!(
            r#"{{"model": "clef", "state": "s", "temperature": 0, "questions": {{"q": {{{noul}}}}}}}"#
        ),
        format!(
            r#"{{"model": "clef", "state": "s", "images": ["https://example.com/a.png"], "questions": {{"q": {{{noul}}}}}}}"#
        ),
        format!(
            r#"{{"model": "clef", "state": "s", "images": ["{png}","{png}","{png}","{png}","{png}"], "questions": {{"q": {{{noul}}}}}}}"#
        ),
        format!(
            r#"{{"model": "clef", "state": "s", "images": [{{"content_type": "image/gif", "base64": "R0lGOD=="}}], "questions": {{"q": {{{noul}}}}}}}"#
        ),
        // Undecodable image bytes (a PNG signature and nothing else).
        format!(
            r#"{{"model": "clef", "state": "s", "images": ["{png}"], "questions": {{"q": {{{noul}}}}}}}"#
        ),
        // The videos extension is off on this server.
        format!(
            r#"{{"model": "clef", "state": "s", "videos": [], "questions": {{"q": {{{noul}}}}}}}"#
        ),
    ];
    for (i, body) in cases.iter().enumerate() {
        let r = server.post(SYSTEMONE, body.as_bytes());
        assert_eq!(r.status, 422, "case {i}: {}", r.text());
        assert_failure(&r, 422, 5012);
    }
    // Header values are validated too.
    let ok = valid();
    for (h, v) in [("x-clef-truncate", "yes"), ("x-clef-precision", "extreme")] {
        let r = server.send(&Req::post(SYSTEMONE, ok.as_bytes()).header(h, v));
        assert_failure(&r, 422, 5012);
    }
    // Messages name the offending path.
    let r = server.post(SYSTEMONE, cases[5].as_bytes());
    assert!(
        error_message(&r).starts_with("questions.q.criteria"),
        "{}",
        error_message(&r)
    );
}

#[test]
fn oversize_bodies_and_prompts_are_413_5021() {
    // The default limit (13 MiB) refuses a 14 MiB body without reading it.
    let server = Server::start(&["--max-context", "440"]);
    let mut big = valid().into_bytes();
    big.resize(14 << 20, b' ');
    let r = server.post(SYSTEMONE, &big);
    assert_failure(&r, 413, 5021);
    assert!(
        error_message(&r).contains(&(14u64 << 20).to_string()),
        "{}",
        error_message(&r)
    );
    // A prompt over --max-context: the measured and the allowed size.
    let g = golden("a01_support_basic");
    let r = server.post(SYSTEMONE, g.request_text.as_bytes());
    assert_failure(&r, 413, 5021);
    let m = error_message(&r);
    assert!(
        m.contains(&g.input_ids.to_string()) && m.contains("440"),
        "{m}"
    );

    // A configured limit, with a declared length and with a chunked body of unknown length.
    let small = Server::start(&["--max-body-bytes", "4096"]);
    let mut body = valid().into_bytes();
    body.resize(5000, b' ');
    assert_failure(&small.post(SYSTEMONE, &body), 413, 5021);
    let mut chunked = Req::post(SYSTEMONE, &body);
    chunked.chunked = true;
    assert_failure(&small.send(&chunked), 413, 5021);
    // Just under the limit is fine, chunked or not.
    body.truncate(4096);
    assert_eq!(small.post(SYSTEMONE, &body).status, 200);
    let mut chunked = Req::post(SYSTEMONE, &body);
    chunked.chunked = true;
    assert_eq!(small.send(&chunked).status, 200);
}

#[test]
fn auth_on_and_off() {
    let body = valid();
    let open = Server::start(&[]);
    assert_eq!(open.post(SYSTEMONE, body.as_bytes()).status, 200);
    assert_eq!(
        open.send(
            &Req::post(SYSTEMONE, body.as_bytes()).header("authorization", "Bearer anything")
        )
        .status,
        200
    );

    let locked = Server::start(&["--api-key", "s3cret-token"]);
    let protected = [
        Req::post(SYSTEMONE, body.as_bytes()),
        Req::post(&workers_path("clef"), body.as_bytes()),
        Req::post(&workers_short_path("clef"), body.as_bytes()),
        Req::get("/v1/models"),
        Req::get("/metrics"),
    ];
    for req in &protected {
        for auth in [
            None,
            Some("Bearer wrong"),
            Some("Bearer s3cret-tokenx"),
            Some("Basic s3cret-token"),
            Some("s3cret-token"),
        ] {
            let mut r = req.clone();
            if let Some(a) = auth {
                r = r.header("authorization", a);
            }
            let resp = locked.send(&r);
            assert_failure(&resp, 401, 10000);
            assert_eq!(resp.header("www-authenticate"), Some("Bearer"));
        }
        let ok = locked.send(&req.clone().header("authorization", "Bearer s3cret-token"));
        assert_eq!(ok.status, 200, "{} {}: {}", req.method, req.path, ok.text());
    }
    // Probes and the API description stay open.
    for path in ["/healthz", "/readyz", "/health", "/openapi.json"] {
        assert_eq!(locked.send(&Req::get(path)).status, 200, "{path}");
    }
}

#[test]
fn api_key_from_the_environment() {
    // Started by hand: Server::with clears CLEF_* variables, so set it after.
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_clef"))
        .args([
            "--threads",
            "1",
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--model",
        ])
        .arg(tiny_a())
        .env("CLEF_API_KEY", "from-env")
        .env("CLEF_QUEUE_DEPTH", "3")
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(dir.path().join("log")).unwrap())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let stdout = child.stdout.take().unwrap();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line).unwrap();
    let addr: std::net::SocketAddr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .parse()
        .unwrap();
    let t0 = std::time::Instant::now();
    while try_send(addr, &Req::get("/readyz")).ok().map(|r| r.status) != Some(200) {
        assert!(t0.elapsed() < Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(10));
    }
    let body = valid();
    assert_failure(
        &send(addr, &Req::post(SYSTEMONE, body.as_bytes())),
        401,
        10000,
    );
    let r = send(
        addr,
        &Req::post(SYSTEMONE, body.as_bytes()).header("authorization", "Bearer from-env"),
    );
    assert_eq!(r.status, 200);
    let metrics = send(
        addr,
        &Req::get("/metrics").header("authorization", "Bearer from-env"),
    );
    assert!(
        metrics.text().contains("clef_queue_capacity 4\n"),
        "{}",
        metrics.text()
    );
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn queue_full_is_429_3040_with_retry_after() {
    // One computing slot and no waiting room: a second request while one computes is refused.
    let server = Server::start(&[
        "--concurrency",
        "1",
        "--queue-depth",
        "0",
        "--retry-after",
        "7",
    ]);
    let long = long_request(1000);
    let held = send_and_hold(server.addr, &Req::post(SYSTEMONE, &long));
    server.wait_metrics(Duration::from_secs(20), "one request computing", |m| {
        m.value("clef_inflight_requests") == 1.0
    });
    let r = server.post(SYSTEMONE, valid().as_bytes());
    assert_failure(&r, 429, 3040);
    assert_eq!(r.header("retry-after"), Some("7"));
    // The place is taken before the body is read, so a full server refuses an invalid body
    // the same way, without reading it; a declared length over the limit is known from the
    // head and is final, so it is still 413.
    assert_failure(&server.post(SYSTEMONE, b"{"), 429, 3040);
    let mut over = std::net::TcpStream::connect(server.addr).unwrap();
    std::io::Write::write_all(
        &mut over,
        b"POST /v1/systemone HTTP/1.1\r\nhost: x\r\ncontent-length: 99999999\r\n\r\n",
    )
    .unwrap();
    assert_failure(&read_response(&mut over).unwrap(), 413, 5021);
    drop(held);
}

/// tiny-a with every weight of the joint head set to NaN (bf16 0xffff): every logit is NaN.
fn broken_model() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(tiny_a()).unwrap() {
        let p = entry.unwrap().path();
        std::fs::copy(&p, dir.path().join(p.file_name().unwrap())).unwrap();
    }
    let path = dir.path().join("joint_head.safetensors");
    let mut bytes = std::fs::read(&path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    bytes[8 + n..].fill(0xff);
    std::fs::write(&path, bytes).unwrap();
    dir
}

#[test]
fn internal_failures_are_500_5012() {
    let model = broken_model();
    let server = Server::with(Options {
        model: model.path().to_path_buf(),
        ..Default::default()
    });
    let r = server.post(SYSTEMONE, valid().as_bytes());
    assert_failure(&r, 500, 5012);
    assert!(
        error_message(&r).starts_with("Clef inference failed"),
        "{}",
        error_message(&r)
    );
    // The server keeps serving after an internal failure.
    assert_eq!(server.send(&Req::get("/healthz")).status, 200);
    assert_failure(
        &server.post(&workers_path("clef"), valid().as_bytes()),
        500,
        5012,
    );
}

/// Video programs are found once at start-up: without an `ffmpeg` on `PATH` a video file is a
/// 422 that says so (a frame list still works, and `/v1/models` says video files are off); an
/// `--ffmpeg` that does not run stops the server at start-up, naming it.
#[test]
fn video_files_without_ffmpeg_are_a_422_decided_at_start_up() {
    let empty = tempfile::tempdir().unwrap();
    let server = Server::with(Options {
        env: vec![("PATH", empty.path().display().to_string())],
        ..Default::default()
    });
    // an MP4 header (`ftypisom`) and zeros, base64: refused before anything reads it
    let mp4 = "AAAAGGZ0eXBpc29tAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==";
    let body = format!(
        r#"{{"model": "clef", "state": "s", "videos": ["data:video/mp4;base64,{mp4}"],
            "questions": {{"q": {{"type": "noul", "instructions": "Is it?"}}}}}}"#
    );
    let r = server.post(SYSTEMONE, body.as_bytes());
    assert_failure(&r, 422, 5012);
    let message = error_message(&r);
    assert!(
        message.contains("video files are not supported on this server")
            && message.contains("`ffmpeg` was not found on PATH at start-up"),
        "{message}"
    );
    // frame lists need no program
    let g = golden("a26_video");
    assert_eq!(
        server.post(SYSTEMONE, g.request_text.as_bytes()).status,
        200
    );
    let models = server.send(&Req::get("/v1/models")).text();
    assert!(models.contains(r#""video_files":false"#), "{models}");
    assert!(server
        .log_text()
        .contains("video files will be refused (422)"));

    let mut broken = Server::with(Options {
        args: vec!["--ffmpeg", "/nonexistent/clef-ffmpeg"],
        wait_ready: false,
        ..Default::default()
    });
    let test = "video_files_without_ffmpeg_are_a_422_decided_at_start_up";
    if clef_testkit::tools::require(test, &["ffmpeg", "ffprobe"]).is_some() {
        // with them: found once, logged with their versions, announced
        let server = Server::start(&[]);
        let log = server.log_text();
        assert!(
            log.contains("video programs") && log.contains("ffmpeg version"),
            "{log}"
        );
        let models = server.send(&Req::get("/v1/models")).text();
        assert!(models.contains(r#""video_files":true"#), "{models}");
    }
    let status = broken.wait_exit(Duration::from_secs(30));
    assert!(!status.success());
    assert!(
        broken.log_text().contains("/nonexistent/clef-ffmpeg"),
        "{}",
        broken.log_text()
    );
}
