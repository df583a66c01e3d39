//! `GET /v1/models`: the OpenAI list shape, each entry extended with a `clef` object that
//! publishes every limit and capability (api.md §1.1), so clients need not learn them from a 422.

use crate::config::ServerConfig;
use crate::loaded::LoadedModel;
use serde_json::{json, Value};

pub fn models_body(model: &LoadedModel, config: &ServerConfig) -> String {
    let primary = model.names.primary();
    let entry = |name: &str, clef: Value| {
        json!({
            "id": name,
            "object": "model",
            "created": model.created,
            "owned_by": "clef.rs",
            "clef": clef,
        })
    };
    // One entry per name, as OpenAI clients list them; the limits and capabilities once, on
    // the primary name: an alias entry only says which model it answers with.
    let data: Vec<Value> = std::iter::once(entry(primary, clef_object(model, config)))
        .chain(
            model
                .names
                .aliases()
                .iter()
                .map(|alias| entry(alias, json!({"alias_of": primary}))),
        )
        .collect();
    json!({"object": "list", "data": data}).to_string()
}

fn clef_object(model: &LoadedModel, config: &ServerConfig) -> Value {
    let engine = &model.description;
    let l = &engine.limits;
    let vision = engine.vision;
    let cache = &engine.state_cache;
    json!({
        "model": model.names.primary(),
        "aliases": model.names.aliases(),
        "max_context": l.max_context,
        "training_length": config.training_length,
        "limits": {
            "profile": l.profile.as_str(),
            "min_questions": 1,
            "max_questions": l.max_questions,
            "question_id_pattern": if l.question_id_pattern {
                Value::String(format!("^[A-Za-z0-9_.-]{{1,{}}}$", l.max_question_id_chars))
            } else {
                Value::Null
            },
            "instructions_required": l.instructions_required,
            "min_choice_options": l.min_choice_options,
            "max_choice_options": l.max_choice_options,
            "min_score_levels": l.min_score_levels,
            "max_score_levels": l.max_score_levels,
            "max_images": l.max_images,
            "max_image_bytes": l.max_image_bytes,
            "max_total_image_bytes": l.max_total_image_bytes,
            "max_image_pixels_decoded": l.max_image_pixels_decoded,
            "max_image_pixels": engine.max_image_pixels,
            "max_body_bytes": config.max_body_bytes,
            "max_context": l.max_context,
            "videos_enabled": l.videos_enabled,
            "max_videos": l.max_videos,
            "max_video_bytes": l.max_video_bytes,
            "max_video_frames": l.max_video_frames,
            "max_json_depth": l.max_json_depth,
        },
        "vision": vision,
        // Frame lists need only the vision tower; video files also need ffmpeg and ffprobe,
        // found once at start-up.
        "video": vision && l.videos_enabled,
        "video_files": vision && l.videos_enabled && engine.video_files.is_ok(),
        "confidence": config.answer.confidence.as_str(),
        "rounding": config.answer.rounding,
        "truncate_state_by_default": config.truncate_state,
        "format": engine.format,
        // The linears' arithmetic: `exact` (f32), `int8` (integer products) or `bf16`
        // (`--matmul`), what runs it (`amx`, `avx512vnni`, `avx512 12x32`, ...) and the
        // instruction-set level (`CLEF_ISA`).
        "matmul": engine.matmul,
        "matmul_isa": engine.kernels.matmul_isa(engine.matmul),
        "isa": engine.kernels.isa,
        // Kept states (docs/state-cache.md): a request about a state already read runs only
        // its question tokens.
        "state_cache": {
            "enabled": cache.budget_bytes > 0,
            "budget_bytes": cache.budget_bytes,
            "budget_mib": cache.budget_bytes >> 20,
            "min_tokens": cache.min_tokens,
            // a state of n tokens (prefix, media and state) is charged fixed + n * per_token
            "bytes_fixed": engine.state_bytes_fixed,
            "bytes_per_token": engine.state_bytes_per_token,
        },
        "batch": {
            "route": crate::routes::BATCH,
            "max_question_sets": clef_api::MAX_QUESTION_SETS,
        },
        "revision": {
            "source": engine.revision.source,
            "bundle_sha256": engine.revision.bundle_sha256,
            "config_sha256": engine.revision.config_sha256,
            // a GGUF file: its name and size
            "gguf": engine.revision.gguf.as_ref().map(|(name, bytes)| json!({
                "file": name,
                "bytes": bytes,
            })),
            "header": engine.revision.to_string(),
        },
    })
}
