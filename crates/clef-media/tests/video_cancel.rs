//! A cancelled video file stops its running ffprobe/ffmpeg: the child is killed and reaped (no
//! process, no zombie, is left under its pid) and the call returns `Cancelled` promptly. The
//! decoding work is bounded before ffmpeg starts.
//!
//! The programs are wrapped in shell scripts that record their pid (`exec`, so the pid is the
//! program's own). Every process-spawning step runs in one test, in order: writing an
//! executable while another test thread forks can make its exec fail with "text file busy".

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use clef_media::{
    prepare_video_file_with_cancel, Cancel, MediaError, MediaLimits, ProcessorConfig, VideoTools,
};

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\necho $$ > \"$0.pid\"\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn pid_of(program: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(program.with_extension("pid")).ok()?;
    text.trim().parse().ok()
}

/// Whether a process (running or zombie) still has this pid.
fn exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Says stop once `program` has started and then `after` has passed.
fn stop_after_start<'a>(program: &'a Path, after: Duration) -> impl Fn() -> bool + Sync + 'a {
    let started = std::sync::OnceLock::new();
    move || {
        if program.with_extension("pid").exists() {
            let t = started.get_or_init(Instant::now);
            t.elapsed() >= after
        } else {
            false
        }
    }
}

fn run(
    tools: &VideoTools,
    bytes: &[u8],
    limits: &MediaLimits,
    cancel: Cancel,
) -> (Result<clef_media::PreparedVideo, MediaError>, Duration) {
    let t0 = Instant::now();
    let cfg = ProcessorConfig::default();
    let r = prepare_video_file_with_cancel(tools, "video/mp4", bytes, &cfg, limits, cancel);
    (r, t0.elapsed())
}

#[test]
fn children_are_killed_on_cancel_and_work_is_bounded() {
    let dir = tempfile::tempdir().unwrap();

    // 1. a hanging ffprobe (needs only sh and sleep): killed and reaped on cancel
    let probe = script(dir.path(), "ffprobe-hangs", "exec sleep 30");
    let tools = VideoTools {
        ffmpeg: "ffmpeg-is-never-reached".into(),
        ffprobe: probe.clone().into(),
    };
    // enough of an MP4 for the container check; ffprobe never reads it
    let mut mp4 = vec![0, 0, 0, 0x18];
    mp4.extend_from_slice(b"ftypisom\0\0\0\0isommp41");
    let stop = stop_after_start(&probe, Duration::from_millis(200));
    let (r, took) = run(&tools, &mp4, &MediaLimits::default(), Cancel::new(&stop));
    assert!(matches!(r, Err(MediaError::Cancelled)), "{r:?}");
    assert!(took < Duration::from_secs(3), "took {took:?}");
    let pid = pid_of(&probe).expect("ffprobe ran");
    assert!(
        !exists(pid),
        "ffprobe {pid} still exists (not killed or not reaped)"
    );

    // 2. a real ffmpeg slowed to the clip's own pace (-re): killed mid-decode on cancel
    let Some(found) = clef_testkit::tools::require(
        "children_are_killed_on_cancel_and_work_is_bounded",
        &["ffmpeg", "ffprobe"],
    ) else {
        return;
    };
    let (ffmpeg, ffprobe) = (&found[0], &found[1]);
    let clip = dir.path().join("clip.mp4");
    let made = Command::new(ffmpeg)
        .args(["-loglevel", "error", "-y", "-f", "lavfi", "-i"])
        .arg("testsrc=size=320x240:rate=10:duration=20")
        .args(["-c:v", "libx264", "-pix_fmt", "yuv420p"])
        .arg(&clip)
        .status()
        .unwrap();
    assert!(made.success());
    let bytes = std::fs::read(&clip).unwrap();
    let slow = script(
        dir.path(),
        "ffmpeg-slow",
        &format!("exec '{}' -re \"$@\"", ffmpeg.display()),
    );
    let tools = VideoTools {
        ffmpeg: slow.clone().into(),
        ffprobe: ffprobe.clone().into(),
    };
    let stop = stop_after_start(&slow, Duration::from_millis(500));
    let (r, took) = run(&tools, &bytes, &MediaLimits::default(), Cancel::new(&stop));
    assert!(matches!(r, Err(MediaError::Cancelled)), "{r:?}");
    // probing takes a moment, decoding at the clip's pace would take 20 s
    assert!(took < Duration::from_secs(5), "took {took:?}");
    let pid = pid_of(&slow).expect("ffmpeg ran");
    assert!(
        !exists(pid),
        "ffmpeg {pid} still exists (not killed or not reaped)"
    );

    // 3. the same clip uncancelled, at full speed, is read
    let plain = VideoTools {
        ffmpeg: ffmpeg.clone().into(),
        ffprobe: ffprobe.clone().into(),
    };
    let (r, _) = run(&plain, &bytes, &MediaLimits::default(), Cancel::never());
    let v = r.expect("the clip decodes");
    // 2 fps over 20 s at 10 fps: 40 targets, last frame index 195 (19.5 s)
    assert_eq!(v.frame_seconds.len(), 40);

    // 4. decoding work over the limit is refused before ffmpeg starts: 196 frames of 320x240
    std::fs::remove_file(slow.with_extension("pid")).unwrap();
    let limits = MediaLimits {
        max_video_decode_pixels: 196 * 320 * 240 - 1,
        ..MediaLimits::default()
    };
    let (r, _) = run(&tools, &bytes, &limits, Cancel::never());
    match r {
        Err(e @ MediaError::TooMuchVideoWork { .. }) => {
            assert_eq!(e.status(), 422);
            assert!(
                e.to_string().contains(&(196 * 320 * 240 - 1).to_string()),
                "{e}"
            );
        }
        other => panic!("expected TooMuchVideoWork, got {other:?}"),
    }
    assert!(pid_of(&slow).is_none(), "ffmpeg was started");
    // at the limit it is decoded
    let at = MediaLimits {
        max_video_decode_pixels: 196 * 320 * 240,
        ..MediaLimits::default()
    };
    assert!(run(&plain, &bytes, &at, Cancel::never()).0.is_ok());
}
