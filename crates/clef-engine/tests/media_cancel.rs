//! The request's cancel predicate reaches media preparation and the vision tower: cancelled
//! at any of their polls, the engine returns `EngineError::Cancelled` at once (never a 4xx/5xx
//! of the media), and a many-scan JPEG is refused up front.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use clef_api::Limits;
use clef_engine::{DecideOptions, Engine, EngineConfig, EngineError};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

fn engine() -> Engine {
    Engine::load(
        &fixtures().join("models/tiny-a"),
        EngineConfig {
            limits: Limits::workers(),
            ..Default::default()
        },
    )
    .unwrap()
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn body(images: &[(&str, &[u8])]) -> String {
    let items: Vec<String> = images
        .iter()
        .map(|(ct, b)| format!(r#""data:{ct};base64,{}""#, b64(b)))
        .collect();
    format!(
        r#"{{"model":"clef","state":"Pictures.","images":[{}],"questions":{{"q":{{"type":"noul","instructions":"Is it?"}}}}}}"#,
        items.join(",")
    )
}

/// Says stop from its `after`-th poll on, counting every poll.
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

/// A 1000x700 photo-like PNG: resized, patchified and run through the tower.
fn big_png() -> Vec<u8> {
    let img = image::RgbImage::from_fn(1000, 700, |x, y| {
        image::Rgb([(x / 3) as u8, (y / 3) as u8, ((x + y) / 7) as u8])
    });
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png).unwrap();
    out.into_inner()
}

#[test]
fn media_and_vision_stop_at_every_poll() {
    let e = engine();
    let png = big_png();
    let small =
        std::fs::read(fixtures().join("golden/tiny-a/media/a22_gradient_64x64.png")).unwrap();
    let req = e
        .parse(body(&[("image/png", &png), ("image/png", &small)]).as_bytes())
        .unwrap();
    let polls_of = |f: &dyn Fn(&DecideOptions) -> Result<(), EngineError>| {
        let free = FlipAfter::new(usize::MAX);
        let check = || free.check();
        let opts = DecideOptions {
            cancelled: &check,
            ..Default::default()
        };
        f(&opts).expect("uncancelled run");
        free.polls()
    };
    let media_only = polls_of(&|o| e.prepare_layout(&req, o).map(|_| ()));
    let with_vision = polls_of(&|o| e.prepare(&req, o).map(|_| ()));
    // decode, resize rows, patchify rows of both images
    assert!(media_only >= 40, "media polled {media_only} times");
    // the tower polls before each of its blocks
    let tower = with_vision - media_only;
    eprintln!("polls: media {media_only}, vision tower {tower}");
    assert!(tower >= 2, "the vision tower polled {tower} times");
    for after in 0..with_vision {
        let flip = FlipAfter::new(after);
        let check = || flip.check();
        let opts = DecideOptions {
            cancelled: &check,
            ..Default::default()
        };
        match e.prepare(&req, &opts) {
            Err(EngineError::Cancelled) => {}
            Err(other) => panic!("cancelled at poll {after} of {with_vision}: {other:?}"),
            Ok(_) => panic!("cancelled at poll {after} of {with_vision}: answered"),
        }
        assert_eq!(flip.polls(), after + 1, "work went on after poll {after}");
    }
    // decide itself: a request cancelled in its media is Cancelled, not a refusal
    let stop = || true;
    let opts = DecideOptions {
        cancelled: &stop,
        ..Default::default()
    };
    assert!(matches!(e.decide(&req, &opts), Err(EngineError::Cancelled)));
}

#[test]
fn thousand_scan_jpeg_is_a_quick_422() {
    let e = engine();
    let jpeg = std::fs::read(fixtures().join("media/progressive_1000scans.jpg")).unwrap();
    let req = e.parse(body(&[("image/jpeg", &jpeg)]).as_bytes()).unwrap();
    let t0 = std::time::Instant::now();
    match e.decide(&req, &DecideOptions::default()) {
        Err(EngineError::Refused(err)) => {
            assert_eq!((err.status, err.code), (422, 5012), "{}", err.message);
            assert!(
                err.message.starts_with("images[0]: ") && err.message.contains("at most 64"),
                "{}",
                err.message
            );
        }
        other => panic!("expected a 422, got {other:?}"),
    }
    assert!(t0.elapsed().as_secs_f64() < 1.0, "took {:?}", t0.elapsed());
}
