//! Pixel rows for the vision tower in the reference's row order (model.md §7.2).

use image::RgbImage;

use crate::cancel::Cancel;
use crate::config::{PreprocessConfig, ProcessorConfig};
use crate::error::MediaError;

/// A media item's patch grid: `t` temporal patches (frame pairs), `h × w` spatial patches of
/// `patch_size` pixels (16 px for Clef).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PatchGrid {
    pub t: usize,
    pub h: usize,
    pub w: usize,
}

impl PatchGrid {
    /// Number of patch rows, `t·h·w`.
    pub fn patches(&self) -> usize {
        self.t * self.h * self.w
    }

    /// LLM tokens after the `merge × merge` merger, `t·h·w / merge²`.
    pub fn merged_tokens(&self, merge_size: usize) -> usize {
        self.patches() / (merge_size * merge_size).max(1)
    }

    /// Merged tokens of one temporal group, `h·w / merge²`.
    pub fn merged_tokens_per_group(&self, merge_size: usize) -> usize {
        self.h * self.w / (merge_size * merge_size).max(1)
    }
}

/// Normalised pixel rows of one image or video plus their grid.
#[derive(Debug, Clone, PartialEq)]
pub struct VisionInput {
    /// `[grid.patches(), row_len]` row-major: each row is one patch with values ordered
    /// (channel, temporal, y, x); rows ordered (temporal group, merge-block row, merge-block
    /// column, row in block, column in block). Values `(v/255 − mean)/std`.
    pub pixel_rows: Vec<f32>,
    pub grid: PatchGrid,
    /// Values per row (3 · temporal · patch², 1536 for Clef).
    pub row_len: usize,
}

/// One image, with the image processor's parameters: the frame is duplicated along the
/// temporal axis (T = temporal_patch_size). The image's sides must be multiples of
/// `patch_size · merge_size` (what smart_resize gives); otherwise an error, never a panic.
pub fn image_to_patches(img: &RgbImage, cfg: &ProcessorConfig) -> Result<VisionInput, MediaError> {
    image_patches(img, &cfg.image, Cancel::never())
}

/// Video frames, with the video processor's parameters: consecutive frames form the temporal
/// patches ((0,1), (2,3), … for T = 2); when the count is not a multiple of the temporal patch
/// size the last frame is repeated. All frames must have the same size, a multiple of
/// `patch_size · merge_size`.
pub fn frames_to_patches(
    frames: &[RgbImage],
    cfg: &ProcessorConfig,
) -> Result<VisionInput, MediaError> {
    frame_patches(frames, &cfg.video, Cancel::never())
}

pub(crate) fn image_patches(
    img: &RgbImage,
    cfg: &PreprocessConfig,
    cancel: Cancel,
) -> Result<VisionInput, MediaError> {
    let frames: Vec<&RgbImage> = vec![img; cfg.temporal_patch_size];
    patchify(&frames, cfg, cancel)
}

pub(crate) fn frame_patches(
    frames: &[RgbImage],
    cfg: &PreprocessConfig,
    cancel: Cancel,
) -> Result<VisionInput, MediaError> {
    let Some(last) = frames.last() else {
        return Err(MediaError::InvalidItem(
            "a video needs at least one frame".into(),
        ));
    };
    let mut refs: Vec<&RgbImage> = frames.iter().collect();
    while !refs.len().is_multiple_of(cfg.temporal_patch_size) {
        refs.push(last);
    }
    patchify(&refs, cfg, cancel)
}

/// Polls `cancel` once per row of merge blocks (m·p pixel rows of every frame of the group).
fn patchify(
    frames: &[&RgbImage],
    cfg: &PreprocessConfig,
    cancel: Cancel,
) -> Result<VisionInput, MediaError> {
    let first = frames
        .first()
        .ok_or_else(|| MediaError::InvalidItem("no frames".into()))?;
    let (width, height) = (first.width() as usize, first.height() as usize);
    for (index, f) in frames.iter().enumerate() {
        if f.dimensions() != first.dimensions() {
            return Err(MediaError::FrameSizeMismatch {
                index,
                width: f.width(),
                height: f.height(),
                first_width: first.width(),
                first_height: first.height(),
            });
        }
    }
    let (p, tp, m) = (cfg.patch_size, cfg.temporal_patch_size, cfg.merge_size);
    let factor = p * m;
    if width == 0 || height == 0 || width % factor != 0 || height % factor != 0 {
        return Err(MediaError::ResizeBounds {
            height: height as u64,
            width: width as u64,
            reason: format!("sides must be positive multiples of {factor} to patchify"),
        });
    }
    let grid = PatchGrid {
        t: frames.len() / tp,
        h: height / p,
        w: width / p,
    };
    let row_len = cfg.row_len();
    let table = cfg.value_table();
    let mut rows = vec![0f32; grid.patches() * row_len];
    let mut out = rows.chunks_exact_mut(row_len);
    for group in frames.chunks_exact(tp) {
        for block_row in 0..grid.h / m {
            cancel.check()?;
            for block_col in 0..grid.w / m {
                for in_row in 0..m {
                    for in_col in 0..m {
                        let (pr, pc) = (block_row * m + in_row, block_col * m + in_col);
                        // `rows` has exactly one chunk per patch, visited in this order.
                        let Some(row) = out.next() else {
                            return Err(MediaError::InvalidItem("patch row count mismatch".into()));
                        };
                        fill_patch(row, group, pr * p, pc * p, p, width, &table);
                    }
                }
            }
        }
    }
    Ok(VisionInput {
        pixel_rows: rows,
        grid,
        row_len,
    })
}

/// Writes one patch row: for each channel, each frame of the temporal group, the p×p pixels.
fn fill_patch(
    row: &mut [f32],
    group: &[&RgbImage],
    y0: usize,
    x0: usize,
    p: usize,
    width: usize,
    table: &[[f32; 256]; 3],
) {
    let mut i = 0;
    for (c, lut) in table.iter().enumerate() {
        for frame in group {
            let raw = frame.as_raw();
            for y in y0..y0 + p {
                let line = &raw[(y * width + x0) * 3..(y * width + x0 + p) * 3];
                for px in line.chunks_exact(3) {
                    row[i] = lut[px[c] as usize];
                    i += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_order_matches_the_reference_layout() {
        // Encode (x, y, channel) in the pixel values, then check where rows land.
        let pcfg = ProcessorConfig::default();
        let cfg = pcfg.image.clone();
        let img = RgbImage::from_fn(64, 32, |x, y| image::Rgb([x as u8, y as u8, 200]));
        let v = image_to_patches(&img, &pcfg).unwrap();
        assert_eq!(v.grid, PatchGrid { t: 1, h: 2, w: 4 });
        assert_eq!(v.pixel_rows.len(), 8 * 1536);
        let t = cfg.value_table();
        // Row 0: patch (0,0); row 1: (0,1); row 2: (1,0); row 3: (1,1); row 4: (0,2) ...
        let expect_origin = [
            (0, 0),
            (0, 16),
            (16, 0),
            (16, 16),
            (0, 32),
            (0, 48),
            (16, 32),
            (16, 48),
        ];
        for (r, (y0, x0)) in expect_origin.iter().enumerate() {
            let row = &v.pixel_rows[r * 1536..(r + 1) * 1536];
            // channel 0 (x), temporal 0, y = 3, x = 5
            assert_eq!(row[3 * 16 + 5], t[0][x0 + 5]);
            // channel 1 (y), temporal 1, y = 7, x = 2
            assert_eq!(row[512 + 256 + 7 * 16 + 2], t[1][y0 + 7]);
            assert_eq!(row[1024], t[2][200]);
        }
    }

    #[test]
    fn odd_frame_count_repeats_the_last() {
        let pcfg = ProcessorConfig::default();
        let cfg = pcfg.video.clone();
        let frames: Vec<RgbImage> = (0..3)
            .map(|i| RgbImage::from_pixel(32, 32, image::Rgb([i * 50, 0, 0])))
            .collect();
        let v = frames_to_patches(&frames, &pcfg).unwrap();
        assert_eq!(v.grid, PatchGrid { t: 2, h: 2, w: 2 });
        let t = cfg.value_table();
        let row4 = &v.pixel_rows[4 * 1536..5 * 1536];
        assert_eq!(row4[0], t[0][100]);
        assert_eq!(row4[256], t[0][100]);
        let row0 = &v.pixel_rows[..1536];
        assert_eq!((row0[0], row0[256]), (t[0][0], t[0][50]));
    }

    #[test]
    fn misaligned_or_mismatched_frames_are_errors() {
        let cfg = ProcessorConfig::default();
        assert!(image_to_patches(&RgbImage::new(48, 32), &cfg).is_err());
        let frames = vec![RgbImage::new(32, 32), RgbImage::new(64, 32)];
        assert!(matches!(
            frames_to_patches(&frames, &cfg),
            Err(MediaError::FrameSizeMismatch { .. })
        ));
        assert!(frames_to_patches(&[], &cfg).is_err());
    }
}
