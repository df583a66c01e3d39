//! Counters, gauges and histograms in the Prometheus text format (version 0.0.4), written by
//! hand: a few atomics and two small histograms do not need a metrics framework.

use crate::admission::Admission;
use crate::body_budget::BodyBudget;
use crate::connections::Connections;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Prefill upper bounds in seconds: milliseconds for the tiny test models up to minutes for
/// a 16k-token prompt on the 27B model on a CPU.
pub const PREFILL_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];

/// Why the engine stopped a request before its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CancelReason {
    Deadline,
    ClientGone,
}

impl CancelReason {
    pub fn as_str(self) -> &'static str {
        match self {
            CancelReason::Deadline => "deadline",
            CancelReason::ClientGone => "client_gone",
        }
    }
}

/// Why the server closed a connection that had no request in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClosedBy {
    /// No complete request head within `--header-timeout` (a silent, slow or idle client).
    HeaderTimeout,
}

pub struct Histogram {
    bounds: &'static [f64],
    inner: Mutex<HistogramInner>,
}

#[derive(Default)]
struct HistogramInner {
    /// Per bucket (not cumulative), plus one for +Inf.
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            inner: Mutex::new(HistogramInner {
                counts: vec![0; bounds.len() + 1],
                ..Default::default()
            }),
        }
    }

    pub fn observe(&self, v: f64) {
        if !v.is_finite() {
            return;
        }
        let i = self.bounds.partition_point(|&b| b < v);
        let mut h = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        h.counts[i] += 1;
        h.sum += v;
        h.count += 1;
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let h = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} histogram");
        let mut cumulative = 0u64;
        for (bound, n) in self.bounds.iter().zip(&h.counts) {
            cumulative += n;
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", h.count);
        let _ = writeln!(out, "{name}_sum {}", h.sum);
        let _ = writeln!(out, "{name}_count {}", h.count);
    }
}

pub struct Metrics {
    /// (route template, status) → responses.
    requests: Mutex<BTreeMap<(String, u16), u64>>,
    decisions: AtomicU64,
    input_tokens: AtomicU64,
    truncated_state_tokens: AtomicU64,
    cancelled_deadline: AtomicU64,
    cancelled_client_gone: AtomicU64,
    closed_header_timeout: AtomicU64,
    prefill: Histogram,
    decision_duration: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            requests: Mutex::new(BTreeMap::new()),
            decisions: AtomicU64::new(0),
            input_tokens: AtomicU64::new(0),
            truncated_state_tokens: AtomicU64::new(0),
            cancelled_deadline: AtomicU64::new(0),
            cancelled_client_gone: AtomicU64::new(0),
            closed_header_timeout: AtomicU64::new(0),
            prefill: Histogram::new(PREFILL_BUCKETS),
            decision_duration: Histogram::new(PREFILL_BUCKETS),
        }
    }
}

/// What the exposition shows besides the counters kept here.
pub struct Gauges<'a> {
    pub admission: &'a Admission,
    pub connections: &'a Connections,
    pub body_budget: &'a BodyBudget,
    pub model_loaded: bool,
    pub draining: bool,
    pub resident_bytes: Option<u64>,
    /// The loaded engine's state cache.
    pub state_cache: Option<clef_engine::StateCacheStats>,
}

impl Metrics {
    /// One response, by route template (`unmatched` for unknown paths) and status.
    pub fn count_response(&self, route: &str, status: u16) {
        let mut map = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        *map.entry((route.to_owned(), status)).or_insert(0) += 1;
    }

    /// One answered decision: its prompt length, dropped state tokens and forward time.
    pub fn record_decision(&self, input_tokens: usize, dropped: usize, forward_s: f64) {
        self.decisions.fetch_add(1, Ordering::Relaxed);
        self.input_tokens
            .fetch_add(input_tokens as u64, Ordering::Relaxed);
        self.truncated_state_tokens
            .fetch_add(dropped as u64, Ordering::Relaxed);
        self.prefill.observe(forward_s);
    }

    /// Wall time of a decision request from arrival to response, whatever its outcome.
    pub fn record_decision_duration(&self, seconds: f64) {
        self.decision_duration.observe(seconds);
    }

    pub fn record_cancel(&self, reason: CancelReason) {
        match reason {
            CancelReason::Deadline => &self.cancelled_deadline,
            CancelReason::ClientGone => &self.cancelled_client_gone,
        }
        .fetch_add(1, Ordering::Relaxed);
    }

    pub fn count_closed(&self, by: ClosedBy) {
        match by {
            ClosedBy::HeaderTimeout => &self.closed_header_timeout,
        }
        .fetch_add(1, Ordering::Relaxed);
    }

    pub fn render(&self, g: &Gauges) -> String {
        let mut out = String::with_capacity(4096);
        out.push_str("# HELP clef_requests_total HTTP responses by route template and status.\n");
        out.push_str("# TYPE clef_requests_total counter\n");
        {
            let map = self.requests.lock().unwrap_or_else(|e| e.into_inner());
            for ((route, status), n) in map.iter() {
                let _ = writeln!(
                    out,
                    "clef_requests_total{{route=\"{}\",status=\"{status}\"}} {n}",
                    escape_label(route)
                );
            }
        }
        let gauge = |out: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} gauge");
            let _ = writeln!(out, "{name} {v}");
        };
        let counter = |out: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} counter");
            let _ = writeln!(out, "{name} {v}");
        };
        gauge(
            &mut out,
            "clef_queue_depth",
            "Admitted requests waiting for a computing slot.",
            g.admission.waiting() as u64,
        );
        gauge(
            &mut out,
            "clef_inflight_requests",
            "Requests computing now.",
            g.admission.running() as u64,
        );
        gauge(
            &mut out,
            "clef_queue_capacity",
            "Most requests admitted at once (concurrency plus queue depth).",
            g.admission.capacity() as u64,
        );
        gauge(
            &mut out,
            "clef_concurrency",
            "Requests that may compute at the same time.",
            g.admission.concurrency() as u64,
        );
        gauge(
            &mut out,
            "clef_open_connections",
            "Connections open now.",
            g.connections.open_count() as u64,
        );
        gauge(
            &mut out,
            "clef_max_connections",
            "Most connections open at once (--max-connections).",
            g.connections.max() as u64,
        );
        out.push_str(
            "# HELP clef_connections_closed_total Connections the server closed outside a request.\n",
        );
        out.push_str("# TYPE clef_connections_closed_total counter\n");
        for (reason, v) in [
            (
                "header_timeout",
                self.closed_header_timeout.load(Ordering::Relaxed),
            ),
            ("room_for_new_client", g.connections.evicted_total()),
        ] {
            let _ = writeln!(
                out,
                "clef_connections_closed_total{{reason=\"{reason}\"}} {v}"
            );
        }
        gauge(
            &mut out,
            "clef_body_bytes_reserved",
            "Bytes reserved by request bodies being read.",
            g.body_budget.reserved() as u64,
        );
        gauge(
            &mut out,
            "clef_body_budget_bytes",
            "Most bytes of request bodies read at once (--body-budget-mib).",
            g.body_budget.total() as u64,
        );
        gauge(
            &mut out,
            "clef_model_loaded",
            "1 once the model is loaded.",
            g.model_loaded as u64,
        );
        gauge(
            &mut out,
            "clef_draining",
            "1 while shutting down (finishing in-flight requests, refusing new ones).",
            g.draining as u64,
        );
        if let Some(rss) = g.resident_bytes {
            gauge(
                &mut out,
                "clef_resident_memory_bytes",
                "Resident set size of the server process.",
                rss,
            );
        }
        if let Some(c) = &g.state_cache {
            counter(
                &mut out,
                "clef_state_cache_hits_total",
                "Requests that started from a kept state.",
                c.hits,
            );
            counter(
                &mut out,
                "clef_state_cache_misses_total",
                "Requests that looked up their state, did not find it and computed it.",
                c.misses,
            );
            counter(
                &mut out,
                "clef_state_cache_evictions_total",
                "Kept states dropped to stay within the budget.",
                c.evictions,
            );
            gauge(
                &mut out,
                "clef_state_cache_bytes",
                "Bytes of kept states.",
                c.bytes as u64,
            );
            gauge(
                &mut out,
                "clef_state_cache_entries",
                "Kept states.",
                c.entries as u64,
            );
            gauge(
                &mut out,
                "clef_state_cache_budget_bytes",
                "Most bytes of kept states (--state-cache-mib; 0: off).",
                c.budget_bytes as u64,
            );
        }
        counter(
            &mut out,
            "clef_decisions_total",
            "Requests answered by the engine.",
            self.decisions.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "clef_input_tokens_total",
            "Prompt tokens processed by answered requests.",
            self.input_tokens.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "clef_truncated_state_tokens_total",
            "State tokens dropped by requested truncation.",
            self.truncated_state_tokens.load(Ordering::Relaxed),
        );
        out.push_str(
            "# HELP clef_cancelled_total Requests the engine stopped at a chunk boundary.\n",
        );
        out.push_str("# TYPE clef_cancelled_total counter\n");
        for (reason, v) in [
            (CancelReason::Deadline, &self.cancelled_deadline),
            (CancelReason::ClientGone, &self.cancelled_client_gone),
        ] {
            let _ = writeln!(
                out,
                "clef_cancelled_total{{reason=\"{}\"}} {}",
                reason.as_str(),
                v.load(Ordering::Relaxed)
            );
        }
        self.prefill.render(
            &mut out,
            "clef_prefill_seconds",
            "Model forward time per answered request (vision tower, backbone, head).",
        );
        self.decision_duration.render(
            &mut out,
            "clef_decision_request_seconds",
            "Wall time of decision requests from arrival to response, queueing included.",
        );
        out
    }
}

/// Label values escape backslash, double quote and newline.
fn escape_label(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(m: &Metrics) -> String {
        let a = Admission::new(1, 2);
        let c = Connections::new(8);
        let b = BodyBudget::new(1000);
        m.render(&Gauges {
            admission: &a,
            connections: &c,
            body_budget: &b,
            model_loaded: true,
            draining: false,
            resident_bytes: Some(42),
            state_cache: Some(clef_engine::StateCacheStats::default()),
        })
    }

    #[test]
    fn counters_and_gauges() {
        let m = Metrics::default();
        m.count_response("/v1/systemone", 200);
        m.count_response("/v1/systemone", 200);
        m.count_response("/v1/systemone", 422);
        m.count_response("a\"b", 404);
        m.record_decision(300, 5, 0.03);
        m.record_cancel(CancelReason::ClientGone);
        let text = render(&m);
        assert!(text.contains("clef_requests_total{route=\"/v1/systemone\",status=\"200\"} 2\n"));
        assert!(text.contains("clef_requests_total{route=\"/v1/systemone\",status=\"422\"} 1\n"));
        assert!(text.contains("clef_requests_total{route=\"a\\\"b\",status=\"404\"} 1\n"));
        assert!(text.contains("clef_input_tokens_total 300\n"));
        assert!(text.contains("clef_truncated_state_tokens_total 5\n"));
        assert!(text.contains("clef_cancelled_total{reason=\"client_gone\"} 1\n"));
        assert!(text.contains("clef_cancelled_total{reason=\"deadline\"} 0\n"));
        assert!(text.contains("clef_queue_capacity 3\n"));
        assert!(text.contains("clef_resident_memory_bytes 42\n"));
        assert!(text.contains("clef_model_loaded 1\n"));
        assert!(text.contains("clef_max_connections 8\n"));
        assert!(text.contains("clef_body_budget_bytes 1000\n"));
        m.count_closed(ClosedBy::HeaderTimeout);
        let text = render(&m);
        assert!(text.contains("clef_connections_closed_total{reason=\"header_timeout\"} 1\n"));
        assert!(text.contains("clef_connections_closed_total{reason=\"room_for_new_client\"} 0\n"));
    }

    #[test]
    fn histogram_buckets_are_cumulative() {
        let m = Metrics::default();
        for v in [0.004, 0.005, 0.02, 700.0, f64::NAN] {
            m.record_decision(1, 0, v);
        }
        let text = render(&m);
        // `le` is inclusive: 0.005 lands in the first bucket.
        assert!(text.contains("clef_prefill_seconds_bucket{le=\"0.005\"} 2\n"));
        assert!(text.contains("clef_prefill_seconds_bucket{le=\"0.01\"} 2\n"));
        assert!(text.contains("clef_prefill_seconds_bucket{le=\"0.025\"} 3\n"));
        assert!(text.contains("clef_prefill_seconds_bucket{le=\"600\"} 3\n"));
        assert!(text.contains("clef_prefill_seconds_bucket{le=\"+Inf\"} 4\n"));
        assert!(text.contains("clef_prefill_seconds_count 4\n"));
        // NaN is not observed, but the decision still counts.
        assert!(text.contains("clef_decisions_total 5\n"));
    }

    #[test]
    fn every_sample_line_is_well_formed() {
        let m = Metrics::default();
        m.count_response("/healthz", 200);
        m.record_decision(10, 0, 0.1);
        for line in render(&m).lines() {
            if line.starts_with('#') {
                assert!(
                    line.starts_with("# HELP ") || line.starts_with("# TYPE "),
                    "{line}"
                );
                continue;
            }
            let (_, value) = line.rsplit_once(' ').unwrap();
            assert!(value.parse::<f64>().is_ok(), "{line}");
        }
    }
}
