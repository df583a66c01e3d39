//! clef-ternary-v1 end to end on the tiny-a fixture: calibration records generated here,
//! GPTQ and CLoQ conversion, loading through the runtime's format seams, answering requests,
//! the MLX export decoded back bit for bit, and the size model through the converter's plan;
//! on the trained nano model, how close the bundle's answers are to the release's.

mod common;

use clef_convert::ternary::mlx::{export_mlx, mlx_dequantize, RawFile};
use clef_convert::ternary::recipe::Recipe;
use clef_convert::ternary::{convert_ternary, TernaryOptions, FORMAT};
use clef_engine::{DecideOptions, Engine, EngineConfig};
use clef_formats::{affine4, ternary};
use clef_kernels::formats::affine4::Affine4View;
use clef_kernels::formats::ternary::TernaryView;
use clef_kernels::PanelDecode;
use clef_model::checkpoint::safetensors_file;
use clef_model::tensor::Tensor;
use clef_model::weights::Storage;
use clef_model::Model;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/models")
        .join(name)
}

/// Synthetic System One requests (the three question types, text and JSON states).
fn calibration_records(n: usize) -> String {
    let topics = [
        "refund", "crash", "password", "invoice", "outage", "quote", "login", "delay",
    ];
    let moods = ["happy", "angry", "calm", "upset"];
    let mut out = String::new();
    for i in 0..n {
        let (t, m) = (topics[i % topics.len()], moods[i % moods.len()]);
        let req = match i % 3 {
            0 => {
                serde_json::json!({"model": "clef", "state": format!("Customer {i} is {m} about the {t}."),
                "questions": {"team": {"type": "choice", "instructions": "Which team?",
                    "criteria": {"billing": "Money", "technical": "Bugs", "account": "Sign in"}}}})
            }
            1 => serde_json::json!({"model": "clef", "state": {"ticket": i, "topic": t, "mood": m},
                "questions": {"happy": {"type": "noul", "instructions": "Is the customer happy?"}}}),
            _ => {
                serde_json::json!({"model": "clef", "state": format!("The {t} happened {i} times today."),
                "questions": {"urgency": {"type": "score", "instructions": "How urgent?",
                    "criteria": ["Low", "Medium", "High"]}}})
            }
        };
        out.push_str(&serde_json::json!({"id": format!("calib-{i}"), "request": req}).to_string());
        out.push('\n');
    }
    out
}

fn decide(engine: &Engine, body: &str) -> Vec<Vec<f32>> {
    let req = engine.parse(body.as_bytes()).unwrap();
    engine
        .decide(&req, &DecideOptions::default())
        .unwrap()
        .probabilities
}

#[test]
fn tiny_a_converts_loads_answers_and_exports_to_mlx() {
    let root = tempfile::tempdir().unwrap();
    let calib = root.path().join("calib.jsonl");
    std::fs::write(&calib, calibration_records(12)).unwrap();
    let dest = root.path().join("ternary");
    let mut opts = TernaryOptions::new(&fixture("tiny-a"), &dest);
    opts.calib = Some(calib.clone());
    opts.calib_records = 10;
    let report = convert_ternary(&opts).unwrap();
    assert_eq!(report.calib_records, 10);
    assert!(report.calib_tokens > 10 * 40);
    // 8 layers: 6 DeltaNet (6 quantized linears each) + 2 attention (7 each)
    assert_eq!(report.linears.len(), 6 * 6 + 2 * 7);

    // CLoQ lowers the calibration-weighted error that GPTQ left, over the whole model
    let (q, qa): (f64, f64) = report.linears.iter().fold((0.0, 0.0), |(a, b), s| {
        (a + s.rel_error.unwrap(), b + s.rel_error_adapter.unwrap())
    });
    assert!(qa < q, "with adapters {qa} vs without {q}");

    // manifest, metadata and the file's exact size as planned
    let m = clef_model::bundle::Manifest::load(&dest).unwrap().unwrap();
    assert_eq!(m.format, FORMAT.name());
    assert_eq!(m.recipe["method"], "gptq");
    assert_eq!(m.recipe["calib"], 10);
    assert!(m.check(&dest, true).is_empty());
    let st = safetensors_file::open(&dest.join("model.safetensors")).unwrap();
    assert_eq!(st.metadata["trit_order"], "base3-lsb-first");
    assert_eq!(
        std::fs::metadata(dest.join("model.safetensors"))
            .unwrap()
            .len(),
        report.size.total
    );

    // the runtime recognises every format
    let model = Model::load(&dest).unwrap();
    let l0 = &model.backbone().layers[0];
    let clef_model::backbone::Mixer::DeltaNet(d) = &l0.mixer else {
        panic!("layer 0 is DeltaNet")
    };
    let qkv = d.in_proj_qkv.storage().unwrap();
    assert!(qkv.format == ternary::NAME && qkv.adapter_rank > 0, "{qkv}");
    let out = d.out_proj.storage().unwrap();
    assert!(out.format == affine4::NAME && out.adapter_rank > 0, "{out}");
    assert!(d.in_proj_a.weight().unwrap().dense().is_some());
    assert_eq!(l0.mlp.down.storage().unwrap().format, ternary::NAME);
    assert_eq!(model.lm_head().storage(), Storage::plain(affine4::NAME));
    drop(model);

    // it answers with proper distributions, one per question of the BF16 model's (how close
    // the answers are is asserted on the trained nano model below: tiny-a's random weights
    // are chaotic under any weight error)
    let engine = Engine::load(&dest, EngineConfig::default()).unwrap();
    let reference = Engine::load(&fixture("tiny-a"), EngineConfig::default()).unwrap();
    let text = std::fs::read_to_string(&calib).unwrap();
    for line in text.lines().take(3) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let body = v["request"].to_string();
        let p = decide(&engine, &body);
        let r = decide(&reference, &body);
        assert_eq!(p.len(), r.len());
        for (pq, rq) in p.iter().zip(&r) {
            assert!((pq.iter().sum::<f32>() - 1.0).abs() < 1e-4);
            assert!(pq.iter().all(|x| x.is_finite()));
            assert_eq!(pq.len(), rq.len());
        }
    }

    // MLX export: every quantized weight decodes (MLX layout) to the bundle's weights exactly
    let mlx = root.path().join("mlx");
    let r = export_mlx(&dest, &mlx, false).unwrap();
    assert_eq!(r.quantized_2bit, 6 * 5 + 2 * 3);
    assert_eq!(r.quantized_4bit, 6 + 2 * 4 + 2);
    assert_eq!(r.adapters, 6 * 6 + 2 * 7);
    assert!(
        export_mlx(&dest, &mlx, false).is_err(),
        "refuses to overwrite"
    );
    check_mlx_matches_bundle(&dest, &mlx);
}

fn bytes_of(t: &Tensor) -> &[u8] {
    t.bytes()
}

fn check_mlx_matches_bundle(bundle: &Path, mlx: &Path) {
    let st = safetensors_file::open(&bundle.join("model.safetensors")).unwrap();
    let t: HashMap<String, Tensor> = st
        .tensors
        .into_iter()
        .map(|t| (t.name.clone(), t))
        .collect();
    let out = RawFile::open(&mlx.join("model.safetensors")).unwrap();
    let cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(mlx.join("config.json")).unwrap()).unwrap();
    let quant = &cfg["quantization"];
    assert_eq!(quant["bits"], 4);
    assert_eq!(quant["group_size"], 64);
    let mut checked = 0;
    for (name, tensor) in &t {
        let (p, bits) = if let Some(p) = name.strip_suffix(".trits") {
            (p, 2)
        } else if let Some(p) = name.strip_suffix(".q4") {
            (p, 4)
        } else {
            continue;
        };
        let scales = &t[&format!("{p}.scales")];
        let (rows, groups) = (scales.shape[0], scales.shape[1]);
        let cols = groups * 64;
        let bundle_w = if bits == 2 {
            TernaryView::new(rows, cols, bytes_of(tensor), bytes_of(scales))
                .unwrap()
                .dequantize()
        } else {
            let biases = &t[&format!("{p}.biases")];
            Affine4View::new(
                rows,
                cols,
                bytes_of(tensor),
                bytes_of(scales),
                bytes_of(biases),
            )
            .unwrap()
            .dequantize()
        };
        let w = out.read(&format!("{p}.weight")).unwrap();
        assert_eq!(w.dtype, "U32");
        assert_eq!(w.shape, vec![rows, cols * bits / 32]);
        let s = out.read(&format!("{p}.scales")).unwrap();
        let b = out.read(&format!("{p}.biases")).unwrap();
        let mlx_w = mlx_dequantize(&w.bytes, &s.bytes, &b.bytes, rows, cols, bits, 64).unwrap();
        assert!(
            bundle_w
                .iter()
                .zip(&mlx_w)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "{name}"
        );
        let module = clef_convert::ternary::mlx::mlx_module_path(p);
        if bits == 2 {
            assert_eq!(quant[&module]["bits"], 2, "{module}");
        } else {
            assert!(quant.get(&module).is_none());
        }
        checked += 1;
    }
    assert_eq!(checked, 6 * 6 + 2 * 7 + 2);
    // adapters: mlx-lm's LoRA layout (transposed), same values
    let ad = RawFile::open(&mlx.join("adapters.safetensors")).unwrap();
    let a_name = "model.language_model.layers.3.self_attn.q_proj.lora_a";
    let a = &t[a_name];
    let module = clef_convert::ternary::mlx::mlx_module_path(
        "model.language_model.layers.3.self_attn.q_proj",
    );
    assert_eq!(module, "language_model.model.layers.3.self_attn.q_proj");
    let got = ad.read(&format!("{module}.lora_a")).unwrap();
    let (r, c) = (a.shape[0], a.shape[1]);
    assert_eq!(got.shape, vec![c, r]);
    for i in 0..r {
        for j in 0..c {
            assert_eq!(
                got.bytes[(j * r + i) * 2..(j * r + i) * 2 + 2],
                a.bytes()[(i * c + j) * 2..(i * c + j) * 2 + 2]
            );
        }
    }
    let ac: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(mlx.join("adapter_config.json")).unwrap())
            .unwrap();
    assert_eq!(ac["num_layers"], 8);
    assert_eq!(ac["lora_parameters"]["scale"], 1.0);
    assert!(mlx.join("tokenizer.json").is_file() && mlx.join("joint_head.safetensors").is_file());
}

/// The size model through the converter's own tensor plan, for Clef-Flash's real shapes from
/// its config (no weights): within 2% of the card's 4.04 GB, and tensor for tensor the plan of
/// clef-quant's independent size model.
#[test]
fn flash_size_follows_the_converter_plan() {
    use clef_convert::ternary::plan::{self, SourceTensor};
    use clef_model::synth::{config_json, Preset, SynthOptions};
    let json = config_json(&SynthOptions {
        preset: Preset::Flash,
        layers: None,
        seed: 0,
    });
    let cfg: clef_model::ModelConfig = serde_json::from_value(json.clone()).unwrap();
    let sources: Vec<SourceTensor> = clef_model::layout::backbone_tensors(&cfg)
        .into_iter()
        .map(|e| SourceTensor {
            name: e.name,
            dtype: clef_model::tensor::Dtype::Bf16,
            shape: e.shape,
        })
        .collect();
    let planned = plan::plan(&sources, &Recipe::default()).unwrap();
    let meta = plan::metadata(Some(&"0".repeat(40)), &Recipe::default());
    let size = plan::size(&sources, &planned, &meta);
    eprintln!("{size:#?}");
    let card = 4.04e9;
    assert!(
        (size.total as f64 / card - 1.0).abs() < 0.02,
        "predicted {} bytes",
        size.total
    );
    let shapes = clef_quant::size::ModelShapes::from_config(&json).unwrap();
    let (quant_plan, quant_size) = clef_quant::size::ternary_plan(&shapes).unwrap();
    let mut ours: Vec<(String, Vec<usize>)> = planned
        .iter()
        .map(|p| (p.spec.name.clone(), p.spec.shape.clone()))
        .collect();
    let mut theirs: Vec<(String, Vec<usize>)> = quant_plan
        .iter()
        .map(|t| (t.name.clone(), t.shape.clone()))
        .collect();
    ours.sort();
    theirs.sort();
    assert_eq!(ours, theirs);
    let data: u64 = planned.iter().map(|p| p.spec.nbytes() as u64).sum();
    assert_eq!(data, quant_size.total_bytes - quant_size.header_bytes);
    assert_eq!(size.ternary.1, quant_size.ternary.bytes);
    assert_eq!(size.adapters.1, quant_size.adapters.bytes);
    assert_eq!(size.tables.1, quant_size.embeddings.bytes);

    // the card's planned v2 (4-bit down_proj) is a recipe change: the down-projections' weights
    // move from the ternary part to the 4-bit part, 2.65 bits per weight more
    let v2 = Recipe {
        hi_names: format!("{},down_proj", plan::HI_NAMES),
        ..Default::default()
    };
    let planned_v2 = plan::plan(&sources, &v2).unwrap();
    let size_v2 = plan::size(&sources, &planned_v2, &meta);
    eprintln!("v2: {size_v2:#?}");
    let down: u64 = sources
        .iter()
        .filter(|t| t.name.ends_with("mlp.down_proj.weight"))
        .map(|t| t.shape.iter().product::<usize>() as u64)
        .sum();
    assert_eq!(size_v2.ternary.0, size.ternary.0 - down);
    assert_eq!(size_v2.affine4_linears.0, size.affine4_linears.0 + down);
    assert_eq!(size_v2.adapters, size.adapters);
    let grown = (size_v2.total - size_v2.header) - (size.total - size.header);
    // 4.5 − 1.85 bits per weight (the last trit byte of a row is rounded up: a little less)
    assert_eq!(grown * 8 / down, 2, "{grown} bytes more for {down} weights");
    assert!((grown as f64 * 8.0 / down as f64 - 2.65).abs() < 0.01);
}

/// A quantized linear runs as `W_q x + B(A x)` with exactly the stored factors.
#[test]
fn quantized_linear_applies_its_adapter_after_the_product() {
    use clef_convert::ternary::plan::Role;
    use clef_convert::ternary::quant::{quantize_linear, Method};
    let (rows, cols, m) = (40, 150, 7); // a shorter last group and a partial trit byte
    let w: Vec<f32> = (0..rows * cols)
        .map(|i| ((i as f32 * 0.37).sin() + (i as f32 * 0.011).cos()) * 0.05)
        .collect();
    let x: Vec<f32> = (0..m * cols)
        .map(|i| ((i * 7 % 23) as f32 - 11.0) * 0.1)
        .collect();
    for role in [Role::Ternary, Role::Affine4Linear] {
        let q = quantize_linear(
            "t",
            &w,
            rows,
            cols,
            role,
            None,
            Method::Rtn,
            &Recipe::default(),
        )
        .unwrap();
        let lin = q.to_linear().unwrap();
        let y = lin.apply(&x, m).unwrap();
        // dense reference from the stored bytes
        let t = q.tensors();
        let w_hat = match role {
            Role::Ternary => TernaryView::new(rows, cols, t[0].3, t[1].3)
                .unwrap()
                .dequantize(),
            _ => Affine4View::new(rows, cols, t[0].3, t[1].3, t[2].3)
                .unwrap()
                .dequantize(),
        };
        let (a, b) = (t[t.len() - 2].3, t[t.len() - 1].3);
        let bf = |bytes: &[u8], i: usize| {
            half::bf16::from_le_bytes([bytes[2 * i], bytes[2 * i + 1]]).to_f32()
        };
        let r = t[t.len() - 2].2[0];
        assert_eq!(r, 16);
        for i in 0..m {
            let xi = &x[i * cols..(i + 1) * cols];
            let ax: Vec<f64> = (0..r)
                .map(|k| {
                    (0..cols)
                        .map(|c| f64::from(bf(a, k * cols + c)) * f64::from(xi[c]))
                        .sum()
                })
                .collect();
            for o in 0..rows {
                let dense: f64 = (0..cols)
                    .map(|c| f64::from(w_hat[o * cols + c]) * f64::from(xi[c]))
                    .sum();
                let low: f64 = (0..r).map(|k| f64::from(bf(b, o * r + k)) * ax[k]).sum();
                let got = f64::from(y[i * rows + o]);
                assert!(
                    (got - dense - low).abs() < 1e-4 * (1.0 + dense.abs()),
                    "{role:?} {got} vs {}",
                    dense + low
                );
            }
        }
        // and the adapter is not a no-op
        assert!(a.iter().any(|&v| v != 0));
    }
}

/// Quick mode converts without calibration records and says so in the recipe; GPTQ without
/// records is refused before any work.
#[test]
fn rtn_quick_mode_and_refusals() {
    let root = tempfile::tempdir().unwrap();
    let dest = root.path().join("rtn");
    let mut opts = TernaryOptions::new(&fixture("tiny-a"), &dest);
    assert!(convert_ternary(&opts).is_err(), "GPTQ needs --calib");
    assert!(!dest.exists());
    opts.method = clef_convert::ternary::Method::Rtn;
    let report = convert_ternary(&opts).unwrap();
    assert_eq!(report.calib_records, 0);
    let m = clef_model::bundle::Manifest::load(&dest).unwrap().unwrap();
    assert_eq!(m.recipe["method"], "rtn");
    assert!(m.recipe["adapters"].as_str().unwrap().contains("identity"));
    Model::load(&dest).unwrap();
    assert!(
        convert_ternary(&opts).is_err(),
        "refuses to overwrite without force"
    );
    let bad = root.path().join("bad.jsonl");
    std::fs::write(&bad, "{not json}\n").unwrap();
    let mut g = TernaryOptions::new(&fixture("tiny-a"), &root.path().join("g"));
    g.calib = Some(bad);
    let e = convert_ternary(&g).unwrap_err().to_string();
    assert!(e.contains("line 1"), "{e}");
}

/// Calibration activations spilled to the partial folder (a zero memory budget) give the same
/// `model.safetensors` as activations kept in memory, and the report accounts for the layer
/// passes: one per stage's capture (four per layer) and one per layer but the last for the next
/// layer's inputs.
#[test]
fn spilled_activations_change_no_byte_and_passes_are_counted() {
    let root = tempfile::tempdir().unwrap();
    let calib = root.path().join("calib.jsonl");
    std::fs::write(&calib, calibration_records(12)).unwrap();
    let convert = |name: &str, budget: u64| {
        let dest = root.path().join(name);
        let mut opts = TernaryOptions::new(&fixture("tiny-a"), &dest);
        opts.calib = Some(calib.clone());
        opts.activation_budget = budget;
        let report = convert_ternary(&opts).unwrap();
        (
            report,
            std::fs::read(dest.join("model.safetensors")).unwrap(),
        )
    };
    let (kept, kept_bytes) = convert("kept", u64::MAX);
    let (spilled, spilled_bytes) = convert("spilled", 0);
    assert!(!kept.activations_spilled && spilled.activations_spilled);
    assert!(kept_bytes == spilled_bytes, "spilling changed the bundle");
    let layers = Model::load(&fixture("tiny-a"))
        .unwrap()
        .backbone()
        .layers
        .len();
    for r in [&kept, &spilled] {
        assert_eq!(r.calibration.layer_passes, 5 * layers - 1);
        assert!(r.calibration.forward_seconds > 0.0 && r.calibration.hessian_seconds > 0.0);
    }
}

/// `Linear::take` and `RowTable::take` recognise the stored formats by name and refuse
/// incomplete or inconsistent ones with typed errors.
#[test]
fn runtime_seams_recognise_and_check_the_tensors() {
    use clef_model::checkpoint::TensorSet;
    use clef_model::linear::Linear;
    use clef_model::rows::RowTable;
    use clef_model::tensor::Dtype;
    let (rows, cols) = (4, 70); // 14 trit bytes, 35 nibble bytes, 2 groups per row
    let u8s = |name: &str, shape: Vec<usize>, v: u8| {
        let n = shape.iter().product();
        Tensor::owned(name, Dtype::U8, shape, vec![v; n])
    };
    let bf16s = |name: &str, shape: Vec<usize>| {
        let n: usize = shape.iter().product();
        let bytes = (0..n)
            .flat_map(|_| half::bf16::from_f32(0.5).to_le_bytes())
            .collect();
        Tensor::owned(name, Dtype::Bf16, shape, bytes)
    };
    let take = |tensors: Vec<Tensor>| {
        let mut set = TensorSet::from_tensors(tensors).unwrap();
        let l = Linear::take(&mut set, "p", rows, cols, false);
        (l, set.finish())
    };
    // ternary with adapter: 121 = five zeros; the adapter alone is the output
    let (l, rest) = take(vec![
        u8s("p.trits", vec![rows, 14], 121),
        bf16s("p.scales", vec![rows, 2]),
        bf16s("p.lora_a", vec![2, cols]),
        bf16s("p.lora_b", vec![rows, 2]),
    ]);
    let l = l.unwrap();
    rest.unwrap();
    assert_eq!(
        l.storage(),
        Some(Storage {
            adapter_rank: 2,
            ..Storage::plain(ternary::NAME)
        })
    );
    let y = l.apply(&vec![1.0; cols], 1).unwrap();
    // B·(A·1) = 0.5 · (0.5 · 70) · 2 = 35
    assert_eq!(y, vec![35.0; rows]);
    // 4-bit without adapter
    let (l, _) = take(vec![
        u8s("p.q4", vec![rows, 35], 0x11),
        bf16s("p.scales", vec![rows, 2]),
        bf16s("p.biases", vec![rows, 2]),
    ]);
    let l = l.unwrap();
    assert_eq!(l.storage(), Some(Storage::plain(affine4::NAME)));
    assert_eq!(l.apply(&vec![1.0; cols], 1).unwrap(), vec![70.0; rows]);
    // refusals
    let bad_byte = take(vec![
        u8s("p.trits", vec![rows, 14], 250),
        bf16s("p.scales", vec![rows, 2]),
    ])
    .0;
    assert!(bad_byte.err().unwrap().to_string().contains("5-trit"));
    let half_adapter = take(vec![
        u8s("p.trits", vec![rows, 14], 121),
        bf16s("p.scales", vec![rows, 2]),
        bf16s("p.lora_a", vec![2, cols]),
    ]);
    assert!(half_adapter.0.is_err());
    let wrong_dtype = take(vec![
        u8s("p.trits", vec![rows, 14], 121),
        u8s("p.scales", vec![rows, 4], 0),
    ]);
    assert!(wrong_dtype.0.is_err());
    let no_biases = take(vec![
        u8s("p.q4", vec![rows, 35], 0),
        bf16s("p.scales", vec![rows, 2]),
    ]);
    assert!(no_biases.0.is_err());
    let wrong_shape = take(vec![
        u8s("p.trits", vec![rows, 13], 121),
        bf16s("p.scales", vec![rows, 2]),
    ]);
    assert!(wrong_shape.0.is_err());
    // dense fallback
    let (l, _) = take(vec![bf16s("p.weight", vec![rows, cols])]);
    assert!(l.unwrap().weight().unwrap().dense().is_some());
    // 4-bit row table: row r decodes to scale·q + bias
    let mut set = TensorSet::from_tensors(vec![
        u8s("t.q4", vec![rows, 35], 0x21),
        bf16s("t.scales", vec![rows, 2]),
        bf16s("t.biases", vec![rows, 2]),
    ])
    .unwrap();
    let table = RowTable::take(&mut set, "t", rows, cols).unwrap();
    let mut row = vec![0.0; cols];
    table.row_to_f32(3, &mut row).unwrap();
    assert_eq!(&row[..2], &[1.0, 1.5]);
    assert!(table.row_to_f32(4, &mut row).is_err());
    assert!(table.row_to_f32(0, &mut row[..10]).is_err());
}

/// nano (trained), GPTQ + CLoQ on its 128 calibration records: on the 10 golden requests, every
/// most likely answer is the release's and no probability moves by more than 0.015, both models
/// run here with f32 products of their stored weights. Measured: 10 of 10, max |dp| 0.0082 on
/// AVX2 when this was written, 0.010 in docs/formats.md (clef-ternary-v1: fidelity); the bound
/// leaves room for the floating-point order of other ISAs (for scale: the quick mode, RTN with
/// SVD adapters, moves nano's answers by up to 0.030 on nano_eval).
#[test]
fn nano_ternary_answers_as_the_release_does() {
    let root = tempfile::tempdir().unwrap();
    let dest = root.path().join("nano-ternary");
    let mut opts = TernaryOptions::new(&fixture("nano"), &dest);
    opts.calib = Some(common::fixtures().join("records/nano_calib.jsonl"));
    let report = convert_ternary(&opts).unwrap();
    assert_eq!(report.calib_records, 128);
    let exact = |dir: &Path| {
        let mut cfg = EngineConfig {
            limits: clef_api::Limits::reference(),
            ..Default::default()
        };
        cfg.run.matmul = Some(clef_model::MatmulMode::Exact);
        Engine::load(dir, cfg).unwrap()
    };
    let f = common::compare("nano", &exact(&dest), &exact(&fixture("nano")));
    eprintln!(
        "nano: ternary vs release, {} questions: {} flipped, max |dp| {:.4}",
        f.questions,
        f.flipped.len(),
        f.worst_dp
    );
    assert!(f.questions >= 10, "{f:?}");
    assert!(f.flipped.is_empty(), "{:#?}", f.flipped);
    assert!(f.worst_dp <= 0.015, "max |dp| {}", f.worst_dp);
}
