//! Media through the whole engine: real video files made with ffmpeg are sampled, placed in
//! the prompt with their timestamps and answered; bad media gets its error code, never a
//! panic.

use clef_api::{ApiError, Limits};
use clef_engine::{DecideOptions, Engine, EngineConfig};
use std::path::PathBuf;
use std::process::Command;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

fn engine() -> Engine {
    // Golden suites run once per instruction set (.ci/run): fail unless CLEF_ISA took effect.
    clef_testkit::isa::under_test();
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

fn request(media: &str) -> String {
    format!(
        r#"{{"model":"clef","state":"A short clip.",{media},"questions":{{"moving":{{"type":"noul","instructions":"Does something move?"}}}}}}"#
    )
}

fn decide(e: &Engine, body: &str) -> Result<clef_engine::Decision, ApiError> {
    let req = e.parse(body.as_bytes())?;
    // media problems are refusals (with their status and code), never internal failures
    e.decide(&req, &DecideOptions::default())
        .map_err(|e| match e {
            clef_engine::EngineError::Refused(a) => a,
            other => panic!("not a refusal: {other:?}"),
        })
}

/// A 3-second 64×64 clip at 10 fps whose brightness changes every frame.
fn make_video(dir: &std::path::Path, ext: &str, codec: &[&str]) -> Option<Vec<u8>> {
    // The engine runs ffprobe and ffmpeg on the file; under CI their absence fails the test.
    clef_testkit::tools::require(
        "mp4_and_webm_files_are_sampled_and_answered",
        &["ffmpeg", "ffprobe"],
    )?;
    let out = dir.join(format!("clip.{ext}"));
    let status = Command::new("ffmpeg")
        .args([
            "-loglevel",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            "testsrc=size=64x64:rate=10:duration=3",
        ])
        .args(codec)
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    Some(std::fs::read(out).unwrap())
}

#[test]
fn mp4_and_webm_files_are_sampled_and_answered() {
    let e = engine();
    let dir = tempfile::tempdir().unwrap();
    for (ext, mime, codec) in [
        (
            "mp4",
            "video/mp4",
            &["-c:v", "libx264", "-pix_fmt", "yuv420p"][..],
        ),
        (
            "webm",
            "video/webm",
            &["-c:v", "libvpx-vp9", "-b:v", "200k"][..],
        ),
    ] {
        let Some(bytes) = make_video(dir.path(), ext, codec) else {
            return;
        };
        let body = request(&format!(
            r#""videos":["data:{mime};base64,{}"]"#,
            b64(&bytes)
        ));
        let d = decide(&e, &body).unwrap_or_else(|err| panic!("{ext}: {err}"));
        // About 2 frames per second over 3 s: frames at 0, 0.5, …, 2.5 s, paired into groups
        // whose timestamps are the pairs' means.
        let media_piece = &d.encoded.pieces[1];
        for ts in ["<0.2 seconds>", "<1.2 seconds>", "<2.2 seconds>"] {
            assert!(
                media_piece.contains(ts),
                "{ext}: {ts} missing from {media_piece:?}"
            );
        }
        assert_eq!(d.encoded.media_slots.len(), 3, "{ext}: three frame pairs");
        let p = &d.probabilities[0];
        assert!(p.iter().all(|v| v.is_finite()) && (p.iter().sum::<f32>() - 1.0).abs() < 1e-5);
    }
}

#[test]
fn bad_media_gets_its_error_code() {
    let e = engine();
    let png = std::fs::read(fixtures().join("golden/tiny-a/media/a22_gradient_64x64.png")).unwrap();
    let cases: Vec<(String, u16, u32)> = vec![
        // Corrupt bytes.
        (
            format!(
                r#""images":["data:image/png;base64,{}"]"#,
                b64(&png[..png.len() / 2])
            ),
            422,
            5012,
        ),
        // A PNG declared as JPEG.
        (
            format!(r#""images":["data:image/jpeg;base64,{}"]"#, b64(&png)),
            422,
            5012,
        ),
        // A remote URL.
        (
            r#""images":["https://example.com/cat.png"]"#.to_string(),
            422,
            5012,
        ),
        // Five images.
        (
            format!(
                r#""images":[{}]"#,
                vec![format!(r#""data:image/png;base64,{}""#, b64(&png)); 5].join(",")
            ),
            422,
            5012,
        ),
        // A video file that is not a video.
        (
            format!(
                r#""videos":["data:video/mp4;base64,{}"]"#,
                b64(b"not a video at all")
            ),
            422,
            5012,
        ),
    ];
    for (media, status, code) in cases {
        let err = decide(&e, &request(&media))
            .err()
            .unwrap_or_else(|| panic!("accepted: {}", &media[..60.min(media.len())]));
        assert_eq!(
            (err.status, err.code),
            (status, code),
            "{}: {}",
            &media[..40.min(media.len())],
            err.message
        );
    }
}

#[test]
fn decompression_bomb_is_refused_before_decoding() {
    // A valid PNG header declaring 100,000 × 100,000 pixels with almost no data.
    let mut png = vec![0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];
    let mut ihdr = b"IHDR".to_vec();
    ihdr.extend_from_slice(&100_000u32.to_be_bytes());
    ihdr.extend_from_slice(&100_000u32.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    png.extend_from_slice(&13u32.to_be_bytes());
    png.extend_from_slice(&ihdr);
    png.extend_from_slice(&crc32(&ihdr).to_be_bytes());
    let err = decide(
        &engine(),
        &request(&format!(
            r#""images":["data:image/png;base64,{}"]"#,
            b64(&png)
        )),
    )
    .err()
    .unwrap();
    assert_eq!((err.status, err.code), (422, 5012), "{}", err.message);
}

fn crc32(data: &[u8]) -> u32 {
    let mut c = 0xffff_ffffu32;
    for &b in data {
        c ^= b as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
    }
    !c
}
