//! Running ffprobe/ffmpeg: explicit argument vectors (never a shell), a wall-clock deadline
//! after which the child is killed, and bounded capture of its output.

use std::ffi::OsStr;
use std::io::Read;
use std::process::{ChildStdout, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::cancel::Cancel;
use crate::error::MediaError;

/// What a finished child left behind.
pub(crate) struct Finished<R> {
    pub status: ExitStatus,
    pub result: R,
    /// The first `stderr_limit` bytes of its standard error.
    pub stderr: String,
}

fn spawn_error(program: &OsStr, e: std::io::Error) -> MediaError {
    let program = program.to_string_lossy().into_owned();
    if e.kind() == std::io::ErrorKind::NotFound {
        MediaError::ToolMissing { program }
    } else {
        MediaError::ToolFailed {
            program,
            message: e.to_string(),
        }
    }
}

/// Runs `program args…`, handing its stdout to `reader` on a separate thread. The child is
/// killed (and reaped) when `deadline` passes or `cancel` says stop, both polled at least every
/// 20 ms while it runs; `reader` returning early closes the pipe, which ends a well-behaved
/// child (EPIPE) instead of letting it block.
pub(crate) fn run_streaming<R, F>(
    program: &OsStr,
    args: &[&OsStr],
    deadline: Instant,
    timeout: Duration,
    cancel: Cancel,
    stderr_limit: usize,
    reader: F,
) -> Result<Finished<R>, MediaError>
where
    R: Send,
    F: FnOnce(ChildStdout) -> R + Send,
{
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| spawn_error(program, e))?;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(MediaError::Io("child pipes missing".into()));
    };
    std::thread::scope(|scope| {
        let out = scope.spawn(move || reader(stdout));
        let err = scope.spawn(move || read_bounded(stderr, stderr_limit));
        let mut pause = Duration::from_millis(1);
        let waited = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Ok(status),
                Ok(None) => {}
                Err(e) => break Err(MediaError::Io(e.to_string())),
            }
            if cancel.is_cancelled() {
                let _ = child.kill();
                let _ = child.wait();
                break Err(MediaError::Cancelled);
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                break Err(MediaError::Timeout {
                    seconds: timeout.as_secs_f64(),
                });
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        };
        let result = out.join();
        let stderr = err.join();
        let status = waited?;
        let result = result.map_err(|_| MediaError::Io("output reader panicked".into()))?;
        let stderr = stderr.unwrap_or_default();
        Ok(Finished {
            status,
            result,
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        })
    })
}

/// Collects stdout up to `stdout_limit` bytes; more is an error (the pipe is closed at once).
pub(crate) fn run_collect(
    program: &OsStr,
    args: &[&OsStr],
    deadline: Instant,
    timeout: Duration,
    cancel: Cancel,
    stdout_limit: usize,
) -> Result<Finished<Option<Vec<u8>>>, MediaError> {
    run_streaming(
        program,
        args,
        deadline,
        timeout,
        cancel,
        64 * 1024,
        move |stdout| {
            let mut buf = Vec::new();
            let read = stdout.take(stdout_limit as u64 + 1).read_to_end(&mut buf);
            match read {
                Ok(_) if buf.len() <= stdout_limit => Some(buf),
                _ => None,
            }
        },
    )
}

/// Reads a stream to its end, keeping the first `limit` bytes (the rest is drained so the
/// child never blocks on a full pipe).
fn read_bounded(mut stream: impl Read, limit: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = limit.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..n.min(room)]);
            }
        }
    }
    kept
}
