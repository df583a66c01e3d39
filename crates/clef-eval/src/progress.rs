//! A progress bar with ETA for long runs, on stderr. indicatif hides it when stderr is not a
//! terminal, so logs and CI output stay clean.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// Progress over the records of a run.
#[derive(Debug, Clone)]
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar for `records` records.
    pub fn new(records: u64) -> Self {
        let bar = ProgressBar::new(records);
        // The template is a constant; if indicatif ever refused it, the default style is kept.
        if let Ok(style) = ProgressStyle::with_template(
            "{elapsed_precise} [{wide_bar}] {pos}/{len} records, {per_sec}, ETA {eta}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.enable_steady_tick(Duration::from_millis(500));
        Self { bar }
    }

    /// A bar that draws nothing (tests, `--quiet`).
    pub fn hidden(records: u64) -> Self {
        let bar = ProgressBar::hidden();
        bar.set_length(records);
        Self { bar }
    }

    /// One more record done.
    pub fn inc(&self) {
        self.bar.inc(1);
    }

    pub fn position(&self) -> u64 {
        self.bar.position()
    }

    /// Removes the bar from the terminal.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_records() {
        let progress = Progress::hidden(3);
        progress.inc();
        progress.inc();
        assert_eq!(progress.position(), 2);
        progress.finish();
    }
}
