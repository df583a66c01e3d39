//! The release's files must agree where they describe the same thing. The encoder takes the
//! media token ids from `tokenizer.json` while transformers takes them from `config.json`, and
//! media is cut into patches by `processor_config.json`'s geometry while the tower's patch
//! embedding is sized by `vision_config`: a mismatch would run without error and place or shape
//! the media wrongly, so it is refused at load, naming both files.

use super::LoadError;
use clef_encode::SpecialTokens;
use clef_media::{PreprocessConfig, ProcessorConfig};
use clef_model::config::{ModelConfig, VisionConfig};

pub(super) fn check(
    config: &ModelConfig,
    special: &SpecialTokens,
    processor: &ProcessorConfig,
) -> Result<(), LoadError> {
    let ids = [
        (
            "image_token_id",
            config.image_token_id,
            "<|image_pad|>",
            special.image_pad,
        ),
        (
            "video_token_id",
            config.video_token_id,
            "<|video_pad|>",
            special.video_pad,
        ),
        (
            "vision_start_token_id",
            config.vision_start_token_id,
            "<|vision_start|>",
            special.vision_start,
        ),
        (
            "vision_end_token_id",
            config.vision_end_token_id,
            "<|vision_end|>",
            special.vision_end,
        ),
    ];
    for (key, declared, token, actual) in ids {
        if let Some(declared) = declared {
            if declared != actual {
                return Err(LoadError::Disagreement(format!(
                    "config.json says {key} {declared}, but tokenizer.json gives {token} the id \
                     {actual}"
                )));
            }
        }
    }
    if let Some(vision) = &config.vision_config {
        geometry("image_processor", &processor.image, vision)?;
        geometry("video_processor", &processor.video, vision)?;
        if vision.in_channels != 3 {
            return Err(LoadError::Disagreement(format!(
                "config.json's vision_config has in_channels {}, but images and video frames \
                 are RGB (3 channels)",
                vision.in_channels
            )));
        }
    }
    Ok(())
}

fn geometry(which: &str, p: &PreprocessConfig, vision: &VisionConfig) -> Result<(), LoadError> {
    let pairs = [
        ("patch_size", p.patch_size, "patch_size", vision.patch_size),
        (
            "temporal_patch_size",
            p.temporal_patch_size,
            "temporal_patch_size",
            vision.temporal_patch_size,
        ),
        (
            "merge_size",
            p.merge_size,
            "spatial_merge_size",
            vision.spatial_merge_size,
        ),
    ];
    for (pkey, pval, vkey, vval) in pairs {
        if pval != vval {
            return Err(LoadError::Disagreement(format!(
                "processor_config.json's {which} has {pkey} {pval}, but config.json's \
                 vision_config has {vkey} {vval}"
            )));
        }
    }
    Ok(())
}
