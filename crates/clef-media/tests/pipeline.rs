//! The image pipeline end to end on images that need resizing (the golden records avoid them):
//! decode → smart_resize target → Pillow bicubic → patch rows.

mod common;

use clef_media::{
    image_target_size, image_to_patches, prepare_image, prepare_images, EncodedMedia, MediaError,
    MediaLimits, ProcessorConfig,
};
use common::{data_dir, fixtures_dir, load_rgb, read};

fn tiny_a() -> ProcessorConfig {
    ProcessorConfig::from_file(fixtures_dir().join("models/tiny-a/processor_config.json")).unwrap()
}

#[test]
fn resized_images_equal_pillow_then_patchify() {
    let cfg = tiny_a();
    let limits = MediaLimits::default();
    let dir = data_dir().join("resize");
    // (input, the smart_resize target under tiny-a's bounds, Pillow's output at that size)
    for (input, (h, w), expected) in [
        ("noise_down_in.png", (64, 96), "noise_down_out_96x64.png"),
        (
            "smooth_big_down_in.png",
            (128, 160),
            "smooth_big_down_out_160x128.png",
        ),
    ] {
        let img = load_rgb(dir.join(input));
        assert_eq!(
            image_target_size(img.height() as usize, img.width() as usize, &cfg, &limits).unwrap(),
            (h, w)
        );
        let prepared = prepare_image("image/png", &read(dir.join(input)), &cfg, &limits).unwrap();
        let want = image_to_patches(&load_rgb(dir.join(expected)), &cfg).unwrap();
        assert_eq!(prepared.input, want, "{input}");
        assert_eq!(prepared.merged_tokens, h * w / 1024);
    }
}

#[test]
fn server_budget_caps_the_processor_bound() {
    let cfg = ProcessorConfig::default();
    let limits = MediaLimits {
        max_image_pixels: 262_144,
        ..MediaLimits::default()
    };
    // 4000x3000 under the LUT-6 budget (262,144 px): 256 merged tokens at most.
    assert_eq!(
        image_target_size(3000, 4000, &cfg, &limits).unwrap(),
        (416, 576)
    );
    // And the processor's own longest_edge wins when it is smaller.
    let tiny = tiny_a();
    let (h, w) = image_target_size(3000, 4000, &tiny, &MediaLimits::default()).unwrap();
    assert!(h * w <= 65_536 && h % 32 == 0 && w % 32 == 0, "{h}x{w}");
}

#[test]
fn request_level_counts_and_totals() {
    let cfg = tiny_a();
    let png = read(fixtures_dir().join("golden/tiny-a/media/a22_gradient_64x64.png"));
    let item = EncodedMedia {
        content_type: "image/png".into(),
        bytes: png.clone(),
    };
    let limits = MediaLimits::default();
    assert_eq!(
        prepare_images(&vec![item.clone(); 4], &cfg, &limits)
            .unwrap()
            .len(),
        4
    );
    assert!(matches!(
        prepare_images(&vec![item.clone(); 5], &cfg, &limits),
        Err(MediaError::TooMany { .. })
    ));
    let tight = MediaLimits {
        max_total_image_bytes: png.len() as u64 * 2,
        ..limits
    };
    assert!(matches!(
        prepare_images(&vec![item; 3], &cfg, &tight),
        Err(MediaError::TooManyBytes { .. })
    ));
}
