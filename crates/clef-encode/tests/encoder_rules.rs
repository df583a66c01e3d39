//! Encoder rules beyond the fixtures: option labels past the cached ones, empty spans, error
//! mapping, piece concatenation, media slot positions.

mod common;

use clef_api::{parse_request, ApiError, Limits, Request};
use clef_encode::{
    EncodeError, EncodeOptions, ImageLayout, MediaKind, MediaLayout, Truncation, VideoLayout,
    DEFAULT_MAX_LENGTH,
};
use common::{qwen, tiny};

fn request(body: &str) -> Request {
    parse_request(body.as_bytes(), &Limits::reference()).unwrap()
}

#[test]
fn defaults() {
    let o = EncodeOptions::default();
    assert_eq!(
        (o.max_length, o.truncation),
        (DEFAULT_MAX_LENGTH, Truncation::Refuse)
    );
    assert_eq!(DEFAULT_MAX_LENGTH, 16_384);
}

#[test]
fn many_options_use_labels_beyond_the_cache() {
    let options: Vec<String> = (0..300).map(|i| format!(r#""opt{i:03}":"d{i}""#)).collect();
    let body = format!(
        r#"{{"model":"clef","state":"s","questions":{{"q":{{"type":"choice","instructions":"pick","criteria":{{{}}}}}}}}}"#,
        options.join(",")
    );
    let req = request(&body);
    for enc in [tiny(), qwen()] {
        let e = enc
            .encode(&req, &MediaLayout::default(), &EncodeOptions::default())
            .unwrap();
        assert!(e.pieces.iter().any(|p| p == "OPTION 300: "));
        let mut concatenated = Vec::new();
        for piece in &e.pieces {
            concatenated.extend(enc.tokenize(piece).unwrap());
        }
        assert_eq!(concatenated, e.input_ids);
        assert_eq!(e.questions[0].options.len(), 300);
        assert_eq!(e.questions[0].options[299].id, "opt299");
    }
}

#[test]
fn empty_id_without_instructions_is_refused_not_a_crash() {
    let req = request(r#"{"model":"clef","state":"s","questions":{"":{"type":"noul"}}}"#);
    let err = tiny()
        .encode(&req, &MediaLayout::default(), &EncodeOptions::default())
        .unwrap_err();
    assert!(matches!(err, EncodeError::EmptySpan { .. }), "{err}");
    let api = ApiError::from(err);
    assert_eq!((api.status, api.code), (422, 5012));
}

#[test]
fn schema_too_long_is_refused_even_when_truncating() {
    let req = request(
        r#"{"model":"clef","state":"","questions":{"q":{"type":"noul","instructions":"i"}}}"#,
    );
    let full = tiny()
        .encode(&req, &MediaLayout::default(), &EncodeOptions::default())
        .unwrap();
    assert_eq!(full.state_tokens, 0);
    let fixed = full.input_ids.len();
    let opts = EncodeOptions {
        max_length: fixed - 1,
        truncation: Truncation::State,
    };
    let err = tiny()
        .encode(&req, &MediaLayout::default(), &opts)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "schema requires {fixed} tokens before state; maximum is {}",
            fixed - 1
        )
    );
    assert_eq!(ApiError::from(err).status, 413);
}

#[test]
fn truncation_keeps_the_first_state_tokens() {
    let req = request(
        r#"{"model":"clef","state":"one two three four five six seven eight nine ten","questions":{"q":{"type":"noul","instructions":"i"}}}"#,
    );
    let full = tiny()
        .encode(&req, &MediaLayout::default(), &EncodeOptions::default())
        .unwrap();
    let state = full.state_span();
    let opts = EncodeOptions {
        max_length: full.input_ids.len() - 3,
        truncation: Truncation::State,
    };
    let cut = tiny().encode(&req, &MediaLayout::default(), &opts).unwrap();
    assert_eq!(cut.state_tokens, full.state_tokens);
    assert_eq!(cut.state_tokens_kept, full.state_tokens - 3);
    assert_eq!(
        &cut.input_ids[..state.start + cut.state_tokens_kept],
        &full.input_ids[..state.start + cut.state_tokens_kept]
    );
    assert_eq!(
        &cut.input_ids[cut.state_span().end..],
        &full.input_ids[state.end..]
    );
    assert_eq!(
        cut.questions[0].span.start + 3,
        full.questions[0].span.start
    );
}

#[test]
fn media_slots_are_absolute_and_typed() {
    let png = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";
    let body = format!(
        r#"{{"model":"clef","state":"s","questions":{{"q":{{"type":"noul","instructions":"i"}}}},"images":["{png}","{png}"],"videos":[{{"frames":["{png}","{png}","{png}"],"fps":4}}]}}"#
    );
    let req = request(&body);
    let media = MediaLayout {
        images: vec![
            ImageLayout { merged_tokens: 3 },
            ImageLayout { merged_tokens: 5 },
        ],
        videos: vec![VideoLayout::from_frame_times(&[0.0, 0.25, 0.5], 2, 4)],
    };
    let e = qwen()
        .encode(&req, &media, &EncodeOptions::default())
        .unwrap();
    let s = qwen().special_tokens();
    let kinds: Vec<(MediaKind, usize, usize, usize)> = e
        .media_slots
        .iter()
        .map(|m| (m.kind, m.item, m.group, m.len))
        .collect();
    assert_eq!(
        kinds,
        [
            (MediaKind::Image, 0, 0, 3),
            (MediaKind::Image, 1, 0, 5),
            (MediaKind::Video, 0, 0, 2),
            (MediaKind::Video, 0, 1, 2)
        ]
    );
    assert_eq!(e.media_offset, 36);
    assert_eq!(e.input_ids[e.media_offset], s.vision_start);
    assert_eq!(e.media_slots[0].start, e.media_offset + 1);
    let types = e.token_types();
    assert_eq!(types.iter().filter(|&&t| t == 1).count(), 8);
    assert_eq!(types.iter().filter(|&&t| t == 2).count(), 4);
    for slot in &e.media_slots {
        let pad = if slot.kind == MediaKind::Image {
            s.image_pad
        } else {
            s.video_pad
        };
        assert!(e.input_ids[slot.start..slot.start + slot.len]
            .iter()
            .all(|&t| t == pad));
        assert_eq!(e.input_ids[slot.start - 1], s.vision_start);
        assert_eq!(e.input_ids[slot.start + slot.len], s.vision_end);
    }
    // Groups at (0 + 0.25)/2 and (0.5 + 0.5)/2 seconds (the odd last frame repeats).
    assert!(
        e.pieces[1].contains("<0.1 seconds>") && e.pieces[1].contains("<0.5 seconds>"),
        "{}",
        e.pieces[1]
    );
    assert!(e.pieces[1].ends_with("<|vision_end|><|vision_end|>\n"));
    assert_eq!(e.state_span().start, e.media_offset + e.media_tokens);
}
