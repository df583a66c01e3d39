//! Resident memory of this process, for `clef bench` and the server's metrics. Linux reads
//! /proc; elsewhere the figures are unavailable (None).

fn status_kib(key: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Current resident set size in bytes.
pub fn rss_bytes() -> Option<u64> {
    status_kib("VmRSS:").map(|k| k * 1024)
}

/// Peak resident set size in bytes since start or the last `reset_peak_rss`.
pub fn peak_rss_bytes() -> Option<u64> {
    status_kib("VmHWM:").map(|k| k * 1024)
}

/// Reset the peak to the current RSS, so a measurement covers one stage only.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// A byte count as people read memory figures: GiB with two decimals from 1 GiB up, whole MiB
/// below; "n/a" where the platform gives no figure.
pub fn fmt_bytes(b: Option<u64>) -> String {
    match b {
        Some(b) if b >= 1 << 30 => format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64),
        Some(b) => format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64),
        None => "n/a".into(),
    }
}
