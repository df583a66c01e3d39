//! Times `resize_bicubic` against the image crate's own Catmull-Rom resize (a baseline measured
//! in the same run), plus patchify, on a synthetic 12 MP photo-sized image; and, when ffmpeg is
//! installed, `prepare_video_file` on a 10 s 1280x720 30 fps H.264 clip.
//!
//! `cargo run --release -p clef-media --example resize_timing`

use std::time::Instant;

use clef_media::{
    image_target_size, image_to_patches, resize_bicubic, MediaLimits, ProcessorConfig, RgbImage,
};

fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> f64 {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let (w, h) = (4000u32, 3000u32);
    let img = RgbImage::from_fn(w, h, |x, y| {
        image::Rgb([(x * 7 + y) as u8, (y * 3) as u8, ((x ^ y) * 5) as u8])
    });
    let cfg = ProcessorConfig::default();
    let limits = MediaLimits::default();
    let (th, tw) = image_target_size(h as usize, w as usize, &cfg, &limits).unwrap();
    let (tw, th) = (tw as u32, th as u32);
    let ours = best_of(5, || resize_bicubic(&img, tw, th));
    let baseline = best_of(5, || {
        image::imageops::resize(&img, tw, th, image::imageops::FilterType::CatmullRom)
    });
    let resized = resize_bicubic(&img, tw, th);
    let patch = best_of(5, || image_to_patches(&resized, &cfg).unwrap());
    println!("{w}x{h} -> {tw}x{th}");
    println!("resize_bicubic (Pillow-exact): {:.1} ms", ours * 1e3);
    println!(
        "image::imageops::resize CatmullRom (baseline): {:.1} ms",
        baseline * 1e3
    );
    println!("ratio ours/baseline: {:.2}", ours / baseline);
    println!("image_to_patches {}x{}: {:.1} ms", tw, th, patch * 1e3);

    video_timing(&cfg, &limits);
}

fn video_timing(cfg: &ProcessorConfig, limits: &MediaLimits) {
    let dir = std::env::temp_dir().join(format!("clef-media-timing-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let clip = dir.join("clip.mp4");
    let made = std::process::Command::new("ffmpeg")
        .args([
            "-v",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            "testsrc2=size=1280x720:rate=30:duration=10",
        ])
        .args([
            "-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p",
        ])
        .arg(&clip)
        .status()
        .is_ok_and(|s| s.success());
    if !made {
        println!("ffmpeg not available: video timing skipped");
        return;
    }
    let bytes = std::fs::read(&clip).unwrap_or_default();
    let t = Instant::now();
    let v = clef_media::prepare_video_file("video/mp4", &bytes, cfg, limits);
    let elapsed = t.elapsed().as_secs_f64();
    match v {
        Ok(v) => println!(
            "prepare_video_file 10 s 1280x720 30 fps H.264 ({} KiB): {:.0} ms, {} frames, grid {:?}",
            bytes.len() / 1024,
            elapsed * 1e3,
            v.frame_seconds.len(),
            v.input.grid
        ),
        Err(e) => println!("prepare_video_file failed: {e}"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}
