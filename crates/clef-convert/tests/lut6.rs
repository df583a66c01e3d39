//! `clef convert --format lut6` end to end on the fixture models: bundle layout and blobs read
//! back, the runtime against a dense model holding the same (dequantized) weights, FP16
//! emulation with calibrated scales, the vision overflow refusal, verification of corrupted
//! files, and an interrupted conversion.

mod common;

use clef_ane::mil::check_blob_references;
use clef_ane::numerics::{Activations, DOWN_SCALE_LIMIT};
use clef_ane::programs::ProgramsFile;
use clef_ane::{StoredAs, TensorsFile, EMBEDDINGS, FORMAT, WEIGHT_BIN};
use clef_api::Limits;
use clef_convert::lut6::{calibrate::calibrate_down_scales, convert_lut6, Lut6Options};
use clef_convert::records::RecordRules;
use clef_engine::{load_model, DecideOptions, Engine, EngineConfig};
use clef_formats::coreml::{BlobFile, MilDType};
use clef_model::bundle::{FileProblem, Manifest};
use clef_model::checkpoint::safetensors_file;
use clef_model::checkpoint::writer::{write_safetensors, TensorSpec};
use clef_model::tensor::Dtype;
use clef_quant::lut6::{palettize_matrix_with, unpack6, ClusterMode};
use half::{bf16, f16};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

fn model(name: &str) -> PathBuf {
    fixtures().join("models").join(name)
}

fn opts(threshold: u64) -> Lut6Options {
    Lut6Options {
        threshold,
        ..Default::default()
    }
}

fn golden_requests(model: &str, names: &[&str]) -> Vec<String> {
    names
        .iter()
        .map(|n| {
            let p = fixtures()
                .join("golden")
                .join(model)
                .join(format!("{n}.json"));
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
            v["request"].to_string()
        })
        .collect()
}

fn engine(dir: &Path, activations: Activations) -> Engine {
    let mut cfg = EngineConfig {
        limits: Limits::reference(),
        ..Default::default()
    };
    cfg.run.numerics = activations.numerics(dir).unwrap();
    Engine::load(dir, cfg).unwrap()
}

fn logits(e: &Engine, body: &str) -> Vec<Vec<f32>> {
    let req = e.parse(body.as_bytes()).unwrap();
    e.decide(&req, &DecideOptions::default()).unwrap().logits
}

fn release_bf16(name: &str) -> BTreeMap<String, (Vec<usize>, Vec<f32>)> {
    let f = safetensors_file::open(&model(name).join("model.safetensors")).unwrap();
    f.tensors
        .iter()
        .map(|t| (t.name.clone(), (t.shape.clone(), t.to_f32().unwrap())))
        .collect()
}

#[test]
fn tiny_bundle_layout_blobs_and_programs() {
    let root = tempfile::tempdir().unwrap();
    let dest = root.path().join("tiny-lut6");
    let report = convert_lut6(&model("tiny-a"), &dest, &opts(1024)).unwrap();

    // manifest: format, recipe, every tensor's storage, hashes
    let m = Manifest::load(&dest).unwrap().unwrap();
    assert_eq!((m.format.as_str(), m.format_version), (FORMAT.name(), 1));
    assert_eq!(m.recipe["lut_threshold"], 1024);
    assert_eq!(m.recipe["clustering"], "lloyd");
    assert_eq!(m.recipe["config"]["text_config"]["hidden_size"], 64);
    let storage = m.recipe["storage"].as_object().unwrap();
    assert_eq!(storage.len(), 142, "every release tensor");
    let l0 = "model.language_model.layers.0.";
    assert_eq!(storage[&format!("{l0}mlp.gate_proj.weight")], "lut6");
    assert_eq!(
        storage[&format!("{l0}linear_attn.in_proj_z.weight")],
        "lut6"
    );
    // in_proj_a: 4 × 64 = 256 weights, below the threshold
    assert_eq!(
        storage[&format!("{l0}linear_attn.in_proj_a.weight")],
        "fp16"
    );
    assert_eq!(storage[&format!("{l0}linear_attn.conv1d.weight")], "fp16");
    assert_eq!(storage["lm_head.weight"], "bf16");
    assert_eq!(storage["model.visual.blocks.0.attn.qkv.weight"], "bf16");
    assert!(m.check(&dest, true).is_empty());
    assert_eq!(
        report.total_bytes(),
        m.files.iter().map(|f| f.bytes).sum::<u64>()
    );
    assert!(m
        .files
        .iter()
        .any(|f| f.path == "text/programs/012_mlp.mil"));

    // weight.bin: header, one metadata record per blob, dtype codes, readback
    let bytes = std::fs::read(dest.join(WEIGHT_BIN)).unwrap();
    assert_eq!(bytes.len() as u64, report.weight_bin_bytes);
    assert_eq!(
        u32::from_le_bytes(bytes[4..8].try_into().unwrap()),
        2,
        "storage version 2"
    );
    assert!(bytes[8..64].iter().all(|&b| b == 0));
    let blobs = BlobFile::parse(&bytes).unwrap();
    let tensors = TensorsFile::load(&dest).unwrap();
    let luts = tensors
        .tensors
        .iter()
        .filter(|t| matches!(t.stored, StoredAs::Lut6 { .. }))
        .count();
    assert_eq!(luts, report.lut.tensors);
    assert_eq!(
        blobs.count() as usize,
        2 * luts + (tensors.tensors.len() - luts)
    );
    assert_eq!(blobs.blobs().unwrap().len(), blobs.count() as usize);
    let source = release_bf16("tiny-a");
    for t in &tensors.tensors {
        let (shape, values) = &source[&t.name];
        assert_eq!(&t.shape, shape);
        match t.stored {
            StoredAs::Lut6 { indices, lut } => {
                let (rows, cols) = (shape[0], shape[1]);
                let ib = blobs.blob_at(indices).unwrap();
                let lb = blobs.blob_at(lut).unwrap();
                assert_eq!((ib.dtype, ib.dtype.code()), (MilDType::UInt6, 13));
                assert_eq!((lb.dtype, lb.dtype.code()), (MilDType::Float16, 1));
                assert_eq!(ib.data_offset, indices + 64);
                assert_eq!(ib.element_count(), (rows * cols) as u64);
                assert_eq!(lb.element_count(), (rows / 16 * 64) as u64);
                // the packed table read back equals the clustering of the source weights
                let src: Vec<bf16> = values.iter().map(|&v| bf16::from_f32(v)).collect();
                let want = palettize_matrix_with(&src, rows, cols, ClusterMode::Lloyd).unwrap();
                assert_eq!(ib.data, &want.indices[..], "{}", t.name);
                let table: Vec<f16> = lb
                    .data
                    .chunks_exact(2)
                    .map(|b| f16::from_le_bytes([b[0], b[1]]))
                    .collect();
                assert_eq!(table, want.luts, "{}", t.name);
                // every table is sorted and finite (real entries first, padding zeros after)
                for g in table.chunks_exact(64) {
                    assert!(g.iter().all(|v| v.is_finite()));
                    let real = g.iter().rposition(|v| *v != f16::ZERO).map_or(0, |p| p + 1);
                    assert!(g[..real].windows(2).all(|w| w[0] <= w[1]), "{}", t.name);
                }
                let idx = unpack6(ib.data, rows * cols).unwrap();
                assert!(idx.iter().all(|&i| i < 64));
            }
            StoredAs::Fp16 { blob } => {
                let b = blobs.blob_at(blob).unwrap();
                assert_eq!(b.dtype, MilDType::Float16);
                let got: Vec<f16> = b
                    .data
                    .chunks_exact(2)
                    .map(|x| f16::from_le_bytes([x[0], x[1]]))
                    .collect();
                let want: Vec<f16> = values.iter().map(|&v| f16::from_f32(v)).collect();
                assert_eq!(got, want, "{}", t.name);
            }
        }
    }
    // BF16 parts keep the release bytes
    let emb = safetensors_file::open(&dest.join(EMBEDDINGS)).unwrap();
    let rel = safetensors_file::open(&model("tiny-a").join("model.safetensors")).unwrap();
    for t in &emb.tensors {
        let r = rel.tensors.iter().find(|r| r.name == t.name).unwrap();
        assert_eq!((t.dtype, t.bytes()), (Dtype::Bf16, r.bytes()));
    }
    assert_eq!(emb.tensors.len(), 3);

    // programs: 2 DeltaNet runs + 2 × 5 attention + 1 tail, every blob reference resolves
    let programs = ProgramsFile::load(&dest).unwrap();
    assert_eq!(programs.text_programs, 13);
    assert_eq!(programs.down_scales, vec![1.0; 8]);
    let mut refs = 0;
    for p in &programs.programs {
        let text = std::fs::read_to_string(dest.join(&p.file)).unwrap();
        refs += check_blob_references(&text, &blobs).unwrap();
        for i in &p.inputs {
            assert!(
                text.contains(&format!("> {}", i.name)),
                "{} input {}",
                p.file,
                i.name
            );
        }
        let outs: Vec<&str> = p.outputs.iter().map(|o| o.name.as_str()).collect();
        assert!(
            text.contains(&format!("}} -> ({});", outs.join(", "))),
            "{}",
            p.file
        );
        // a reference moved off its record is caught
        if let Some(at) = text.find("offset = uint64(") {
            let start = at + "offset = uint64(".len();
            let end = start + text[start..].find(')').unwrap();
            let off: u64 = text[start..end].parse().unwrap();
            let bad = format!("{}{}{}", &text[..start], off + 64, &text[end..]);
            assert!(check_blob_references(&bad, &blobs).is_err(), "{}", p.file);
        }
    }
    // each LUT tensor is referenced by its 5 attention buckets or once, FP16 tensors likewise
    assert!(refs >= 2 * luts);
}

/// A release folder holding the bundle's text weights dequantized (F16), the release's
/// embeddings and vision: the same numbers the LUT-6 runtime multiplies by.
fn dequantized_release(bundle: &Path, release: &Path, out: &Path) {
    std::fs::create_dir_all(out).unwrap();
    let tensors = TensorsFile::load(bundle).unwrap();
    let bytes = std::fs::read(bundle.join(WEIGHT_BIN)).unwrap();
    let blobs = BlobFile::parse(&bytes).unwrap();
    let mut specs = Vec::new();
    let mut data: Vec<Vec<u8>> = Vec::new();
    for t in &tensors.tensors {
        let raw = match t.stored {
            StoredAs::Lut6 { indices, lut } => {
                let (rows, cols) = (t.shape[0], t.shape[1]);
                let idx = unpack6(blobs.blob_at(indices).unwrap().data, rows * cols).unwrap();
                let table = blobs.blob_at(lut).unwrap().data;
                let mut out = Vec::with_capacity(rows * cols * 2);
                for (k, &i) in idx.iter().enumerate() {
                    let e = (k / cols / 16 * 64 + i as usize) * 2;
                    out.extend_from_slice(&table[e..e + 2]);
                }
                out
            }
            StoredAs::Fp16 { blob } => blobs.blob_at(blob).unwrap().data.to_vec(),
        };
        specs.push(TensorSpec::new(t.name.clone(), Dtype::F16, &t.shape));
        data.push(raw);
    }
    let rel = safetensors_file::open(&release.join("model.safetensors")).unwrap();
    for t in &rel.tensors {
        if tensors.get(&t.name).is_none() {
            specs.push(TensorSpec::new(t.name.clone(), t.dtype, &t.shape));
            data.push(t.bytes().to_vec());
        }
    }
    write_safetensors(
        &out.join("model.safetensors"),
        &specs,
        &BTreeMap::new(),
        |i, w| w.write_all(&data[i]),
    )
    .unwrap();
    for f in [
        "config.json",
        "generation_config.json",
        "joint_head.safetensors",
        "joint_head_config.json",
        "processor_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ] {
        std::fs::copy(release.join(f), out.join(f)).unwrap();
    }
}

#[test]
fn lut6_runtime_equals_dense_dequantized_weights_and_fp16_mode_runs() {
    let root = tempfile::tempdir().unwrap();
    let dest = root.path().join("tiny-lut6");
    convert_lut6(&model("tiny-a"), &dest, &opts(1024)).unwrap();
    let dense = root.path().join("tiny-dense");
    dequantized_release(&dest, &model("tiny-a"), &dense);

    let lut = engine(&dest, Activations::F32);
    let reference = engine(&dense, Activations::F32);
    let fp16 = engine(&dest, Activations::Fp16);
    // a LUT-6 bundle lowers the image budget; an explicit setting is kept
    assert_eq!(lut.media_limits().max_image_pixels, 262_144);
    assert_eq!(reference.media_limits().max_image_pixels, 1_048_576);
    let mut explicit = EngineConfig {
        limits: Limits::reference(),
        model_image_cap: false,
        ..Default::default()
    };
    explicit.media.max_image_pixels = 1_000_000;
    assert_eq!(
        Engine::load(&dest, explicit)
            .unwrap()
            .media_limits()
            .max_image_pixels,
        1_000_000
    );
    assert_eq!(
        lut.model().backbone().layers[0].mlp.gate.storage(),
        Some(clef_model::weights::Storage::plain(
            clef_formats::lut6::NAME
        ))
    );

    let bodies = golden_requests(
        "tiny-a",
        &[
            "a01_support_basic",
            "a09_twelve_questions",
            "a18_long_state",
            "a22_image_one",
        ],
    );
    let mut differs = false;
    for body in &bodies {
        let a = logits(&lut, body);
        let b = logits(&reference, body);
        // same weights, same kernels: bit for bit
        assert_eq!(a, b);
        let h = logits(&fp16, body);
        assert!(h.iter().flatten().all(|v| v.is_finite()));
        differs |= h != a;
    }
    assert!(differs, "FP16 emulation changes the numbers");
}

#[test]
fn nano_calibrated_scales_follow_the_rule_and_fp16_answers() {
    let calib = fixtures().join("records/nano_calib.jsonl");
    let c = calibrate_down_scales(&model("nano"), &calib, 24, &RecordRules::default()).unwrap();
    assert_eq!((c.records, c.skipped_media), (24, 0));
    assert_eq!(c.scales.len(), 8);
    for (&s, &p) in c.scales.iter().zip(&c.peaks) {
        assert!(p > 0.0 && p.is_finite());
        assert!([1.0, 2.0, 4.0, 8.0, 16.0].contains(&s));
        assert!(s == 1.0 || s * p <= DOWN_SCALE_LIMIT);
        assert!(s == 16.0 || 2.0 * s * p > DOWN_SCALE_LIMIT);
    }

    let root = tempfile::tempdir().unwrap();
    let dest = root.path().join("nano-lut6");
    let o = Lut6Options {
        calib: Some(calib),
        calib_records: 24,
        ..opts(1024)
    };
    let r = convert_lut6(&model("nano"), &dest, &o).unwrap();
    assert_eq!(r.down_scales, c.scales);
    let programs = ProgramsFile::load(&dest).unwrap();
    assert_eq!(programs.down_scales, c.scales);
    assert!(programs.down_scale_source.starts_with("calibration"));
    let loaded = clef_ane::load_model(&dest).unwrap();
    assert_eq!(loaded.format(), Some(FORMAT));
    assert_eq!(
        clef_ane::Fp16::for_model(&dest).unwrap().down_scales,
        c.scales
    );
    // FP16 activations (with the calibrated down scales) against f32 on the same bundle, and
    // the bundle against the release, on every nano golden request: no answer flips, and the
    // probabilities stay within the bounds below. Measured when this was written (24
    // calibration records, AVX2): FP16 vs f32 max |dp| 3.2e-5, bundle (FP16) vs release 7.0e-4;
    // docs/formats.md (LUT-6: fidelity) has 0.0009 with 128 records. The bounds are about 3x.
    let fp16 = engine(&dest, Activations::Fp16);
    let f32 = engine(&dest, Activations::F32);
    let release = engine(&model("nano"), Activations::F32);
    for (what, a, b, bound) in [
        ("FP16 vs f32", &fp16, &f32, 1e-4),
        ("bundle (FP16) vs release", &fp16, &release, 2e-3),
    ] {
        let f = common::compare("nano", a, b);
        eprintln!(
            "nano LUT-6 {what}: {} questions, {} flipped, max |dp| {:.2e}",
            f.questions,
            f.flipped.len(),
            f.worst_dp
        );
        assert!(f.questions >= 10, "{f:?}");
        assert!(f.flipped.is_empty(), "{what}: {:#?}", f.flipped);
        assert!(f.worst_dp <= bound, "{what}: max |dp| {}", f.worst_dp);
    }
}

/// Records with images run through the vision tower, as at deployment: the same request with
/// and without its image gives other peaks, and nothing is skipped.
#[test]
fn calibration_runs_image_records() {
    let png = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAQAAAADCAIAAAA7ljmRAAAAMklEQVR4nAEnANj/AEQggjz95vHCazD5DgDH3QHkiHU0og8LDQQAw27YDnHg/XewdnDrXaYSP5CQWlsAAAAASUVORK5CYII=";
    let root = tempfile::tempdir().unwrap();
    let calibrate = |images: serde_json::Value| {
        let req = serde_json::json!({"model": "clef", "state": "Which colour dominates?",
            "images": images, "questions": {"red": {"type": "noul", "instructions": "Red?"}}});
        let path = root.path().join("c.jsonl");
        let line = serde_json::json!({"id": "r", "request": req}).to_string();
        std::fs::write(&path, line).unwrap();
        calibrate_down_scales(&model("tiny-a"), &path, 10, &RecordRules::default()).unwrap()
    };
    let with = calibrate(serde_json::json!([png]));
    let without = calibrate(serde_json::json!([]));
    assert_eq!((with.records, with.skipped_media), (1, 0));
    assert_ne!(with.peaks, without.peaks);
}

#[test]
fn overwrite_needs_force_and_exact_dp_is_recorded() {
    let root = tempfile::tempdir().unwrap();
    let dest = root.path().join("b");
    convert_lut6(&model("tiny-a"), &dest, &opts(1024)).unwrap();
    assert!(convert_lut6(&model("tiny-a"), &dest, &opts(1024)).is_err());
    let exact = Lut6Options {
        force: true,
        clustering: ClusterMode::ExactDp,
        ..opts(1024)
    };
    let before = std::fs::read(dest.join(WEIGHT_BIN)).unwrap();
    convert_lut6(&model("tiny-a"), &dest, &exact).unwrap();
    let m = Manifest::load(&dest).unwrap().unwrap();
    assert_eq!(m.recipe["clustering"], "exact-dp");
    assert_ne!(before, std::fs::read(dest.join(WEIGHT_BIN)).unwrap());
    // the card's threshold keeps every tiny linear in FP16: still a loadable bundle
    let plain = root.path().join("c");
    let r = convert_lut6(&model("tiny-a"), &plain, &opts(1_048_576)).unwrap();
    assert_eq!(r.lut.tensors, 0);
    load_model(&plain).unwrap();
}

#[test]
fn every_corrupted_file_is_named_and_resized_files_are_refused_at_load() {
    let root = tempfile::tempdir().unwrap();
    let dest = root.path().join("b");
    convert_lut6(&model("tiny-a"), &dest, &opts(4096)).unwrap();
    let m = Manifest::load(&dest).unwrap().unwrap();
    for f in &m.files {
        let p = dest.join(&f.path);
        let orig = std::fs::read(&p).unwrap();
        let mut bad = orig.clone();
        let at = bad.len() / 2;
        bad[at] ^= 0x10;
        std::fs::write(&p, &bad).unwrap();
        assert_eq!(
            m.check(&dest, true),
            vec![FileProblem::Hash {
                path: f.path.clone()
            }],
            "{}",
            f.path
        );
        let mut longer = orig.clone();
        longer.push(0);
        std::fs::write(&p, &longer).unwrap();
        let err = load_model(&dest)
            .err()
            .expect("a resized file is refused")
            .to_string();
        assert!(err.contains(&f.path), "{err}");
        std::fs::write(&p, &orig).unwrap();
    }
    assert!(m.check(&dest, true).is_empty());
    load_model(&dest).unwrap();
}

#[test]
fn vision_fp16_overflow_is_refused_with_422() {
    // tiny-a with a patch embedding scaled by 10⁶: finite in f32, beyond FP16's range
    let root = tempfile::tempdir().unwrap();
    let hot = root.path().join("hot-release");
    std::fs::create_dir_all(&hot).unwrap();
    let rel = safetensors_file::open(&model("tiny-a").join("model.safetensors")).unwrap();
    let specs: Vec<TensorSpec> = rel
        .tensors
        .iter()
        .map(|t| TensorSpec::new(t.name.clone(), t.dtype, &t.shape))
        .collect();
    write_safetensors(
        &hot.join("model.safetensors"),
        &specs,
        &BTreeMap::new(),
        |i, w| {
            let t = &rel.tensors[i];
            if t.name == "model.visual.patch_embed.proj.weight" {
                let scaled: Vec<u8> = t
                    .to_f32()
                    .unwrap()
                    .iter()
                    .flat_map(|v| bf16::from_f32(v * 1e6).to_le_bytes())
                    .collect();
                w.write_all(&scaled)
            } else {
                w.write_all(t.bytes())
            }
        },
    )
    .unwrap();
    for f in std::fs::read_dir(model("tiny-a")).unwrap() {
        let f = f.unwrap();
        if f.file_name() != "model.safetensors" {
            std::fs::copy(f.path(), hot.join(f.file_name())).unwrap();
        }
    }
    let dest = root.path().join("hot-lut6");
    convert_lut6(&hot, &dest, &opts(1024)).unwrap();
    let image = golden_requests("tiny-a", &["a22_image_one"]).remove(0);
    let text = golden_requests("tiny-a", &["a01_support_basic"]).remove(0);

    let fp16 = engine(&dest, Activations::Fp16);
    let req = fp16.parse(image.as_bytes()).unwrap();
    let err = match fp16.decide(&req, &DecideOptions::default()) {
        Err(clef_engine::EngineError::Refused(e)) => e,
        other => panic!("expected a refusal, got {:?}", other.map(|d| d.logits)),
    };
    assert_eq!((err.status, err.code), (422, 5012));
    assert!(
        err.message.contains("FP16 overflow in the vision encoder"),
        "{}",
        err.message
    );
    // text-only requests do not touch the tower
    assert!(logits(&fp16, &text).iter().flatten().all(|v| v.is_finite()));
    // f32 activations answer the same image
    let f32e = engine(&dest, Activations::F32);
    let req = f32e.parse(image.as_bytes()).unwrap();
    assert!(f32e.decide(&req, &DecideOptions::default()).is_ok());
}

const CHILD_DEST: &str = "CLEF_LUT6_INTERRUPT_DEST";

#[test]
fn interrupted_conversion_leaves_no_bundle() {
    if let Ok(dest) = std::env::var(CHILD_DEST) {
        // the child: convert, and stall for good after a few tensors until killed
        let dest = PathBuf::from(dest);
        let marker = dest.with_extension("started");
        let count = std::cell::Cell::new(0);
        let o = Lut6Options {
            on_tensor: Some(Box::new(move |_| {
                count.set(count.get() + 1);
                if count.get() == 20 {
                    std::fs::write(&marker, b"").unwrap();
                    std::thread::sleep(std::time::Duration::from_secs(300));
                }
            })),
            ..opts(1024)
        };
        let _ = convert_lut6(&model("tiny-a"), &dest, &o);
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let dest = root.path().join("bundle");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "interrupted_conversion_leaves_no_bundle",
            "--nocapture",
        ])
        .env(CHILD_DEST, &dest)
        .spawn()
        .unwrap();
    let marker = dest.with_extension("started");
    let t0 = std::time::Instant::now();
    while !marker.exists() {
        assert!(
            t0.elapsed().as_secs() < 120,
            "the child never started converting"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the child exited early"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // killed mid-way: nothing at the destination, and what was written does not load
    assert!(!dest.exists());
    assert!(load_model(&dest).is_err());
    let partial: Vec<PathBuf> = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(partial.len(), 1, "one hidden temporary folder");
    assert!(partial[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with(".bundle.partial"));
    assert!(!partial[0].join("manifest.json").exists());
    assert!(load_model(&partial[0]).is_err());
    // a new conversion to the same destination needs no --force and succeeds
    convert_lut6(&model("tiny-a"), &dest, &opts(1024)).unwrap();
    load_model(&dest).unwrap();
}

/// A truncated blob file is named by the manifest's size check before anything parses it, as
/// for every other bundle file.
#[test]
fn a_truncated_weight_bin_is_refused_by_the_manifest_check() {
    let root = tempfile::tempdir().unwrap();
    let dest = root.path().join("b");
    convert_lut6(&model("tiny-a"), &dest, &opts(4096)).unwrap();
    let path = dest.join(WEIGHT_BIN);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
    let err = load_model(&dest).err().expect("refused").to_string();
    assert!(
        err.contains("does not match its manifest") && err.contains(WEIGHT_BIN),
        "{err}"
    );
}
