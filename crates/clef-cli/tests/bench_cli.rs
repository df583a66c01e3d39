//! `clef bench` as the benchmark scripts run it: `--repeat` reports the fastest of several
//! timed runs and says how it was measured; a repeat of zero is a clear usage error.

mod cli_common;

use cli_common::{clef, fixtures, s, text};
use serde_json::Value;

#[test]
fn repeat_reports_how_the_figure_was_measured() {
    let nano = fixtures().join("models/nano");
    let o = clef(&[
        "bench",
        "--model",
        s(&nano),
        "--tokens",
        "64,96",
        "--json",
        "--warmup",
        "0",
        "--repeat",
        "3",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let lines: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "one line per length");
    for (v, n) in lines.iter().zip([64, 96]) {
        assert_eq!(v["tokens"], n);
        assert_eq!(v["repeat"], 3);
        assert_eq!(v["warmup"], 0);
        assert!(v["seconds"].as_f64().unwrap() > 0.0);
        assert!(v["peak_rss_bytes"].as_u64().unwrap() > 0);
    }
}

#[test]
fn a_repeat_of_zero_is_refused() {
    let nano = fixtures().join("models/nano");
    let o = clef(&[
        "bench",
        "--model",
        s(&nano),
        "--tokens",
        "16",
        "--repeat",
        "0",
    ]);
    assert!(!o.status.success());
    assert!(text(&o).contains("--repeat"), "{}", text(&o));
}
