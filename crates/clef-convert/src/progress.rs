//! Progress of a conversion over the bytes of the source tensors, with an ETA; hidden when
//! stderr is not a terminal (CI, tests).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct Progress(ProgressBar);

impl Progress {
    pub fn new(total_bytes: u64, what: &str) -> Progress {
        let bar = ProgressBar::with_draw_target(Some(total_bytes), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template(
            "{msg} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(what.to_string());
        Progress(bar)
    }

    pub fn hidden() -> Progress {
        Progress(ProgressBar::hidden())
    }

    pub fn advance(&self, bytes: u64, current: &str) {
        self.0.set_message(current.to_string());
        self.0.inc(bytes);
    }

    pub fn finish(&self) {
        self.0.finish_and_clear();
    }
}
