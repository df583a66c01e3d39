//! Which decoded frames of a video file are used (the project's policy, model.md §7.6).
//!
//! Rule, on frame presentation times `t_i` taken relative to the first frame (`t_0 = 0`) and
//! sorted, with `S` the last frame's time, `r` the sampling rate (2 /s) and `M` the frame cap (64):
//!
//! 1. Targets: `0, 1/r, 2/r, …` up to `S` (that is `⌊S·r⌋ + 1` of them).
//! 2. If that is more than `M`, the targets are instead `M` times spread evenly over the clip:
//!    `k·S/(M−1)` for `k = 0…M−1` (both ends included).
//! 3. Each target takes the frame with the nearest time (the earlier one on a tie).
//! 4. A frame chosen by two targets (clips below `r` frames per second) is used once.

/// Indices into `times` (sorted ascending, relative to the first frame) of the frames to use,
/// ascending and distinct. Empty when `times` is empty or `max_frames` is 0.
pub fn choose_frames(times: &[f64], sample_fps: f64, max_frames: usize) -> Vec<usize> {
    let (Some(&first), Some(&last)) = (times.first(), times.last()) else {
        return Vec::new();
    };
    if max_frames == 0 || !(sample_fps.is_finite() && sample_fps > 0.0) {
        return Vec::new();
    }
    let span = (last - first).max(0.0);
    // A microsecond of slack so a frame stamped 2.4999999 s still counts as the 2.5 s target.
    let on_grid = (span * sample_fps + 1e-6).floor() as usize + 1;
    let targets: Vec<f64> = if on_grid <= max_frames {
        (0..on_grid)
            .map(|k| first + k as f64 / sample_fps)
            .collect()
    } else if max_frames == 1 {
        vec![first]
    } else {
        (0..max_frames)
            .map(|k| first + span * k as f64 / (max_frames - 1) as f64)
            .collect()
    };
    let mut chosen: Vec<usize> = Vec::with_capacity(targets.len());
    for t in targets {
        let i = nearest(times, t);
        if chosen.last() != Some(&i) {
            chosen.push(i);
        }
    }
    chosen
}

fn nearest(times: &[f64], t: f64) -> usize {
    let after = times.partition_point(|&x| x < t);
    if after == 0 {
        return 0;
    }
    if after == times.len() {
        return times.len() - 1;
    }
    if t - times[after - 1] <= times[after] - t {
        after - 1
    } else {
        after
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at_fps(fps: f64, n: usize) -> Vec<f64> {
        (0..n).map(|i| i as f64 / fps).collect()
    }

    #[test]
    fn two_per_second_from_ten_fps() {
        // 3 s at 10 fps: frames 0..29, last at 2.9 s -> targets 0, 0.5, ..., 2.5
        assert_eq!(
            choose_frames(&at_fps(10.0, 30), 2.0, 64),
            vec![0, 5, 10, 15, 20, 25]
        );
    }

    #[test]
    fn nearest_frame_with_odd_rates() {
        // 30 fps for 2 s: frame 15 is at 0.5 s exactly, 30 at 1.0 s
        assert_eq!(
            choose_frames(&at_fps(30.0, 60), 2.0, 64),
            vec![0, 15, 30, 45]
        );
        // 24 fps: 0.5 s = frame 12
        assert_eq!(
            choose_frames(&at_fps(24.0, 48), 2.0, 64),
            vec![0, 12, 24, 36]
        );
        // irregular times: 0.5 s -> 0.45 (index 2), 1.0 s -> 1.02 (index 4)
        assert_eq!(
            choose_frames(&[0.0, 0.3, 0.45, 0.7, 1.02], 2.0, 64),
            vec![0, 2, 4]
        );
        // an exact tie takes the earlier frame: 0.5 s between 0.25 and 0.75
        assert_eq!(
            choose_frames(&[0.0, 0.25, 0.75, 1.0], 2.0, 64),
            vec![0, 1, 3]
        );
    }

    #[test]
    fn slow_clips_use_each_frame_once() {
        // 1 fps: targets 0, 0.5 (tie between frames 0 and 1 -> 0), 1.0, 1.5 (tie -> 1), 2.0
        assert_eq!(choose_frames(&at_fps(1.0, 3), 2.0, 64), vec![0, 1, 2]);
    }

    #[test]
    fn long_clips_are_spread_over_the_duration() {
        // 100 s at 4 fps: 201 grid targets > 64, so 64 evenly spaced over 0..99.75 s
        let times = at_fps(4.0, 400);
        let chosen = choose_frames(&times, 2.0, 64);
        assert_eq!(chosen.len(), 64);
        assert_eq!((chosen[0], chosen[63]), (0, 399));
        for (k, &i) in chosen.iter().enumerate() {
            let target = 99.75 * k as f64 / 63.0;
            assert!((times[i] - target).abs() <= 0.125 + 1e-9, "k={k} i={i}");
        }
    }

    #[test]
    fn start_offset_is_kept() {
        let times: Vec<f64> = (0..10).map(|i| 1.0 + i as f64 * 0.25).collect();
        assert_eq!(choose_frames(&times, 2.0, 64), vec![0, 2, 4, 6, 8]);
        assert!(choose_frames(&[], 2.0, 64).is_empty());
        assert_eq!(choose_frames(&[0.0], 2.0, 64), vec![0]);
    }

    proptest! {
        #[test]
        fn chosen_are_sorted_distinct_and_bounded(
            fps in 0.5f64..120.0, n in 1usize..2000, cap in 1usize..80
        ) {
            let times = at_fps(fps, n);
            let chosen = choose_frames(&times, 2.0, cap);
            prop_assert!(!chosen.is_empty());
            prop_assert!(chosen.len() <= cap);
            prop_assert!(chosen.windows(2).all(|w| w[0] < w[1]));
            prop_assert!(*chosen.last().unwrap() < n);
            prop_assert_eq!(chosen[0], 0);
        }
    }
}
