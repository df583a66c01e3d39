//! The README's first command as a newcomer runs it: the `clef-demo` binary explains its numbers,
//! answers one request of each question type and points at the committed model to serve.

use std::process::{Command, Output};

fn demo(args: &[&str]) -> (Output, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_clef-demo"))
        .args(args)
        .output()
        .expect("run clef-demo");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out, text)
}

#[test]
fn the_demo_explains_each_question_type_and_reads_every_answer() {
    let (out, t) = demo(&[]);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("model: nano, a toy checkpoint trained"), "{t}");
    for legend in [
        "noul   : the probability that the answer is yes (P(true))",
        "choice : the most probable option; `confidence` is its probability",
        "score  : the expected level",
    ] {
        assert!(t.contains(legend), "missing {legend:?} in:\n{t}");
    }
    // One example of each type, each answer read out in words.
    for answer in [
        r#""type":"noul""#,
        r#""type":"choice""#,
        r#""type":"score""#,
    ] {
        assert!(t.contains(answer), "no {answer} answer in:\n{t}");
    }
    let readings = t.lines().filter(|l| l.starts_with("reading : ")).count();
    let responses = t.lines().filter(|l| l.starts_with("response: ")).count();
    assert_eq!((readings, responses), (3, 3), "{t}");
    assert!(t.contains("reading : urgency: expected level "), "{t}");
    assert!(t.contains("--model tests/fixtures/models/nano"), "{t}");
}

/// nano was trained on these task families: the demo's answers are the right ones, not just
/// well-formed (a broken embedding of the weights would answer at random).
#[test]
fn the_trained_model_answers_its_examples_correctly() {
    let (out, t) = demo(&[]);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("reading : happy: yes (P(yes) = "), "{t}");
    assert!(
        t.contains("reading : status: \"shipped\", with probability "),
        "{t}"
    );
}

#[test]
fn help_and_unknown_arguments() {
    let (out, t) = demo(&["--help"]);
    assert!(out.status.success(), "{t}");
    assert!(
        t.contains("usage: clef-demo") && t.contains("demo --synthetic tiny"),
        "{t}"
    );
    let (out, t) = demo(&["--synthetic"]);
    assert_eq!(out.status.code(), Some(2), "{t}");
    assert!(t.contains("unexpected argument \"--synthetic\""), "{t}");
    assert!(!t.contains("reading : "), "{t}");
}

#[test]
fn a_synthetic_checkpoint_is_labelled_random() {
    let mut out = Vec::new();
    clef_demo::run(
        clef_demo::DemoOptions {
            synthetic: Some("tiny".parse().unwrap()),
            layers: Some(1),
        },
        &mut out,
    )
    .unwrap();
    let t = String::from_utf8(out).unwrap();
    assert!(t.contains("random weights: its answers are random"), "{t}");
    assert_eq!(
        t.lines().filter(|l| l.starts_with("reading : ")).count(),
        3,
        "{t}"
    );
}
