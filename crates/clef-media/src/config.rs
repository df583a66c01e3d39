//! `processor_config.json`: the image and video preprocessing parameters of a model folder.

use std::path::Path;

use serde::Deserialize;

use crate::error::MediaError;

/// Preprocessing parameters of one modality (the `image_processor` or `video_processor` block).
///
/// `min_pixels` / `max_pixels` come from `size.shortest_edge` / `size.longest_edge`, which the
/// Qwen processors use as pixel *areas*, not edge lengths (model.md §7.1). For video they bound
/// the whole `t·h·w` volume, as in transformers' `Qwen3VLVideoProcessor`.
#[derive(Debug, Clone, PartialEq)]
pub struct PreprocessConfig {
    pub patch_size: usize,
    pub temporal_patch_size: usize,
    pub merge_size: usize,
    pub image_mean: [f64; 3],
    pub image_std: [f64; 3],
    pub rescale_factor: f64,
    pub min_pixels: u64,
    pub max_pixels: u64,
    /// PIL resampling filter id; only 3 (bicubic) is implemented.
    pub resample: u32,
    pub do_resize: bool,
    pub do_rescale: bool,
    pub do_normalize: bool,
}

impl PreprocessConfig {
    /// Side multiple every resized image must have: one merge block of patches (32 px).
    pub fn factor(&self) -> usize {
        self.patch_size * self.merge_size
    }

    /// Values per patch row: 3 channels × temporal × patch × patch (1536 for Clef).
    pub fn row_len(&self) -> usize {
        3 * self.temporal_patch_size * self.patch_size * self.patch_size
    }

    /// The normalised value of every possible byte, per channel.
    ///
    /// Matches transformers' fused rescale+normalize, which folds the rescale factor into mean
    /// and std and then computes `(v − mean/r) / (std/r)` in float32.
    pub fn value_table(&self) -> [[f32; 256]; 3] {
        let mut table = [[0f32; 256]; 3];
        for (c, row) in table.iter_mut().enumerate() {
            let (mean, std) = match (self.do_rescale, self.do_normalize) {
                (true, true) => (
                    (self.image_mean[c] * (1.0 / self.rescale_factor)) as f32,
                    (self.image_std[c] * (1.0 / self.rescale_factor)) as f32,
                ),
                (false, true) => (self.image_mean[c] as f32, self.image_std[c] as f32),
                (true, false) => (0.0, (1.0 / self.rescale_factor) as f32),
                (false, false) => (0.0, 1.0),
            };
            for (v, out) in row.iter_mut().enumerate() {
                *out = (v as f32 - mean) / std;
            }
        }
        table
    }

    fn validate(&self, which: &str) -> Result<(), MediaError> {
        let bad = |msg: String| Err(MediaError::Config(format!("{which}: {msg}")));
        if self.patch_size == 0 || self.temporal_patch_size == 0 || self.merge_size == 0 {
            return bad("patch_size, temporal_patch_size and merge_size must be positive".into());
        }
        if self.patch_size > 64 || self.temporal_patch_size > 8 || self.merge_size > 8 {
            return bad(format!(
                "implausible patch geometry {}x{}x{}",
                self.temporal_patch_size, self.patch_size, self.merge_size
            ));
        }
        if self.resample != 3 {
            return bad(format!(
                "resample {} is not supported (only 3, bicubic)",
                self.resample
            ));
        }
        if !(self.rescale_factor.is_finite() && self.rescale_factor > 0.0) {
            return bad(format!(
                "rescale_factor {} is not positive",
                self.rescale_factor
            ));
        }
        for c in 0..3 {
            if !self.image_mean[c].is_finite()
                || !self.image_std[c].is_finite()
                || self.image_std[c] == 0.0
            {
                return bad("image_mean/image_std must be finite with non-zero std".into());
            }
        }
        if self.max_pixels == 0 {
            return bad("size.longest_edge must be positive".into());
        }
        Ok(())
    }
}

/// Both preprocessing blocks of a model's `processor_config.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessorConfig {
    pub image: PreprocessConfig,
    pub video: PreprocessConfig,
}

impl Default for ProcessorConfig {
    /// Clef-Flash's image processor (model.md §7.1: patch 16, merge 2, temporal 2, mean = std =
    /// 0.5, rescale 1/255, bicubic, pixel area 65,536 – 16,777,216) and, for video, the same
    /// geometry with transformers' `Qwen3VLVideoProcessor` area bounds quoted in model.md §7.6
    /// (4,096 – 25,165,824 over the t·h·w volume).
    fn default() -> Self {
        let image = PreprocessConfig {
            patch_size: 16,
            temporal_patch_size: 2,
            merge_size: 2,
            image_mean: [0.5; 3],
            image_std: [0.5; 3],
            rescale_factor: 1.0 / 255.0,
            min_pixels: 65_536,
            max_pixels: 16_777_216,
            resample: 3,
            do_resize: true,
            do_rescale: true,
            do_normalize: true,
        };
        let video = PreprocessConfig {
            min_pixels: 4_096,
            max_pixels: 25_165_824,
            ..image.clone()
        };
        ProcessorConfig { image, video }
    }
}

#[derive(Deserialize)]
struct RawFile {
    image_processor: Option<RawBlock>,
    video_processor: Option<RawBlock>,
}

#[derive(Deserialize)]
struct RawSize {
    shortest_edge: Option<u64>,
    longest_edge: Option<u64>,
}

#[derive(Deserialize)]
struct RawBlock {
    patch_size: Option<usize>,
    temporal_patch_size: Option<usize>,
    merge_size: Option<usize>,
    image_mean: Option<[f64; 3]>,
    image_std: Option<[f64; 3]>,
    rescale_factor: Option<f64>,
    size: Option<RawSize>,
    min_pixels: Option<u64>,
    max_pixels: Option<u64>,
    resample: Option<u32>,
    do_resize: Option<bool>,
    do_rescale: Option<bool>,
    do_normalize: Option<bool>,
}

impl RawBlock {
    fn apply(self, base: &PreprocessConfig) -> PreprocessConfig {
        let size = self.size.unwrap_or(RawSize {
            shortest_edge: None,
            longest_edge: None,
        });
        PreprocessConfig {
            patch_size: self.patch_size.unwrap_or(base.patch_size),
            temporal_patch_size: self.temporal_patch_size.unwrap_or(base.temporal_patch_size),
            merge_size: self.merge_size.unwrap_or(base.merge_size),
            image_mean: self.image_mean.unwrap_or(base.image_mean),
            image_std: self.image_std.unwrap_or(base.image_std),
            rescale_factor: self.rescale_factor.unwrap_or(base.rescale_factor),
            // Older processors spell the bounds `min_pixels`/`max_pixels`; `size` wins.
            min_pixels: size
                .shortest_edge
                .or(self.min_pixels)
                .unwrap_or(base.min_pixels),
            max_pixels: size
                .longest_edge
                .or(self.max_pixels)
                .unwrap_or(base.max_pixels),
            resample: self.resample.unwrap_or(base.resample),
            do_resize: self.do_resize.unwrap_or(base.do_resize),
            do_rescale: self.do_rescale.unwrap_or(base.do_rescale),
            do_normalize: self.do_normalize.unwrap_or(base.do_normalize),
        }
    }
}

impl ProcessorConfig {
    /// Reads a model folder's `processor_config.json` (the file itself, not the folder).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, MediaError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| MediaError::Config(format!("{}: {e}", path.display())))?;
        Self::from_json(&text).map_err(|e| match e {
            MediaError::Config(m) => MediaError::Config(format!("{}: {m}", path.display())),
            other => other,
        })
    }

    /// Parses the JSON text of `processor_config.json`. Missing fields take the defaults of
    /// [`ProcessorConfig::default`]; a missing `video_processor` block reuses the image
    /// block's geometry with the default video bounds.
    pub fn from_json(text: &str) -> Result<Self, MediaError> {
        let raw: RawFile =
            serde_json::from_str(text).map_err(|e| MediaError::Config(e.to_string()))?;
        let defaults = ProcessorConfig::default();
        let image = match raw.image_processor {
            Some(block) => block.apply(&defaults.image),
            None => defaults.image.clone(),
        };
        let video_base = PreprocessConfig {
            min_pixels: defaults.video.min_pixels,
            max_pixels: defaults.video.max_pixels,
            ..image.clone()
        };
        let video = match raw.video_processor {
            Some(block) => block.apply(&video_base),
            None => video_base,
        };
        image.validate("image_processor")?;
        video.validate("video_processor")?;
        Ok(ProcessorConfig { image, video })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_fields_take_defaults() {
        let cfg = ProcessorConfig::from_json(
            r#"{"image_processor": {"size": {"longest_edge": 262144}}}"#,
        )
        .unwrap();
        assert_eq!(cfg.image.max_pixels, 262_144);
        assert_eq!(cfg.image.min_pixels, 65_536);
        assert_eq!(cfg.video.patch_size, 16);
        assert_eq!(
            (cfg.video.min_pixels, cfg.video.max_pixels),
            (4_096, 25_165_824)
        );
        assert_eq!(
            ProcessorConfig::from_json("{}").unwrap(),
            ProcessorConfig::default()
        );
    }

    #[test]
    fn older_min_max_pixels_spelling() {
        let cfg = ProcessorConfig::from_json(
            r#"{"image_processor": {"min_pixels": 3136, "max_pixels": 1003520}}"#,
        )
        .unwrap();
        assert_eq!(
            (cfg.image.min_pixels, cfg.image.max_pixels),
            (3136, 1_003_520)
        );
    }

    #[test]
    fn inconsistent_configs_are_refused() {
        for bad in [
            r#"{"image_processor": {"resample": 2}}"#,
            r#"{"image_processor": {"patch_size": 0}}"#,
            r#"{"video_processor": {"image_std": [0.5, 0.0, 0.5]}}"#,
            r#"{"image_processor": {"rescale_factor": -1}}"#,
            r#"not json"#,
        ] {
            assert!(
                matches!(ProcessorConfig::from_json(bad), Err(MediaError::Config(_))),
                "{bad}"
            );
        }
        let missing = ProcessorConfig::from_file("/nonexistent/processor_config.json").unwrap_err();
        assert_eq!(missing.status(), 500);
    }

    #[test]
    fn value_table_is_the_fused_normalisation() {
        let t = ProcessorConfig::default().image.value_table();
        assert_eq!((t[0][0], t[1][255]), (-1.0, 1.0));
        assert!((t[2][128] - (128.0 / 255.0 - 0.5) / 0.5).abs() < 1e-7);
    }
}
