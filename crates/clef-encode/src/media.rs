//! Where media tokens go: the layout the media crate computes (token counts, video group
//! timestamps) and the slots the encoder reports back (absolute runs of pad tokens).

/// Token layout of every image and video of a request, in request order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MediaLayout {
    pub images: Vec<ImageLayout>,
    pub videos: Vec<VideoLayout>,
}

/// One image: its merged-token count (one per 2×2 block of 16-px patches).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageLayout {
    pub merged_tokens: usize,
}

/// One video: one group per temporal patch (2 frames).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VideoLayout {
    pub groups: Vec<VideoGroup>,
}

/// A temporal group: its timestamp (mean of its two frames' times, seconds) and merged tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VideoGroup {
    pub seconds: f64,
    pub merged_tokens: usize,
}

/// Frames per temporal patch (`temporal_patch_size`).
pub const FRAMES_PER_GROUP: usize = 2;
/// Patches per merged token along each side (`spatial_merge_size`).
pub const MERGE: usize = 2;

impl ImageLayout {
    /// From a patch grid (t, h, w) in 16-px patches: t·h·w/4 merged tokens.
    pub fn from_grid(t: usize, h: usize, w: usize) -> Self {
        ImageLayout {
            merged_tokens: t * h * w / (MERGE * MERGE),
        }
    }
}

impl VideoLayout {
    /// From a patch grid (t groups, h, w) of a frame sequence indexed 0, 1, 2, … at `fps`
    /// frames per second: group g covers frames 2g and 2g+1 (the reference's frame lists
    /// assume 24 fps).
    pub fn from_grid(t: usize, h: usize, w: usize, fps: f64) -> Self {
        let times: Vec<f64> = (0..t * FRAMES_PER_GROUP).map(|i| i as f64 / fps).collect();
        Self::from_frame_times(&times, h, w)
    }

    /// From the presentation times of the sampled frames (seconds): an odd count repeats the
    /// last frame; each group's timestamp is the mean of its two frames' times, computed as
    /// transformers does (`(t0 + t1) / 2`).
    pub fn from_frame_times(times: &[f64], h: usize, w: usize) -> Self {
        let merged_tokens = h * w / (MERGE * MERGE);
        let groups = times
            .chunks(FRAMES_PER_GROUP)
            .map(|pair| {
                let first = pair[0];
                let last = pair.get(1).copied().unwrap_or(first);
                VideoGroup {
                    seconds: (first + last) / 2.0,
                    merged_tokens,
                }
            })
            .collect();
        VideoLayout { groups }
    }
}

/// Kind of media behind a run of pad tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MediaKind {
    Image,
    Video,
}

impl MediaKind {
    /// `mm_token_type_ids` value of its pad tokens.
    pub fn token_type(self) -> u8 {
        match self {
            MediaKind::Image => 1,
            MediaKind::Video => 2,
        }
    }
}

/// One run of pad tokens in the final sequence: image `item` (group 0), or group `group` of
/// video `item`. The vision tower's merged outputs replace these positions in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MediaSlot {
    pub kind: MediaKind,
    pub item: usize,
    pub group: usize,
    pub start: usize,
    pub len: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_list_timestamps_at_24_fps() {
        let v = VideoLayout::from_grid(3, 4, 6, 24.0);
        let secs: Vec<String> = v
            .groups
            .iter()
            .map(|g| format!("{:.1}", g.seconds))
            .collect();
        assert_eq!(secs, ["0.0", "0.1", "0.2"]);
        assert!(v.groups.iter().all(|g| g.merged_tokens == 6));
        let odd = VideoLayout::from_frame_times(&[0.0, 0.5, 1.0], 2, 2);
        assert_eq!(odd.groups.len(), 2);
        assert_eq!(odd.groups[1].seconds, 1.0);
        assert_eq!(ImageLayout::from_grid(1, 16, 8).merged_tokens, 32);
    }
}
