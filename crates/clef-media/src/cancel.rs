//! The caller's "stop now" predicate, polled between and inside the long steps of media
//! preparation (decoding, resizing, patchify, a running ffmpeg/ffprobe).
//!
//! The engine hands media preparation the same predicate its prefill polls (client gone,
//! deadline passed, shutdown). A poll that says stop ends the step with
//! [`MediaError::Cancelled`], which the engine reports as its own `Cancelled`: the request was
//! abandoned, not refused, so it never becomes a 4xx/5xx of its own.

use crate::error::MediaError;

/// A borrowed cancellation predicate. `Copy`, so every stage can take it by value; `Sync`,
/// because a video's frames are resized on the thread that reads ffmpeg's output.
#[derive(Clone, Copy)]
pub struct Cancel<'a> {
    check: &'a (dyn Fn() -> bool + Sync),
}

impl<'a> Cancel<'a> {
    /// Polls `check`; `true` means stop.
    pub fn new(check: &'a (dyn Fn() -> bool + Sync)) -> Self {
        Cancel { check }
    }

    /// Never cancelled: what the functions without a `Cancel` argument use.
    pub fn never() -> Cancel<'static> {
        Cancel { check: &|| false }
    }

    pub fn is_cancelled(&self) -> bool {
        (self.check)()
    }

    /// `Err(MediaError::Cancelled)` once the predicate says stop.
    pub fn check(&self) -> Result<(), MediaError> {
        if self.is_cancelled() {
            Err(MediaError::Cancelled)
        } else {
            Ok(())
        }
    }
}

impl std::fmt::Debug for Cancel<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cancel")
    }
}

impl Default for Cancel<'static> {
    fn default() -> Self {
        Cancel::never()
    }
}
