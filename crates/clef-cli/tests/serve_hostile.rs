//! The hostile-client suite (short form): clients that hold connections without sending, send
//! their heads or bodies a byte at a time, declare huge bodies and send nothing, or send what
//! the HTTP parser refuses. Each case checks that a well-behaved client is still answered and
//! that the server's memory and counters stay bounded. Loopback only; every loop is bounded.
//! `bench/hostile.sh` runs the long fuzz form (`serve_fuzz.rs`) and records the figures.

mod serve_common;

use serve_common::*;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SYSTEMONE: &str = "/v1/systemone";

fn good_request() -> Vec<u8> {
    golden("a11_numeric_ids").request_text.into_bytes()
}

/// A well-behaved client: sends the whole request, and after a 429 waits the Retry-After it
/// was given and tries again (as the official SDKs do). Returns the time to its 200.
fn well_behaved(addr: SocketAddr, body: &[u8], limit: Duration) -> Duration {
    let t0 = Instant::now();
    loop {
        let r = send(addr, &Req::post(SYSTEMONE, body));
        match r.status {
            200 => return t0.elapsed(),
            429 => {
                let wait: u64 = r
                    .header("retry-after")
                    .and_then(|v| v.parse().ok())
                    .expect("a 429 carries Retry-After");
                std::thread::sleep(Duration::from_secs(wait));
            }
            other => panic!("{other}: {}", r.text()),
        }
        assert!(t0.elapsed() < limit, "not answered within {limit:?}");
    }
}

/// Median of a few unloaded requests.
fn unloaded_latency(addr: SocketAddr, body: &[u8]) -> Duration {
    let mut times: Vec<Duration> = (0..5)
        .map(|_| well_behaved(addr, body, Duration::from_secs(60)))
        .collect();
    times.sort();
    times[2]
}

/// Writes one byte to every socket each second until stopped (errors ignored: the server may
/// have closed some of them, which is the point).
fn trickle(
    mut sockets: Vec<TcpStream>,
    byte: u8,
) -> (Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let handle = std::thread::spawn(move || {
        while !flag.load(Ordering::Acquire) {
            for s in &mut sockets {
                let _ = s.write_all(&[byte]);
            }
            for _ in 0..10 {
                if flag.load(Ordering::Acquire) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    });
    (stop, handle)
}

fn connect_all(addr: SocketAddr, n: usize, first: &[u8]) -> Vec<TcpStream> {
    (0..n)
        .map(|_| {
            let mut s = TcpStream::connect(addr).expect("connect");
            if !first.is_empty() {
                s.write_all(first).expect("write");
            }
            s
        })
        .collect()
}

#[test]
fn silent_slow_and_trickling_clients_do_not_starve_a_good_one() {
    const CONNECTIONS: usize = 64;
    const HEADER_TIMEOUT_S: u64 = 3;
    let server = Server::start(&[
        "--max-connections",
        "64",
        "--header-timeout",
        "3",
        "--body-timeout",
        "1",
    ]);
    let body = good_request();
    let unloaded = unloaded_latency(server.addr, &body);
    // The issue's bound: twice the unloaded latency plus the header timeout.
    let bound = unloaded * 2 + Duration::from_secs(HEADER_TIMEOUT_S);
    let limit = Duration::from_secs(60);

    // 1. Silent sockets fill every place; the good client takes the oldest one's.
    let silent = connect_all(server.addr, CONNECTIONS, b"");
    std::thread::sleep(Duration::from_millis(200));
    let took = well_behaved(server.addr, &body, limit);
    println!("silent: answered in {took:?} (unloaded {unloaded:?}, bound {bound:?})");
    assert!(took <= bound, "silent: {took:?} > {bound:?}");
    drop(silent);

    // 2. Heads sent one byte a second.
    let slow_heads = connect_all(server.addr, CONNECTIONS, b"P");
    let (stop, writer) = trickle(slow_heads, b'O');
    std::thread::sleep(Duration::from_millis(200));
    let took = well_behaved(server.addr, &body, limit);
    stop.store(true, Ordering::Release);
    writer.join().unwrap();
    println!("slow heads: answered in {took:?} (unloaded {unloaded:?}, bound {bound:?})");
    assert!(took <= bound, "slow heads: {took:?} > {bound:?}");

    // 3. Bodies sent one byte a second: the admitted ones are cut off by the body pace, the
    // others are refused at once (the queue is full) without their bodies being read.
    let head =
        b"POST /v1/systemone HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
                 content-length: 1000\r\n\r\n{";
    let trickling = connect_all(server.addr, CONNECTIONS, head);
    let (stop, writer) = trickle(trickling, b' ');
    std::thread::sleep(Duration::from_millis(200));
    let took = well_behaved(server.addr, &body, limit);
    stop.store(true, Ordering::Release);
    writer.join().unwrap();
    println!("trickling bodies: answered in {took:?} (unloaded {unloaded:?}, bound {bound:?})");
    assert!(took <= bound, "trickling bodies: {took:?} > {bound:?}");

    let m = server.metrics();
    assert!(
        m.value("clef_connections_closed_total{reason=\"room_for_new_client\"}") >= 2.0,
        "{}",
        m.0
    );
    assert!(m.requests(SYSTEMONE, 408) >= 1, "{}", m.0);
    assert!(m.requests(SYSTEMONE, 429) >= 1, "{}", m.0);
    assert_eq!(m.requests(SYSTEMONE, 500), 0);
}

#[test]
fn a_thousand_declared_bodies_hold_no_memory() {
    let server = Server::start(&[]);
    assert_eq!(server.post(SYSTEMONE, &good_request()).status, 200);
    let before = server.rss_bytes();
    let head = format!(
        "POST /v1/systemone HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n",
        13 << 20
    );
    let mut sockets = connect_all(server.addr, 1000, head.as_bytes());
    // Every connection has had its head read: the admitted ones hold their places, the
    // others have been refused.
    let m = server.wait_metrics(Duration::from_secs(60), "1,000 heads handled", |m| {
        m.requests(SYSTEMONE, 429)
            + m.value("clef_queue_depth") as u64
            + m.value("clef_inflight_requests") as u64
            >= 1000
    });
    let rss = server.rss_bytes();
    assert!(
        rss < 512 << 20,
        "resident {} MiB with 1,000 declared bodies (before: {} MiB)",
        rss >> 20,
        before >> 20
    );
    let reserved = m.value("clef_body_bytes_reserved");
    assert!(
        reserved <= m.value("clef_body_budget_bytes"),
        "{reserved} bytes reserved over the budget"
    );
    // A refused one got the JSON envelope, before it sent any of its body.
    let refused = sockets
        .iter_mut()
        .rev()
        .find_map(|s| {
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            read_response(s).ok().filter(|r| r.status == 429)
        })
        .expect("a refused connection");
    assert_failure(&refused, 429, 3040);
    println!(
        "RSS before {} MiB, with 1,000 declared 13 MiB bodies {} MiB; {} bytes reserved",
        before >> 20,
        rss >> 20,
        reserved
    );
}

#[test]
fn huge_states_are_refused_before_they_cost_memory() {
    // The largest body the server takes (13 MiB by default), as states whose cost grows with
    // their size: millions of tiny values (each a parsed item), and one long string (each
    // word a token). Both must be refused by their bounds (the JSON item budget; the token
    // lower bound) before the parser builds them or the tokenizer reads them. The peak includes
    // the body itself (13 MB).
    let server = Server::start(&[]);
    assert_eq!(server.post(SYSTEMONE, &good_request()).status, 200);
    let numbers = format!("[{}]", vec!["1"; 13_000_000 / 2 - 8].join(","));
    let string = format!("\"{}\"", "word ".repeat(13_000_000 / 5 - 20));
    for (what, state) in [("numbers", numbers), ("a string", string)] {
        let body = format!(
            r#"{{"model": "clef", "state": {state}, "questions": {{"q": {{"type": "noul", "instructions": "Is it?"}}}}}}"#
        );
        assert!(
            body.len() > 12_900_000 && body.len() < 13 << 20,
            "{}",
            body.len()
        );
        let before = server.peak_rss_bytes();
        let t0 = Instant::now();
        let r = server.post(SYSTEMONE, body.as_bytes());
        let took = t0.elapsed();
        assert_failure(&r, 413, 5021);
        let growth = server.peak_rss_bytes().saturating_sub(before);
        assert!(
            growth < 100_000_000,
            "a 13 MB state of {what}: peak RSS grew {} MiB",
            growth >> 20
        );
        println!(
            "13 MB state of {what}: 413 in {took:?}, peak RSS growth {} MiB: {}",
            growth >> 20,
            error_message(&r)
        );
    }
    assert_eq!(server.post(SYSTEMONE, &good_request()).status, 200);
}

#[test]
fn a_thousand_scan_jpeg_is_refused_before_it_takes_the_slot() {
    // A 100 kB progressive JPEG of 1,000 scans at 4000x4000 would keep libjpeg busy for
    // seconds; it is refused from its markers (docs/media.md §8) and the one computing slot
    // is free for the next request at once, long before the 5 s deadline.
    let server = Server::start(&["--deadline", "5", "--queue-depth", "0"]);
    let jpeg = std::fs::read(fixtures().join("media/progressive_1000scans.jpg"))
        .expect("the 1000-scan JPEG fixture");
    use base64::Engine as _;
    let data = base64::engine::general_purpose::STANDARD.encode(&jpeg);
    let body = format!(
        r#"{{"model": "clef", "state": "x", "images": ["data:image/jpeg;base64,{data}"], "questions": {{"q": {{"type": "noul", "instructions": "Is it?"}}}}}}"#
    );
    let t0 = Instant::now();
    let r = server.post(SYSTEMONE, body.as_bytes());
    assert_failure(&r, 422, 5012);
    let message = error_message(&r);
    assert!(message.contains("1000 scans"), "{message}");
    // With no queue, a slot still held would make this a 429.
    assert_eq!(server.post(SYSTEMONE, &good_request()).status, 200);
    println!(
        "1000-scan JPEG: 422 then a good request answered {:?} after the first was sent",
        t0.elapsed()
    );
    assert_eq!(server.metrics().value("clef_inflight_requests"), 0.0);
}

#[test]
fn a_full_queue_refuses_before_reading_the_body() {
    // One computing slot, no queue: a long request holds the slot, so the next request must be
    // refused from its head alone; its body is never sent.
    let server = Server::start(&["--queue-depth", "0"]);
    let mut holder = send_and_hold(server.addr, &Req::post(SYSTEMONE, &long_request(1000)));
    server.wait_metrics(Duration::from_secs(30), "the slot taken", |m| {
        m.value("clef_inflight_requests") == 1.0
    });
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.write_all(
        b"POST /v1/systemone HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
          content-length: 1048576\r\n\r\n",
    )
    .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let r = read_response(&mut s).expect("answered without its body");
    assert_failure(&r, 429, 3040);
    assert!(r.header("retry-after").is_some());
    let _ = read_response(&mut holder);
}

#[test]
fn a_trickling_body_is_cut_by_its_pace_and_frees_its_place() {
    let server = Server::start(&["--body-timeout", "0.5", "--min-body-rate", "1000"]);
    let mut slow = TcpStream::connect(server.addr).unwrap();
    slow.write_all(
        b"POST /v1/systemone HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
          content-length: 100000\r\n\r\n{\"model\": ",
    )
    .unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let r = read_response(&mut slow).expect("a response");
    assert_failure(&r, 408, 3007);
    let message = r.text();
    assert!(message.contains("arrived too slowly"), "{message}");
    let m = server.metrics();
    assert_eq!(m.value("clef_queue_depth"), 0.0);
    assert_eq!(m.value("clef_body_bytes_reserved"), 0.0);
    assert_eq!(server.post(SYSTEMONE, &good_request()).status, 200);
}

#[test]
fn requests_the_http_parser_refuses_are_counted() {
    let server = Server::start(&[]);
    let raw = |bytes: &[u8]| {
        let mut s = TcpStream::connect(server.addr).unwrap();
        let _ = s.write_all(bytes);
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        String::from_utf8_lossy(&got).into_owned()
    };
    assert!(raw(b"NOT HTTP AT ALL\r\n\r\n").starts_with("HTTP/1.1 400"));
    let huge_header = format!(
        "GET /healthz HTTP/1.1\r\nhost: x\r\nx-big: {}\r\n\r\n",
        "a".repeat(600 << 10)
    );
    assert!(raw(huge_header.as_bytes()).starts_with("HTTP/1.1 431"));
    let long_uri = format!("GET /{} HTTP/1.1\r\nhost: x\r\n\r\n", "a".repeat(70_000));
    assert!(raw(long_uri.as_bytes()).starts_with("HTTP/1.1 414"));
    let m = server.wait_metrics(Duration::from_secs(10), "the three counted", |m| {
        m.requests("malformed", 400) == 1
            && m.requests("malformed", 431) == 1
            && m.requests("malformed", 414) == 1
    });
    assert_eq!(m.requests("malformed", 500), 0);
    // The server is unharmed.
    assert_eq!(server.post(SYSTEMONE, &good_request()).status, 200);
}
