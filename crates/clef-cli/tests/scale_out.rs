//! Scale-out: three real `clef serve` replicas behind HAProxy, configured by the committed
//! `deploy/haproxy/haproxy.cfg` (addresses from the environment), all on loopback.
//!
//! (c) a replica that is still loading receives no traffic, and takes its share once ready;
//! (a) the follow-up workload (several states, each asked several question sets, round by
//!     round) with and without the `x-clef-session` header: the state cache's hit rate;
//! (b) SIGTERM to one replica under load: every request sent is answered or refused with a
//!     retryable status (429/503 with `Retry-After`), none is lost, a request in flight on the
//!     stopped replica is answered, and the other replicas take its sessions over.
//!
//! The short form runs in CI (`cargo test`); `bench/scale_out.sh` runs the long form (more
//! states, follow-ups and load) with the sizes below raised through `CLEF_SCALE_OUT_*`, and
//! docs/deploy.md has its figures. Needs `haproxy` (Debian's package): skipped and recorded
//! outside CI when missing, a failure under CI (crates/clef-testkit).

mod serve_common;

use serve_common::*;
use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const SYSTEMONE: &str = "/v1/systemone";
/// Words per state: about 490 state tokens on tiny-a (666 prompt rows with the prefix and one
/// question), above the state cache's 256-token minimum.
const WORDS: usize = 100;

/// A size of the run: the short form's value, or `CLEF_SCALE_OUT_<NAME>` when set.
fn size(name: &str, short: usize) -> usize {
    std::env::var(format!("CLEF_SCALE_OUT_{name}"))
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(short)
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn haproxy_cfg() -> PathBuf {
    repo_root().join("deploy/haproxy/haproxy.cfg")
}

/// A loopback port that was free a moment ago (HAProxy binds it right after).
fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
}

/// HAProxy running the committed configuration in the foreground; killed when dropped.
struct Haproxy {
    child: Child,
    addr: SocketAddr,
    stats: SocketAddr,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Haproxy {
    fn start(program: &Path, replicas: [SocketAddr; 3]) -> Haproxy {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = dir.path().join("haproxy.log");
        let (addr, stats) = (free_port(), free_port());
        let out = std::fs::File::create(&log).expect("log file");
        let mut cmd = Command::new(program);
        cmd.args(["-db", "-f"])
            .arg(haproxy_cfg())
            .env("CLEF_LB_BIND", addr.to_string())
            .env("CLEF_LB_STATS", stats.to_string())
            .env("CLEF_LB_CHECK_INTER", "200ms")
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log file"))
            .stderr(out);
        for (i, r) in replicas.iter().enumerate() {
            cmd.env(format!("CLEF_REPLICA_{}", i + 1), r.to_string());
        }
        let child = cmd.spawn().expect("spawn haproxy");
        let lb = Haproxy {
            child,
            addr,
            stats,
            log,
            _dir: dir,
        };
        let t0 = Instant::now();
        while try_send(lb.stats, &Req::get("/stats;csv")).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "haproxy did not start; log:\n{}",
                lb.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        lb
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The health status HAProxy gives each replica (`UP`, `DOWN`, ...), by server name; none
    /// while the stats page is not the CSV yet (HAProxy just started: `wait_statuses` polls on).
    fn statuses(&self) -> Vec<(String, String)> {
        let csv = send(self.stats, &Req::get("/stats;csv")).text();
        let mut lines = csv.lines();
        let header: Vec<&str> = lines
            .next()
            .unwrap_or_default()
            .trim_start_matches("# ")
            .split(',')
            .collect();
        let col = |name: &str| header.iter().position(|h| *h == name);
        let (Some(px), Some(sv), Some(status)) = (col("pxname"), col("svname"), col("status"))
        else {
            return vec![];
        };
        lines
            .map(|l| l.split(',').collect::<Vec<_>>())
            .filter(|f| f.len() > status && f[px] == "clef_replicas" && f[sv].starts_with('r'))
            .map(|f| (f[sv].to_owned(), f[status].to_owned()))
            .collect()
    }

    /// Columns of the backend's own stats row (`svname` BACKEND), e.g. `wretr` (requests
    /// retried) and `wredis` (sent to another server).
    fn backend_counter(&self, column: &str) -> u64 {
        let csv = send(self.stats, &Req::get("/stats;csv")).text();
        let mut lines = csv.lines();
        let header: Vec<&str> = lines
            .next()
            .unwrap_or_default()
            .trim_start_matches("# ")
            .split(',')
            .collect();
        let col = |name: &str| header.iter().position(|h| *h == name).expect(name);
        let (px, sv, c) = (col("pxname"), col("svname"), col(column));
        lines
            .map(|l| l.split(',').collect::<Vec<_>>())
            .find(|f| f.len() > c && f[px] == "clef_replicas" && f[sv] == "BACKEND")
            .and_then(|f| f[c].parse().ok())
            .unwrap_or_else(|| panic!("{column} of the backend in:\n{csv}"))
    }

    fn wait_statuses(&self, want: &[(&str, &str)]) {
        let t0 = Instant::now();
        loop {
            let now = self.statuses();
            let ok = want.iter().all(|(sv, st)| {
                now.iter()
                    .any(|(s, t)| s == sv && t.split(' ').next() == Some(*st))
            });
            if ok {
                return;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "haproxy never showed {want:?}: {now:?}; log:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The text of state `s` of a workload (`tag` keeps the phases' states apart).
fn state(tag: &str, s: usize) -> String {
    (0..WORDS)
        .map(|i| format!("{tag}{s}w{i}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Question set `q` about a state: a different question each time (a follow-up).
fn body(state: &str, q: usize) -> Vec<u8> {
    format!(
        r#"{{"model": "clef", "state": "{state}", "questions": {{"q{q}": {{"type": "noul", "instructions": "Follow-up number {q}: is item {q} mentioned?"}}}}}}"#
    )
    .into_bytes()
}

/// What became of one request sent to the balancer.
#[derive(Debug)]
enum Outcome {
    /// 200, with `x-clef-state-cache` and the replica HAProxy names in `x-clef-replica`.
    Answered { cache: String, replica: String },
    /// 429 or 503 with `Retry-After`: the client may send it again.
    Refused,
    /// Anything else: a connection error, another status, a 429/503 without `Retry-After`.
    Lost(String),
}

fn ask(lb: SocketAddr, body: &[u8], session: Option<&str>) -> Outcome {
    let mut req = Req::post(SYSTEMONE, body);
    if let Some(s) = session {
        req = req.header("x-clef-session", s);
    }
    match try_send(lb, &req) {
        Err(e) => Outcome::Lost(format!("connection: {e}")),
        Ok(r) if r.status == 200 => Outcome::Answered {
            cache: r.header("x-clef-state-cache").unwrap_or("none").to_owned(),
            replica: r.header("x-clef-replica").unwrap_or("none").to_owned(),
        },
        Ok(r) if matches!(r.status, 429 | 503) && r.header("retry-after").is_some() => {
            Outcome::Refused
        }
        Ok(r) => Outcome::Lost(format!("{} {}", r.status, r.text())),
    }
}

#[derive(Default, Debug)]
struct Tally {
    sent: usize,
    answered: usize,
    refused: usize,
    lost: Vec<String>,
    hits: usize,
    misses: usize,
    /// Answers per replica.
    by_replica: std::collections::BTreeMap<String, usize>,
}

impl Tally {
    fn add(&mut self, o: &Outcome) {
        self.sent += 1;
        match o {
            Outcome::Answered { cache, replica } => {
                self.answered += 1;
                *self.by_replica.entry(replica.clone()).or_default() += 1;
                match cache.as_str() {
                    "hit" => self.hits += 1,
                    "miss" => self.misses += 1,
                    other => panic!("x-clef-state-cache: {other}"),
                }
            }
            Outcome::Refused => self.refused += 1,
            Outcome::Lost(why) => self.lost.push(why.clone()),
        }
    }

    fn hit_rate(&self) -> f64 {
        self.hits as f64 / (self.hits + self.misses).max(1) as f64
    }
}

/// The follow-up workload: `states` states, each asked `rounds` question sets, round by round
/// (every state's first question, then every state's second, ...), by `clients` threads taking
/// requests in that order. A refused request is sent again after its `Retry-After`.
fn follow_up_workload(
    lb: SocketAddr,
    tag: &str,
    states: usize,
    rounds: usize,
    clients: usize,
    with_header: bool,
) -> Tally {
    let order: Vec<(usize, usize)> = (0..rounds)
        .flat_map(|q| (0..states).map(move |s| (s, q)))
        .collect();
    let next = AtomicUsize::new(0);
    let tally = Mutex::new(Tally::default());
    std::thread::scope(|scope| {
        for _ in 0..clients {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(&(s, q)) = order.get(i) else { return };
                let session = format!("{tag}-session-{s}");
                let body = body(&state(tag, s), q);
                loop {
                    let o = ask(lb, &body, with_header.then_some(session.as_str()));
                    tally.lock().unwrap().add(&o);
                    match o {
                        Outcome::Refused => std::thread::sleep(Duration::from_secs(1)),
                        _ => break,
                    }
                }
            });
        }
    });
    tally.into_inner().unwrap()
}

fn report(line: &str) {
    eprintln!("scale_out: {line}");
    if let Ok(path) = std::env::var("CLEF_SCALE_OUT_REPORT") {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("report file");
        writeln!(f, "{line}").expect("write report");
    }
}

/// A copy of tiny-a (symlinks) whose joint_head_config.json is a FIFO: the replica loading it
/// stays "not ready" until the test writes the real file into it.
#[cfg(unix)]
fn blocked_model() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(tiny_a()).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_owned();
        if name != "joint_head_config.json" {
            std::os::unix::fs::symlink(&p, dir.path().join(name)).unwrap();
        }
    }
    let made = Command::new("mkfifo")
        .arg(dir.path().join("joint_head_config.json"))
        .status()
        .unwrap();
    assert!(made.success());
    dir
}

fn number_at(json: &clef_api::Json, path: &[&str]) -> f64 {
    let mut at = json.clone();
    for key in path {
        at = match key.parse::<usize>() {
            Ok(i) => at.as_array().and_then(|a| a.get(i)).cloned(),
            Err(_) => at.as_object().and_then(|o| o.get(key)).cloned(),
        }
        .unwrap_or_else(|| panic!("{path:?} in {}", json.to_json_string()));
    }
    at.as_number().expect("a number").as_f64()
}

#[cfg(unix)]
#[test]
fn three_replicas_behind_haproxy() {
    let test = "scale_out::three_replicas_behind_haproxy";
    // Debian installs haproxy in /usr/sbin, which is not on every user's PATH.
    let mut path = std::env::var_os("PATH").unwrap_or_default();
    path.push(":/usr/sbin:/usr/local/sbin");
    let haproxy = match clef_testkit::tools::find_on_path("haproxy", &path) {
        Some(p) => p,
        None => match clef_testkit::tools::require(test, &["haproxy"]) {
            Some(found) => found[0].clone(),
            None => return,
        },
    };
    let t_start = Instant::now();
    // Not a multiple of 3: strict round robin (HAProxy's choice without the header) would
    // otherwise send every state to the same replica each round, an affinity by accident.
    let states = size("STATES", 13);
    let rounds = size("ROUNDS", 4);
    // One client: the order of the requests, and so HAProxy's round robin without the header,
    // is the same every run, and so are the hit rates (the long form runs several).
    let clients = size("CLIENTS", 1);
    let load_clients = size("LOAD_CLIENTS", 4);
    let load_secs = size("LOAD_SECS", 3) as u64;
    // Each replica's state cache holds its share of the states plus one (0.77 MB each on
    // tiny-a): what affinity needs, and the sizing docs/deploy.md recommends; far fewer than all
    // of them. Checked against the model's own figures below.
    // `CLEF_SCALE_OUT_CACHE_MIB` replaces this size (the long form also runs with a cache that
    // holds every state, the case most favourable to going without the header).
    let cache_states = states.div_ceil(3) + 1;
    let sized = std::env::var("CLEF_SCALE_OUT_CACHE_MIB").is_err();
    let cache_mib = size("CACHE_MIB", (cache_states * 807_000).div_ceil(1 << 20));
    let cache_mib = cache_mib.to_string();
    let args = vec![
        "--state-cache-mib",
        cache_mib.as_str(),
        "--retry-after",
        "1",
    ];
    let r1 = Server::with(Options {
        args: args.clone(),
        ..Default::default()
    });
    let r2 = Server::with(Options {
        args: args.clone(),
        ..Default::default()
    });
    let model3 = blocked_model();
    let r3 = Server::with(Options {
        model: model3.path().to_path_buf(),
        args: args.clone(),
        wait_ready: false,
        ..Default::default()
    });
    let mut r1 = r1;
    let lb = Haproxy::start(&haproxy, [r1.addr, r2.addr, r3.addr]);

    // The cache budget holds more than a replica's share and fewer than all the states.
    let models = r1.send(&Req::get("/v1/models")).json();
    let at = |k: &str| number_at(&models, &["data", "0", "clef", "state_cache", k]);
    let per_state = at("bytes_fixed") + 666.0 * at("bytes_per_token");
    let holds = (at("budget_bytes") / per_state).floor() as usize;
    assert!(
        !sized || (holds > states.div_ceil(3) && holds < states),
        "cache holds {holds} states of {states}"
    );

    // (c) The loading replica is marked down by its /readyz and receives no request.
    lb.wait_statuses(&[("r1", "UP"), ("r2", "UP"), ("r3", "DOWN")]);
    let mut before_ready = Tally::default();
    let mut served_by = std::collections::BTreeMap::<String, usize>::new();
    for s in 0..24 {
        let o = ask(lb.addr, &body(&state("c", s), 0), Some(&format!("c-{s}")));
        if let Outcome::Answered { replica, .. } = &o {
            *served_by.entry(replica.clone()).or_default() += 1;
        }
        before_ready.add(&o);
    }
    assert_eq!(before_ready.answered, 24, "{before_ready:?}");
    assert!(!served_by.contains_key("r3"), "{served_by:?}");
    let m3 = r3.metrics();
    assert_eq!(m3.value("clef_model_loaded"), 0.0);
    assert_eq!(m3.requests(SYSTEMONE, 200) + m3.requests(SYSTEMONE, 503), 0);
    report(&format!(
        "not ready: 24 requests while r3 loads, answered by {served_by:?}, none reached r3"
    ));
    // Once loaded it is marked up and takes its share of the sessions.
    let config = std::fs::read(tiny_a().join("joint_head_config.json")).unwrap();
    let mut writer = std::fs::OpenOptions::new()
        .write(true)
        .open(model3.path().join("joint_head_config.json"))
        .unwrap();
    writer.write_all(&config).unwrap();
    drop(writer);
    r3.wait_ready();
    lb.wait_statuses(&[("r1", "UP"), ("r2", "UP"), ("r3", "UP")]);
    let mut after_ready = std::collections::BTreeMap::<String, usize>::new();
    for s in 0..24 {
        match ask(lb.addr, &body(&state("c", s), 1), Some(&format!("c-{s}"))) {
            Outcome::Answered { replica, .. } => *after_ready.entry(replica).or_default() += 1,
            o => panic!("after r3 is ready: {o:?}"),
        }
    }
    assert!(
        after_ready.get("r3").copied().unwrap_or(0) > 0,
        "{after_ready:?}"
    );

    // (a) The follow-up workload, with the session header and without it.
    let with = follow_up_workload(lb.addr, "a", states, rounds, clients, true);
    let without = follow_up_workload(lb.addr, "b", states, rounds, clients, false);
    for (name, t) in [("with header", &with), ("without header", &without)] {
        assert!(t.lost.is_empty(), "{name}: {:?}", t.lost);
        assert_eq!(t.answered, states * rounds, "{name}: {t:?}");
        report(&format!(
            "follow-ups {name}: {states} states x {rounds} question sets, {clients} clients, \
             cache {cache_mib} MiB per replica ({holds} states): {} hits / {} answers = {:.1} %; \
             answers per replica {:?}",
            t.hits,
            t.answered,
            100.0 * t.hit_rate(),
            t.by_replica
        ));
    }
    // With affinity every follow-up can hit; without it each replica sees every state and its
    // cache, sized for a third of them, keeps evicting them before their next question.
    assert!(
        !sized || (with.hit_rate() >= 3.0 * without.hit_rate() && with.hit_rate() > 0.5),
        "hit rate with the header {:.3}, without {:.3}",
        with.hit_rate(),
        without.hit_rate()
    );
    report(&format!(
        "hit rate ratio with/without header: {}",
        if without.hits == 0 {
            "no hit without the header".to_owned()
        } else {
            format!("{:.1}x", with.hit_rate() / without.hit_rate())
        }
    ));

    // (b) SIGTERM to r1 under load. First a long request (about 5,000 tokens) that HAProxy
    // routes to r1, so that one is certainly in flight there when the signal arrives.
    let on_r1 = (0..states)
        .map(|s| format!("a-session-{s}"))
        .find(|session| {
            matches!(ask(lb.addr, &body(&state("a", 0), 9), Some(session)),
                Outcome::Answered { replica, .. } if replica == "r1")
        })
        .expect("a session that hashes to r1");
    let stop = AtomicBool::new(false);
    // Requests the load clients have begun to send.
    let started = AtomicUsize::new(0);
    let signalled = AtomicBool::new(false);
    let load = Mutex::new(Tally::default());
    let after_exit = Mutex::new(std::collections::BTreeMap::<String, usize>::new());
    let exited = AtomicBool::new(false);
    let (retries_before, redispatches_before) =
        (lb.backend_counter("wretr"), lb.backend_counter("wredis"));
    let t_load = Instant::now();
    let (in_flight, status) = std::thread::scope(|scope| {
        let long = scope.spawn(|| {
            let o = ask(lb.addr, &long_request(1000), Some(&on_r1));
            (o, signalled.load(Ordering::SeqCst))
        });
        // Only the long request is on r1 now (the workloads above are finished).
        r1.wait_metrics(Duration::from_secs(30), "the long request on r1", |m| {
            m.value("clef_inflight_requests") >= 1.0
        });
        for c in 0..load_clients {
            let (stop, load, after_exit, exited, started) =
                (&stop, &load, &after_exit, &exited, &started);
            scope.spawn(move || {
                let mut i = c;
                while !stop.load(Ordering::SeqCst) {
                    let s = i % states;
                    // Sent after r1 exited: it cannot be answered there.
                    let after = exited.load(Ordering::SeqCst);
                    started.fetch_add(1, Ordering::SeqCst);
                    let o = ask(
                        lb.addr,
                        &body(&state("a", s), rounds + i / states),
                        Some(&format!("a-session-{s}")),
                    );
                    if let (true, Outcome::Answered { replica, .. }) = (after, &o) {
                        *after_exit
                            .lock()
                            .unwrap()
                            .entry(replica.clone())
                            .or_default() += 1;
                    }
                    let refused = matches!(o, Outcome::Refused);
                    load.lock().unwrap().add(&o);
                    if refused {
                        std::thread::sleep(Duration::from_secs(1));
                    }
                    i += load_clients;
                }
            });
        }
        // SIGTERM once every load client has a request on its way (on every replica, r1
        // included, queued behind the long request there), and while the long request still
        // computes: a fixed wait would outlast it in a release build.
        let t_wait = Instant::now();
        while started.load(Ordering::SeqCst) < load_clients {
            assert!(
                t_wait.elapsed() < Duration::from_secs(10),
                "load clients did not start"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(20));
        signalled.store(true, Ordering::SeqCst);
        r1.signal("TERM");
        let status = r1.wait_exit(Duration::from_secs(120));
        exited.store(true, Ordering::SeqCst);
        // r1 is gone: HAProxy's next check marks it down; the load goes on for a while.
        let rest = Duration::from_secs(load_secs).saturating_sub(t_load.elapsed());
        std::thread::sleep(rest.max(Duration::from_secs(1)));
        stop.store(true, Ordering::SeqCst);
        (long.join().unwrap(), status)
    });
    let load = load.into_inner().unwrap();
    let after_exit = after_exit.into_inner().unwrap();
    assert!(status.success(), "r1 exit status {status:?}");
    match &in_flight {
        (Outcome::Answered { replica, .. }, true) => assert_eq!(replica, "r1"),
        other => panic!("the request in flight on r1 at SIGTERM: {other:?}"),
    }
    lb.wait_statuses(&[("r1", "DOWN"), ("r2", "UP"), ("r3", "UP")]);
    // What the balancer did for the clients: requests it sent again (a refused connection or
    // a 503 from the draining replica), and those it sent to another replica.
    let retries = lb.backend_counter("wretr") - retries_before;
    let redispatches = lb.backend_counter("wredis") - redispatches_before;
    report(&format!(
        "SIGTERM to r1 under load ({load_clients} clients, {:.1} s): sent {} = answered {} + \
         refused with Retry-After {} + lost {}; HAProxy retried {retries} and redispatched \
         {redispatches} of them; the request in flight on r1 answered by r1; answers after r1 \
         exited: {after_exit:?}",
        t_load.elapsed().as_secs_f64(),
        load.sent,
        load.answered,
        load.refused,
        load.lost.len()
    ));
    assert!(load.lost.is_empty(), "lost: {:?}", load.lost);
    assert_eq!(load.sent, load.answered + load.refused);
    assert!(
        !after_exit.contains_key("r1") && after_exit.values().sum::<usize>() > 0,
        "{after_exit:?}"
    );
    // Both remaining replicas serve after the takeover.
    let mut takeover = std::collections::BTreeMap::<String, usize>::new();
    for s in 0..states {
        match ask(
            lb.addr,
            &body(&state("a", s), 99),
            Some(&format!("a-session-{s}")),
        ) {
            Outcome::Answered { replica, .. } => *takeover.entry(replica).or_default() += 1,
            o => panic!("after the takeover: {o:?}"),
        }
    }
    assert_eq!(
        takeover.keys().collect::<Vec<_>>(),
        ["r2", "r3"],
        "{takeover:?}"
    );
    report(&format!(
        "after the takeover every session is answered by r2/r3: {takeover:?}; total {:.1} s",
        t_start.elapsed().as_secs_f64()
    ));
}
