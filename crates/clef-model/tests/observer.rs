//! The forward observer sees every linear layer's input by typed id, in execution order, and
//! exactly the rows the product reads; observing changes nothing; an unloaded layer refuses to
//! run.

mod common;

use clef_model::{ForwardObserver, LinearId, LinearKind, Model, PrefillOrder, RunOptions};
use common::*;

#[derive(Default)]
struct Record {
    calls: Vec<(LinearId, usize)>,
    /// Layer 0's MLP gate input and down input of the first chunk.
    gate_in: Option<Vec<f32>>,
    down_in: Option<Vec<f32>>,
}

impl ForwardObserver for Record {
    fn linear_input(&mut self, id: LinearId, x: &[f32], rows: usize) {
        self.calls.push((id, rows));
        if id.layer == 0 && id.kind == LinearKind::MlpGate && self.gate_in.is_none() {
            self.gate_in = Some(x.to_vec());
        }
        if id.layer == 0 && id.kind == LinearKind::MlpDown && self.down_in.is_none() {
            self.down_in = Some(x.to_vec());
        }
    }
}

fn rows_of(
    model: &Model,
    g: &Golden,
    opts: &RunOptions,
    obs: &mut dyn ForwardObserver,
) -> Vec<f32> {
    let positions = text_positions(g.ids.len());
    let seq = clef_model::Sequence {
        cut: None,
        ids: &g.ids,
        positions: &positions,
        media: &[],
    };
    let mut out = Vec::new();
    model
        .prefill(seq, opts, obs, &|| false, &mut |rows, n| {
            out.extend_from_slice(&rows[..n * model.hidden()]);
            Ok(())
        })
        .unwrap();
    out
}

#[test]
fn every_linear_input_is_seen_in_order_and_observing_changes_nothing() {
    let model = Model::load(&fixtures().join("models/tiny-a")).unwrap();
    let g = load_golden(&fixtures().join("golden/tiny-a/a18_long_state.json"));
    let len = g.ids.len();
    let opts = RunOptions {
        chunk_size: Some(100),
        ..Default::default()
    };
    let mut rec = Record::default();
    let observed = rows_of(&model, &g, &opts, &mut rec);
    let plain = rows_of(&model, &g, &opts, &mut ());
    assert_eq!(observed, plain, "observing must not change the forward");

    // chunk-major: per chunk, every layer's linears in execution order
    let chunks: Vec<usize> = (0..len).step_by(100).map(|s| 100.min(len - s)).collect();
    let mut want = Vec::new();
    for &n in &chunks {
        for (li, layer) in model.backbone().layers.iter().enumerate() {
            for &kind in layer.linear_kinds() {
                want.push((LinearId::new(li, kind), n));
            }
        }
    }
    assert_eq!(rec.calls, want);

    // the rows shown are exactly what the products read: layer 0's down-projection input is
    // SiLU(gate x) ⊙ up x of its gate input
    let mlp = &model.backbone().layers[0].mlp;
    let x = rec.gate_in.unwrap();
    let n = chunks[0];
    let mut gate = mlp.gate.apply(&x, n).unwrap();
    let up = mlp.up.apply(&x, n).unwrap();
    clef_kernels::swiglu_in_place(&mut gate, &up);
    assert_eq!(rec.down_in.unwrap(), gate);

    // layer-major: the same ids, layer by layer
    let mut lm = Record::default();
    let layer_major = RunOptions {
        order: PrefillOrder::LayerMajor,
        ..opts.clone()
    };
    rows_of(&model, &g, &layer_major, &mut lm);
    let mut sorted = want.clone();
    sorted.sort_by_key(|(id, _)| id.layer);
    assert_eq!(lm.calls, sorted);
}

#[test]
fn ids_name_the_release_tensors_and_unloaded_layers_refuse_to_run() {
    let mut model = Model::load(&fixtures().join("models/tiny-a")).unwrap();
    let id = LinearId::new(1, LinearKind::MlpDown);
    assert_eq!(
        id.tensor_prefix(),
        "model.language_model.layers.1.mlp.down_proj"
    );
    for (li, layer) in model.backbone().layers.iter().enumerate() {
        for &kind in layer.linear_kinds() {
            let l = model.backbone().linear(LinearId::new(li, kind)).unwrap();
            assert_eq!(
                l.name(),
                format!("{}.weight", LinearId::new(li, kind).tensor_prefix())
            );
        }
    }
    model.backbone_mut().unload_layer(0);
    let g = load_golden(&fixtures().join("golden/tiny-a/a01_support_basic.json"));
    let positions = text_positions(g.ids.len());
    let seq = clef_model::Sequence {
        cut: None,
        ids: &g.ids,
        positions: &positions,
        media: &[],
    };
    let err = model
        .prefill(
            seq,
            &RunOptions::default(),
            &mut (),
            &|| false,
            &mut |_, _| Ok(()),
        )
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("layers.0") && err.contains("unloaded"),
        "{err}"
    );
}
