//! Which storage each release tensor gets in a LUT-6 bundle (formats.md §2.1).

use crate::error::{ConvertError, Result};
use clef_model::tensor::Tensor;

/// Storage of one release tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    /// A text linear with at least the threshold's weights: 6-bit indices + FP16 tables.
    Lut6,
    /// Any other text-program tensor (norms, conv, small projections, decay parameters).
    Fp16,
    /// `embed_tokens`, `lm_head`, final norm: release bytes, in `embeddings.safetensors`.
    Embeddings,
    /// The vision tower: release bytes, in `vision.safetensors`.
    Vision,
}

impl Storage {
    /// The name the manifest's recipe records.
    pub fn name(self) -> &'static str {
        match self {
            Storage::Lut6 => "lut6",
            Storage::Fp16 => "fp16",
            Storage::Embeddings | Storage::Vision => "bf16",
        }
    }
}

const LAYERS: &str = "model.language_model.layers.";
const EMBEDDING_NAMES: [&str; 3] = [
    "model.language_model.embed_tokens.weight",
    "lm_head.weight",
    "model.language_model.norm.weight",
];
/// The text linears of a decoder layer (model.md §3.5).
const LINEARS: [&str; 12] = [
    "mlp.gate_proj.weight",
    "mlp.up_proj.weight",
    "mlp.down_proj.weight",
    "linear_attn.in_proj_qkv.weight",
    "linear_attn.in_proj_z.weight",
    "linear_attn.in_proj_a.weight",
    "linear_attn.in_proj_b.weight",
    "linear_attn.out_proj.weight",
    "self_attn.q_proj.weight",
    "self_attn.k_proj.weight",
    "self_attn.v_proj.weight",
    "self_attn.o_proj.weight",
];

/// Whether `name` is a decoder layer's linear weight.
pub fn is_text_linear(name: &str) -> bool {
    name.strip_prefix(LAYERS)
        .and_then(|rest| rest.split_once('.'))
        .is_some_and(|(layer, part)| {
            layer.bytes().all(|b| b.is_ascii_digit()) && LINEARS.contains(&part)
        })
}

/// The storage of `t` under a LUT threshold of `threshold` weights ("at least").
pub fn classify(t: &Tensor, threshold: u64) -> Result<Storage> {
    let name = t.name.as_str();
    if name.starts_with("model.visual.") {
        return Ok(Storage::Vision);
    }
    if EMBEDDING_NAMES.contains(&name) {
        return Ok(Storage::Embeddings);
    }
    if !name.starts_with(LAYERS) {
        return Err(ConvertError::Invalid(format!(
            "tensor `{name}` is not part of the Clef layout"
        )));
    }
    if let [rows, cols] = t.shape[..] {
        if is_text_linear(name) && (rows as u64).saturating_mul(cols as u64) >= threshold {
            if rows % clef_quant::lut6::GROUP_ROWS != 0 {
                return Err(ConvertError::Invalid(format!(
                    "`{name}` [{rows}, {cols}] reaches the LUT threshold but its {rows} output rows are not a multiple of 16 (formats.md §2.1); raise --lut-threshold"
                )));
            }
            return Ok(Storage::Lut6);
        }
    }
    Ok(Storage::Fp16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clef_model::tensor::Dtype;

    fn t(name: &str, shape: &[usize]) -> Tensor {
        let n: usize = shape.iter().product();
        Tensor::owned(name, Dtype::Bf16, shape.to_vec(), vec![0; 2 * n])
    }

    #[test]
    fn card_rule_at_the_27b_shapes() {
        let th = clef_quant::lut6::LUT_MIN_WEIGHTS;
        let l = "model.language_model.layers.7.";
        // in_proj_a/b of the 27B: 48 × 5120 = 245,760 weights → FP16
        assert_eq!(
            classify(
                &t(&format!("{l}linear_attn.in_proj_a.weight"), &[48, 5120]),
                th
            )
            .unwrap(),
            Storage::Fp16
        );
        // exactly 1,048,576 weights is LUT-6 ("at least")
        assert_eq!(
            classify(
                &t(&format!("{l}self_attn.k_proj.weight"), &[1024, 1024]),
                th
            )
            .unwrap(),
            Storage::Lut6
        );
        assert_eq!(
            classify(
                &t(&format!("{l}self_attn.k_proj.weight"), &[1024, 1023]),
                th
            )
            .unwrap(),
            Storage::Fp16
        );
        assert_eq!(
            classify(
                &t(&format!("{l}linear_attn.conv1d.weight"), &[10240, 1, 4]),
                1
            )
            .unwrap(),
            Storage::Fp16
        );
        assert_eq!(
            classify(&t(&format!("{l}input_layernorm.weight"), &[5120]), 1).unwrap(),
            Storage::Fp16
        );
        assert_eq!(
            classify(&t("lm_head.weight", &[248_320, 5120]), th).unwrap(),
            Storage::Embeddings
        );
        assert_eq!(
            classify(
                &t("model.visual.blocks.0.attn.qkv.weight", &[3456, 1152]),
                th
            )
            .unwrap(),
            Storage::Vision
        );
        // a low threshold reaching a 48-row projection is refused, not silently changed
        assert!(classify(
            &t(&format!("{l}linear_attn.in_proj_a.weight"), &[48, 5120]),
            1000
        )
        .is_ok());
        assert!(classify(
            &t(&format!("{l}linear_attn.in_proj_a.weight"), &[4, 5120]),
            1000
        )
        .is_err());
        assert!(classify(&t("model.mtp.fc.weight", &[16, 16]), 1).is_err());
        assert!(!is_text_linear(
            "model.language_model.layers.x.mlp.up_proj.weight"
        ));
    }
}
