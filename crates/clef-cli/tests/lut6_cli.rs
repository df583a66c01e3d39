//! The LUT-6 commands as a user runs them: `clef convert --format lut6`, `clef verify` naming a
//! corrupted file, `clef inspect --ane-plan` (97 programs for Clef's config, 49 for
//! Clef-Flash's) and `clef inspect --emit-mil`, and `clef decide --activations fp16`.

use clef_model::synth::{config_json, Preset, SynthOptions};
mod cli_common;

use cli_common::{clef, fixtures, s, text};

#[test]
fn convert_verify_inspect_and_emit() {
    let root = tempfile::tempdir().unwrap();
    let bundle = root.path().join("tiny-lut6");
    let tiny = fixtures().join("models/tiny-a");
    let args = [
        "convert",
        "--format",
        "lut6",
        "--from",
        s(&tiny),
        "--to",
        s(&bundle),
        "--lut-threshold",
        "1024",
    ];
    let o = clef(&args);
    assert!(o.status.success(), "{}", text(&o));
    let again = clef(&args);
    assert!(!again.status.success());
    assert!(text(&again).contains("--force"), "{}", text(&again));

    let o = clef(&["verify", s(&bundle)]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("clef-lut6-v1"));

    let o = clef(&["inspect", "--ane-plan", s(&bundle)]);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(
        out.contains("13 text programs = 2 DeltaNet runs + 10 attention"),
        "{out}"
    );
    assert!(out.contains("012_mlp.mil"), "{out}");

    let mil = root.path().join("mil");
    let o = clef(&["inspect", "--emit-mil", s(&mil), s(&bundle)]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("wrote 13 MIL programs"), "{}", text(&o));
    for e in std::fs::read_dir(bundle.join("text/programs")).unwrap() {
        let e = e.unwrap();
        let emitted = std::fs::read(mil.join("programs").join(e.file_name())).unwrap();
        assert_eq!(
            emitted,
            std::fs::read(e.path()).unwrap(),
            "{:?}",
            e.file_name()
        );
    }
    assert_eq!(
        std::fs::read(mil.join("weights/weight.bin")).unwrap(),
        std::fs::read(bundle.join("text/weights/weight.bin")).unwrap()
    );

    // FP16 emulation through decide
    let req = fixtures().join("golden/tiny-a/a01_support_basic.json");
    let o = clef(&[
        "decide",
        "--raw",
        "--activations",
        "fp16",
        "--model",
        s(&bundle),
        s(&req),
    ]);
    assert!(o.status.success(), "{}", text(&o));

    // one flipped byte: verify names the file and fails
    let w = bundle.join("text/weights/weight.bin");
    let mut bytes = std::fs::read(&w).unwrap();
    let at = bytes.len() - 10;
    bytes[at] ^= 1;
    std::fs::write(&w, &bytes).unwrap();
    let o = clef(&["verify", s(&bundle)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).contains("FAIL text/weights/weight.bin: SHA-256 differs"),
        "{}",
        text(&o)
    );
}

#[test]
fn plan_counts_from_the_release_configs() {
    let root = tempfile::tempdir().unwrap();
    for (preset, name, count, total) in [
        (
            Preset::Clef,
            "clef",
            "97 text programs",
            "97 text + 27 vision = 124",
        ),
        (
            Preset::Flash,
            "flash",
            "49 text programs",
            "49 text + 27 vision = 76",
        ),
    ] {
        let dir = root.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let cfg = config_json(&SynthOptions {
            preset,
            layers: None,
            seed: 0,
        });
        std::fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
        let o = clef(&["inspect", "--ane-plan", s(&dir)]);
        assert!(o.status.success(), "{}", text(&o));
        let out = text(&o);
        assert!(out.contains(count), "{out}");
        assert!(out.contains(total), "{out}");
        assert!(out.contains("contexts up to 16384 tokens"), "{out}");
    }
}
