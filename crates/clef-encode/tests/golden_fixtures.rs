//! The encoding parts of golden/tiny-a and golden/nano (tiny vocabulary), media records
//! included: layout from the fixtures' patch grids, slots and token types checked.

mod common;

use clef_api::{Json, Limits, Request, VideoInput};
use clef_encode::{EncodeOptions, ImageLayout, MediaKind, MediaLayout, Truncation, VideoLayout};
use common::*;

/// Layout from the `media` record: image grid (t,h,w) → t·h·w/4 tokens; video grid (t,h,w)
/// → t groups of h·w/4 at the request's frame rate (24 fps for bare frame lists).
fn layout(req: &Request, media: Option<&Json>) -> MediaLayout {
    let Some(media) = media.and_then(Json::as_object) else {
        return MediaLayout::default();
    };
    let grids = |key: &str| -> Vec<Vec<usize>> {
        media
            .get(key)
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(usizes)
            .collect()
    };
    let images = grids("image_grid_thw")
        .iter()
        .map(|g| ImageLayout::from_grid(g[0], g[1], g[2]))
        .collect();
    let videos = grids("video_grid_thw")
        .iter()
        .zip(&req.videos)
        .map(|(g, input)| {
            let fps = match input {
                VideoInput::Frames { fps, .. } => *fps,
                VideoInput::File(_) => panic!("fixtures hold frame lists only"),
            };
            VideoLayout::from_grid(g[0], g[1], g[2], fps)
        })
        .collect();
    MediaLayout { images, videos }
}

#[test]
fn golden_encodings() {
    let mut files = json_files("golden/tiny-a");
    files.extend(json_files("golden/nano"));
    assert_eq!(files.len(), 37);
    let mut with_media = 0;
    for path in files {
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let case = load(&path);
        let req = Request::from_json(case.get("request").unwrap(), &Limits::reference()).unwrap();
        let media = layout(&req, case.get("media"));
        let opts = EncodeOptions {
            max_length: usize_of(case.get("max_length").unwrap()),
            truncation: Truncation::State,
        };
        let enc = tiny()
            .encode(&req, &media, &opts)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let want: Vec<u32> = usizes(case.get("input_ids").unwrap())
            .into_iter()
            .map(|i| i as u32)
            .collect();
        assert_eq!(enc.input_ids, want, "{name}: input_ids");
        check_structure(&name, &enc, &case);
        if let Some(m) = case.get("media").and_then(Json::as_object) {
            with_media += 1;
            assert_eq!(
                enc.media_offset,
                usize_of(m.get("token_offset").unwrap()),
                "{name}"
            );
            assert_eq!(
                enc.media_tokens,
                usize_of(m.get("media_token_count").unwrap()),
                "{name}"
            );
            let types: Vec<usize> = enc.token_types().into_iter().map(usize::from).collect();
            assert_eq!(
                types,
                usizes(m.get("mm_token_type_ids").unwrap()),
                "{name}: token types"
            );
            // Slots in order: images, then each video's groups.
            let slots: Vec<(MediaKind, usize, usize)> = enc
                .media_slots
                .iter()
                .map(|s| (s.kind, s.item, s.group))
                .collect();
            let mut want_slots = Vec::new();
            for i in 0..media.images.len() {
                want_slots.push((MediaKind::Image, i, 0));
            }
            for (v, video) in media.videos.iter().enumerate() {
                for g in 0..video.groups.len() {
                    want_slots.push((MediaKind::Video, v, g));
                }
            }
            assert_eq!(slots, want_slots, "{name}");
            for slot in &enc.media_slots {
                let pad = match slot.kind {
                    MediaKind::Image => tiny().special_tokens().image_pad,
                    MediaKind::Video => tiny().special_tokens().video_pad,
                };
                assert!(enc.input_ids[slot.start..slot.start + slot.len]
                    .iter()
                    .all(|&t| t == pad));
            }
        } else {
            assert_eq!(enc.media_tokens, 0);
        }
    }
    assert_eq!(with_media, 6);
}

#[test]
fn special_tokens_come_from_the_tokenizer() {
    let s = tiny().special_tokens();
    assert_eq!(
        (
            s.im_start,
            s.im_end,
            s.endoftext,
            s.vision_start,
            s.vision_end,
            s.image_pad,
            s.video_pad
        ),
        (769, 770, 768, 777, 778, 780, 781)
    );
    let s = qwen().special_tokens();
    assert_eq!(
        (
            s.im_start,
            s.im_end,
            s.endoftext,
            s.vision_start,
            s.vision_end,
            s.image_pad,
            s.video_pad
        ),
        (248045, 248046, 248044, 248053, 248054, 248056, 248057)
    );
}

#[test]
fn media_layout_must_match_the_request() {
    let case = load(&fixtures().join("golden/tiny-a/a22_image_one.json"));
    let req = Request::from_json(case.get("request").unwrap(), &Limits::reference()).unwrap();
    let opts = EncodeOptions::default();
    let err = tiny()
        .encode(&req, &MediaLayout::default(), &opts)
        .unwrap_err();
    assert_eq!(clef_api::ApiError::from(err).status, 500);
    let zero = MediaLayout {
        images: vec![ImageLayout { merged_tokens: 0 }],
        videos: vec![],
    };
    assert!(tiny().encode(&req, &zero, &opts).is_err());
}

#[test]
fn video_timestamps_follow_the_frame_rate() {
    let case = load(&fixtures().join("golden/tiny-a/a26_video.json"));
    let req = Request::from_json(case.get("request").unwrap(), &Limits::reference()).unwrap();
    let media = MediaLayout {
        images: vec![],
        videos: vec![VideoLayout::from_grid(2, 4, 4, 2.0)],
    };
    let enc = tiny()
        .encode(&req, &media, &EncodeOptions::default())
        .unwrap();
    // Frames 0,1 and 2,3 at 2 fps: 0.25 s and 1.25 s, printed with one decimal, ties to even.
    assert!(enc.pieces[1].contains("<0.2 seconds>"), "{}", enc.pieces[1]);
    assert!(enc.pieces[1].contains("<1.2 seconds>"), "{}", enc.pieces[1]);
}
