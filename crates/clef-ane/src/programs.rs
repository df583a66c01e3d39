//! `text/programs.json`: the program partition (plan.rs) with each program's MIL file, input and
//! output tensors, and the activation scale factors of the FP16 programs (formats.md §2.8).

use super::plan::{plan_programs, Part, Program, ProgramKind, ProgramPlan, CHUNK_TOKENS};
use super::{FORMAT, PROGRAMS_DIR, PROGRAMS_JSON};
use crate::numerics::ATTENTION_PROB_SCALE;
use clef_model::config::{LayerKind, ModelConfig, TextConfig};
use clef_model::error::{ModelError, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A program input or output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoTensor {
    pub name: String,
    /// `fp16` or `int32`.
    pub dtype: String,
    pub shape: Vec<usize>,
}

impl IoTensor {
    fn fp16(name: impl Into<String>, shape: Vec<usize>) -> Self {
        IoTensor {
            name: name.into(),
            dtype: "fp16".into(),
            shape,
        }
    }

    fn int32(name: impl Into<String>, shape: Vec<usize>) -> Self {
        IoTensor {
            name: name.into(),
            dtype: "int32".into(),
            shape,
        }
    }
}

/// The down-projection input scale of one layer's MLP in a program.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerScale {
    pub layer: usize,
    pub scale: f32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProgramEntry {
    #[serde(flatten)]
    pub program: Program,
    /// The MIL text, relative to the bundle.
    pub file: String,
    pub layers: Vec<usize>,
    pub inputs: Vec<IoTensor>,
    pub outputs: Vec<IoTensor>,
    /// Down-projection scales of the MLPs this program runs.
    pub down_scales: Vec<LayerScale>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProgramsFile {
    pub format: String,
    pub chunk_tokens: usize,
    pub context_buckets: Vec<usize>,
    pub max_context: usize,
    pub program_limit: usize,
    pub text_programs: usize,
    pub vision_programs: usize,
    pub calls_per_chunk: usize,
    /// Attention probabilities are multiplied by this before the product with V.
    pub attention_probability_scale: f32,
    /// MLP down-projection input scale of every text layer.
    pub down_scales: Vec<f32>,
    /// How the scales were chosen (calibration records, or none).
    pub down_scale_source: String,
    pub programs: Vec<ProgramEntry>,
}

/// The program's inputs and outputs. Every program maps `x` `[1, 128, hidden]` (the residual
/// stream) to `y`; DeltaNet runs also carry each layer's conv and recurrent states, attention
/// programs the KV buffer of their bucket.
pub fn program_io(p: &Program, cfg: &ModelConfig) -> (Vec<IoTensor>, Vec<IoTensor>) {
    let t = &cfg.text_config;
    let n = CHUNK_TOKENS;
    let x = vec![1, n, t.hidden_size];
    let mut inputs = vec![IoTensor::fp16("x", x.clone())];
    let mut outputs = vec![IoTensor::fp16("y", x)];
    match p.kind {
        ProgramKind::Deltanet => {
            let hist = t.linear_conv_kernel_dim.saturating_sub(1);
            // padding rows of a short last chunk get β = 0 and g = 0, so they leave the state
            // alone; the conv state is gathered from the last valid columns
            inputs.push(IoTensor::fp16("valid", vec![1, n, 1]));
            inputs.push(IoTensor::int32("conv_tail", vec![hist]));
            for s in p.steps.iter().filter(|s| s.part == Part::Deltanet) {
                let l = s.layer;
                let conv = vec![1, conv_dim(t), hist];
                let ssm = vec![
                    1,
                    t.linear_num_value_heads,
                    t.linear_key_head_dim,
                    t.linear_value_head_dim,
                ];
                inputs.push(IoTensor::fp16(format!("conv_state_{l}"), conv.clone()));
                inputs.push(IoTensor::fp16(format!("ssm_state_{l}"), ssm.clone()));
                outputs.push(IoTensor::fp16(format!("conv_state_{l}_out"), conv));
                outputs.push(IoTensor::fp16(format!("ssm_state_{l}_out"), ssm));
            }
        }
        ProgramKind::Attention => {
            let b = p.context.unwrap_or(0);
            let (hkv, d) = (t.num_key_value_heads, t.head_dim);
            let rot = cfg.text_rotary_dim();
            inputs.push(IoTensor::fp16("k_cache", vec![1, hkv, b, d]));
            inputs.push(IoTensor::fp16("v_cache", vec![1, hkv, b, d]));
            inputs.push(IoTensor::fp16("rope_cos", vec![1, n, 1, rot]));
            inputs.push(IoTensor::fp16("rope_sin", vec![1, n, 1, rot]));
            inputs.push(IoTensor::fp16("mask", vec![1, 1, n, b + n]));
            outputs.push(IoTensor::fp16("k_new", vec![1, hkv, n, d]));
            outputs.push(IoTensor::fp16("v_new", vec![1, hkv, n, d]));
        }
        ProgramKind::Mlp => {}
    }
    (inputs, outputs)
}

pub(crate) fn conv_dim(t: &TextConfig) -> usize {
    2 * t.linear_num_key_heads * t.linear_key_head_dim
        + t.linear_num_value_heads * t.linear_value_head_dim
}

/// The plan of a model's config (vision programs = vision depth).
pub fn plan_for(cfg: &ModelConfig) -> std::result::Result<ProgramPlan, super::plan::PlanError> {
    let kinds: Vec<LayerKind> = cfg.layer_kinds();
    plan_programs(&kinds, cfg.vision_config.as_ref().map_or(0, |v| v.depth))
}

impl ProgramsFile {
    /// Describes `plan` for `cfg` with per-layer down-projection scales.
    pub fn build(
        cfg: &ModelConfig,
        plan: &ProgramPlan,
        down_scales: Vec<f32>,
        down_scale_source: String,
    ) -> ProgramsFile {
        let programs = plan
            .programs
            .iter()
            .map(|p| {
                let (inputs, outputs) = program_io(p, cfg);
                ProgramEntry {
                    file: format!("{PROGRAMS_DIR}/{}", p.file_name()),
                    layers: p.layers(),
                    inputs,
                    outputs,
                    down_scales: p
                        .steps
                        .iter()
                        .filter(|s| s.part == Part::Mlp)
                        .map(|s| LayerScale {
                            layer: s.layer,
                            scale: down_scales.get(s.layer).copied().unwrap_or(1.0),
                        })
                        .collect(),
                    program: p.clone(),
                }
            })
            .collect();
        ProgramsFile {
            format: FORMAT.name().into(),
            chunk_tokens: CHUNK_TOKENS,
            context_buckets: super::plan::CONTEXT_BUCKETS.to_vec(),
            max_context: plan.max_context(),
            program_limit: super::plan::ANE_PROGRAM_LIMIT,
            text_programs: plan.text_programs(),
            vision_programs: plan.vision_programs,
            calls_per_chunk: plan.calls_per_chunk(),
            attention_probability_scale: ATTENTION_PROB_SCALE,
            down_scales,
            down_scale_source,
            programs,
        }
    }

    pub fn load(dir: &Path) -> Result<ProgramsFile> {
        let path = dir.join(PROGRAMS_JSON);
        let text = std::fs::read_to_string(&path).map_err(|e| ModelError::io(&path, e))?;
        let f: ProgramsFile = serde_json::from_str(&text).map_err(|e| ModelError::Json {
            path: path.clone(),
            message: e.to_string(),
        })?;
        if f.format != FORMAT.name() {
            return Err(ModelError::config(&path, format!("format is not {FORMAT}")));
        }
        // a scale outside [1, 16] or not a power of two would not be exact in FP16
        if let Some(bad) = f
            .down_scales
            .iter()
            .find(|s| !(1.0..=16.0).contains(*s) || s.log2().fract() != 0.0)
        {
            return Err(ModelError::config(
                &path,
                format!("down-projection scale {bad} is not a power of two in [1, 16]"),
            ));
        }
        Ok(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clef_model::synth::{config_json, Preset, SynthOptions};

    fn config(preset: Preset) -> ModelConfig {
        serde_json::from_value(config_json(&SynthOptions {
            preset,
            layers: None,
            seed: 0,
        }))
        .unwrap()
    }

    #[test]
    fn counts_from_the_configs() {
        let clef = config(Preset::Clef);
        assert_eq!(clef.text_config.num_hidden_layers, 64);
        let plan = plan_for(&clef).unwrap();
        assert_eq!((plan.text_programs(), plan.vision_programs), (97, 27));
        let flash = config(Preset::Flash);
        let plan = plan_for(&flash).unwrap();
        assert_eq!((plan.text_programs(), plan.vision_programs), (49, 27));
        let f = ProgramsFile::build(&flash, &plan, vec![2.0; 32], "test".into());
        assert_eq!(
            (f.text_programs, f.calls_per_chunk, f.max_context),
            (49, 17, 16_384)
        );
        assert_eq!(f.programs[0].file, "text/programs/000_deltanet.mil");
        assert_eq!(
            f.programs[0]
                .inputs
                .iter()
                .map(|i| i.name.as_str())
                .collect::<Vec<_>>(),
            vec![
                "x",
                "valid",
                "conv_tail",
                "conv_state_0",
                "ssm_state_0",
                "conv_state_1",
                "ssm_state_1",
                "conv_state_2",
                "ssm_state_2"
            ]
        );
        // Flash: conv_dim = 2·16·128 + 32·128 = 8192; ssm [1, 32, 128, 128]
        assert_eq!(f.programs[0].inputs[3].shape, vec![1, 8192, 3]);
        assert_eq!(f.programs[0].inputs[4].shape, vec![1, 32, 128, 128]);
        let att = &f.programs[5];
        assert_eq!(att.program.context, Some(16_384));
        assert_eq!(
            att.inputs
                .iter()
                .map(|i| i.shape.clone())
                .collect::<Vec<_>>(),
            vec![
                vec![1, 128, 4096],
                vec![1, 4, 16_384, 256],
                vec![1, 4, 16_384, 256],
                vec![1, 128, 1, 64],
                vec![1, 128, 1, 64],
                vec![1, 1, 128, 16_384 + 128]
            ]
        );
        assert_eq!(
            f.programs[6]
                .down_scales
                .first()
                .map(|d| (d.layer, d.scale)),
            Some((3, 2.0))
        );
    }
}
