//! The helper end to end, as CI meets it: a test binary run with `ffprobe` missing from `PATH`
//! and `CI` set fails, and its output names `ffprobe`; without `CI` it passes but logs the skip.

use std::path::Path;
use std::process::Command;

/// Not run by itself: the outer tests run it in a child process with a doctored environment.
#[test]
#[ignore = "run by the tests below in a child process"]
fn needs_ffmpeg_and_ffprobe() {
    let found = clef_testkit::tools::require("needs_ffmpeg_and_ffprobe", &["ffmpeg", "ffprobe"]);
    // Reached with both programs, or skipped (recorded) outside CI; under CI a panic above.
    if let Some(paths) = found {
        assert_eq!(paths.len(), 2);
    }
}

/// A `PATH` with only a fake `ffmpeg` on it.
fn path_with_only_ffmpeg(dir: &Path) -> std::ffi::OsString {
    let ffmpeg = dir.join("ffmpeg");
    std::fs::write(&ffmpeg, "#!/bin/sh\nexit 0\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&ffmpeg, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    dir.as_os_str().to_owned()
}

fn run_inner(ci: Option<&str>, dir: &Path, log: &Path) -> std::process::Output {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--ignored",
        "--exact",
        "needs_ffmpeg_and_ffprobe",
        "--nocapture",
    ])
    .env("PATH", path_with_only_ffmpeg(dir))
    .env("CLEF_TEST_SKIP_LOG", log)
    .env_remove("CI");
    if let Some(v) = ci {
        cmd.env("CI", v);
    }
    cmd.output().unwrap()
}

#[test]
fn under_ci_a_missing_ffprobe_fails_the_test_and_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("skips.log");
    let out = run_inner(Some("1"), dir.path(), &log);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("needs ffprobe, not found on PATH"), "{text}");
    assert!(!log.exists(), "a failure is not a skip");
}

#[test]
fn outside_ci_a_missing_ffprobe_is_a_recorded_skip() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("skips.log");
    let out = run_inner(None, dir.path(), &log);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("SKIPPED needs_ffmpeg_and_ffprobe"),
        "{stderr}"
    );
    let logged = std::fs::read_to_string(&log).unwrap();
    assert_eq!(logged.lines().count(), 1, "{logged}");
    assert!(logged.contains("ffprobe not found on PATH"), "{logged}");
}
