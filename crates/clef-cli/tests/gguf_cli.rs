//! GGUF files as a user meets them on the command line: `clef inspect FILE.gguf` lists the file's
//! tensor types, `clef decide --model FILE.gguf` answers, and a file that is not GGUF or not a
//! Clef model is refused with a clear error.

mod cli_common;
mod serve_common;

use cli_common::{clef, fixtures, s, text};

#[test]
fn inspect_lists_the_tensor_types() {
    let file = fixtures().join("gguf/nano-q4_0.gguf");
    let o = clef(&["inspect", s(&file)]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("GGUF v3, architecture clef"), "{t}");
    assert!(t.contains("Q4_0") && t.contains("F32"), "{t}");
    assert!(t.contains("text: 8 layers, hidden 128"), "{t}");
    assert!(!t.contains("blk.0.ffn_up.weight"), "{t}");
    let o = clef(&["inspect", "--tensors", s(&file)]);
    let t = text(&o);
    assert!(
        t.contains("blk.0.ffn_up.weight") && t.contains("[256, 128]"),
        "{t}"
    );
}

#[test]
fn decide_answers_from_a_gguf_file() {
    let dir = tempfile::tempdir().unwrap();
    let request = dir.path().join("request.json");
    std::fs::write(
        &request,
        r#"{"model": "clef", "state": "My card was charged twice.", "questions": {"team": {"type": "choice", "instructions": "Which team?", "criteria": {"billing": "Money", "technical": "Bugs"}}}}"#,
    )
    .unwrap();
    let file = fixtures().join("gguf/nano-q8_0.gguf");
    let o = clef(&["decide", "--model", s(&file), s(&request)]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("\"billing\""), "{}", text(&o));

    // Q8_0 blocks run the integer product (the default) or the exact one, as asked; a file
    // with no integer-form type is refused the integer product, saying why
    for mode in ["int8", "exact"] {
        let o = clef(&["decide", "--matmul", mode, "--model", s(&file), s(&request)]);
        assert!(o.status.success(), "{mode}: {}", text(&o));
        assert!(text(&o).contains("\"billing\""), "{}", text(&o));
    }
    let bf16 = fixtures().join("gguf/nano-bf16.gguf");
    let o = clef(&[
        "decide",
        "--matmul",
        "int8",
        "--model",
        s(&bf16),
        s(&request),
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("--matmul int8 needs integer weights")
            && text(&o).contains("this GGUF file has none"),
        "{}",
        text(&o)
    );

    // a file that is not GGUF is named as such, not as a missing model folder
    let other = dir.path().join("weights.bin");
    std::fs::write(&other, b"not a model at all").unwrap();
    let o = clef(&["decide", "--model", s(&other), s(&request)]);
    assert!(!o.status.success());
    assert!(text(&o).contains("not a GGUF file"), "{}", text(&o));
}

/// `clef serve --model FILE.gguf`: the routes of a release, `/v1/models` naming the file's
/// tensor types and the file itself.
#[test]
fn serve_answers_from_a_gguf_file() {
    use serve_common::{Options, Req, Server};
    let file = fixtures().join("gguf/nano-q4_0.gguf");
    let server = Server::with(Options {
        model: file,
        ..Default::default()
    });
    let r = server.post(
        "/v1/systemone",
        br#"{"model": "clef", "state": "My card was charged twice.", "questions": {"team": {"type": "choice", "instructions": "Which team?", "criteria": {"billing": "Money", "technical": "Bugs"}}}}"#,
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let bytes = std::fs::metadata(fixtures().join("gguf/nano-q4_0.gguf"))
        .unwrap()
        .len();
    assert_eq!(
        r.header("x-clef-model-revision"),
        Some(format!("gguf=nano-q4_0.gguf; bytes={bytes}").as_str())
    );
    let models = server.send(&Req::get("/v1/models")).json();
    let text = models.to_json_string();
    assert!(
        text.contains(r#""format":"gguf F32×113 Q4_0×104""#),
        "{text}"
    );
    // the integer product by default (Q4_0 blocks); where the K-quants take a tile of their
    // own (every AVX-512 VNNI machine, AMX ones included), it is named too
    assert!(text.contains(r#""matmul":"int8""#), "{text}");
    for main in ["amx", "avx512vnni-narrow"] {
        if text.contains(&format!(r#""matmul_isa":"{main}"#)) {
            let both = format!(r#""matmul_isa":"{main} (K-quants: avx512vnni-superblock)""#);
            assert!(text.contains(&both), "{text}");
        }
    }
    assert!(text.contains(r#""file":"nano-q4_0.gguf""#), "{text}");
}
