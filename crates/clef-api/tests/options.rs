//! Option order and descriptions as the model sees them (encoding.md §3).

use clef_api::{parse_request, Json, Limits, QuestionOption};

fn options(question: &str) -> Vec<QuestionOption> {
    let body = format!(r#"{{"model":"clef","state":"s","questions":{{"q":{question}}}}}"#);
    let req = parse_request(body.as_bytes(), &Limits::reference()).unwrap();
    req.questions[0].options()
}

fn ids(opts: &[QuestionOption]) -> Vec<&str> {
    opts.iter().map(|o| o.id.as_str()).collect()
}

#[test]
fn noul_defaults_overrides_and_null() {
    let o = options(r#"{"type":"noul","instructions":"i"}"#);
    assert_eq!(ids(&o), ["true", "false"]);
    assert_eq!(
        o[0].description,
        Some(Json::from("The proposition is true or the answer is yes."))
    );
    assert_eq!(
        o[1].description,
        Some(Json::from("The proposition is false or the answer is no."))
    );
    let o =
        options(r#"{"type":"noul","instructions":"i","criteria":{"false":{"x":1},"true":null}}"#);
    assert_eq!(o[0].description, None);
    assert!(matches!(&o[1].description, Some(Json::Object(_))));
}

#[test]
fn choice_sorted_by_code_point() {
    let q = r#"{"type":"choice","instructions":"i","criteria":{"é":1,"zeta":null,"_under":"u","Z":"Z","10":"t","9":"n","beta":"b","Alpha":"A","\ud83d\ude00":"e","\uffff":"f"}}"#;
    let o = options(q);
    // Code-point order; UTF-16 order would put the emoji (surrogates D83D…) before U+FFFF.
    assert_eq!(
        ids(&o),
        ["10", "9", "Alpha", "Z", "_under", "beta", "zeta", "é", "\u{ffff}", "😀"]
    );
    assert_eq!(o[6].description, None);
    let body = format!(r#"{{"model":"clef","state":"s","questions":{{"q":{q}}}}}"#);
    let req = parse_request(body.as_bytes(), &Limits::reference()).unwrap();
    let order = req.questions[0].encode_order();
    assert_eq!(order, [4, 5, 7, 3, 2, 6, 1, 0, 9, 8]);
    assert_eq!(req.questions[0].request_option_ids()[0], "é");
}

#[test]
fn score_levels_in_order() {
    let o = options(r#"{"type":"score","instructions":"i","criteria":["a",{"b":2},["c"]]}"#);
    assert_eq!(ids(&o), ["0", "1", "2"]);
    assert_eq!(o[0].description, Some(Json::from("a")));
}
