//! Every validation rule of api.md §2 and §7, with its HTTP status and Workers AI code, under
//! both limit profiles.

use clef_api::{
    parse_request, parse_routed_request, Criteria, Json, Limits, Profile, QuestionKind, Request,
    VideoInput,
};

const PNG_1X1: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";

fn limits(profile: Profile) -> Limits {
    Limits::for_profile(profile)
}

fn parse(body: &str, profile: Profile) -> Result<Request, clef_api::ApiError> {
    parse_request(body.as_bytes(), &limits(profile))
}

#[track_caller]
fn refused(body: &str, profile: Profile, status: u16, code: u32, needle: &str) {
    match parse(body, profile) {
        Ok(_) => panic!("accepted under {profile}: {body}"),
        Err(e) => {
            assert_eq!(
                (e.status, e.code),
                (status, code),
                "{profile}: {e} for {body}"
            );
            assert!(e.message.contains(needle), "{e:?} lacks {needle:?}");
        }
    }
}

#[track_caller]
fn refused_both(body: &str, status: u16, code: u32, needle: &str) {
    refused(body, Profile::Workers, status, code, needle);
    refused(body, Profile::Reference, status, code, needle);
}

#[track_caller]
fn accepted(body: &str, profile: Profile) -> Request {
    parse(body, profile).unwrap_or_else(|e| panic!("refused under {profile}: {e} for {body}"))
}

fn with_question(q: &str) -> String {
    format!(r#"{{"model":"clef","state":"s","questions":{{"q":{q}}}}}"#)
}

fn with_questions(n: usize) -> String {
    let qs: Vec<String> = (0..n)
        .map(|i| format!(r#""q{i}":{{"type":"noul","instructions":"i"}}"#))
        .collect();
    format!(
        r#"{{"model":"clef","state":"s","questions":{{{}}}}}"#,
        qs.join(",")
    )
}

fn choice_with(n: usize) -> String {
    let opts: Vec<String> = (0..n).map(|i| format!(r#""o{i}":"d""#)).collect();
    with_question(&format!(
        r#"{{"type":"choice","instructions":"i","criteria":{{{}}}}}"#,
        opts.join(",")
    ))
}

fn score_with(n: usize) -> String {
    let levels = vec![r#""l""#; n].join(",");
    with_question(&format!(
        r#"{{"type":"score","instructions":"i","criteria":[{levels}]}}"#
    ))
}

fn with_images(items: &[String]) -> String {
    format!(
        r#"{{"model":"clef","state":"s","questions":{{"q":{{"type":"noul","instructions":"i"}}}},"images":[{}]}}"#,
        items.join(",")
    )
}

fn with_videos(items: &str) -> String {
    format!(
        r#"{{"model":"clef","state":"s","questions":{{"q":{{"type":"noul","instructions":"i"}}}},"videos":{items}}}"#
    )
}

fn png_url() -> String {
    format!("\"data:image/png;base64,{PNG_1X1}\"")
}

#[test]
fn body_level_errors() {
    refused_both("not json", 400, 6003, "invalid JSON");
    refused_both("[1,2]", 400, 6003, "must be a JSON object");
    refused_both(
        r#"{"model":"clef","state":"\ud800","questions":{}}"#,
        400,
        6003,
        "surrogate",
    );
    let bad_utf8 = b"{\"model\":\"\xff\"}";
    let e = parse_request(bad_utf8, &Limits::workers()).unwrap_err();
    assert_eq!((e.status, e.code), (400, 6003));
    refused_both(
        r#"{"model":"clef","state":1e400,"questions":{"q":{"type":"noul","instructions":"i"}}}"#,
        422,
        5012,
        "outside the range",
    );
    let deep = format!(
        r#"{{"model":"clef","state":{}{},"questions":{{"q":{{"type":"noul","instructions":"i"}}}}}}"#,
        "[".repeat(300),
        "]".repeat(300)
    );
    refused_both(&deep, 422, 5012, "nested deeper");
}

#[test]
fn body_size_limit() {
    let mut l = Limits::workers();
    l.max_body_bytes = 64;
    let body = with_questions(3);
    assert!(body.len() > 64);
    let e = parse_request(body.as_bytes(), &l).unwrap_err();
    assert_eq!((e.status, e.code), (413, 5021));
    assert!(e
        .message
        .contains(&format!("{} bytes, at most 64", body.len())));
    // The real limit: 13 MiB + 1 byte is refused before parsing (it is not even JSON).
    let big = vec![b' '; 13 * 1024 * 1024 + 1];
    let e = parse_request(&big, &Limits::workers()).unwrap_err();
    assert_eq!((e.status, e.code), (413, 5021));
}

/// The Workers AI paths name the model in the URL: a body without `model` takes the route's,
/// a body with one keeps its own (the server compares the two), and a `model` of the wrong
/// type is still refused.
#[test]
fn a_route_model_stands_in_for_a_missing_model() {
    let body = r#"{"state":"s","questions":{"q":{"type":"noul","instructions":"i"}}}"#;
    for profile in [Profile::Workers, Profile::Reference] {
        let req = parse_routed_request(body.as_bytes(), &limits(profile), Some("clef-flash"))
            .unwrap_or_else(|e| panic!("{profile}: {e}"));
        assert_eq!(req.model, "clef-flash");
        let own = r#"{"model":" clef ","state":"s","questions":{"q":{"type":"noul","instructions":"i"}}}"#;
        let req =
            parse_routed_request(own.as_bytes(), &limits(profile), Some("clef-flash")).unwrap();
        assert_eq!(req.model, " clef ");
        let typed =
            r#"{"model":null,"state":"s","questions":{"q":{"type":"noul","instructions":"i"}}}"#;
        let e = parse_routed_request(typed.as_bytes(), &limits(profile), Some("clef")).unwrap_err();
        assert_eq!((e.status, e.code), (400, 5006), "{e}");
        // Without a route model the field stays required.
        let e = parse_routed_request(body.as_bytes(), &limits(profile), None).unwrap_err();
        assert_eq!((e.status, e.code), (400, 5006), "{e}");
    }
}

#[test]
fn top_level_structure() {
    refused_both(
        r#"{"state":"s","questions":{"q":{"type":"noul","instructions":"i"}}}"#,
        400,
        5006,
        "model: required",
    );
    refused_both(
        r#"{"model":7,"state":"s","questions":{"q":{"type":"noul","instructions":"i"}}}"#,
        400,
        5006,
        "model: must be a string",
    );
    refused_both(
        r#"{"model":"clef","questions":{"q":{"type":"noul","instructions":"i"}}}"#,
        400,
        5006,
        "state: required",
    );
    refused_both(
        r#"{"model":"clef","state":"s"}"#,
        400,
        5006,
        "questions: required",
    );
    refused_both(
        r#"{"model":"clef","state":"s","questions":[]}"#,
        400,
        5006,
        "questions: must be an object",
    );
    refused_both(
        r#"{"model":"clef","state":"s","questions":{}}"#,
        400,
        5006,
        "at least one question",
    );
    // Structure is reported before an unknown field.
    refused_both(
        r#"{"model":"clef","extra":1,"questions":{}}"#,
        400,
        5006,
        "state: required",
    );
    refused_both(
        r#"{"model":"clef","state":null,"questions":{"q":{"type":"noul","instructions":"i"}},"temperature":0}"#,
        422,
        5012,
        "temperature: unknown field",
    );
    let r = accepted(
        r#"{"model":" clef ","state":null,"questions":{"q":{"type":"noul","instructions":"i"}}}"#,
        Profile::Workers,
    );
    assert_eq!(r.model, " clef ");
    assert_eq!(r.state, Json::Null);
}

#[test]
fn question_structure() {
    refused_both(
        &with_question("[]"),
        400,
        5006,
        "questions.q: a question must be an object",
    );
    refused_both(
        &with_question(r#"{"instructions":"i"}"#),
        400,
        5006,
        "questions.q.type: required",
    );
    refused_both(
        &with_question(r#"{"type":"bool","instructions":"i"}"#),
        400,
        5006,
        "not a question type",
    );
    refused_both(
        &with_question(r#"{"type":"Noul","instructions":"i"}"#),
        400,
        5006,
        "not a question type",
    );
    refused_both(
        &with_question(r#"{"type":1,"instructions":"i"}"#),
        400,
        5006,
        "must be a string",
    );
    refused_both(
        &with_question(r#"{"type":"choice","instructions":"i"}"#),
        400,
        5006,
        "questions.q.criteria",
    );
    refused_both(
        &with_question(r#"{"type":"choice","instructions":"i","criteria":["a","b"]}"#),
        400,
        5006,
        "questions.q.criteria",
    );
    refused_both(
        &with_question(r#"{"type":"score","instructions":"i","criteria":{"0":"a"}}"#),
        400,
        5006,
        "questions.q.criteria",
    );
    refused_both(
        &with_question(r#"{"type":"noul","instructions":"i","criteria":["a"]}"#),
        400,
        5006,
        "questions.q.criteria",
    );
}

#[test]
fn question_count() {
    accepted(&with_questions(64), Profile::Workers);
    refused(
        &with_questions(65),
        Profile::Workers,
        422,
        5012,
        "questions: 65 questions, at most 64",
    );
    assert_eq!(
        accepted(&with_questions(65), Profile::Reference)
            .questions
            .len(),
        65
    );
}

#[test]
fn question_ids() {
    let body = |id: &str| {
        format!(
            r#"{{"model":"clef","state":"s","questions":{{"{id}":{{"type":"noul","instructions":"i"}}}}}}"#
        )
    };
    let ok_id = "A".repeat(100);
    accepted(&body(&ok_id), Profile::Workers);
    accepted(&body("a-b_c.D9"), Profile::Workers);
    let long = "A".repeat(101);
    refused(&body(&long), Profile::Workers, 422, 5012, "101 characters");
    refused(&body("has space"), Profile::Workers, 422, 5012, "' '");
    refused(&body(""), Profile::Workers, 422, 5012, "0 characters");
    refused(&body("é"), Profile::Workers, 422, 5012, "'é'");
    for id in [long.as_str(), "has space", "", "é"] {
        assert_eq!(accepted(&body(id), Profile::Reference).questions[0].id, id);
    }
}

#[test]
fn instructions() {
    refused(
        &with_question(r#"{"type":"noul"}"#),
        Profile::Workers,
        422,
        5012,
        "questions.q.instructions: required",
    );
    refused(
        &with_question(r#"{"type":"noul","instructions":""}"#),
        Profile::Workers,
        422,
        5012,
        "must not be empty",
    );
    for bad in ["null", "3", "true"] {
        refused(
            &with_question(&format!(r#"{{"type":"noul","instructions":{bad}}}"#)),
            Profile::Workers,
            422,
            5012,
            "questions.q.instructions",
        );
    }
    for good in [r#""Is it?""#, r#"{"q":"Is it?","data":[1]}"#, r#"["a"]"#] {
        accepted(
            &with_question(&format!(r#"{{"type":"noul","instructions":{good}}}"#)),
            Profile::Workers,
        );
    }
    // Reference: missing, null and "" fall back to the id; other values are rendered as sent.
    for fallback in [
        r#"{"type":"noul"}"#,
        r#"{"type":"noul","instructions":null}"#,
        r#"{"type":"noul","instructions":""}"#,
    ] {
        assert_eq!(
            accepted(&with_question(fallback), Profile::Reference).questions[0].instructions,
            None
        );
    }
    let r = accepted(
        &with_question(r#"{"type":"noul","instructions":0}"#),
        Profile::Reference,
    );
    assert!(matches!(r.questions[0].instructions, Some(Json::Number(_))));
}

#[test]
fn choice_option_counts() {
    accepted(&choice_with(2), Profile::Workers);
    accepted(&choice_with(255), Profile::Workers);
    refused(
        &choice_with(1),
        Profile::Workers,
        422,
        5012,
        "questions.q.criteria: 1 option, at least 2",
    );
    refused(
        &choice_with(256),
        Profile::Workers,
        422,
        5012,
        "questions.q.criteria: 256 options, at most 255",
    );
    accepted(&choice_with(1), Profile::Reference);
    accepted(&choice_with(300), Profile::Reference);
    refused_both(&choice_with(0), 422, 5012, "0 options, at least");
}

#[test]
fn choice_option_values() {
    let empty_id =
        with_question(r#"{"type":"choice","instructions":"i","criteria":{"":"x","b":"y"}}"#);
    refused(&empty_id, Profile::Workers, 422, 5012, "non-empty");
    accepted(&empty_id, Profile::Reference);
    let number =
        with_question(r#"{"type":"choice","instructions":"i","criteria":{"a":1,"b":"y"}}"#);
    refused(
        &number,
        Profile::Workers,
        422,
        5012,
        "questions.q.criteria.a",
    );
    accepted(&number, Profile::Reference);
    accepted(
        &with_question(
            r#"{"type":"choice","instructions":"i","criteria":{"a":null,"b":{"x":1},"c":["y"]}}"#,
        ),
        Profile::Workers,
    );
}

#[test]
fn score_level_counts_and_values() {
    accepted(&score_with(2), Profile::Workers);
    accepted(&score_with(10), Profile::Workers);
    refused(
        &score_with(1),
        Profile::Workers,
        422,
        5012,
        "1 level, at least 2",
    );
    refused(
        &score_with(11),
        Profile::Workers,
        422,
        5012,
        "11 levels, at most 10",
    );
    accepted(&score_with(1), Profile::Reference);
    accepted(&score_with(11), Profile::Reference);
    refused_both(&score_with(0), 422, 5012, "0 levels, at least");
    let null_level = with_question(r#"{"type":"score","instructions":"i","criteria":["a",null]}"#);
    refused(
        &null_level,
        Profile::Workers,
        422,
        5012,
        "questions.q.criteria[1]",
    );
    accepted(&null_level, Profile::Reference);
}

#[test]
fn noul_criteria_keys() {
    let extra = with_question(
        r#"{"type":"noul","instructions":"i","criteria":{"true":"yes","maybe":"?"}}"#,
    );
    refused(
        &extra,
        Profile::Workers,
        422,
        5012,
        "questions.q.criteria.maybe",
    );
    let r = accepted(&extra, Profile::Reference);
    assert_eq!(
        r.questions[0].criteria,
        Criteria::Noul {
            when_true: Some(Json::from("yes")),
            when_false: None
        }
    );
    accepted(
        &with_question(r#"{"type":"noul","instructions":"i","criteria":null}"#),
        Profile::Workers,
    );
    // The reference reads `criteria or {}`: falsy values mean no overrides there.
    for falsy in ["[]", "false", "0", "\"\""] {
        let body = with_question(&format!(
            r#"{{"type":"noul","instructions":"i","criteria":{falsy}}}"#
        ));
        refused(&body, Profile::Workers, 400, 5006, "questions.q.criteria");
        let r = accepted(&body, Profile::Reference);
        assert_eq!(
            r.questions[0].criteria,
            Criteria::Noul {
                when_true: None,
                when_false: None
            }
        );
    }
    refused_both(
        &with_question(r#"{"type":"noul","instructions":"i","criteria":["a"]}"#),
        400,
        5006,
        "questions.q.criteria",
    );
}

#[test]
fn unknown_question_field() {
    refused_both(
        &with_question(r#"{"type":"noul","instructions":"i","prior":0.5}"#),
        422,
        5012,
        "questions.q.prior: unknown field",
    );
}

#[test]
fn first_failure_in_request_order_wins() {
    // q1 fails a value rule, q2 a structure rule: q1 is reported.
    let body = r#"{"model":"clef","state":"s","questions":{"bad id":{"type":"noul","instructions":"i"},"q2":[]}}"#;
    refused(body, Profile::Workers, 422, 5012, "questions.bad id");
    refused(body, Profile::Reference, 400, 5006, "questions.q2");
    // Questions are validated before images.
    let body =
        r#"{"model":"clef","state":"s","questions":{"q":{"type":"noul"}},"images":[1,2,3,4,5]}"#;
    refused(body, Profile::Workers, 422, 5012, "instructions");
}

#[test]
fn questions_keep_request_order_and_dict_semantics() {
    let r = accepted(
        r#"{"model":"clef","state":"s","questions":{"z":{"type":"noul","instructions":"1"},"a":{"type":"score","instructions":"2","criteria":["x","y"]},"z":{"type":"choice","instructions":"3","criteria":{"b":"B","a":"A"}}}}"#,
        Profile::Workers,
    );
    let ids: Vec<&str> = r.questions.iter().map(|q| q.id.as_str()).collect();
    assert_eq!(ids, ["z", "a"]);
    assert_eq!(r.questions[0].kind, QuestionKind::Choice);
    assert_eq!(r.questions[0].instructions, Some(Json::from("3")));
}

#[test]
fn image_rules() {
    let png = png_url();
    let r = accepted(&with_images(std::slice::from_ref(&png)), Profile::Workers);
    assert_eq!(r.images[0].content_type, "image/png");
    assert_eq!(&r.images[0].bytes[..4], b"\x89PNG");
    accepted(&with_images(&vec![png.clone(); 4]), Profile::Workers);
    refused_both(
        &with_images(&vec![png.clone(); 5]),
        422,
        5012,
        "images: 5 images, at most 4",
    );
    let object = format!(r#"{{"content_type":"image/jpg","base64":"{PNG_1X1}"}}"#);
    assert_eq!(
        accepted(&with_images(&[object]), Profile::Workers).images[0].content_type,
        "image/jpeg"
    );
    let upper = format!("\"DATA:IMAGE/PNG;BASE64,{PNG_1X1}\"");
    accepted(&with_images(&[upper]), Profile::Workers);
    refused_both(
        &with_images(&["\"https://example.com/a.png\"".into()]),
        422,
        5012,
        "remote URLs",
    );
    refused_both(
        &with_images(&["\"file:///etc/passwd\"".into()]),
        422,
        5012,
        "remote URLs",
    );
    refused_both(
        &with_images(&["\"aGVsbG8=\"".into()]),
        422,
        5012,
        "must be a data URL",
    );
    refused_both(
        &with_images(&[format!("\"data:image/gif;base64,{PNG_1X1}\"")]),
        422,
        5012,
        "not supported",
    );
    refused_both(
        &with_images(&["\"data:image/png,abc\"".into()]),
        422,
        5012,
        "base64",
    );
    refused_both(
        &with_images(&["\"data:image/png;base64,@@@@\"".into()]),
        422,
        5012,
        "invalid base64",
    );
    refused_both(
        &with_images(&["\"data:image/png;base64,\"".into()]),
        422,
        5012,
        "empty",
    );
    refused_both(&with_images(&["3".into()]), 400, 5006, "images[0]");
    refused_both(
        &with_images(&[r#"{"content_type":"image/png"}"#.into()]),
        400,
        5006,
        "images[0].base64: required",
    );
    refused_both(
        &with_images(&[format!(
            r#"{{"content_type":"image/png","base64":"{PNG_1X1}","detail":"high"}}"#
        )]),
        422,
        5012,
        "images[0].detail: unknown field",
    );
    refused_both(
        r#"{"model":"clef","state":"s","questions":{"q":{"type":"noul","instructions":"i"}},"images":"x"}"#,
        400,
        5006,
        "images: must be an array",
    );
}

#[test]
fn image_byte_limits() {
    let mut l = Limits::workers();
    l.max_image_bytes = 100;
    l.max_total_image_bytes = 150;
    let payload = |n: usize| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(vec![7u8; n])
    };
    let item = |n: usize| format!("\"data:image/png;base64,{}\"", payload(n));
    assert!(parse_request(with_images(&[item(100)]).as_bytes(), &l).is_ok());
    let e = parse_request(with_images(&[item(101)]).as_bytes(), &l).unwrap_err();
    assert_eq!((e.status, e.code), (422, 5012));
    assert!(
        e.message.contains("images[0]: 101 bytes, at most 100"),
        "{e}"
    );
    let e = parse_request(with_images(&[item(80), item(80)]).as_bytes(), &l).unwrap_err();
    assert_eq!((e.status, e.code), (422, 5012));
    assert!(
        e.message
            .contains("160 bytes of images in total, at most 150"),
        "{e}"
    );
    // Whitespace inside the payload (MIME line wrapping) is ignored.
    let wrapped = format!(
        "\"data:image/png;base64,{}\\n{}\"",
        &payload(60)[..40],
        &payload(60)[40..]
    );
    assert_eq!(
        parse_request(with_images(&[wrapped]).as_bytes(), &l)
            .unwrap()
            .images[0]
            .bytes
            .len(),
        60
    );
}

#[test]
fn video_extension() {
    let png = png_url();
    let r = accepted(&with_videos(&format!("[[{png},{png}]]")), Profile::Workers);
    assert!(
        matches!(&r.videos[0], VideoInput::Frames { frames, fps } if frames.len() == 2 && *fps == 24.0)
    );
    let r = accepted(
        &with_videos(&format!(r#"[{{"frames":[{png}],"fps":2.5}}]"#)),
        Profile::Workers,
    );
    assert!(matches!(&r.videos[0], VideoInput::Frames { fps, .. } if *fps == 2.5));
    let r = accepted(
        &with_videos(r#"["data:video/mp4;base64,AAAAIGZ0eXA="]"#),
        Profile::Workers,
    );
    assert!(matches!(&r.videos[0], VideoInput::File(m) if m.content_type == "video/mp4"));
    let r = accepted(
        &with_videos(r#"[{"content_type":"video/webm","base64":"GkXfow=="}]"#),
        Profile::Workers,
    );
    assert!(matches!(&r.videos[0], VideoInput::File(m) if m.content_type == "video/webm"));
    refused_both(
        &with_videos(&format!(r#"[{{"frames":[{png}],"fps":0}}]"#)),
        422,
        5012,
        "videos[0].fps",
    );
    refused_both(
        &with_videos(r#"[{"frames":[],"fps":1}]"#),
        422,
        5012,
        "at least one frame",
    );
    refused_both(&with_videos("[[]]"), 422, 5012, "at least one frame");
    refused_both(
        &with_videos(&format!("[{png}]")),
        422,
        5012,
        "not supported",
    );
    refused_both(
        &with_videos(r#"["data:video/mp4;base64,AAAA", "x"]"#),
        422,
        5012,
        "videos[1]",
    );
    refused_both(
        &with_videos(&format!(r#"[{{"frames":[{png}],"speed":1}}]"#)),
        422,
        5012,
        "videos[0].speed",
    );
    refused_both(&with_videos("[1]"), 400, 5006, "videos[0]");
    refused_both(&with_videos("{}"), 400, 5006, "videos: must be an array");
    let frames = vec![png.as_str(); 65].join(",");
    refused_both(
        &with_videos(&format!("[[{frames}]]")),
        422,
        5012,
        "videos[0]: 65 frames, at most 64",
    );
    let mut l = Limits::workers();
    l.max_video_bytes = 100;
    let e = parse_request(with_videos(&format!("[[{png},{png}]]")).as_bytes(), &l).unwrap_err();
    assert_eq!((e.status, e.code), (422, 5012));
    assert!(
        e.message.contains("bytes of frames in total, at most 100"),
        "{e}"
    );
    let file = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode([0u8; 101])
    };
    let e = parse_request(
        with_videos(&format!(r#"["data:video/mp4;base64,{file}"]"#)).as_bytes(),
        &l,
    )
    .unwrap_err();
    assert!(
        e.message.contains("videos[0]: 101 bytes, at most 100"),
        "{e}"
    );
    let mut l = Limits::workers();
    l.videos_enabled = false;
    let e = parse_request(with_videos(&format!("[[{png}]]")).as_bytes(), &l).unwrap_err();
    assert_eq!((e.status, e.code), (422, 5012));
    assert!(e.message.contains("videos extension is disabled"));
}
