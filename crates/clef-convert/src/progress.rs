//! Progress of a conversion over the bytes of the source tensors, with the stage, the tensor
//! being converted (its name carries the layer), the elapsed time and an ETA: a bar on a
//! terminal, plain lines every few seconds when stderr is a file or a pipe (a conversion of a
//! real model runs for hours, often under `nohup` or in CI logs), nothing for library callers
//! that ask for none (tests).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Seconds between two plain progress lines (a new stage prints at once).
const LINE_EVERY: Duration = Duration::from_secs(10);

/// Where progress goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressMode {
    Hidden,
    /// A redrawn bar (stderr is a terminal).
    Bar,
    /// A line per [`LINE_EVERY`] and per stage on stderr.
    Lines,
}

impl ProgressMode {
    /// A bar on a terminal, lines otherwise.
    pub fn for_stderr() -> ProgressMode {
        if std::io::stderr().is_terminal() {
            ProgressMode::Bar
        } else {
            ProgressMode::Lines
        }
    }
}

pub struct Progress {
    bar: ProgressBar,
    lines: Option<Mutex<Lines>>,
}

struct Lines {
    what: String,
    stage: String,
    total: u64,
    done: u64,
    started: Instant,
    last_line: Option<Instant>,
    out: Box<dyn Write + Send>,
}

impl Progress {
    /// Progress over `total_bytes` of source tensors; `show` false hides it, otherwise a bar or
    /// lines as [`ProgressMode::for_stderr`] says.
    pub fn new(total_bytes: u64, what: &str, show: bool) -> Progress {
        let mode = if show {
            ProgressMode::for_stderr()
        } else {
            ProgressMode::Hidden
        };
        Self::with_mode(total_bytes, what, mode, Box::new(std::io::stderr()))
    }

    /// As [`Progress::new`], with the mode and (for lines) the writer given.
    pub fn with_mode(
        total_bytes: u64,
        what: &str,
        mode: ProgressMode,
        out: Box<dyn Write + Send>,
    ) -> Progress {
        match mode {
            ProgressMode::Hidden => Progress {
                bar: ProgressBar::hidden(),
                lines: None,
            },
            ProgressMode::Bar => {
                let bar =
                    ProgressBar::with_draw_target(Some(total_bytes), ProgressDrawTarget::stderr());
                if let Ok(style) = ProgressStyle::with_template(
                    "{prefix} {msg} [{bar:30}] {bytes}/{total_bytes} {elapsed_precise} ETA {eta}",
                ) {
                    bar.set_style(style.progress_chars("=> "));
                }
                bar.set_prefix(what.to_string());
                Progress { bar, lines: None }
            }
            ProgressMode::Lines => Progress {
                bar: ProgressBar::hidden(),
                lines: Some(Mutex::new(Lines {
                    what: what.to_string(),
                    stage: String::new(),
                    total: total_bytes,
                    done: 0,
                    started: Instant::now(),
                    last_line: None,
                    out,
                })),
            },
        }
    }

    /// A progress that shows nothing.
    pub fn hidden() -> Progress {
        Self::with_mode(0, "", ProgressMode::Hidden, Box::new(std::io::sink()))
    }

    /// A new stage (e.g. "reading calibration records"): shown at once.
    pub fn stage(&self, stage: &str) {
        self.bar.set_prefix(stage.to_string());
        if let Some(lines) = &self.lines {
            let mut l = lines.lock().unwrap_or_else(|e| e.into_inner());
            l.stage = stage.to_string();
            l.line("");
        }
    }

    /// `bytes` more of the source converted, the last of them from `current`.
    pub fn advance(&self, bytes: u64, current: &str) {
        self.bar.set_message(current.to_string());
        self.bar.inc(bytes);
        if let Some(lines) = &self.lines {
            let mut l = lines.lock().unwrap_or_else(|e| e.into_inner());
            l.done = l.done.saturating_add(bytes).min(l.total);
            if l.last_line.is_none_or(|t| t.elapsed() >= LINE_EVERY) {
                l.line(current);
            }
        }
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
        if let Some(lines) = &self.lines {
            let mut l = lines.lock().unwrap_or_else(|e| e.into_inner());
            let secs = l.started.elapsed().as_secs_f64();
            let what = l.what.clone();
            // Progress is best effort: a closed stderr must not fail the conversion.
            let _ = writeln!(l.out, "{what}: done in {}", clock(secs));
        }
    }
}

impl Lines {
    fn line(&mut self, current: &str) {
        let secs = self.started.elapsed().as_secs_f64();
        let frac = if self.total == 0 {
            0.0
        } else {
            self.done as f64 / self.total as f64
        };
        // the rate so far, once there is one
        let eta = if frac > 0.0 && frac < 1.0 {
            format!(", ETA {}", clock(secs / frac * (1.0 - frac)))
        } else {
            String::new()
        };
        let stage = if self.stage.is_empty() {
            String::new()
        } else {
            format!(" [{}]", self.stage)
        };
        let current = if current.is_empty() {
            String::new()
        } else {
            format!(" {current}")
        };
        let _ = writeln!(
            self.out,
            "{}{stage}: {:.1}% of {:.2} GB{current}, {} elapsed{eta}",
            self.what,
            100.0 * frac,
            self.total as f64 / 1e9,
            clock(secs),
        );
        self.last_line = Some(Instant::now());
    }
}

/// `1h02m03s`, `4m05s` or `6s`.
fn clock(secs: f64) -> String {
    let s = secs.round() as u64;
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, min, sec) => format!("{min}m{sec:02}s"),
        (h, min, sec) => format!("{h}h{min:02}m{sec:02}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A writer the test reads back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_show_stage_share_tensor_and_finish() {
        let out = Shared::default();
        let p = Progress::with_mode(
            4_000_000_000,
            "ternary",
            ProgressMode::Lines,
            Box::new(out.clone()),
        );
        p.stage("quantizing");
        p.advance(1_000_000_000, "model.language_model.layers.0.mlp.up_proj");
        // within LINE_EVERY of the last line: no new line
        p.advance(1_000_000_000, "model.language_model.layers.1.mlp.up_proj");
        p.stage("tables");
        p.finish();
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(
            lines[0].starts_with("ternary [quantizing]: 0.0% of 4.00 GB, ")
                && lines[0].ends_with("elapsed"),
            "{text}"
        );
        assert!(
            lines[1].starts_with("ternary [tables]: 50.0% of 4.00 GB, "),
            "{text}"
        );
        assert!(lines[1].contains("ETA "), "{text}");
        assert!(lines[2].starts_with("ternary: done in "), "{text}");
    }

    #[test]
    fn hidden_and_clock() {
        let p = Progress::hidden();
        p.stage("x");
        p.advance(5, "y");
        p.finish();
        assert_eq!(clock(6.4), "6s");
        assert_eq!(clock(245.0), "4m05s");
        assert_eq!(clock(3723.0), "1h02m03s");
    }
}
