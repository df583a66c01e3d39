//! Times `resize_bicubic` against the image crate's own Catmull-Rom resize (a baseline measured
//! in the same run), plus patchify, on a synthetic 12 MP photo-sized image.
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
}
