//! Time-dependent behaviour of `clef serve`: 503 while the model loads, 408 at the deadline,
//! cancellation when the client disconnects, graceful shutdown on SIGTERM, and a failed load.

mod serve_common;

use serve_common::*;
use std::io::Write;
use std::time::{Duration, Instant};

const SYSTEMONE: &str = "/v1/systemone";

#[cfg(unix)]
#[test]
fn loading_is_503_3040_until_the_model_is_ready() {
    // The model folder's joint_head_config.json is a FIFO: loading blocks on it until the test
    // writes the real file into it, so the "still loading" window is deterministic.
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(tiny_a()).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_owned();
        if name != "joint_head_config.json" {
            std::os::unix::fs::symlink(&p, dir.path().join(name)).unwrap();
        }
    }
    let fifo = dir.path().join("joint_head_config.json");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let server = Server::with(Options {
        model: dir.path().to_path_buf(),
        wait_ready: false,
        ..Default::default()
    });
    assert_eq!(server.send(&Req::get("/healthz")).status, 200);
    for path in ["/readyz", "/health", "/v1/models"] {
        assert_failure(&server.send(&Req::get(path)), 503, 3040);
    }
    let body = golden("a11_numeric_ids").request_text;
    assert_failure(&server.post(SYSTEMONE, body.as_bytes()), 503, 3040);
    assert_failure(
        &server.post(&workers_path("clef"), body.as_bytes()),
        503,
        3040,
    );
    assert_eq!(server.metrics().value("clef_model_loaded"), 0.0);

    let config = std::fs::read(tiny_a().join("joint_head_config.json")).unwrap();
    let mut writer = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    writer.write_all(&config).unwrap();
    drop(writer);
    server.wait_ready();
    assert_eq!(server.post(SYSTEMONE, body.as_bytes()).status, 200);
    assert_eq!(server.metrics().value("clef_model_loaded"), 1.0);
}

#[test]
fn the_deadline_is_408_3007_and_stops_the_engine() {
    // About 5,000 tokens: seconds of prefill on one thread in the test profile, far more than
    // the 0.3 s deadline.
    let server = Server::start(&["--deadline", "0.3"]);
    let t0 = Instant::now();
    let r = server.post(SYSTEMONE, &long_request(1000));
    assert_failure(&r, 408, 3007);
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "answered after {:?}",
        t0.elapsed()
    );
    // The engine saw the deadline at a chunk boundary and gave up: no answer was computed.
    let m = server.wait_metrics(Duration::from_secs(10), "the cancellation", |m| {
        m.value("clef_cancelled_total{reason=\"deadline\"}") == 1.0
            && m.value("clef_inflight_requests") == 0.0
    });
    assert_eq!(m.value("clef_decisions_total"), 0.0);
    assert_eq!(m.requests(SYSTEMONE, 408), 1);
    // Short requests still fit in the deadline.
    assert_eq!(
        server
            .post(SYSTEMONE, golden("a11_numeric_ids").request_text.as_bytes())
            .status,
        200
    );
}

#[test]
fn a_client_that_disconnects_stops_its_request() {
    let server = Server::start(&[]);
    let held = send_and_hold(server.addr, &Req::post(SYSTEMONE, &long_request(1000)));
    server.wait_metrics(Duration::from_secs(20), "the request computing", |m| {
        m.value("clef_inflight_requests") == 1.0
    });
    drop(held);
    let m = server.wait_metrics(Duration::from_secs(10), "the cancellation", |m| {
        m.value("clef_cancelled_total{reason=\"client_gone\"}") == 1.0
            && m.value("clef_inflight_requests") == 0.0
    });
    assert_eq!(m.value("clef_decisions_total"), 0.0);
    assert_eq!(m.requests(SYSTEMONE, 499), 1);
    // The slot is free again.
    assert_eq!(
        server
            .post(SYSTEMONE, golden("a11_numeric_ids").request_text.as_bytes())
            .status,
        200
    );
}

#[cfg(unix)]
#[test]
fn sigterm_finishes_in_flight_requests_and_refuses_new_ones() {
    let mut server = Server::start(&["--concurrency", "1", "--queue-depth", "4"]);
    let addr = server.addr;
    let long = long_request(1000);
    let in_flight = std::thread::spawn(move || send(addr, &Req::post(SYSTEMONE, &long)));
    let g = golden("a11_numeric_ids");
    let queued_body = g.request_text.clone();
    // One computing, one waiting in the queue: both must be answered.
    server.wait_metrics(Duration::from_secs(20), "the request computing", |m| {
        m.value("clef_inflight_requests") == 1.0
    });
    let queued =
        std::thread::spawn(move || send(addr, &Req::post(SYSTEMONE, queued_body.as_bytes())));
    server.wait_metrics(Duration::from_secs(20), "the second request queued", |m| {
        m.value("clef_queue_depth") == 1.0
    });
    server.signal("TERM");
    // New connections are refused once the listener is closed, while the others still run.
    let t0 = Instant::now();
    loop {
        match std::net::TcpStream::connect(addr) {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => break,
            _ => {
                assert!(
                    t0.elapsed() < Duration::from_secs(5),
                    "still accepting connections"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
    let r = in_flight.join().unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let r = queued.join().unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    check_client_contract(&g.request, &r, false);
    same_json(&r.json(), &g.response, 2e-4, "queued").unwrap();
    let status = server.wait_exit(Duration::from_secs(20));
    assert!(status.success(), "{status:?}");
    assert!(server.log_text().contains("SIGTERM received"));
}

#[test]
fn a_model_that_cannot_load_stops_the_server_with_an_error() {
    // A folder that looks like a model (it has a config.json) but does not load: the server
    // binds, tries, and stops. A folder that is not a model at all is refused before binding
    // (tests/first_run.rs).
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken");
    std::fs::create_dir(&broken).unwrap();
    std::fs::write(broken.join("config.json"), "{}").unwrap();
    let mut server = Server::with(Options {
        model: broken,
        wait_ready: false,
        ..Default::default()
    });
    let status = server.wait_exit(Duration::from_secs(20));
    assert!(!status.success());
    let log = server.log_text();
    assert!(log.contains("loading the model"), "{log}");
}

/// Reads until the server closes the connection; the bound only keeps a broken server from
/// hanging the suite (it is far above the timeouts under test).
fn read_until_closed(stream: &mut std::net::TcpStream) -> Vec<u8> {
    use std::io::Read;
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut got = Vec::new();
    match stream.read_to_end(&mut got) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the server kept the connection open: {e}"),
    }
    got
}

#[test]
fn a_client_that_never_finishes_its_headers_is_disconnected() {
    let server = Server::start(&["--header-timeout", "0.5"]);
    let mut silent = std::net::TcpStream::connect(server.addr).unwrap();
    silent
        .write_all(b"POST /v1/systemone HTTP/1.1\r\nhost: localhost\r\n")
        .unwrap();
    let t0 = Instant::now();
    read_until_closed(&mut silent);
    // Closed by the header timer, not by the 60 s read bound above.
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
    let r = server.post(SYSTEMONE, golden("a11_numeric_ids").request_text.as_bytes());
    assert_eq!(r.status, 200, "{}", r.text());
}

#[test]
fn silent_and_http2_sockets_are_closed_by_the_header_timer() {
    // The three openings hyper's protocol-sniffing connection left open forever: nothing at
    // all, one byte that could still become either protocol, and an HTTP/2 prior-knowledge
    // preface (which it answered with HTTP/2).
    let server = Server::start(&["--max-connections", "3", "--header-timeout", "0.5"]);
    let openings: [&[u8]; 3] = [b"", b"P", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"];
    let mut sockets: Vec<_> = openings
        .iter()
        .map(|bytes| {
            let mut s = std::net::TcpStream::connect(server.addr).unwrap();
            s.write_all(bytes).unwrap();
            s
        })
        .collect();
    let t0 = Instant::now();
    for (socket, opening) in sockets.iter_mut().zip(openings) {
        let got = read_until_closed(socket);
        // Never an HTTP/2 frame (a SETTINGS frame starts with a length, then type 0x04).
        assert!(
            got.is_empty() || got.starts_with(b"HTTP/1.1 "),
            "{:?} got {:?}",
            String::from_utf8_lossy(opening),
            String::from_utf8_lossy(&got)
        );
    }
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
    // All three slots are free again.
    let r = server.post(SYSTEMONE, golden("a11_numeric_ids").request_text.as_bytes());
    assert_eq!(r.status, 200, "{}", r.text());
}

#[test]
fn a_body_that_trickles_past_the_deadline_is_408_3007() {
    let server = Server::start(&["--deadline", "0.5"]);
    let mut slow = std::net::TcpStream::connect(server.addr).unwrap();
    slow.write_all(
        b"POST /v1/systemone HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
          content-length: 1000\r\nconnection: close\r\n\r\n{\"model\": ",
    )
    .unwrap();
    let raw = read_until_closed(&mut slow);
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("3007"), "{text}");
}

#[test]
fn a_client_over_the_limit_takes_the_place_of_a_waiting_connection() {
    // The header timer (30 s) would close the silent connection only much later: the new
    // client is served because it takes that connection's place at once.
    let server = Server::start(&["--max-connections", "1", "--header-timeout", "30"]);
    let mut silent = std::net::TcpStream::connect(server.addr).unwrap();
    silent.write_all(b"GET /healthz HTTP/1.1\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let t0 = Instant::now();
    let r = server.post(SYSTEMONE, golden("a11_numeric_ids").request_text.as_bytes());
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "waited for the header timer: {:?}",
        t0.elapsed()
    );
    // The first connection was closed for it.
    let got = read_until_closed(&mut silent);
    assert!(got.is_empty(), "{:?}", String::from_utf8_lossy(&got));
    // (`/metrics` is read over a connection of its own, which again takes a waiting one's
    // place; none is left, so nothing else is closed.)
    let m = server.metrics();
    assert_eq!(
        m.value("clef_connections_closed_total{reason=\"room_for_new_client\"}"),
        1.0
    );
}

#[test]
fn a_client_that_leaves_mid_body_is_counted_as_499() {
    let server = Server::start(&[]);
    let mut gone = std::net::TcpStream::connect(server.addr).unwrap();
    gone.write_all(
        b"POST /v1/systemone HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
          content-length: 1000\r\n\r\n{\"model\": ",
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    drop(gone);
    let m = server.wait_metrics(Duration::from_secs(10), "the 499", |m| {
        m.requests(SYSTEMONE, 499) == 1
    });
    assert_eq!(
        m.requests(SYSTEMONE, 400),
        0,
        "a client that left is not a bad body"
    );
    let log = server.log_text();
    assert!(
        log.contains("the client closed the connection before sending the whole body"),
        "{log}"
    );
}
