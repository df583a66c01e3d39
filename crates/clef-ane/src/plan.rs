//! Partition of the text layers into Apple Neural Engine programs (formats.md §2.7).
//!
//! The card: "each run of three linear-attention layers is one program, together with the MLP
//! of the full-attention layer before it"; full-attention programs for contexts of 1,024,
//! 2,048, 4,096, 8,192 and 16,384 tokens; 128 tokens per call; at most 127 programs resident on
//! the ANE across all apps (the vision encoder adds one per vision layer). Generalised from the
//! layer list so that any `layer_types` gets a plan:
//!
//! - every maximal run of consecutive DeltaNet layers is one program (each layer: norm,
//!   DeltaNet, norm, MLP), preceded by the MLP of the attention layer just before the run;
//! - every attention layer has one program per context bucket (norm, attention, residual; the
//!   five share one copy of the weights);
//! - an attention layer's MLP that no DeltaNet run follows (the last layer, or two attention
//!   layers in a row) is a program of its own (the "tail").
//!
//! Clef (64 layers, every fourth attention): 16 runs + 16 × 5 + 1 tail = 97 programs;
//! Clef-Flash (32 layers): 8 + 8 × 5 + 1 = 49.

use clef_model::config::LayerKind;
use serde::{Deserialize, Serialize};

/// Tokens per ANE call.
pub const CHUNK_TOKENS: usize = 128;
/// Key capacities of the full-attention programs.
pub const CONTEXT_BUCKETS: [usize; 5] = [1024, 2048, 4096, 8192, 16384];
/// Programs macOS keeps resident on the ANE across all applications.
pub const ANE_PROGRAM_LIMIT: usize = 127;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProgramKind {
    /// A run of DeltaNet layers (with the MLP of the attention layer before it).
    Deltanet,
    /// One full-attention layer's mixer at one context bucket.
    Attention,
    /// An attention layer's MLP on its own (the tail).
    Mlp,
}

impl ProgramKind {
    pub fn name(self) -> &'static str {
        match self {
            ProgramKind::Deltanet => "deltanet",
            ProgramKind::Attention => "attention",
            ProgramKind::Mlp => "mlp",
        }
    }
}

/// One layer's share of a program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    /// `input_layernorm`, Gated DeltaNet, residual.
    Deltanet,
    /// `input_layernorm`, gated attention against the bucket's KV buffer, residual.
    Attention,
    /// `post_attention_layernorm`, SwiGLU MLP (down-projection input scaled), residual.
    Mlp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    pub layer: usize,
    pub part: Part,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Program {
    pub index: usize,
    pub kind: ProgramKind,
    /// In execution order.
    pub steps: Vec<Step>,
    /// KV capacity of an attention program.
    pub context: Option<usize>,
}

impl Program {
    /// `NNN_<kind>.mil`.
    pub fn file_name(&self) -> String {
        format!("{:03}_{}.mil", self.index, self.kind.name())
    }

    /// The distinct layers the program touches, in order.
    pub fn layers(&self) -> Vec<usize> {
        let mut out: Vec<usize> = Vec::new();
        for s in &self.steps {
            if out.last() != Some(&s.layer) {
                out.push(s.layer);
            }
        }
        out
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgramPlan {
    pub programs: Vec<Program>,
    /// Programs of the vision encoder (one per vision layer), counted against the limit.
    pub vision_programs: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("the model has no text layers")]
    Empty,
    #[error(
        "{text} text programs + {vision} vision programs exceed the ANE's {limit}-program limit"
    )]
    TooManyPrograms {
        text: usize,
        vision: usize,
        limit: usize,
    },
}

/// Partitions `kinds` (one per text layer) into programs; `vision_programs` is the vision
/// encoder's share of the limit.
pub fn plan_programs(
    kinds: &[LayerKind],
    vision_programs: usize,
) -> Result<ProgramPlan, PlanError> {
    if kinds.is_empty() {
        return Err(PlanError::Empty);
    }
    let mut programs: Vec<Program> = Vec::new();
    let mut push = |kind, steps, context| {
        let index = programs.len();
        programs.push(Program {
            index,
            kind,
            steps,
            context,
        });
    };
    // the attention layer whose MLP has not been placed yet
    let mut pending_mlp: Option<usize> = None;
    let mut i = 0;
    while i < kinds.len() {
        match kinds[i] {
            LayerKind::LinearAttention => {
                let mut steps = Vec::new();
                if let Some(a) = pending_mlp.take() {
                    steps.push(Step {
                        layer: a,
                        part: Part::Mlp,
                    });
                }
                while i < kinds.len() && kinds[i] == LayerKind::LinearAttention {
                    steps.push(Step {
                        layer: i,
                        part: Part::Deltanet,
                    });
                    steps.push(Step {
                        layer: i,
                        part: Part::Mlp,
                    });
                    i += 1;
                }
                push(ProgramKind::Deltanet, steps, None);
            }
            LayerKind::FullAttention => {
                if let Some(a) = pending_mlp.take() {
                    push(
                        ProgramKind::Mlp,
                        vec![Step {
                            layer: a,
                            part: Part::Mlp,
                        }],
                        None,
                    );
                }
                for b in CONTEXT_BUCKETS {
                    push(
                        ProgramKind::Attention,
                        vec![Step {
                            layer: i,
                            part: Part::Attention,
                        }],
                        Some(b),
                    );
                }
                pending_mlp = Some(i);
                i += 1;
            }
        }
    }
    if let Some(a) = pending_mlp {
        push(
            ProgramKind::Mlp,
            vec![Step {
                layer: a,
                part: Part::Mlp,
            }],
            None,
        );
    }
    if programs.len() + vision_programs > ANE_PROGRAM_LIMIT {
        return Err(PlanError::TooManyPrograms {
            text: programs.len(),
            vision: vision_programs,
            limit: ANE_PROGRAM_LIMIT,
        });
    }
    Ok(ProgramPlan {
        programs,
        vision_programs,
    })
}

impl ProgramPlan {
    pub fn text_programs(&self) -> usize {
        self.programs.len()
    }

    pub fn count(&self, kind: ProgramKind) -> usize {
        self.programs.iter().filter(|p| p.kind == kind).count()
    }

    /// ANE calls per 128-token chunk: every program except the attention programs of the
    /// buckets not in use (one bucket per attention layer runs).
    pub fn calls_per_chunk(&self) -> usize {
        self.count(ProgramKind::Deltanet)
            + self.count(ProgramKind::Mlp)
            + self.count(ProgramKind::Attention) / CONTEXT_BUCKETS.len()
    }

    /// The largest context the programs serve.
    pub fn max_context(&self) -> usize {
        CONTEXT_BUCKETS[CONTEXT_BUCKETS.len() - 1]
    }

    /// The programs one chunk ending at sequence position `end` (exclusive) runs, in order:
    /// every DeltaNet and MLP program, and for each attention layer the program of the
    /// smallest bucket holding positions `0..end`. None past the largest bucket.
    pub fn calls_for_chunk(&self, end: usize) -> Option<Vec<&Program>> {
        let bucket = bucket_for(end)?;
        Some(
            self.programs
                .iter()
                .filter(|p| p.kind != ProgramKind::Attention || p.context == Some(bucket))
                .collect(),
        )
    }
}

/// The smallest context bucket holding `positions` key positions.
pub fn bucket_for(positions: usize) -> Option<usize> {
    CONTEXT_BUCKETS.into_iter().find(|&b| b >= positions)
}

/// Layer kinds as the release config lists them: attention every `interval`-th layer.
pub fn interval_layers(n: usize, interval: usize) -> Vec<LayerKind> {
    (0..n)
        .map(|i| {
            if interval > 0 && (i + 1) % interval == 0 {
                LayerKind::FullAttention
            } else {
                LayerKind::LinearAttention
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clef_has_97_text_programs() {
        let plan = plan_programs(&interval_layers(64, 4), 27).unwrap();
        assert_eq!(plan.text_programs(), 97);
        assert_eq!(plan.count(ProgramKind::Deltanet), 16);
        assert_eq!(plan.count(ProgramKind::Attention), 80);
        assert_eq!(plan.count(ProgramKind::Mlp), 1);
        assert_eq!(plan.calls_per_chunk(), 33);
        assert_eq!(plan.text_programs() + plan.vision_programs, 124);
        // run k ≥ 1: the MLP of attention layer 4k − 1, then layers 4k..4k+2
        let run1 = &plan.programs[6];
        assert_eq!(run1.kind, ProgramKind::Deltanet);
        assert_eq!(run1.layers(), vec![3, 4, 5, 6]);
        assert_eq!(
            run1.steps[0],
            Step {
                layer: 3,
                part: Part::Mlp
            }
        );
        assert_eq!(run1.steps.len(), 7);
        let first = &plan.programs[0];
        assert_eq!(first.layers(), vec![0, 1, 2]);
        let buckets: Vec<_> = plan.programs[1..6].iter().map(|p| p.context).collect();
        assert_eq!(
            buckets,
            CONTEXT_BUCKETS.iter().map(|&b| Some(b)).collect::<Vec<_>>()
        );
        let tail = plan.programs.last().unwrap();
        assert_eq!((tail.kind, tail.layers()), (ProgramKind::Mlp, vec![63]));
        assert_eq!(tail.file_name(), "096_mlp.mil");
        assert_eq!(plan.programs[1].file_name(), "001_attention.mil");
    }

    #[test]
    fn clef_flash_has_49() {
        let plan = plan_programs(&interval_layers(32, 4), 27).unwrap();
        assert_eq!(plan.text_programs(), 49);
        assert_eq!(
            (
                plan.count(ProgramKind::Deltanet),
                plan.count(ProgramKind::Attention),
                plan.count(ProgramKind::Mlp)
            ),
            (8, 40, 1)
        );
        assert_eq!(plan.calls_per_chunk(), 17);
    }

    #[test]
    fn irregular_layer_lists_place_every_part_once() {
        use LayerKind::*;
        let kinds = [
            FullAttention,
            FullAttention,
            LinearAttention,
            LinearAttention,
            FullAttention,
            LinearAttention,
        ];
        let plan = plan_programs(&kinds, 0).unwrap();
        let parts: Vec<Step> = plan
            .programs
            .iter()
            .filter(|p| p.kind != ProgramKind::Attention || p.context == Some(1024))
            .flat_map(|p| p.steps.clone())
            .collect();
        // execution order: each layer's mixer before its MLP, layers ascending
        let order: Vec<(usize, Part)> = parts.iter().map(|s| (s.layer, s.part)).collect();
        assert_eq!(
            order,
            vec![
                (0, Part::Attention),
                (0, Part::Mlp),
                (1, Part::Attention),
                (1, Part::Mlp),
                (2, Part::Deltanet),
                (2, Part::Mlp),
                (3, Part::Deltanet),
                (3, Part::Mlp),
                (4, Part::Attention),
                (4, Part::Mlp),
                (5, Part::Deltanet),
                (5, Part::Mlp),
            ]
        );
        assert_eq!(
            plan.count(ProgramKind::Mlp),
            1,
            "layer 0's MLP stands alone"
        );
        assert_eq!(plan.calls_per_chunk(), 6);
    }

    #[test]
    fn limits_and_buckets() {
        // 30 attention layers × 5 buckets cannot fit
        let kinds = vec![LayerKind::FullAttention; 30];
        assert!(matches!(
            plan_programs(&kinds, 27),
            Err(PlanError::TooManyPrograms { .. })
        ));
        assert!(matches!(plan_programs(&[], 0), Err(PlanError::Empty)));
        assert_eq!(bucket_for(128), Some(1024));
        assert_eq!(bucket_for(1024), Some(1024));
        assert_eq!(bucket_for(1025), Some(2048));
        assert_eq!(bucket_for(16_384), Some(16_384));
        assert_eq!(bucket_for(16_385), None);
        let plan = plan_programs(&interval_layers(8, 4), 2).unwrap();
        let calls = plan.calls_for_chunk(1280).unwrap();
        assert_eq!(calls.len(), plan.calls_per_chunk());
        assert!(calls
            .iter()
            .filter(|p| p.kind == ProgramKind::Attention)
            .all(|p| p.context == Some(2048)));
        assert!(plan.calls_for_chunk(20_000).is_none());
    }
}
