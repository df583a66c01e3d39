//! Reading a video file with ffprobe (stream facts, packet times) and ffmpeg (chosen frames as
//! raw RGB), each call bounded in time and output.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

use image::RgbImage;
use serde::Deserialize;

use crate::cancel::Cancel;
use crate::error::MediaError;
use crate::limits::MediaLimits;
use crate::video::container::Container;
use crate::video::process::{run_collect, run_streaming};

/// Codecs accepted in video files. Anything else is refused before decoding, which keeps the
/// decoder surface small and the behaviour predictable.
pub const ALLOWED_CODECS: &[&str] = &["h264", "hevc", "vp8", "vp9", "av1", "mpeg4"];

/// Highest packet rate considered plausible (packets per second of duration); bounds the
/// packet listing's size.
const MAX_PACKETS_PER_SECOND: f64 = 240.0;

/// Where the external programs are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VideoTools {
    pub ffmpeg: OsString,
    pub ffprobe: OsString,
}

impl Default for VideoTools {
    /// `ffmpeg` and `ffprobe` from `PATH`.
    fn default() -> Self {
        VideoTools {
            ffmpeg: "ffmpeg".into(),
            ffprobe: "ffprobe".into(),
        }
    }
}

/// The programs as found at start-up, with the first line of each one's `-version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundTools {
    /// Absolute paths.
    pub tools: VideoTools,
    pub ffmpeg_version: String,
    pub ffprobe_version: String,
}

impl VideoTools {
    /// Find both programs once, so that no request depends on `PATH`: an explicit path as
    /// given, else the first executable `ffmpeg` / `ffprobe` on `PATH`, made absolute; each must
    /// run `-version`. The error says which program is missing or broken.
    pub fn locate(ffmpeg: Option<&Path>, ffprobe: Option<&Path>) -> Result<FoundTools, MediaError> {
        let find = |given: Option<&Path>, name: &str| -> Result<(OsString, String), MediaError> {
            let program = match given {
                Some(p) => p.as_os_str().to_owned(),
                None => on_path(name).ok_or_else(|| MediaError::ToolMissing {
                    program: name.to_owned(),
                })?,
            };
            let version = version_line(&program)?;
            Ok((program, version))
        };
        let (ffmpeg, ffmpeg_version) = find(ffmpeg, "ffmpeg")?;
        let (ffprobe, ffprobe_version) = find(ffprobe, "ffprobe")?;
        Ok(FoundTools {
            tools: VideoTools { ffmpeg, ffprobe },
            ffmpeg_version,
            ffprobe_version,
        })
    }

    /// Runs `-version` on both programs; a missing one gives [`MediaError::ToolMissing`].
    pub fn check(&self) -> Result<(), MediaError> {
        for program in [&self.ffprobe, &self.ffmpeg] {
            version_line(program)?;
        }
        Ok(())
    }
}

/// The first executable file called `name` in a directory of `PATH`, as an absolute path.
fn on_path(name: &str) -> Option<OsString> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .map(|p| p.into_os_string())
}

/// The first line of `program -version` (`ffmpeg version 5.1.6-0+deb12u1 ...`).
fn version_line(program: &OsStr) -> Result<String, MediaError> {
    let timeout = Duration::from_secs(10);
    let args = [OsStr::new("-version")];
    let done = run_collect(
        program,
        &args,
        Instant::now() + timeout,
        timeout,
        Cancel::never(),
        1 << 20,
    )?;
    if !done.status.success() {
        return Err(MediaError::ToolFailed {
            program: program.to_string_lossy().into_owned(),
            message: format!("`-version` exited with {}", done.status),
        });
    }
    Ok(String::from_utf8_lossy(&done.result.unwrap_or_default())
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_owned())
}

/// Facts about the first video stream.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StreamInfo {
    pub codec: String,
    pub width: u32,
    pub height: u32,
    /// Display rotation in degrees counter-clockwise (the display matrix), 0 when absent.
    pub rotation: f64,
    /// Container or stream duration in seconds, when declared.
    pub duration: Option<f64>,
}

#[derive(Deserialize)]
struct ProbeJson {
    #[serde(default)]
    streams: Vec<ProbeStream>,
    format: Option<ProbeFormat>,
}

#[derive(Deserialize)]
struct ProbeStream {
    codec_name: Option<String>,
    width: Option<u32>,
    height: Option<u32>,
    duration: Option<String>,
    #[serde(default)]
    side_data_list: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
struct ProbeFormat {
    duration: Option<String>,
}

pub(crate) struct Session<'a> {
    pub tools: &'a VideoTools,
    pub path: &'a Path,
    pub container: Container,
    pub deadline: Instant,
    pub timeout: Duration,
    /// Polled while every child runs; a cancelled child is killed.
    pub cancel: Cancel<'a>,
}

impl Session<'_> {
    fn input_args(&self) -> Vec<&OsStr> {
        vec![
            OsStr::new("-protocol_whitelist"),
            OsStr::new("file"),
            OsStr::new("-f"),
            OsStr::new(self.container.demuxer()),
        ]
    }

    fn probe_failure(&self, stderr: &str) -> MediaError {
        let msg = self.last_line(stderr);
        MediaError::VideoDecode(if msg.is_empty() {
            "ffprobe could not read the file".into()
        } else {
            msg
        })
    }

    /// The last non-empty line of a program's stderr, for the client's error message, with the
    /// server's temp-file path replaced by `input` (ffmpeg starts its messages with it).
    fn last_line(&self, stderr: &str) -> String {
        let line = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim();
        line.replace(&*self.path.to_string_lossy(), "input")
    }

    /// Codec, size, rotation and declared duration of the first video stream.
    pub fn stream_info(&self) -> Result<StreamInfo, MediaError> {
        let mut args = vec![
            OsStr::new("-v"),
            OsStr::new("error"),
            OsStr::new("-hide_banner"),
        ];
        args.extend(self.input_args());
        args.extend([
            OsStr::new("-select_streams"),
            OsStr::new("v:0"),
            OsStr::new("-show_entries"),
            OsStr::new(
                "stream=codec_name,width,height,duration:stream_side_data=rotation:format=duration",
            ),
            OsStr::new("-of"),
            OsStr::new("json"),
            self.path.as_os_str(),
        ]);
        let ffprobe = self.tools.ffprobe.as_os_str();
        let done = run_collect(
            ffprobe,
            &args,
            self.deadline,
            self.timeout,
            self.cancel,
            1 << 20,
        )?;
        if !done.status.success() {
            return Err(self.probe_failure(&done.stderr));
        }
        let stdout = done
            .result
            .ok_or_else(|| MediaError::VideoDecode("ffprobe output too large".into()))?;
        let parsed: ProbeJson = serde_json::from_slice(&stdout)
            .map_err(|e| MediaError::VideoDecode(format!("unreadable ffprobe output: {e}")))?;
        let Some(stream) = parsed.streams.into_iter().next() else {
            return Err(MediaError::UnsupportedCodec(
                "the file has no video stream".into(),
            ));
        };
        let codec = stream.codec_name.unwrap_or_default();
        let (Some(width), Some(height)) = (stream.width, stream.height) else {
            return Err(MediaError::VideoDecode(
                "the video stream has no frame size".into(),
            ));
        };
        let rotation = stream
            .side_data_list
            .iter()
            .find_map(|d| d.get("rotation").and_then(|r| r.as_f64()))
            .unwrap_or(0.0);
        let seconds = |s: Option<String>| {
            s.and_then(|v| v.parse::<f64>().ok())
                .filter(|d| d.is_finite())
        };
        let duration = seconds(parsed.format.and_then(|f| f.duration)).or(seconds(stream.duration));
        Ok(StreamInfo {
            codec,
            width,
            height,
            rotation,
            duration,
        })
    }

    /// Presentation times of the video packets, ascending (packets flagged as discarded and
    /// those without a time are left out). Reading packets does not decode anything.
    pub fn packet_times(&self, limits: &MediaLimits) -> Result<Vec<f64>, MediaError> {
        let max_packets =
            (limits.max_video_seconds.max(1.0) * MAX_PACKETS_PER_SECOND) as usize + 64;
        let mut args = vec![
            OsStr::new("-v"),
            OsStr::new("error"),
            OsStr::new("-hide_banner"),
        ];
        args.extend(self.input_args());
        args.extend([
            OsStr::new("-select_streams"),
            OsStr::new("v:0"),
            OsStr::new("-show_entries"),
            OsStr::new("packet=pts_time,flags"),
            OsStr::new("-of"),
            OsStr::new("csv=p=0"),
            self.path.as_os_str(),
        ]);
        let ffprobe = self.tools.ffprobe.as_os_str();
        // ~20 bytes per line ("12.345678,K__\n"); 48 leaves room for long timestamps.
        let done = run_collect(
            ffprobe,
            &args,
            self.deadline,
            self.timeout,
            self.cancel,
            max_packets * 48,
        )?;
        if !done.status.success() {
            return Err(self.probe_failure(&done.stderr));
        }
        let Some(stdout) = done.result else {
            return Err(MediaError::VideoDecode(format!(
                "too many frames (more than {MAX_PACKETS_PER_SECOND} per second of the allowed duration)"
            )));
        };
        let text = String::from_utf8_lossy(&stdout);
        let mut times = Vec::new();
        for line in text.lines() {
            let mut fields = line.split(',');
            let pts = fields.next().unwrap_or("").trim();
            let flags = fields.next().unwrap_or("");
            if flags.contains('D') {
                continue;
            }
            if let Ok(t) = pts.parse::<f64>() {
                if t.is_finite() {
                    times.push(t);
                }
            }
        }
        if times.len() > max_packets {
            return Err(MediaError::VideoDecode("too many frames".into()));
        }
        times.sort_by(f64::total_cmp);
        Ok(times)
    }

    /// Decodes the frames at the given presentation-order indices and hands each, as stored
    /// (before any display rotation), to `consume`. Returns the frames' own presentation
    /// times as ffmpeg reports them (`showinfo`), or `None` when they could not be read.
    pub fn extract(
        &self,
        indices: &[usize],
        info: &StreamInfo,
        consume: &mut (dyn FnMut(RgbImage) -> Result<(), MediaError> + Send),
    ) -> Result<Option<Vec<f64>>, MediaError> {
        match self.extract_with(indices, info, "-fps_mode", consume) {
            // ffmpeg before 5.1 only knows the older spelling.
            Err(MediaError::ToolFailed { message, .. }) if message.contains("fps_mode") => {
                self.extract_with(indices, info, "-vsync", consume)
            }
            other => other,
        }
    }

    fn extract_with(
        &self,
        indices: &[usize],
        info: &StreamInfo,
        sync_option: &str,
        consume: &mut (dyn FnMut(RgbImage) -> Result<(), MediaError> + Send),
    ) -> Result<Option<Vec<f64>>, MediaError> {
        let select: Vec<String> = indices.iter().map(|i| format!("eq(n\\,{i})")).collect();
        // The explicit scale pins every output frame to the probed size, so a stream that
        // changes resolution midway cannot desynchronise the fixed-size reads below.
        let filter = format!(
            "select={},scale={}:{},showinfo",
            select.join("+"),
            info.width,
            info.height
        );
        let frame_count = indices.len().to_string();
        let mut args = vec![
            OsStr::new("-nostdin"),
            OsStr::new("-hide_banner"),
            OsStr::new("-nostats"),
            OsStr::new("-loglevel"),
            OsStr::new("info"),
            OsStr::new("-noautorotate"),
        ];
        args.extend(self.input_args());
        args.extend([
            OsStr::new("-i"),
            self.path.as_os_str(),
            OsStr::new("-map"),
            OsStr::new("0:v:0"),
            OsStr::new("-an"),
            OsStr::new("-sn"),
            OsStr::new("-dn"),
            OsStr::new("-vf"),
            OsStr::new(&filter),
            OsStr::new(sync_option),
            OsStr::new("passthrough"),
            // stop right after the last chosen frame instead of decoding the rest of the file
            OsStr::new("-frames:v"),
            OsStr::new(&frame_count),
            OsStr::new("-pix_fmt"),
            OsStr::new("rgb24"),
            OsStr::new("-f"),
            OsStr::new("rawvideo"),
            OsStr::new("pipe:1"),
        ]);
        let frame_bytes = info.width as usize * info.height as usize * 3;
        let (width, height) = (info.width, info.height);
        let expected = indices.len();
        let ffmpeg = self.tools.ffmpeg.as_os_str();
        let done = run_streaming(
            ffmpeg,
            &args,
            self.deadline,
            self.timeout,
            self.cancel,
            4 << 20,
            move |mut stdout| {
                let mut got = 0usize;
                while got < expected {
                    let mut buf = vec![0u8; frame_bytes];
                    match read_full(&mut stdout, &mut buf) {
                        Ok(true) => {}
                        Ok(false) => break,
                        Err(e) => return Err(MediaError::Io(e.to_string())),
                    }
                    let frame = RgbImage::from_raw(width, height, buf).ok_or_else(|| {
                        MediaError::VideoDecode("frame buffer size mismatch".into())
                    })?;
                    consume(frame)?;
                    got += 1;
                }
                Ok(got)
            },
        )?;
        // A frame the consumer refused (e.g. resizing) closed the pipe; report that, not the
        // broken pipe ffmpeg then died of.
        let got = match done.result {
            Err(MediaError::Io(_)) if !done.status.success() => None,
            Err(e) => return Err(e),
            Ok(n) => Some(n),
        };
        if !done.status.success() {
            if done.stderr.contains("Unrecognized option")
                && done.stderr.contains(sync_option.trim_start_matches('-'))
            {
                return Err(MediaError::ToolFailed {
                    program: ffmpeg.to_string_lossy().into_owned(),
                    message: format!("option {sync_option} not supported (fps_mode)"),
                });
            }
            let last = self.last_line(&done.stderr);
            return Err(MediaError::VideoDecode(format!("ffmpeg failed: {last}")));
        }
        let got = got.unwrap_or(0);
        if got != expected {
            return Err(MediaError::VideoDecode(format!(
                "ffmpeg produced {got} of {expected} frames"
            )));
        }
        let times = showinfo_times(&done.stderr);
        Ok((times.len() == expected).then_some(times))
    }
}

/// Fills `buf` completely; `Ok(false)` on a clean end of stream before the first byte.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<bool> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) if filled == 0 => return Ok(false),
            Ok(0) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "truncated frame",
                ))
            }
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// `pts_time:` of every `showinfo` frame line, in output order.
fn showinfo_times(stderr: &str) -> Vec<f64> {
    stderr
        .lines()
        .filter(|l| l.contains("showinfo") && l.contains(" n:"))
        .filter_map(|l| {
            let rest = &l[l.find("pts_time:")? + "pts_time:".len()..];
            rest.split_whitespace().next()?.parse::<f64>().ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_showinfo_lines() {
        let err = "[Parsed_showinfo_1 @ 0x5] config in time_base: 1/10240\n\
                   [Parsed_showinfo_1 @ 0x5] n:   0 pts:      0 pts_time:0       pos: 48 fmt:yuv420p\n\
                   [Parsed_showinfo_1 @ 0x5] n:   1 pts:   5120 pts_time:0.5     pos: 9\n";
        assert_eq!(showinfo_times(err), vec![0.0, 0.5]);
    }
}
