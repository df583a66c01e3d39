//! GGUF files as users have them (written by llama.cpp's own converter: tests/fixtures/gguf):
//! answered as the release answers, every ggml block type read as the values the file defines,
//! media refused with the flag that adds them, and damaged or foreign files refused by name.

use clef_api::Limits;
use clef_encode::Truncation;
use clef_engine::{DecideOptions, Engine, EngineConfig};
use clef_gguf::write::Writer;
use clef_gguf::{GgmlType, Value};
use clef_model::MatmulMode;
use serde_json::Value as JsonValue;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// `model` loaded with the reference's limits, running its default arithmetic (the integer
/// product for a file with integer-form block types, else the exact one).
fn engine(model: &Path) -> Engine {
    engine_with(model, None)
}

/// [`engine`] with the linears' arithmetic chosen.
fn engine_with(model: &Path, matmul: Option<MatmulMode>) -> Engine {
    let mut cfg = EngineConfig {
        limits: Limits::reference(),
        ..Default::default()
    };
    cfg.run.matmul = matmul;
    Engine::load(model, cfg).unwrap_or_else(|e| panic!("{}: {e}", model.display()))
}

/// One golden request: its name, the request as written, the reference's probabilities,
/// whether it has media, and its `max_length`.
struct Golden {
    name: String,
    request: String,
    probabilities: Vec<Vec<f64>>,
    media: bool,
    max_length: Option<usize>,
}

/// The golden requests of `model`.
fn goldens(model: &str) -> Vec<Golden> {
    clef_testkit::fixtures::golden_files(model)
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let g: JsonValue = serde_json::from_str(&text).unwrap();
            // the request as written: its keys' order is the questions' and options' order
            let raw = clef_api::parse_json(text.as_bytes()).unwrap();
            let clef_api::Json::Object(obj) = &raw else {
                panic!("{}", p.display())
            };
            let request = obj.get("request").unwrap().to_json_string();
            let req = &g["request"];
            let media = ["images", "videos"].iter().any(|k| {
                req.get(*k)
                    .and_then(|v| v.as_array())
                    .is_some_and(|a| !a.is_empty())
            });
            let probs = g["probabilities"]
                .as_array()
                .unwrap()
                .iter()
                .map(|q| {
                    q.as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_f64().unwrap())
                        .collect()
                })
                .collect();
            Golden {
                name: g["name"].as_str().unwrap().to_string(),
                request,
                probabilities: probs,
                media,
                max_length: g["max_length"].as_u64().map(|v| v as usize),
            }
        })
        .collect()
}

/// The decision on golden request `g`, or the error's text.
fn decide(e: &Engine, g: &Golden) -> Result<clef_engine::Decision, String> {
    let req = e.parse(g.request.as_bytes()).map_err(|e| e.to_string())?;
    let opts = DecideOptions {
        truncation: Truncation::State,
        max_length: g.max_length,
        ..Default::default()
    };
    e.decide(&req, &opts).map_err(|e| e.to_string())
}

fn logits(e: &Engine, g: &Golden) -> Result<Vec<Vec<f32>>, String> {
    decide(e, g).map(|d| d.logits)
}

/// The largest |Δp| against the reference's probabilities.
fn against_reference(d: &clef_engine::Decision, g: &Golden) -> f64 {
    d.probabilities_f64()
        .iter()
        .zip(&g.probabilities)
        .flat_map(|(x, y)| x.iter().zip(y).map(|(p, q)| (p - q).abs()))
        .fold(0.0, f64::max)
}

fn worst(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .flat_map(|(x, y)| {
            assert_eq!(x.len(), y.len());
            x.iter().zip(y).map(|(p, q)| (p - q).abs())
        })
        .fold(0.0, f32::max)
}

/// nano's BF16 GGUF holds the release's weights unchanged (norms with their +1 added in f32,
/// `ssm_a = −exp(A_log)` as llama.cpp computes it, value heads tiled): its answers are the
/// release's to the last bits the two exponentials can differ in.
#[test]
fn an_unquantized_gguf_answers_as_the_release() {
    let release = engine(&fixtures().join("models/nano"));
    let gguf = engine(&fixtures().join("gguf/nano-bf16.gguf"));
    let mut max = 0.0f32;
    for g in goldens("nano") {
        let ours = decide(&gguf, &g).unwrap();
        let d = worst(&logits(&release, &g).unwrap(), &ours.logits);
        assert!(d <= 1e-5, "{}: |Δ logit| {d}", g.name);
        max = max.max(d);
        let dp = against_reference(&ours, &g);
        assert!(dp <= 1e-4, "{}: |Δp| {dp} against the reference", g.name);
    }
    eprintln!("nano-bf16.gguf vs the release: max |Δ logit| {max:.2e}");
}

/// tiny-a's F16 GGUF answers the text goldens within the goldens' bound; its media requests
/// are refused with the flag that supplies a vision tower, and with that flag (the release
/// folder lending its tower) answered within the same bound.
#[test]
fn a_gguf_answers_text_and_with_a_lent_vision_tower_media() {
    let path = fixtures().join("gguf/tiny-a-f16.gguf");
    let gguf = engine(&path);
    let cfg = EngineConfig {
        limits: Limits::reference(),
        vision: Some(fixtures().join("models/tiny-a")),
        ..Default::default()
    };
    let seeing = Engine::load(&path, cfg).unwrap();
    let mut media = 0;
    for g in goldens("tiny-a") {
        if g.media {
            let Err(e) = decide(&gguf, &g) else {
                panic!("{}: media answered without a vision tower", g.name)
            };
            assert!(e.contains("--vision DIR"), "{}: {e}", g.name);
            media += 1;
        } else {
            let dp = against_reference(&decide(&gguf, &g).unwrap(), &g);
            assert!(dp <= 1e-4, "{}: |Δp| {dp}", g.name);
        }
        match decide(&seeing, &g) {
            Ok(d) => {
                let dp = against_reference(&d, &g);
                assert!(dp <= 1e-4, "{} with --vision: |Δp| {dp}", g.name);
            }
            // video files need ffmpeg, which the golden suite of the release skips alike
            Err(e) if e.contains("ffmpeg") || e.contains("video files") => {}
            Err(e) => panic!("{} with --vision: {e}", g.name),
        }
    }
    assert!(media > 0, "tiny-a's goldens include media requests");
    // a folder without a vision tower, and --vision for a model folder, are refused
    let cfg = |_: &str, vision: &str| EngineConfig {
        vision: Some(fixtures().join(vision)),
        ..Default::default()
    };
    let e = Engine::load(&path, cfg("", "models/nano"))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("out_hidden_size 128 differs"), "{e}");
    let e = Engine::load(&path, cfg("", "gguf"))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("config.json"), "{e}");
    let folder = fixtures().join("models/tiny-a");
    let e = Engine::load(&folder, cfg("", "models/tiny-a"))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("lends a vision tower to a GGUF file"), "{e}");
}

/// `file` rewritten with every block-typed tensor widened to F32 by the gguf reader's
/// dequantizer (the values the file defines), into `dir` beside a copy of the tokenizer.
fn widened(file: &Path, dir: &Path) -> PathBuf {
    let bytes = std::fs::read(file).unwrap();
    let g = clef_gguf::read(&bytes).unwrap();
    let mut w = Writer::new();
    for (k, v) in g.metadata.iter() {
        if k != "general.alignment" {
            w.meta(k, v.clone());
        }
    }
    let mut widened = 0;
    for t in &g.tensors {
        let data = &bytes[t.range()];
        if matches!(t.ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16) {
            w.tensor(&t.name, &t.shape(), t.ty, data.to_vec());
        } else {
            let mut f = vec![0.0f32; t.numel()];
            clef_formats::ggml::dequantize_row(t.ty, data, &mut f).unwrap();
            let out = f.iter().flat_map(|v| v.to_le_bytes()).collect();
            w.tensor(&t.name, &t.shape(), GgmlType::F32, out);
            widened += 1;
        }
    }
    assert!(widened > 0, "{} holds block-typed tensors", file.display());
    let out = dir.join("widened.gguf");
    std::fs::write(&out, w.bytes()).unwrap();
    std::fs::copy(
        fixtures().join("gguf/tokenizer.json"),
        dir.join("tokenizer.json"),
    )
    .unwrap();
    out
}

/// Every block type the fixtures hold answers, on the exact path, as the same file with its
/// blocks widened to F32: the panel decoder reads the values ggml defines, and the product is
/// the exact one.
#[test]
fn block_typed_files_answer_as_their_widened_values() {
    // the kq files (K- and I-quants, random weights at widths of 256) take nano's requests:
    // the same tokenizer
    for (file, model) in [
        ("nano-q8_0.gguf", "nano"),
        ("nano-q4_0.gguf", "nano"),
        ("tiny-a-q8_0.gguf", "tiny-a"),
        ("tiny-a-q4_1.gguf", "tiny-a"),
        ("tiny-a-q5_0.gguf", "tiny-a"),
        ("tiny-a-q5_1.gguf", "tiny-a"),
        ("kq-Q4_K_M.gguf", "nano"),
        ("kq-Q5_K_M.gguf", "nano"),
        ("kq-Q6_K.gguf", "nano"),
        ("kq-IQ4_XS.gguf", "nano"),
        ("kq-Q3_K_M.gguf", "nano"),
    ] {
        let path = fixtures().join("gguf").join(file);
        let dir = tempfile::tempdir().unwrap();
        let blocks = engine_with(&path, Some(MatmulMode::Exact));
        let plain = engine(&widened(&path, dir.path()));
        let mut max = 0.0f32;
        for g in goldens(model).into_iter().filter(|g| !g.media).take(6) {
            let d = worst(&logits(&blocks, &g).unwrap(), &logits(&plain, &g).unwrap());
            assert!(d <= 1e-5, "{file} {}: |Δ logit| {d}", g.name);
            max = max.max(d);
        }
        eprintln!("{file}: max |Δ logit| against its widened values {max:.2e}");
        // By default every one of these files runs the integer product (each holds an
        // integer-form type; the tile tests of clef-kernels check its arithmetic, and nano's
        // files its fidelity): it answers, with finite logits.
        let int8 = engine(&path);
        assert_eq!(int8.description().matmul, MatmulMode::Int8.name(), "{file}");
        for g in goldens(model).into_iter().filter(|g| !g.media).take(2) {
            let l = logits(&int8, &g).unwrap();
            assert!(
                l.iter().flatten().all(|v| v.is_finite()),
                "{file} {}",
                g.name
            );
        }
    }
}

/// A tokenizer.json of another vocabulary beside the file is refused at load, naming the
/// first token that differs.
#[test]
fn a_tokenizer_of_another_vocabulary_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("nano.gguf");
    std::fs::copy(fixtures().join("gguf/nano-q4_0.gguf"), &file).unwrap();
    let mut tok: JsonValue = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("gguf/tokenizer.json")).unwrap(),
    )
    .unwrap();
    // swap two tokens' ids
    let vocab = tok["model"]["vocab"].as_object_mut().unwrap();
    let (a, b) = ("a", "b");
    let (ia, ib) = (vocab[a].clone(), vocab[b].clone());
    vocab.insert(a.into(), ib);
    vocab.insert(b.into(), ia);
    std::fs::write(dir.path().join("tokenizer.json"), tok.to_string()).unwrap();
    let e = Engine::load(&file, EngineConfig::default())
        .err()
        .expect("refused");
    let e = e.to_string();
    assert!(e.contains("tokenizer does not belong to this model"), "{e}");
}

/// Without a tokenizer.json beside the file, the tokenizer is built from the file's own
/// `tokenizer.ggml.*` metadata: the golden requests encode to the reference's ids (NFC and
/// special tokens included) and get the same answers. Metadata it cannot use is refused.
#[test]
fn without_tokenizer_json_the_files_vocabulary_encodes_as_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("nano.gguf");
    std::fs::copy(fixtures().join("gguf/nano-q8_0.gguf"), &file).unwrap();
    let alone = engine(&file);
    let beside = engine(&fixtures().join("gguf/nano-q8_0.gguf"));
    for g in goldens("nano") {
        let (a, b) = (decide(&alone, &g).unwrap(), decide(&beside, &g).unwrap());
        let path = fixtures()
            .join("golden/nano")
            .join(format!("{}.json", g.name));
        let golden: JsonValue =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let ids: Vec<u32> = golden["input_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        assert_eq!(a.encoded.input_ids, ids, "{}", g.name);
        assert_eq!(a.logits, b.logits, "{}", g.name);
    }
    // a vocabulary of another kind is refused by name
    let bytes = std::fs::read(&file).unwrap();
    let g = clef_gguf::read(&bytes).unwrap();
    let mut w = Writer::new();
    for (k, v) in g.metadata.iter() {
        let v = if k == "tokenizer.ggml.model" {
            Value::String("llama".into())
        } else {
            v.clone()
        };
        w.meta(k, v);
    }
    for t in &g.tensors {
        w.tensor(&t.name, &t.shape(), t.ty, bytes[t.range()].to_vec());
    }
    std::fs::write(&file, w.bytes()).unwrap();
    let e = Engine::load(&file, EngineConfig::default())
        .err()
        .expect("refused");
    assert!(e.to_string().contains("llama"), "{e}");
}

/// Writes a changed version of one tensor (name, shape, type, data) into the writer and says
/// so, or leaves it to be copied unchanged.
type Edit<'a> = &'a dyn Fn(&str, &[usize], GgmlType, &[u8], &mut Writer) -> bool;

/// Damaged and foreign files: each refused with an error naming what is wrong.
#[test]
fn bad_gguf_files_are_refused_by_name() {
    let good = std::fs::read(fixtures().join("gguf/tiny-a-q8_0.gguf")).unwrap();
    let g = clef_gguf::read(&good).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixtures().join("gguf/tokenizer.json"),
        dir.path().join("tokenizer.json"),
    )
    .unwrap();
    let load = |bytes: &[u8]| {
        let p = dir.path().join("m.gguf");
        std::fs::write(&p, bytes).unwrap();
        Engine::load(&p, EngineConfig::default())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let rewrite = |f: Edit, meta: &dyn Fn(&str, &Value) -> Option<Value>| {
        let mut w = Writer::new();
        for (k, v) in g.metadata.iter() {
            if let Some(v) = meta(k, v) {
                w.meta(k, v);
            }
        }
        for t in &g.tensors {
            if !f(&t.name, &t.shape(), t.ty, &good[t.range()], &mut w) {
                w.tensor(&t.name, &t.shape(), t.ty, good[t.range()].to_vec());
            }
        }
        w.bytes()
    };
    let keep = |_: &str, v: &Value| Some(v.clone());

    let last = g.tensors.iter().max_by_key(|t| t.offset).unwrap();
    let e = load(&good[..last.offset + last.bytes / 2]);
    assert!(e.contains("truncated") && e.contains(&last.name), "{e}");
    let mut bad = good.clone();
    bad[..4].copy_from_slice(b"GGUG");
    assert!(load(&bad).contains("not a GGUF file"));

    let e = load(&rewrite(&|_, _, _, _, _| false, &|k, v| {
        Some(if k == "general.architecture" {
            Value::String("llama".into())
        } else {
            v.clone()
        })
    }));
    assert!(e.contains("architecture `llama`"), "{e}");

    let e = load(&rewrite(
        &|n, _, _, _, _| n == "blk.1.ffn_down.weight",
        &keep,
    ));
    assert!(
        e.contains("model.language_model.layers.1.mlp.down_proj.weight"),
        "{e}"
    );

    let e = load(&rewrite(
        &|n, s, ty, d, w| {
            if n == "blk.0.ssm_norm.weight" {
                w.tensor(n, &[s[0] * 2], ty, [d, d].concat());
                true
            } else {
                false
            }
        },
        &keep,
    ));
    assert!(e.contains("linear_attn.norm.weight"), "{e}");

    let e = load(&rewrite(
        &|n, s, _, d, w| {
            if n == "blk.0.ffn_up.weight" {
                // same bytes per row as Q8_0 (34 per 32 values) under a type clef.rs does not read
                w.tensor(
                    n,
                    &[s[0], s[1] * 256 / 32 * 34 / 292],
                    GgmlType::Q8_K,
                    d.to_vec(),
                );
                true
            } else {
                false
            }
        },
        &keep,
    ));
    assert!(
        e.contains("blk.0.ffn_up.weight") && e.contains("Q8_K"),
        "{e}"
    );

    let e = load(&rewrite(
        &|n, s, ty, d, w| {
            if n == "blk.0.ffn_up.weight" {
                w.tensor("blk.0.ffn_upp.weight", s, ty, d.to_vec());
                true
            } else {
                false
            }
        },
        &keep,
    ));
    assert!(e.contains("blk.0.ffn_upp.weight"), "{e}");
}

/// The answer (index of the most probable option) of every question of `d`.
fn answers(d: &clef_engine::Decision) -> Vec<usize> {
    d.probabilities
        .iter()
        .map(|q| {
            (0..q.len())
                .max_by(|&a, &b| q[a].total_cmp(&q[b]))
                .unwrap_or(0)
        })
        .collect()
}

/// nano's quantized GGUFs on its 300 labelled records (the judge of quantization: random-weight
/// models are chaotic under any weight error), on the exact path and on the integer path (their
/// default): Q8_0 keeps every answer of the release within the q8 bundle's bound (max |Δp| ≤
/// 0.005) on both, Q4_0 at least 297 of 300 on both.
#[test]
fn nano_quantized_ggufs_keep_the_releases_answers() {
    let release = engine(&fixtures().join("models/nano"));
    let runs = [
        ("nano-q8_0.gguf", MatmulMode::Exact),
        ("nano-q8_0.gguf", MatmulMode::Int8),
        ("nano-q4_0.gguf", MatmulMode::Exact),
        ("nano-q4_0.gguf", MatmulMode::Int8),
        // llama-quantize's Q4_K_M of nano: Q4_K and Q6_K on every backbone ffn_down (the
        // K-quants' super-block integer path on a trained model), Q5_0 and Q8_0 elsewhere
        ("nano-q4_k_m.gguf", MatmulMode::Exact),
        ("nano-q4_k_m.gguf", MatmulMode::Int8),
    ];
    let quantized: Vec<Engine> = runs
        .iter()
        .map(|(f, mode)| engine_with(&fixtures().join("gguf").join(f), Some(*mode)))
        .collect();
    for (e, (f, mode)) in quantized.iter().zip(&runs) {
        let d = e.description();
        assert_eq!(d.matmul, mode.name(), "{f}");
    }
    assert_eq!(
        engine(&fixtures().join("gguf/nano-q4_0.gguf"))
            .description()
            .matmul,
        MatmulMode::Int8.name(),
        "a file of integer-form types runs the integer product by default"
    );
    let text = std::fs::read_to_string(fixtures().join("records/nano_eval.jsonl")).unwrap();
    let (mut questions, mut agree, mut max_dp) = (0usize, [0usize; 6], [0.0f64; 6]);
    for line in text.lines() {
        let raw = clef_api::parse_json(line.as_bytes()).unwrap();
        let clef_api::Json::Object(obj) = &raw else {
            panic!("{line}")
        };
        let request = obj.get("request").unwrap().to_json_string();
        let g = Golden {
            name: String::new(),
            request,
            probabilities: vec![],
            media: false,
            max_length: None,
        };
        let want = decide(&release, &g).unwrap();
        questions += want.probabilities.len();
        for (i, e) in quantized.iter().enumerate() {
            let got = decide(e, &g).unwrap();
            agree[i] += answers(&got)
                .iter()
                .zip(answers(&want))
                .filter(|(a, b)| **a == *b)
                .count();
            let dp = got
                .probabilities_f64()
                .iter()
                .zip(want.probabilities_f64())
                .flat_map(|(x, y)| {
                    x.iter()
                        .zip(y)
                        .map(|(p, q)| (p - q).abs())
                        .collect::<Vec<_>>()
                })
                .fold(0.0, f64::max);
            max_dp[i] = max_dp[i].max(dp);
        }
    }
    for (i, (f, mode)) in runs.iter().enumerate() {
        eprintln!(
            "{f} ({}): {} of {questions} answers kept, max |Δp| {:.2e}",
            mode.name(),
            agree[i],
            max_dp[i]
        );
    }
    assert_eq!(questions, 300);
    for i in [0, 1] {
        assert_eq!(agree[i], 300, "Q8_0 {:?}", runs[i].1);
        assert!(
            max_dp[i] <= 0.005,
            "Q8_0 {:?} max |Δp| {}",
            runs[i].1,
            max_dp[i]
        );
    }
    for i in [2, 3, 4, 5] {
        assert!(
            agree[i] >= 297,
            "{} {:?} kept {}",
            runs[i].0,
            runs[i].1,
            agree[i]
        );
    }
    // the integer path is a different arithmetic, not the exact one again
    assert!(max_dp[1] != max_dp[0] && max_dp[3] != max_dp[2] && max_dp[5] != max_dp[4]);
    let format = quantized[5].description().format;
    assert!(
        format.contains("Q4_K×") && format.contains("Q6_K×"),
        "the Q4_K_M file holds K-quants: {format}"
    );
}

/// What `/v1/models`, `clef bench` and the start-up log report as the stored format: the
/// file's tensor types with their counts.
#[test]
fn the_description_names_the_files_tensor_types() {
    let e = engine(&fixtures().join("gguf/nano-q4_0.gguf"));
    let format = e.description().format;
    assert_eq!(format, "gguf F32×113 Q4_0×104");
}

/// A GGUF file's integer products prefill 512 rows per call unless told otherwise (ggml's blocks
/// are decoded once per call and cost more to decode than the project's formats); its exact
/// path keeps 128, a release's integer path 128 off AMX; `--chunk` wins over both.
#[test]
fn gguf_integer_products_prefill_512_rows_per_call() {
    let file = fixtures().join("gguf/nano-q4_0.gguf");
    assert_eq!(engine_with(&file, Some(MatmulMode::Int8)).chunk_size(), 512);
    assert_eq!(
        engine_with(&file, Some(MatmulMode::Exact)).chunk_size(),
        128
    );
    let mut cfg = EngineConfig {
        limits: Limits::reference(),
        ..Default::default()
    };
    cfg.run.chunk_size = Some(64);
    assert_eq!(Engine::load(&file, cfg).unwrap().chunk_size(), 64);
    assert_eq!(MatmulMode::Int8.default_chunk(16), 512);
    assert_eq!(MatmulMode::Exact.default_chunk(32), 128);
    let amx = clef_kernels::Kernels::detected().implementation(clef_kernels::cpu::Family::Int8Tile)
        == "amx";
    assert_eq!(
        MatmulMode::Int8.default_chunk(clef_kernels::int8::GROUP),
        if amx { 512 } else { 128 }
    );
}

/// The K- and I-quant files llama-quantize wrote (kq-*.gguf) widen, tensor by tensor, to the
/// values the `gguf` package's numpy dequantizers give (their SHA-256 as f32 bytes, written by
/// tests/fixtures/gguf/dequant_hashes.py), and each file holds the types its name promises.
#[test]
fn k_and_i_quant_files_widen_as_the_gguf_package_does() {
    use sha2::{Digest, Sha256};
    let dir = fixtures().join("gguf");
    let want: JsonValue =
        serde_json::from_str(&std::fs::read_to_string(dir.join("kq-dequant.json")).unwrap())
            .unwrap();
    let want = want.as_object().unwrap();
    let mut types = std::collections::BTreeSet::new();
    for (file, tensors) in want {
        let bytes = std::fs::read(dir.join(file)).unwrap();
        let g = clef_gguf::read(&bytes).unwrap();
        let tensors = tensors.as_object().unwrap();
        let mut checked = 0;
        for t in &g.tensors {
            let Some(w) = tensors.get(&t.name) else {
                assert!(
                    matches!(t.ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16),
                    "{file}: {} ({}) has no reference hash",
                    t.name,
                    t.ty
                );
                continue;
            };
            assert_eq!(w["type"], t.ty.name(), "{file}: {}", t.name);
            let mut f = vec![0.0f32; t.numel()];
            clef_formats::ggml::dequantize_row(t.ty, &bytes[t.range()], &mut f).unwrap();
            let mut h = Sha256::new();
            for v in &f {
                h.update(v.to_le_bytes());
            }
            let got: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(
                got,
                w["sha256"].as_str().unwrap(),
                "{file}: {} ({})",
                t.name,
                t.ty
            );
            types.insert(t.ty.name());
            checked += 1;
        }
        assert_eq!(checked, tensors.len(), "{file}");
    }
    for ty in ["Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS"] {
        assert!(
            types.contains(ty),
            "the kq files hold no {ty} tensor: {types:?}"
        );
    }
}

/// A `qwen35` GGUF (the backbone alone, as llama.cpp converts a Clef folder without its head
/// config) with the release's head files beside it answers tiny-a's text goldens as the release
/// does; without the head files it is refused, saying what to put beside it.
#[test]
fn a_backbone_only_gguf_takes_the_releases_head_beside_it() {
    let file = fixtures().join("gguf/qwen35/tiny-a-bf16.gguf");
    let gguf = engine(&file);
    let release = engine(&fixtures().join("models/tiny-a"));
    for g in goldens("tiny-a").into_iter().filter(|g| !g.media) {
        let d = worst(&logits(&release, &g).unwrap(), &logits(&gguf, &g).unwrap());
        assert!(d <= 1e-5, "{}: |Δ logit| {d}", g.name);
    }
    let dir = tempfile::tempdir().unwrap();
    let alone = dir.path().join("tiny-a.gguf");
    std::fs::copy(&file, &alone).unwrap();
    let Err(e) = Engine::load(&alone, EngineConfig::default()) else {
        panic!("a qwen35 file without its head loaded")
    };
    assert!(
        e.to_string().contains("joint_head.safetensors beside it"),
        "{e}"
    );
}
