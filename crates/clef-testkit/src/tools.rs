//! External programs a test needs.
//!
//! A test that needs ffmpeg used to print a note and `return` when it was absent, which counts
//! as a pass and hides the note. Here the decision is made once, the same way for every test:
//!
//! - every program found on `PATH`: the test runs;
//! - one missing and `CI` set: the test fails with the missing program's name;
//! - one missing outside CI: the test is skipped, with a line on stderr and one appended to the
//!   skip log ([`skip_log`]), which `.ci/run` reports as a count.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::{Path, PathBuf};

/// What a test should do about the programs it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every program was found; their paths, in the order asked.
    Run(Vec<PathBuf>),
    /// Outside CI, something is missing: skip, saying why.
    Skip(String),
    /// Under CI, something is missing: fail, saying what.
    Fail(String),
}

/// Whether `CI` is set to anything but empty, `0` or `false` (what CI services export; `.ci/run`
/// exports `CI=1` itself).
pub fn under_ci() -> bool {
    ci_value(std::env::var_os("CI").as_deref())
}

fn ci_value(value: Option<&OsStr>) -> bool {
    match value.and_then(OsStr::to_str) {
        None => value.is_some(), // set, but not UTF-8: still set
        Some(v) => !matches!(v.trim().to_ascii_lowercase().as_str(), "" | "0" | "false"),
    }
}

/// The first executable file named `program` in the directories of `path` (a `PATH` value).
pub fn find_on_path(program: &str, path: &OsStr) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

#[cfg(unix)]
fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(p: &Path) -> bool {
    p.is_file() || p.with_extension("exe").is_file()
}

/// The verdict for a test needing every one of `programs`, given a `PATH` value and whether
/// this is CI. Pure, so that it is tested as such.
pub fn decide(test: &str, programs: &[&str], path: &OsStr, ci: bool) -> Verdict {
    let mut found = Vec::with_capacity(programs.len());
    let mut missing = Vec::new();
    for &program in programs {
        match find_on_path(program, path) {
            Some(p) => found.push(p),
            None => missing.push(program),
        }
    }
    if missing.is_empty() {
        return Verdict::Run(found);
    }
    let what = missing.join(", ");
    if ci {
        Verdict::Fail(format!(
            "{test}: needs {what}, not found on PATH; CI must install it (.ci/run does)"
        ))
    } else {
        Verdict::Skip(format!("{test}: skipped, {what} not found on PATH"))
    }
}

/// The verdict for a test that needs any one of `alternatives` (the first found is used):
/// `Run` with that one path.
pub fn decide_any(test: &str, alternatives: &[&str], path: &OsStr, ci: bool) -> Verdict {
    match alternatives.iter().find_map(|p| find_on_path(p, path)) {
        Some(p) => Verdict::Run(vec![p]),
        None => decide(test, &[&alternatives.join(" or ")], path, ci),
    }
}

/// For a test that needs every one of `programs`: their paths when all are on `PATH`; `None`
/// when the test must be skipped (recorded); a panic naming the missing ones under CI.
pub fn require(test: &str, programs: &[&str]) -> Option<Vec<PathBuf>> {
    act(decide(test, programs, &path_var(), under_ci()))
}

/// For a test that needs one of `alternatives` (e.g. `chromium` or `chromium-browser`): the
/// first found, as [`require`] otherwise.
pub fn require_any(test: &str, alternatives: &[&str]) -> Option<PathBuf> {
    act(decide_any(test, alternatives, &path_var(), under_ci())).and_then(|v| v.into_iter().next())
}

/// Inside a test that already runs: a step that could not be done here (an encoder this ffmpeg
/// lacks, say). Under CI it fails the test; outside it records a skip. Returns so the caller
/// can `return` from the test.
pub fn cannot_run(test: &str, why: &str) {
    let verdict = if under_ci() {
        Verdict::Fail(format!("{test}: {why}"))
    } else {
        Verdict::Skip(format!("{test}: skipped, {why}"))
    };
    act(verdict);
}

fn path_var() -> OsString {
    std::env::var_os("PATH").unwrap_or_default()
}

fn act(verdict: Verdict) -> Option<Vec<PathBuf>> {
    match verdict {
        Verdict::Run(paths) => Some(paths),
        Verdict::Fail(why) => panic!("{why}"),
        Verdict::Skip(why) => {
            eprintln!("SKIPPED {why}");
            record_skip(&why);
            None
        }
    }
}

/// Where skips are recorded, one line each: `CLEF_TEST_SKIP_LOG` when set, else
/// `clef-test-skips.log` in the target directory of the running test binary
/// (`<target>/<profile>/deps/<test>`).
pub fn skip_log() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CLEF_TEST_SKIP_LOG") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    Some(
        exe.parent()?
            .parent()?
            .parent()?
            .join("clef-test-skips.log"),
    )
}

fn record_skip(why: &str) {
    let Some(path) = skip_log() else { return };
    // One short append per skip; tests running in parallel may interleave lines, never bytes
    // within one (O_APPEND writes of a line this short are atomic).
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
    {
        let _ = f.write_all(format!("{}\n", why.replace('\n', " ")).as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bin_dir(programs: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for p in programs {
            let file = dir.path().join(p);
            std::fs::write(&file, "#!/bin/sh\nexit 0\n").unwrap();
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
        }
        dir
    }

    #[test]
    fn a_missing_program_fails_under_ci_and_is_named() {
        let dir = bin_dir(&["ffmpeg"]);
        let path = dir.path().as_os_str();
        match decide("t", &["ffmpeg", "ffprobe"], path, true) {
            Verdict::Fail(why) => {
                assert!(why.contains("ffprobe") && !why.contains("ffmpeg,"), "{why}")
            }
            other => panic!("{other:?}"),
        }
        match decide("t", &["ffmpeg", "ffprobe"], path, false) {
            Verdict::Skip(why) => assert!(why.contains("ffprobe"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn programs_on_path_run_with_their_paths() {
        let dir = bin_dir(&["ffmpeg", "ffprobe"]);
        let path = std::env::join_paths([Path::new("/nonexistent"), dir.path()]).unwrap();
        assert_eq!(
            decide("t", &["ffprobe", "ffmpeg"], &path, true),
            Verdict::Run(vec![dir.path().join("ffprobe"), dir.path().join("ffmpeg")])
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_file_that_is_not_executable_is_not_a_program() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ffprobe"), "").unwrap();
        assert!(find_on_path("ffprobe", dir.path().as_os_str()).is_none());
        std::fs::create_dir(dir.path().join("ffmpeg")).unwrap();
        assert!(find_on_path("ffmpeg", dir.path().as_os_str()).is_none());
    }

    #[test]
    fn any_of_several_takes_the_first_found() {
        let dir = bin_dir(&["chromium-browser"]);
        let path = dir.path().as_os_str();
        assert_eq!(
            decide_any("t", &["chromium", "chromium-browser"], path, true),
            Verdict::Run(vec![dir.path().join("chromium-browser")])
        );
        let empty = bin_dir(&[]);
        match decide_any(
            "t",
            &["chromium", "chromium-browser"],
            empty.path().as_os_str(),
            true,
        ) {
            Verdict::Fail(why) => assert!(why.contains("chromium or chromium-browser"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn ci_is_set_unless_empty_zero_or_false() {
        assert!(!ci_value(None));
        for off in ["", "0", "false", " FALSE "] {
            assert!(!ci_value(Some(OsStr::new(off))), "{off:?}");
        }
        for on in ["1", "true", "yes", "github"] {
            assert!(ci_value(Some(OsStr::new(on))), "{on:?}");
        }
    }
}
