//! Cancellation of image and frame-list preparation: a predicate that turns true after N polls
//! ends the call with `MediaError::Cancelled` at that very poll (no further work is polled for),
//! for every N up to the number of polls an uncancelled run makes.

use std::io::Cursor;
use std::sync::atomic::{AtomicUsize, Ordering};

use clef_media::{
    prepare_image_with_cancel, prepare_video_frames_with_cancel, Cancel, MediaError, MediaLimits,
    ProcessorConfig,
};
use image::{ImageFormat, RgbImage};

/// Says stop from its `after`-th poll on (counting from 0), and counts the polls.
struct FlipAfter {
    after: usize,
    polls: AtomicUsize,
}

impl FlipAfter {
    fn new(after: usize) -> Self {
        FlipAfter {
            after,
            polls: AtomicUsize::new(0),
        }
    }
    fn check(&self) -> bool {
        self.polls.fetch_add(1, Ordering::SeqCst) >= self.after
    }
    fn polls(&self) -> usize {
        self.polls.load(Ordering::SeqCst)
    }
}

fn png(w: u32, h: u32, seed: u8) -> Vec<u8> {
    let img = RgbImage::from_fn(w, h, |x, y| {
        image::Rgb([(x * 3) as u8 ^ seed, (y * 5) as u8, (x + y) as u8])
    });
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, ImageFormat::Png).unwrap();
    out.into_inner()
}

/// Runs `call` uncancelled to count its polls, then cancelled at every poll index: each must
/// return `Cancelled` right at the poll that said stop.
fn cancel_at_every_poll(min_polls: usize, call: impl Fn(Cancel) -> Result<(), MediaError>) {
    let free = FlipAfter::new(usize::MAX);
    let check = || free.check();
    call(Cancel::new(&check)).expect("uncancelled run");
    let total = free.polls();
    assert!(total >= min_polls, "only {total} polls");
    for after in 0..total {
        let flip = FlipAfter::new(after);
        let check = || flip.check();
        match call(Cancel::new(&check)) {
            Err(MediaError::Cancelled) => {}
            Err(other) => panic!("cancelled at poll {after} of {total}: {other}"),
            Ok(()) => panic!("cancelled at poll {after} of {total}: went on"),
        }
        assert_eq!(flip.polls(), after + 1, "work went on after poll {after}");
    }
}

#[test]
fn image_preparation_stops_at_every_poll() {
    let cfg = ProcessorConfig::default();
    let limits = MediaLimits::default();
    // 1500x1000 is resized to 1248x832 (both passes) and patchified into 26 merge-block rows
    let bytes = png(1500, 1000, 0);
    // before + after decoding, 1000/32 + 832/32 resize polls, 26 patchify polls
    cancel_at_every_poll(2 + 32 + 26 + 26, |cancel| {
        prepare_image_with_cancel("image/png", &bytes, &cfg, &limits, cancel).map(|_| ())
    });
}

#[test]
fn frame_list_stops_between_and_inside_frames() {
    let cfg = ProcessorConfig::default();
    let limits = MediaLimits::default();
    let frames: Vec<Vec<u8>> = (0..5).map(|i| png(400, 300, i * 40)).collect();
    let items: Vec<(&str, &[u8])> = frames.iter().map(|f| ("image/png", f.as_slice())).collect();
    // one poll before each frame's decoding, resize rows, patchify rows
    cancel_at_every_poll(5 + 5 * 2, |cancel| {
        prepare_video_frames_with_cancel(&items, 24.0, &cfg, &limits, cancel).map(|_| ())
    });
}

#[test]
fn jpeg_decoding_stops_between_scans() {
    // 4000x4000 with 64 scans: the most the default limits allow at this size
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/media/progressive_64scans.jpg");
    let bytes = std::fs::read(path).unwrap();
    let cfg = ProcessorConfig::default();
    let limits = MediaLimits::default();
    let t0 = std::time::Instant::now();
    prepare_image_with_cancel("image/jpeg", &bytes, &cfg, &limits, Cancel::never())
        .expect("64 scans are accepted");
    let whole = t0.elapsed();
    // poll 0 is before decoding; the decode's watcher makes poll 1, which says stop: libjpeg
    // stops at its next scan
    let flip = FlipAfter::new(1);
    let check = || flip.check();
    let t0 = std::time::Instant::now();
    match prepare_image_with_cancel("image/jpeg", &bytes, &cfg, &limits, Cancel::new(&check)) {
        Err(MediaError::Cancelled) => {}
        Err(other) => panic!("expected Cancelled, got {other}"),
        Ok(_) => panic!("expected Cancelled, got an image"),
    }
    let cancelled = t0.elapsed();
    assert_eq!(
        flip.polls(),
        2,
        "the watcher stops polling once it said stop"
    );
    eprintln!("64-scan 4000x4000 JPEG: whole {whole:?}, cancelled {cancelled:?}");
    assert!(
        cancelled < whole / 4,
        "cancelled after {cancelled:?} of {whole:?}"
    );
}

#[test]
fn cancelled_is_not_a_refusal_of_the_media() {
    // the fallback status, for callers without a cancellation of their own
    assert_eq!(MediaError::Cancelled.status(), 408);
    let cfg = ProcessorConfig::default();
    let limits = MediaLimits::default();
    let bytes = png(64, 64, 1);
    let stop = || true;
    match prepare_image_with_cancel("image/png", &bytes, &cfg, &limits, Cancel::new(&stop)) {
        Err(MediaError::Cancelled) => {}
        Err(other) => panic!("expected Cancelled, got {other}"),
        Ok(_) => panic!("expected Cancelled, got an image"),
    }
}
