//! Fuzzing `clef serve` over HTTP with mutated text and media requests: every response must be
//! an answer or a 4xx with the JSON failure envelope (never a 5xx, never a non-JSON error body
//! from the application), the server must not panic, and it must still answer afterwards.
//!
//! Bounded in time: `CLEF_FUZZ_SECONDS` (default 20, the short form CI runs; `bench/hostile.sh`
//! runs 600) and seeded by `CLEF_FUZZ_SEED` (default fixed; the seed is printed so that a
//! failure can be replayed). Loopback only.

mod serve_common;

use base64::Engine as _;
use serde_json::Value;
use serve_common::*;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// xorshift64*: small, deterministic, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
}

/// Every tiny-a golden request (text, JSON states, images, videos) as JSON.
fn seeds() -> Vec<Value> {
    golden_names()
        .iter()
        .map(|name| serde_json::from_str(&golden(name).request_text).expect("golden request"))
        .collect()
}

/// Byte-level damage: flips, inserts, deletions, truncation.
fn mutate_bytes(rng: &mut Rng, bytes: &mut Vec<u8>) {
    if bytes.is_empty() {
        bytes.push(rng.next() as u8);
        return;
    }
    for _ in 0..1 + rng.below(8) {
        let at = rng.below(bytes.len());
        match rng.below(5) {
            0 => bytes[at] ^= 1 << rng.below(8),
            1 => bytes[at] = rng.next() as u8,
            2 => bytes.insert(at, rng.next() as u8),
            3 => {
                let end = (at + 1 + rng.below(64)).min(bytes.len());
                bytes.drain(at..end);
            }
            _ => bytes.truncate(at.max(1)),
        }
        if bytes.is_empty() {
            return;
        }
    }
}

/// A JSON value an attacker might put anywhere.
fn hostile_value(rng: &mut Rng) -> Value {
    match rng.below(12) {
        0 => Value::Null,
        1 => Value::Bool(rng.chance(2)),
        2 => serde_json::from_str("1e308").unwrap(),
        3 => Value::from(-(rng.next() as i64)),
        4 => Value::from("x".repeat(rng.below(5000))),
        5 => Value::from("\u{0}\u{202e}\u{fffd}😀\u{301}e\n\t"),
        6 => Value::Array(vec![]),
        7 => Value::Object(Default::default()),
        8 => {
            let mut v = Value::from(1);
            for _ in 0..rng.below(300) {
                v = Value::Array(vec![v]);
            }
            v
        }
        9 => Value::Array((0..rng.below(3000)).map(Value::from).collect()),
        10 => Value::from("data:image/png;base64,AAAA"),
        _ => Value::from(rng.next() as f64 / 7.0),
    }
}

/// Paths to every node of `v`, as child indexes.
fn node_paths(v: &Value, here: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
    out.push(here.clone());
    let children: Vec<&Value> = match v {
        Value::Array(a) => a.iter().collect(),
        Value::Object(o) => o.values().collect(),
        _ => return,
    };
    for (i, c) in children.into_iter().enumerate() {
        here.push(i);
        node_paths(c, here, out);
        here.pop();
    }
}

fn node_at<'a>(v: &'a mut Value, path: &[usize]) -> &'a mut Value {
    let Some((&first, rest)) = path.split_first() else {
        return v;
    };
    let child = match v {
        Value::Array(a) => &mut a[first],
        Value::Object(o) => o.values_mut().nth(first).expect("child"),
        _ => unreachable!("paths lead through containers"),
    };
    node_at(child, rest)
}

/// Damage the decoded bytes of a `data:...;base64,` string, keeping it well-formed base64.
fn mutate_media(rng: &mut Rng, s: &str) -> Option<String> {
    let (head, data) = s.split_once(";base64,")?;
    let mut bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .ok()?;
    mutate_bytes(rng, &mut bytes);
    let head = if rng.chance(8) {
        [
            "data:image/jpeg",
            "data:image/webp",
            "data:video/mp4",
            "data:image/gif",
        ][rng.below(4)]
    } else {
        head
    };
    Some(format!(
        "{head};base64,{}",
        base64::engine::general_purpose::STANDARD.encode(&bytes)
    ))
}

/// One fuzzed body from a seed.
fn fuzz_body(rng: &mut Rng, seed: &Value) -> Vec<u8> {
    let mut v = seed.clone();
    match rng.below(4) {
        // Raw bytes of the serialized request.
        0 => {
            let mut bytes = serde_json::to_vec(&v).unwrap();
            mutate_bytes(rng, &mut bytes);
            return bytes;
        }
        // A media string damaged (or, without media, another structural change).
        1 => {
            let mut paths = Vec::new();
            node_paths(&v, &mut Vec::new(), &mut paths);
            let media: Vec<&Vec<usize>> = paths
                .iter()
                .filter(|p| {
                    let mut copy = v.clone();
                    node_at(&mut copy, p)
                        .as_str()
                        .is_some_and(|s| s.contains(";base64,"))
                })
                .collect();
            if !media.is_empty() {
                let path = media[rng.below(media.len())].clone();
                let node = node_at(&mut v, &path);
                if let Some(damaged) = node.as_str().and_then(|s| mutate_media(rng, s)) {
                    *node = Value::from(damaged);
                }
                return serde_json::to_vec(&v).unwrap();
            }
        }
        _ => {}
    }
    // Structural: replace, delete or duplicate nodes.
    for _ in 0..1 + rng.below(3) {
        let mut paths = Vec::new();
        node_paths(&v, &mut Vec::new(), &mut paths);
        let path = paths[rng.below(paths.len())].clone();
        if path.is_empty() {
            continue;
        }
        let (parent_path, last) = path.split_at(path.len() - 1);
        let parent = node_at(&mut v, parent_path);
        match (parent, rng.below(3)) {
            (Value::Object(o), 0) => {
                let key = o.keys().nth(last[0]).cloned().unwrap();
                o.remove(&key);
            }
            (Value::Array(a), 0) => {
                a.remove(last[0]);
            }
            (Value::Object(o), 1) => {
                let key = format!("k{}", rng.below(10));
                o.insert(key, hostile_value(rng));
            }
            (parent, _) => *node_at(parent, last) = hostile_value(rng),
        }
    }
    serde_json::to_vec(&v).unwrap()
}

#[test]
fn fuzzed_text_and_media_requests_get_answers_or_json_4xx() {
    let seconds: u64 = std::env::var("CLEF_FUZZ_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let seed: u64 = std::env::var("CLEF_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_c1ef);
    println!("fuzz seed {seed}, {seconds} s (CLEF_FUZZ_SEED, CLEF_FUZZ_SECONDS)");
    let mut rng = Rng(seed | 1);
    let server = Server::start(&["--deadline", "10", "--body-timeout", "5"]);
    let seeds = seeds();
    let paths = ["/v1/systemone".to_string(), workers_path("clef")];
    let t0 = Instant::now();
    let mut statuses: BTreeMap<u16, u64> = BTreeMap::new();
    let mut sent = 0u64;
    while t0.elapsed() < Duration::from_secs(seconds) {
        let seed_req = &seeds[rng.below(seeds.len())];
        let body = fuzz_body(&mut rng, seed_req);
        let path = &paths[rng.below(paths.len())];
        let mut req = Req::post(path, &body);
        if rng.chance(10) {
            req.chunked = true;
        }
        let r = try_send(server.addr, &req).unwrap_or_else(|e| {
            panic!(
                "request {sent} lost ({e}); body: {}",
                String::from_utf8_lossy(&body[..body.len().min(2000)])
            )
        });
        sent += 1;
        *statuses.entry(r.status).or_insert(0) += 1;
        assert!(
            r.status < 500,
            "request {sent}: {} {}; body: {}",
            r.status,
            r.text(),
            String::from_utf8_lossy(&body[..body.len().min(2000)])
        );
        if r.status >= 400 {
            assert_eq!(
                r.header("content-type"),
                Some("application/json"),
                "{}",
                r.text()
            );
            let envelope = r.json();
            let o = envelope.as_object().expect("an envelope");
            assert_eq!(o.get("success"), Some(&clef_api::Json::Bool(false)));
        }
    }
    println!("{sent} fuzzed requests in {:?}: {statuses:?}", t0.elapsed());
    assert!(sent > 0);
    let m = server.metrics();
    // (`/readyz` answered 503 while the model loaded, before the fuzzing began.)
    for (route, status, n) in m.all_requests() {
        assert!(status < 500 || route == "/readyz", "{route} {status}: {n}");
    }
    let log = server.log_text();
    assert!(!log.contains("panicked"), "{log}");
    // Still serving.
    let g = golden("a22_image_one");
    assert_eq!(
        server
            .post("/v1/systemone", g.request_text.as_bytes())
            .status,
        200
    );
}
