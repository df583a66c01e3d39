//! Size models against the real shapes (model.md §2, §3.5) and the cards' figures
//! (formats.md §2.10, §3.7), and the tensor inventory against the tiny-a fixture checkpoint.

use std::fs::File;
use std::io::Read;
use std::path::PathBuf;

use clef_quant::size::{
    lut6_bundle_size, release_tensors, ternary_bundle_size, ternary_plan, ModelShapes,
};

/// `config.json` keys of Clef-Flash (model.md §2); 9B vision out width 4096.
fn clef_flash_config() -> String {
    config(4096, 12288, 32, 16, 32, 4096)
}

/// Clef (27B).
fn clef_27b_config() -> String {
    config(5120, 17408, 64, 24, 48, 5120)
}

fn config(
    hidden: usize,
    inter: usize,
    layers: usize,
    heads: usize,
    v_heads: usize,
    vis_out: usize,
) -> String {
    format!(
        r#"{{
        "architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
        "text_config": {{
            "hidden_size": {hidden}, "intermediate_size": {inter}, "num_hidden_layers": {layers},
            "full_attention_interval": 4, "num_attention_heads": {heads}, "num_key_value_heads": 4,
            "head_dim": 256, "linear_num_key_heads": 16, "linear_num_value_heads": {v_heads},
            "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
            "vocab_size": 248320, "attn_output_gate": true
        }},
        "vision_config": {{
            "depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16,
            "patch_size": 16, "temporal_patch_size": 2, "spatial_merge_size": 2, "in_channels": 3,
            "num_position_embeddings": 2304, "out_hidden_size": {vis_out}
        }}
    }}"#
    )
}

fn fixture(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(path)
}

#[test]
fn tiny_a_inventory_matches_the_fixture_checkpoint() {
    let cfg = std::fs::read_to_string(fixture("models/tiny-a/config.json")).unwrap();
    let shapes = ModelShapes::from_config_str(&cfg).unwrap();
    let mut f = File::open(fixture("models/tiny-a/model.safetensors")).unwrap();
    let mut len = [0u8; 8];
    f.read_exact(&mut len).unwrap();
    let mut header = vec![0u8; u64::from_le_bytes(len) as usize];
    f.read_exact(&mut header).unwrap();
    let header: serde_json::Value = serde_json::from_slice(&header).unwrap();
    let mut stored: Vec<(String, Vec<usize>)> = header
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| *k != "__metadata__")
        .map(|(k, v)| {
            let shape = v["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap() as usize)
                .collect();
            (k.clone(), shape)
        })
        .collect();
    stored.sort();
    let mut derived: Vec<(String, Vec<usize>)> = release_tensors(&shapes)
        .into_iter()
        .map(|t| (t.name, t.shape))
        .collect();
    derived.sort();
    assert_eq!(derived.len(), 142);
    assert_eq!(derived, stored);
}

#[test]
fn clef_flash_ternary_bundle_matches_the_card() {
    let shapes = ModelShapes::from_config_str(&clef_flash_config()).unwrap();
    let b = ternary_bundle_size(&shapes).unwrap();
    let gb = |x: u64| x as f64 / 1e9;
    eprintln!("{b:#?}\ntotal {:.4} GB", gb(b.total_bytes));
    // formats.md §3.7 row by row (weights in billions / millions, bytes in GB, as printed)
    assert!((gb(b.ternary.weights) - 6.04).abs() < 0.005);
    assert!((gb(b.ternary.bytes) - 1.40).abs() < 0.005);
    assert!((gb(b.affine4_backbone.weights) - 0.87).abs() < 0.005);
    assert!((gb(b.affine4_backbone.bytes) - 0.49).abs() < 0.005);
    assert!((gb(b.embeddings.weights) - 2.03).abs() < 0.005);
    assert!((gb(b.embeddings.bytes) - 1.14).abs() < 0.005);
    assert!((b.adapters.weights as f64 / 1e6 - 40.0).abs() < 0.5);
    assert!((gb(b.adapters.bytes) - 0.08).abs() < 0.005);
    assert!((b.vision.weights as f64 / 1e6 - 456.0).abs() < 0.5);
    assert!((gb(b.vision.bytes) - 0.91).abs() < 0.005);
    assert!((b.other_bf16.weights as f64 / 1e6 - 7.0).abs() < 0.5);
    assert!((gb(b.other_bf16.bytes) - 0.01).abs() < 0.005);
    // the acceptance criterion: within 2% of the card's 4.04 GB
    assert!(
        (gb(b.total_bytes) / 4.04 - 1.0).abs() < 0.02,
        "{}",
        gb(b.total_bytes)
    );
    // 760 release tensors, of which 2 embeddings + 248 backbone linears change names
    assert_eq!(release_tensors(&shapes).len(), 760);
    let (plan, _) = ternary_plan(&shapes).unwrap();
    assert_eq!(plan.len(), b.tensor_count);
    let trits = plan
        .iter()
        .find(|t| t.name == "model.language_model.layers.0.mlp.down_proj.trits")
        .unwrap();
    assert_eq!(trits.shape, vec![4096, 2458]);
    let scales = plan
        .iter()
        .find(|t| t.name == "model.language_model.layers.0.mlp.down_proj.scales")
        .unwrap();
    assert_eq!(scales.shape, vec![4096, 192]);
    let q4 = plan.iter().find(|t| t.name == "lm_head.q4").unwrap();
    assert_eq!(q4.shape, vec![248320, 2048]);
    assert!(plan.iter().all(|t| t.name != "lm_head.lora_a"));
}

#[test]
fn clef_27b_lut6_bundle_matches_the_card() {
    let shapes = ModelShapes::from_config_str(&clef_27b_config()).unwrap();
    let b = lut6_bundle_size(&shapes).unwrap();
    let gib = |x: u64| x as f64 / (1u64 << 30) as f64;
    eprintln!("{b:#?}\nweight.bin {:.4} GiB", gib(b.weight_bin_bytes));
    // formats.md §2.10: ANE programs 17.09 GiB, embeddings + LM head 4.74 GiB, vision 0.86 GiB
    assert!((gib(b.weight_bin_bytes) / 17.09 - 1.0).abs() < 0.01);
    assert!((gib(b.embeddings.bytes) - 4.74).abs() < 0.005);
    assert!((gib(b.vision.bytes) - 0.86).abs() < 0.005);
    // in_proj_a / in_proj_b (48 × 5120) stay FP16; every big linear is LUT-6
    assert_eq!(
        b.lut.weights + b.fp16_text.weights + b.embeddings.weights + b.vision.weights,
        release_tensors(&shapes)
            .iter()
            .map(|t| t.numel())
            .sum::<u64>()
    );
    assert!(b.fp16_text.weights < 30_000_000);
}
