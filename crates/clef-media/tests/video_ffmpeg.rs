//! Video files through ffprobe/ffmpeg: real MP4 (H.264 with B-frames) and WebM (VP9) files are
//! made here from synthetic frames whose colour encodes their index, so both the chosen
//! presentation times and the decoded content of every chosen frame can be checked.
//! Tests that need ffmpeg and ffprobe fail under CI when either is absent and are recorded as
//! skipped outside it (`clef_testkit::tools`); `.ci/run` installs both.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use clef_media::{
    prepare_video_file, prepare_video_file_with, MediaError, MediaLimits, PreparedVideo,
    ProcessorConfig, VideoTools,
};

/// Whether `test` can run: both programs on `PATH`. Under CI their absence fails the test.
fn have_ffmpeg(test: &str) -> bool {
    clef_testkit::tools::require(test, &["ffmpeg", "ffprobe"]).is_some()
}

/// Level of channel 0 in frame `i` (distinct, far apart, away from clipping).
fn level(i: usize) -> u8 {
    (16 + (i * 7) % 224) as u8
}

/// Encodes `frames` solid frames (`w × h`) at `fps` with the given encoder arguments; `None`
/// (a recorded skip, or a failure under CI) when this ffmpeg lacks the encoder.
fn make_video(
    dir: &Path,
    name: &str,
    w: u32,
    h: u32,
    fps: u32,
    frames: usize,
    encode: &[&str],
) -> Option<Vec<u8>> {
    let out = dir.join(name);
    let size = format!("{w}x{h}");
    let rate = fps.to_string();
    let mut args = vec![
        "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", &size, "-r", &rate, "-i",
        "pipe:0",
    ];
    args.extend_from_slice(encode);
    let out_str = out.to_str().unwrap();
    args.push(out_str);
    let mut child = Command::new("ffmpeg")
        .args(&args)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        let mut stdin = child.stdin.take().unwrap();
        for i in 0..frames {
            let px = [level(i), 255 - level(i), 128];
            let frame: Vec<u8> = std::iter::repeat_n(px, (w * h) as usize)
                .flatten()
                .collect();
            if stdin.write_all(&frame).is_err() {
                break;
            }
        }
    }
    let output = child.wait_with_output().unwrap();
    if !output.status.success() {
        clef_testkit::tools::cannot_run(
            &format!("encoding {name}"),
            &format!(
                "this ffmpeg cannot encode it ({})",
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        );
        return None;
    }
    Some(std::fs::read(out).unwrap())
}

/// Channel-0 byte value of temporal slot `tt` of group `g`, from the first patch row.
fn group_level(v: &PreparedVideo, g: usize, tt: usize) -> f32 {
    let per_group = v.input.grid.h * v.input.grid.w;
    let row = &v.input.pixel_rows[g * per_group * v.input.row_len..];
    let x = row[tt * 256 + 8 * 16 + 8];
    (x * 0.5 + 0.5) * 255.0
}

/// Every chosen frame shows the content of the source frame at its reported time.
fn assert_content_matches_times(v: &PreparedVideo, fps: f64) {
    for (k, &t) in v.frame_seconds.iter().enumerate() {
        let index = (t * fps).round() as usize;
        let got = group_level(v, k / 2, k % 2);
        let want = level(index) as f32;
        assert!(
            (got - want).abs() <= 6.0,
            "frame {k} at {t} s: level {got}, source frame {index} has {want}"
        );
    }
}

fn seconds(v: &PreparedVideo) -> Vec<f64> {
    v.groups.iter().map(|g| g.seconds).collect()
}

fn close(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6)
}

#[test]
fn mp4_h264_sampled_two_per_second_by_pts() {
    if !have_ffmpeg("mp4_h264_sampled_two_per_second_by_pts") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(mp4) = make_video(
        dir.path(),
        "a.mp4",
        64,
        48,
        10,
        30,
        &[
            "-c:v", "libx264", "-pix_fmt", "yuv420p", "-bf", "2", "-g", "7",
        ],
    ) else {
        return;
    };
    let v = prepare_video_file(
        "video/mp4",
        &mp4,
        &ProcessorConfig::default(),
        &MediaLimits::default(),
    )
    .unwrap();
    // 3 s at 10 fps: frames at 0, 0.5, …, 2.5 s.
    assert!(
        close(&v.frame_seconds, &[0.0, 0.5, 1.0, 1.5, 2.0, 2.5]),
        "{:?}",
        v.frame_seconds
    );
    assert!(
        close(&seconds(&v), &[0.25, 1.25, 2.25]),
        "{:?}",
        seconds(&v)
    );
    assert_eq!(v.input.grid.t, 3);
    // 64x48 frames: the video rule rounds 48 up to 64 (factor 32).
    assert_eq!((v.input.grid.h, v.input.grid.w), (4, 4));
    assert_eq!(v.merged_tokens(), 12);
    assert_content_matches_times(&v, 10.0);
    let labels: Vec<String> = v
        .groups
        .iter()
        .map(|g| format!("{:.1}", g.seconds))
        .collect();
    assert_eq!(labels, ["0.2", "1.2", "2.2"]);
}

#[test]
fn webm_vp9_odd_frame_count_repeats_the_last() {
    if !have_ffmpeg("webm_vp9_odd_frame_count_repeats_the_last") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(webm) = make_video(
        dir.path(),
        "b.webm",
        64,
        64,
        12,
        30,
        &["-c:v", "libvpx-vp9", "-b:v", "400k", "-g", "10"],
    ) else {
        return;
    };
    let cfg = ProcessorConfig::default();
    let v = prepare_video_file("video/webm", &webm, &cfg, &MediaLimits::default()).unwrap();
    // last frame at 29/12 ≈ 2.417 s: targets 0 … 2.0 s, i.e. frames 0, 6, 12, 18, 24.
    assert!(
        close(&v.frame_seconds, &[0.0, 0.5, 1.0, 1.5, 2.0]),
        "{:?}",
        v.frame_seconds
    );
    assert!(close(&seconds(&v), &[0.25, 1.25, 2.0]), "{:?}", seconds(&v));
    assert_eq!(v.input.grid.t, 3);
    assert_content_matches_times(&v, 12.0);
    // the padded slot of the last group repeats frame 24
    assert!((group_level(&v, 2, 1) - level(24) as f32).abs() <= 6.0);
}

#[test]
fn long_video_spreads_64_frames_over_its_duration() {
    if !have_ffmpeg("long_video_spreads_64_frames_over_its_duration") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // 40 s at 4 fps: the 2-per-second grid would give 80 frames, so 64 are spread evenly.
    let Some(mp4) = make_video(
        dir.path(),
        "long.mp4",
        32,
        32,
        4,
        160,
        &["-c:v", "libx264", "-pix_fmt", "yuv420p"],
    ) else {
        return;
    };
    let v = prepare_video_file(
        "video/mp4",
        &mp4,
        &ProcessorConfig::default(),
        &MediaLimits::default(),
    )
    .unwrap();
    assert_eq!(v.frame_seconds.len(), 64);
    assert_eq!(v.input.grid.t, 32);
    let span = 159.0 / 4.0;
    for (k, t) in v.frame_seconds.iter().enumerate() {
        let target = span * k as f64 / 63.0;
        assert!(
            (t - target).abs() <= 0.125 + 1e-9,
            "frame {k}: {t} s, target {target}"
        );
    }
    assert_content_matches_times(&v, 4.0);
    // every frame within the 65,536-pixel cap
    assert!(v.input.grid.h * v.input.grid.w * 256 <= 65_536);
}

#[test]
fn frames_are_capped_at_65536_pixels() {
    if !have_ffmpeg("frames_are_capped_at_65536_pixels") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(mp4) = make_video(
        dir.path(),
        "big.mp4",
        640,
        480,
        2,
        3,
        &["-c:v", "libx264", "-pix_fmt", "yuv420p"],
    ) else {
        return;
    };
    let v = prepare_video_file(
        "video/mp4",
        &mp4,
        &ProcessorConfig::default(),
        &MediaLimits::default(),
    )
    .unwrap();
    let (h, w) = (v.input.grid.h * 16, v.input.grid.w * 16);
    assert!(h * w <= 65_536, "{h}x{w}");
    assert_eq!(
        (h, w),
        clef_media::smart_resize(480, 640, 32, 4096, 65_536).unwrap()
    );
    assert_eq!(v.groups[0].merged_tokens, h * w / 1024);
}

#[test]
fn display_rotation_is_applied_like_ffmpeg_autorotate() {
    if !have_ffmpeg("display_rotation_is_applied_like_ffmpeg_autorotate") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // A left-to-right gradient, then remuxed with a 90° display rotation (`-display_rotation`
    // on ffmpeg 6+, the `rotate` tag on older ones; only stream copy keeps it).
    let flat = dir.path().join("grad_flat.mp4");
    let status = Command::new("ffmpeg")
        .args([
            "-v",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            "color=c=black:s=64x32:r=2:d=1",
            "-vf",
            "geq=r='X*4':g='X*4':b='X*4'",
        ])
        .args(["-c:v", "libx264", "-pix_fmt", "yuv444p", "-qp", "0"])
        .arg(&flat)
        .status()
        .unwrap();
    assert!(status.success());
    let src = dir.path().join("grad.mp4");
    let tagged = |args: &[&str]| {
        Command::new("ffmpeg")
            .args(args)
            .arg(&src)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let flat_s = flat.to_str().unwrap();
    let _ = tagged(&[
        "-v",
        "error",
        "-y",
        "-display_rotation",
        "90",
        "-i",
        flat_s,
        "-c",
        "copy",
    ]) || tagged(&[
        "-v",
        "error",
        "-y",
        "-i",
        flat_s,
        "-c",
        "copy",
        "-metadata:s:v:0",
        "rotate=90",
    ]);
    let probe = Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-show_entries",
            "stream_side_data=rotation",
            "-of",
            "csv=p=0",
        ])
        .arg(&src)
        .output()
        .unwrap();
    if String::from_utf8_lossy(&probe.stdout).trim().is_empty() {
        clef_testkit::tools::cannot_run(
            "display_rotation_is_applied_like_ffmpeg_autorotate",
            "this ffmpeg could not tag a display rotation",
        );
        return;
    }
    let bytes = std::fs::read(&src).unwrap();
    let v = prepare_video_file(
        "video/mp4",
        &bytes,
        &ProcessorConfig::default(),
        &MediaLimits::default(),
    )
    .unwrap();
    // Shown 32 wide and 64 tall.
    assert_eq!((v.input.grid.h, v.input.grid.w), (4, 2));

    // ffmpeg's own autorotated first frame, for comparison.
    let auto = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(&src)
        .args([
            "-frames:v",
            "1",
            "-pix_fmt",
            "rgb24",
            "-f",
            "rawvideo",
            "pipe:1",
        ])
        .output()
        .unwrap();
    assert_eq!(auto.stdout.len(), 32 * 64 * 3);
    // Our frame 0 from the patch rows: patch (pr, pc) holds pixels y = 16·pr.., x = 16·pc...
    let grid = v.input.grid;
    let mut max_diff = 0f32;
    for y in 0..64usize {
        for x in 0..32usize {
            let (pr, pc) = (y / 16, x / 16);
            let (br, bc, ir, ic) = (pr / 2, pc / 2, pr % 2, pc % 2);
            let row = ((br * (grid.w / 2) + bc) * 4 + ir * 2 + ic) * v.input.row_len;
            let val = v.input.pixel_rows[row + (y % 16) * 16 + (x % 16)];
            let ours = (val * 0.5 + 0.5) * 255.0;
            let theirs = auto.stdout[(y * 32 + x) * 3] as f32;
            max_diff = max_diff.max((ours - theirs).abs());
        }
    }
    assert!(
        max_diff <= 1.0,
        "max diff against ffmpeg autorotate: {max_diff}"
    );
}

#[test]
fn bad_video_files_get_typed_errors() {
    if !have_ffmpeg("bad_video_files_get_typed_errors") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = ProcessorConfig::default();
    let limits = MediaLimits::default();
    let Some(mp4) = make_video(
        dir.path(),
        "ok.mp4",
        64,
        48,
        10,
        30,
        &["-c:v", "libx264", "-pix_fmt", "yuv420p"],
    ) else {
        return;
    };

    // Longer than the limit (3 s against 2 s).
    let short = MediaLimits {
        max_video_seconds: 2.0,
        ..limits.clone()
    };
    let err = prepare_video_file("video/mp4", &mp4, &cfg, &short).unwrap_err();
    assert!(matches!(err, MediaError::VideoTooLong { .. }), "{err}");
    assert_eq!((err.status(), err.code()), (422, 5012));

    // Too many pixels per frame (from the stream header).
    let tiny = MediaLimits {
        max_pixels_decoded: 1000,
        ..limits.clone()
    };
    assert!(matches!(
        prepare_video_file("video/mp4", &mp4, &cfg, &tiny),
        Err(MediaError::TooManyPixels { .. })
    ));

    // Over the byte limit.
    let small = MediaLimits {
        max_video_bytes: 100,
        ..limits.clone()
    };
    assert!(matches!(
        prepare_video_file("video/mp4", &mp4, &cfg, &small),
        Err(MediaError::TooManyBytes { .. })
    ));

    // Wrong content type for the bytes, and unsupported types.
    assert!(matches!(
        prepare_video_file("video/webm", &mp4, &cfg, &limits),
        Err(MediaError::ContentTypeMismatch { .. })
    ));
    assert!(matches!(
        prepare_video_file("video/x-msvideo", &mp4, &cfg, &limits),
        Err(MediaError::UnsupportedContentType(_))
    ));
    // MOV and MP4 are one family: a QuickTime type on MP4 bytes is accepted.
    assert!(prepare_video_file("video/quicktime", &mp4, &cfg, &limits).is_ok());

    // Corrupt: a valid start, then garbage; and bytes that are no container at all.
    let mut corrupt = mp4[..64.min(mp4.len())].to_vec();
    corrupt.extend(std::iter::repeat_n(0xA5u8, 4000));
    let err = prepare_video_file("video/mp4", &corrupt, &cfg, &limits).unwrap_err();
    assert!(
        matches!(
            err,
            MediaError::VideoDecode(_) | MediaError::UnsupportedCodec(_)
        ),
        "{err:?}"
    );
    assert_eq!(err.status(), 422);
    assert!(matches!(
        prepare_video_file("video/mp4", b"hello world, not a video", &cfg, &limits),
        Err(MediaError::VideoDecode(_))
    ));

    // Unsupported codec (Motion JPEG in a QuickTime file).
    // (Every ffmpeg build has the mjpeg and aac encoders; a missing one fails under CI.)
    if let Some(mov) = make_video(dir.path(), "m.mov", 64, 48, 10, 5, &["-c:v", "mjpeg"]) {
        let err = prepare_video_file("video/quicktime", &mov, &cfg, &limits).unwrap_err();
        assert!(matches!(err, MediaError::UnsupportedCodec(_)), "{err}");
        assert!(err.to_string().contains("mjpeg"));
    }

    // No video stream at all (audio only).
    let audio = dir.path().join("audio.mp4");
    let made = Command::new("ffmpeg")
        .args([
            "-v",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            "sine=frequency=440:duration=1",
            "-c:a",
            "aac",
        ])
        .arg(&audio)
        .status()
        .is_ok_and(|s| s.success());
    if made {
        let err = prepare_video_file("video/mp4", &std::fs::read(&audio).unwrap(), &cfg, &limits)
            .unwrap_err();
        assert!(matches!(err, MediaError::UnsupportedCodec(_)), "{err}");
    } else {
        clef_testkit::tools::cannot_run(
            "bad_video_files_get_typed_errors",
            "this ffmpeg could not make an audio-only MP4 (aac)",
        );
    }

    // Deadline: the child is killed and the request gets 408/3007.
    let hurry = MediaLimits {
        video_decode_timeout: Duration::from_millis(1),
        ..limits.clone()
    };
    let err = prepare_video_file("video/mp4", &mp4, &cfg, &hurry).unwrap_err();
    assert!(matches!(err, MediaError::Timeout { .. }), "{err}");
    assert_eq!((err.status(), err.code()), (408, 3007));
}

#[test]
fn missing_programs_are_named_in_a_500() {
    // Needs no ffmpeg: the programs are deliberately absent.
    for tools in [
        VideoTools {
            ffprobe: "clef-no-such-ffprobe".into(),
            ..VideoTools::default()
        },
        VideoTools {
            ffmpeg: "clef-no-such-ffmpeg".into(),
            ffprobe: "clef-no-such-ffmpeg".into(),
        },
    ] {
        let mp4 = [&[0, 0, 0, 0x18][..], b"ftypisom", &[0u8; 64]].concat();
        refused_as_missing(&tools, &mp4, "clef-no-such-");
    }
}

/// `tools` refuse `mp4` with the 500 that names the missing program (`missing`), both in
/// `check` and when asked to read the file.
fn refused_as_missing(tools: &VideoTools, mp4: &[u8], missing: &str) {
    let err = prepare_video_file_with(
        tools,
        "video/mp4",
        mp4,
        &ProcessorConfig::default(),
        &MediaLimits::default(),
    )
    .unwrap_err();
    assert!(matches!(err, MediaError::ToolMissing { .. }), "{err}");
    assert_eq!((err.status(), err.code()), (500, 5012));
    assert!(err.to_string().contains(missing), "{err}");
    let err = tools.check().unwrap_err();
    assert!(matches!(err, MediaError::ToolMissing { .. }), "{err}");
    assert!(err.to_string().contains(missing), "{err}");
}

#[test]
fn a_missing_ffmpeg_is_named_when_ffprobe_is_there() {
    // ffprobe reads the file first and succeeds on a real video; the absence of ffmpeg, which
    // decodes the frames, must still be what the request is told.
    let test = "a_missing_ffmpeg_is_named_when_ffprobe_is_there";
    let Some(found) = clef_testkit::tools::require(test, &["ffmpeg", "ffprobe"]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let Some(mp4) = make_video(
        dir.path(),
        "ok.mp4",
        64,
        48,
        10,
        10,
        &["-c:v", "libx264", "-pix_fmt", "yuv420p"],
    ) else {
        return;
    };
    let tools = VideoTools {
        ffmpeg: "clef-no-such-ffmpeg".into(),
        ffprobe: found[1].clone().into_os_string(),
    };
    refused_as_missing(&tools, &mp4, "clef-no-such-ffmpeg");
}

#[test]
fn damaged_mp4_files_are_refused_or_read_never_misread() {
    // Bytes flipped across the middle of a real H.264 MP4 (what once gave a frame time before
    // the first packet and a 500 from the encoder): each damaged file is either read, with
    // every time finite and non-negative, or refused with a 4xx.
    let test = "damaged_mp4_files_are_refused_or_read_never_misread";
    if !have_ffmpeg(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(mp4) = make_video(
        dir.path(),
        "d.mp4",
        64,
        48,
        10,
        30,
        &["-c:v", "libx264", "-pix_fmt", "yuv420p", "-bf", "2"],
    ) else {
        return;
    };
    let (cfg, limits) = (ProcessorConfig::default(), MediaLimits::default());
    let (mut read, mut refused) = (0, 0);
    for k in 1..24 {
        let mut damaged = mp4.clone();
        let at = damaged.len() * k / 24;
        let end = (at + 1 + k % 7).min(damaged.len());
        for b in &mut damaged[at..end] {
            *b ^= 0x5A;
        }
        match prepare_video_file("video/mp4", &damaged, &cfg, &limits) {
            Ok(v) => {
                let times = v.groups.iter().map(|g| g.seconds).chain(v.frame_seconds);
                for t in times {
                    assert!(t.is_finite() && t >= 0.0, "flip at {at}: time {t}");
                }
                read += 1;
            }
            Err(e) => {
                assert!((400..500).contains(&e.status()), "flip at {at}: {e}");
                refused += 1;
            }
        }
    }
    eprintln!("damaged MP4s: {read} read, {refused} refused");
}

#[test]
fn the_programs_are_found_once_with_their_versions() {
    // an explicit path is used as given, and named when it does not run
    let err = VideoTools::locate(Some(std::path::Path::new("/nonexistent/clef-ffmpeg")), None)
        .unwrap_err();
    assert!(
        err.to_string().contains("/nonexistent/clef-ffmpeg"),
        "{err}"
    );
    let test = "the_programs_are_found_once_with_their_versions";
    if clef_testkit::tools::require(test, &["ffmpeg", "ffprobe"]).is_none() {
        return;
    }
    let found = VideoTools::locate(None, None).unwrap();
    for (program, version, name) in [
        (&found.tools.ffmpeg, &found.ffmpeg_version, "ffmpeg"),
        (&found.tools.ffprobe, &found.ffprobe_version, "ffprobe"),
    ] {
        let path = std::path::Path::new(program);
        assert!(path.is_absolute(), "{path:?}");
        assert!(path.ends_with(name), "{path:?}");
        assert!(version.starts_with(&format!("{name} version")), "{version}");
    }
}
