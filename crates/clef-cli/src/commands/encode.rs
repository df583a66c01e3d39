//! `clef encode`: print the token ids, spans and pieces of a request, with the reference
//! fixtures' key names, for debugging prompts and comparing with the reference encoder.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use clef_api::{ApiError, Json, Limits, Profile, Request, VideoInput, Work};
use clef_encode::{
    EncodeOptions, Encoded, Encoder, ImageLayout, MediaLayout, Truncation, VideoLayout,
};
use clef_media::{MediaLimits, ProcessorConfig};

use super::request_file::{parse_request_file, FileKind};

#[derive(Args)]
pub struct EncodeArgs {
    /// A tokenizer.json file, or a folder holding one (a model folder: its
    /// processor_config.json is then used for media).
    #[arg(long)]
    pub tokenizer: PathBuf,
    /// Token budget of the prompt. Default: the fixture's "max_length", else the context
    /// limit of the Clef models, 16384 (encode reads no model).
    #[arg(long)]
    pub max_length: Option<usize>,
    /// Request rules: "reference" (default here: what the reference encoder accepts, e.g.
    /// questions without instructions) or "workers" (the hosted service's limits).
    #[arg(long, default_value = "reference")]
    pub profile: Profile,
    /// Cut the state to fit max-length, keeping its first tokens (the reference rule).
    /// Default: on with --profile reference (the reference always truncates), off with
    /// --profile workers (an oversize prompt is refused, as the server does).
    #[arg(long, conflicts_with = "no_truncate")]
    pub truncate: bool,
    /// Refuse an oversize prompt instead of truncating the state.
    #[arg(long)]
    pub no_truncate: bool,
    /// The System One request, or a fixture file holding one under "request" (with an
    /// optional "max_length" and, for media, the "media" patch grids).
    pub request: PathBuf,
}

/// Exit status of a refused request (bad input, over a limit).
const REFUSED: u8 = 2;

pub fn run(args: EncodeArgs) -> anyhow::Result<ExitCode> {
    match encode(&args)? {
        Ok(encoded) => {
            let text = fixture_text(&encoded);
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())
                .and_then(|()| out.flush())
                .context("writing the encoding to stdout")?;
            Ok(ExitCode::SUCCESS)
        }
        Err(refusal) => {
            eprintln!(
                "error: HTTP {}, code {}: {}",
                refusal.status, refusal.code, refusal.message
            );
            Ok(ExitCode::from(REFUSED))
        }
    }
}

/// The outer `Result` is an operational failure (unreadable file, bad tokenizer); the inner
/// one a refusal of the request itself.
fn encode(args: &EncodeArgs) -> anyhow::Result<Result<Encoded, ApiError>> {
    let bytes = std::fs::read(&args.request)
        .with_context(|| format!("reading {}", args.request.display()))?;
    let limits = Limits::for_profile(args.profile);
    // One request: a batch document is validated as a request (and refused as one).
    let kind = match FileKind::of(&bytes) {
        FileKind::Fixture => FileKind::Fixture,
        FileKind::Request | FileKind::Batch => FileKind::Request,
    };
    let input = match parse_request_file(&bytes, &limits, kind) {
        Ok(input) => input,
        Err(refusal) => return Ok(Err(refusal)),
    };
    let Work::One(request) = &input.work else {
        return Ok(Err(ApiError::structure(
            "clef encode reads one request, not a batch",
        )));
    };
    let encoder = Encoder::from_path(&args.tokenizer)
        .with_context(|| format!("loading the tokenizer {}", args.tokenizer.display()))?;
    let media = match media_layout(request, input.media.as_ref(), &args.tokenizer) {
        Ok(media) => media,
        Err(refusal) => return Ok(Err(refusal)),
    };
    let truncation = if args.truncate {
        Truncation::State
    } else if args.no_truncate {
        Truncation::Refuse
    } else {
        match args.profile {
            Profile::Reference => Truncation::State,
            Profile::Workers => Truncation::Refuse,
        }
    };
    let opts = EncodeOptions {
        max_length: args
            .max_length
            .or(input.max_length)
            .unwrap_or(limits.max_context),
        truncation,
    };
    Ok(encoder
        .encode(request, &media, &opts)
        .map_err(ApiError::from))
}

/// The media's token layout: from a fixture's `media` record when it has one, else from the
/// media themselves.
fn media_layout(
    req: &Request,
    fixture_media: Option<&Json>,
    tokenizer: &Path,
) -> Result<MediaLayout, ApiError> {
    if !req.has_media() {
        return Ok(MediaLayout::default());
    }
    match fixture_media {
        Some(media) => layout_from_grids(req, media),
        None => layout_from_media(req, tokenizer),
    }
}

/// The fixtures' `media` record: image grid (t,h,w) → t·h·w/4 tokens; video grid (t,h,w) → t
/// groups of h·w/4 tokens, frame i at i/fps seconds.
fn layout_from_grids(req: &Request, media: &Json) -> Result<MediaLayout, ApiError> {
    let grids = |key: &str| -> Result<Vec<[usize; 3]>, ApiError> {
        let bad = || ApiError::structure(format!("media.{key}: must be a list of [t, h, w]"));
        let Some(list) = media.as_object().and_then(|m| m.get(key)) else {
            return Ok(Vec::new());
        };
        list.as_array()
            .ok_or_else(bad)?
            .iter()
            .map(|grid| {
                let dims: Vec<usize> = grid
                    .as_array()
                    .ok_or_else(bad)?
                    .iter()
                    .map(|d| d.as_number().and_then(|n| n.as_u64()).map(|n| n as usize))
                    .collect::<Option<_>>()
                    .ok_or_else(bad)?;
                <[usize; 3]>::try_from(dims).map_err(|_| bad())
            })
            .collect()
    };
    let images = grids("image_grid_thw")?
        .into_iter()
        .map(|[t, h, w]| ImageLayout::from_grid(t, h, w))
        .collect();
    let video_grids = grids("video_grid_thw")?;
    if video_grids.len() != req.videos.len() {
        return Err(ApiError::structure(format!(
            "media.video_grid_thw: {} grids for {} videos",
            video_grids.len(),
            req.videos.len()
        )));
    }
    let videos = video_grids
        .into_iter()
        .zip(&req.videos)
        .map(|([t, h, w], video)| {
            let fps = match video {
                VideoInput::Frames { fps, .. } => *fps,
                VideoInput::File(_) => clef_api::media::DEFAULT_FRAME_LIST_FPS,
            };
            VideoLayout::from_grid(t, h, w, fps)
        })
        .collect();
    Ok(MediaLayout { images, videos })
}

/// Decodes the media with the media crate, using the model folder's processor config when
/// the tokenizer sits in one.
fn layout_from_media(req: &Request, tokenizer: &Path) -> Result<MediaLayout, ApiError> {
    let folder = if tokenizer.is_dir() {
        Some(tokenizer)
    } else {
        tokenizer.parent()
    };
    let config_file = folder.map(|f| f.join("processor_config.json"));
    let cfg = match config_file.filter(|f| f.is_file()) {
        Some(file) => ProcessorConfig::from_file(&file).map_err(media_error)?,
        None => ProcessorConfig::default(),
    };
    let video = clef_engine::locate_video_tools(None, None);
    Ok(clef_engine::prepare_media(req, &cfg, &MediaLimits::default(), &video)?.layout)
}

fn media_error(e: clef_media::MediaError) -> ApiError {
    clef_engine::media::media_error(e)
}

/// One top-level key per line, compact values: the layout of the reference fixtures.
fn fixture_text(encoded: &Encoded) -> String {
    let json = encoded.to_fixture_json();
    let mut out = String::from("{\n");
    if let Some(object) = json.as_object() {
        for (i, (key, value)) in object.iter().enumerate() {
            if i > 0 {
                out.push_str(",\n");
            }
            out.push(' ');
            clef_api::json::write_json_string(&mut out, key);
            out.push_str(": ");
            out.push_str(&value.to_json_string());
        }
    }
    out.push_str("\n}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clef_api::parse_json;

    fn fixtures() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
    }

    fn args(tokenizer: &str, request: &str) -> EncodeArgs {
        EncodeArgs {
            tokenizer: fixtures().join(tokenizer),
            max_length: None,
            profile: Profile::Reference,
            truncate: false,
            no_truncate: false,
            request: fixtures().join(request),
        }
    }

    /// The printed object equals the fixture on every key the CLI prints.
    fn assert_matches_fixture(args: &EncodeArgs) {
        let encoded = encode(args).unwrap().unwrap();
        let printed = parse_json(fixture_text(&encoded).as_bytes()).unwrap();
        let fixture = parse_json(&std::fs::read(&args.request).unwrap()).unwrap();
        let fixture = fixture.as_object().unwrap();
        let printed = printed.as_object().unwrap();
        assert_eq!(printed.len(), 10);
        for (key, value) in printed.iter() {
            if key == "pieces" || key == "state_tokens" || key == "state_tokens_kept" {
                // Golden files do not carry these.
                if let Some(want) = fixture.get(key) {
                    assert_eq!(value, want, "{key}");
                }
                continue;
            }
            assert_eq!(Some(value), fixture.get(key), "{key}");
        }
    }

    #[test]
    fn fixture_files_are_reproduced() {
        assert_matches_fixture(&args(
            "tokenizers/qwen35/tokenizer.json",
            "encoding/long_state_truncated.json",
        ));
        assert_matches_fixture(&args(
            "tokenizers/qwen35",
            "encoding/empty_and_null_instructions.json",
        ));
        assert_matches_fixture(&args(
            "models/tiny-a",
            "golden/tiny-a/a27_image_and_video.json",
        ));
    }

    #[test]
    fn media_without_grids_goes_through_the_media_crate() {
        // Strip the fixture down to its bare request: the layout then comes from decoding the
        // PNGs (sides already multiples of 32, so no resize) and must give the same ids.
        let path = fixtures().join("golden/tiny-a/a27_image_and_video.json");
        let fixture = parse_json(&std::fs::read(&path).unwrap()).unwrap();
        let fixture = fixture.as_object().unwrap();
        let bare = fixture.get("request").unwrap().to_json_string();
        let dir = tempfile::tempdir().unwrap();
        let request = dir.path().join("request.json");
        std::fs::write(&request, bare).unwrap();
        let mut a = args("models/tiny-a", "golden/tiny-a/a27_image_and_video.json");
        a.request = request;
        let encoded = encode(&a).unwrap().unwrap();
        let printed = encoded.to_fixture_json();
        assert_eq!(
            printed.as_object().unwrap().get("input_ids"),
            fixture.get("input_ids")
        );
    }

    #[test]
    fn refusals() {
        let mut a = args("tokenizers/qwen35", "encoding/schema_too_long.json");
        let refusal = encode(&a).unwrap().unwrap_err();
        assert_eq!((refusal.status, refusal.code), (413, 5021));
        assert_eq!(
            refusal.message,
            "schema requires 332 tokens before state; maximum is 120"
        );
        // The workers profile refuses what the reference accepts (no instructions).
        a.request = fixtures().join("encoding/empty_and_null_instructions.json");
        a.profile = Profile::Workers;
        let refusal = encode(&a).unwrap().unwrap_err();
        assert_eq!((refusal.status, refusal.code), (422, 5012));
        // Without truncation an oversize state is refused with its measured size.
        a.request = fixtures().join("encoding/small_max_length.json");
        a.profile = Profile::Reference;
        a.no_truncate = true;
        let refusal = encode(&a).unwrap().unwrap_err();
        assert_eq!((refusal.status, refusal.code), (413, 5021));
        assert!(refusal.message.contains("maximum is 160"), "{refusal}");
        a.no_truncate = false;
        a.truncate = true;
        a.max_length = Some(100_000);
        let encoded = encode(&a).unwrap().unwrap();
        assert_eq!(encoded.state_tokens_kept, encoded.state_tokens);
    }

    #[test]
    fn operational_failures_are_not_refusals() {
        let a = args("tokenizers/qwen35", "encoding/does_not_exist.json");
        assert!(encode(&a).is_err());
        let a = args("no/such/tokenizer", "encoding/text_basic.json");
        assert!(encode(&a).is_err());
    }
}
