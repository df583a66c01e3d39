//! JPEG pixels exactly as Pillow makes them.
//!
//! Pillow decodes JPEG with libjpeg-turbo (slow-integer IDCT, "fancy" triangular chroma
//! upsampling, its own YCbCr → RGB tables). zune-jpeg, the `image` crate's decoder, rounds its
//! IDCT and upsampling differently (up to 4 levels on a third of the samples, more in the last
//! column of odd-width subsampled images), which is enough to move a model's probabilities past
//! 1e-4. mozjpeg's decoder is libjpeg-turbo's, built from bundled C sources, so a YCbCr, RGB or
//! greyscale JPEG decodes to the same bytes as in the reference; CMYK/YCCK files get Pillow's
//! own CMYK → RGB arithmetic on libjpeg's CMYK output.

use std::cell::RefCell;
use std::os::raw::c_int;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use image::{DynamicImage, GrayImage, RgbImage};
use mozjpeg::ColorSpace;
use mozjpeg_sys as sys;

use crate::cancel::Cancel;
use crate::decode::check_pixels;
use crate::error::MediaError;
use crate::limits::MediaLimits;

/// Carried by the unwind out of libjpeg's callbacks back to [`decode`].
enum Failure {
    Message(String),
    Cancelled,
}

thread_local! {
    /// While this thread runs libjpeg for [`decode`]: the flag its watcher raises when the
    /// caller cancels. libjpeg's callbacks get no user data that the mozjpeg crate lets us set,
    /// and the caller's predicate is borrowed (not `'static`), so the predicate is polled by a
    /// scoped watcher thread and the callback only reads this flag.
    static STOP: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// How often the watcher polls the caller's predicate during a decode.
const WATCH_EVERY: Duration = Duration::from_millis(5);

fn stop_requested() -> bool {
    STOP.with(|s| {
        s.borrow()
            .as_ref()
            .is_some_and(|f| f.load(Ordering::Relaxed))
    })
}

fn message_code(cinfo: &sys::jpeg_common_struct) -> c_int {
    // SAFETY: libjpeg only calls the handlers with `err` pointing at the manager it was given,
    // which the `Decompress` owning `cinfo` keeps alive.
    unsafe { cinfo.err.as_ref() }.map_or(0, |e| e.msg_code)
}

/// libjpeg's fatal errors (corrupt markers, unsupported precision, ...).
extern "C-unwind" fn error_exit(cinfo: &mut sys::jpeg_common_struct) {
    let code = message_code(cinfo);
    resume_unwind(Box::new(Failure::Message(format!(
        "the JPEG data is corrupt or unsupported (libjpeg message {code})"
    ))));
}

/// Warnings and trace messages. An in-memory source that runs dry makes libjpeg insert a fake
/// end marker and grey out the rest; Pillow instead refuses a truncated file ("image file is
/// truncated"), so that one warning is an error here. Other warnings ("extraneous bytes before
/// marker", ...) are ignored, as Pillow ignores them.
///
/// libjpeg traces every start-of-scan marker it reads (level 1, whatever the trace level),
/// which for a progressive file is between two passes over the image: the point where a
/// cancelled decode stops.
extern "C-unwind" fn emit_message(cinfo: &mut sys::jpeg_common_struct, level: c_int) {
    let code = message_code(cinfo);
    if level < 0 && code == sys::JWRN_JPEG_EOF as c_int {
        resume_unwind(Box::new(Failure::Message(
            "the JPEG data ends before the image does (truncated file)".into(),
        )));
    }
    if level >= 0 && code == sys::JTRC_SOS as c_int && stop_requested() {
        resume_unwind(Box::new(Failure::Cancelled));
    }
}

fn error_manager() -> sys::jpeg_error_mgr {
    // SAFETY: jpeg_error_mgr is a plain C struct for which all-zero bytes are valid (null
    // pointers, `None` handlers); jpeg_std_error fills every field with libjpeg's defaults.
    let mut err: sys::jpeg_error_mgr = unsafe { std::mem::zeroed() };
    unsafe { sys::jpeg_std_error(&mut err) };
    err.error_exit = Some(error_exit);
    err.emit_message = Some(emit_message);
    err
}

/// Pillow reads every CMYK JPEG as `CMYK;I` (Adobe's inverted samples), then `convert("RGB")`
/// computes each channel as `nk - nk·c/255` with `nk = 255 - k`, in its rounded integer form
/// (libImaging/Convert.c `cmyk2rgb`, `MULDIV255`).
fn adobe_cmyk_to_rgb(stored: &[u8]) -> [u8; 3] {
    let muldiv255 = |a: u32, b: u32| {
        let t = a * b + 128;
        ((t >> 8) + t) >> 8
    };
    let [c, m, y, k] = [0, 1, 2, 3].map(|i| 255 - u32::from(stored[i]));
    let nk = 255 - k;
    [c, m, y].map(|v| (nk - muldiv255(v, nk)) as u8)
}

/// Decodes a JPEG the way Pillow's `Image.open(...).convert("RGB")` sees it: `Some(Rgb8)` for
/// YCbCr, RGB and CMYK/YCCK files, `Some(Luma8)` for greyscale ones, `None` for anything else
/// libjpeg can read (the caller's fallback). The pixel count is checked against `limits` from
/// the header libjpeg reads, before the pixel buffer is allocated. `cancel` is polled (by a
/// watcher thread) during the decode, which stops at the next scan once it says stop.
pub(crate) fn decode(
    bytes: &[u8],
    limits: &MediaLimits,
    cancel: Cancel,
) -> Result<Option<DynamicImage>, MediaError> {
    let run = || -> Result<Option<DynamicImage>, MediaError> {
        let io = |e: std::io::Error| MediaError::Decode(format!("JPEG: {e}"));
        let d = mozjpeg::Decompress::builder()
            .with_err(error_manager())
            .from_mem(bytes)
            .map_err(io)?;
        let (width, height) = (d.width(), d.height());
        check_pixels(
            u32::try_from(width).unwrap_or(u32::MAX),
            u32::try_from(height).unwrap_or(u32::MAX),
            limits,
        )?;
        let (w, h) = (width as u32, height as u32);
        let bad_size = || MediaError::Decode("JPEG: fewer scanlines than the header says".into());
        // the colour space libjpeg converts to: what Pillow's mode for the file holds
        let out = match d.color_space() {
            ColorSpace::JCS_GRAYSCALE => ColorSpace::JCS_GRAYSCALE,
            ColorSpace::JCS_YCbCr | ColorSpace::JCS_RGB => ColorSpace::JCS_RGB,
            ColorSpace::JCS_CMYK | ColorSpace::JCS_YCCK => ColorSpace::JCS_CMYK,
            _ => return Ok(None),
        };
        let mut started = d.to_colorspace(out).map_err(io)?;
        let pixels: Vec<u8> = started.read_scanlines().map_err(io)?;
        started.finish().map_err(io)?;
        let image = match out {
            ColorSpace::JCS_GRAYSCALE => {
                GrayImage::from_raw(w, h, pixels).map(DynamicImage::ImageLuma8)
            }
            ColorSpace::JCS_CMYK => {
                let rgb: Vec<u8> = pixels.chunks_exact(4).flat_map(adobe_cmyk_to_rgb).collect();
                RgbImage::from_raw(w, h, rgb).map(DynamicImage::ImageRgb8)
            }
            _ => RgbImage::from_raw(w, h, pixels).map(DynamicImage::ImageRgb8),
        };
        image.map(Some).ok_or_else(bad_size)
    };
    let stop = Arc::new(AtomicBool::new(false));
    let outcome = std::thread::scope(|scope| {
        let (finished, done) = channel::<()>();
        let flag = Arc::clone(&stop);
        scope.spawn(move || watch(cancel, &flag, done));
        STOP.with(|s| *s.borrow_mut() = Some(Arc::clone(&stop)));
        let outcome = catch_unwind(AssertUnwindSafe(run));
        STOP.with(|s| s.borrow_mut().take());
        // ends the watcher
        drop(finished);
        outcome
    });
    match outcome {
        Ok(result) => result,
        Err(payload) => Err(match payload.downcast::<Failure>().map(|f| *f) {
            Ok(Failure::Message(message)) => MediaError::Decode(message),
            Ok(Failure::Cancelled) => MediaError::Cancelled,
            Err(_) => MediaError::Decode("the JPEG decoder failed".into()),
        }),
    }
}

/// Polls `cancel` every [`WATCH_EVERY`] until it says stop (then raises `stop`) or the decode
/// ends (`done` disconnects).
fn watch(cancel: Cancel, stop: &AtomicBool, done: Receiver<()>) {
    while !cancel.is_cancelled() {
        match done.recv_timeout(WATCH_EVERY) {
            Err(RecvTimeoutError::Timeout) => {}
            _ => return,
        }
    }
    stop.store(true, Ordering::Relaxed);
}
