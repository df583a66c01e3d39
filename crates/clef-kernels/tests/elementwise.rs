//! The causal conv and the elementwise loops of the blocks: every ISA against the scalar twin,
//! bit for bit, and the twin against the definition.

use clef_kernels::{
    add_in_place_with, causal_conv1d_with, deltanet_gates, mul_sigmoid_in_place, scale_in_place,
    sigmoid, softplus, unscale_in_place, Kernels,
};
use proptest::prelude::*;

fn values(seed: u64, n: usize) -> Vec<f32> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 8.0
        })
        .collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// out[t, c] = Σ_j w[j, c] · x[t + j, c], in tap order, on every ISA.
    #[test]
    fn causal_conv_matches_its_definition_on_every_isa(
        channels in 1usize..70, n in 1usize..40, taps in 1usize..5, seed in any::<u64>()
    ) {
        let ext = values(seed, (n + taps - 1) * channels);
        let w = values(seed ^ 0x9e37, taps * channels);
        let mut want = vec![0.0f32; n * channels];
        for t in 0..n {
            for c in 0..channels {
                let mut acc = w[c] * ext[t * channels + c];
                for j in 1..taps {
                    acc += w[j * channels + c] * ext[(t + j) * channels + c];
                }
                want[t * channels + c] = acc;
            }
        }
        for kt in Kernels::available() {
            let mut got = vec![f32::NAN; n * channels];
            causal_conv1d_with(kt, &ext, &w, channels, n, &mut got);
            prop_assert_eq!(bits(&got), bits(&want), "{:?}", kt);
        }
    }

    #[test]
    fn residual_add_is_bit_identical_on_every_isa(n in 0usize..300, seed in any::<u64>()) {
        let a = values(seed, n);
        let b = values(seed ^ 0x51, n);
        let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
        for kt in Kernels::available() {
            let mut got = a.clone();
            add_in_place_with(kt, &mut got, &b);
            prop_assert_eq!(bits(&got), bits(&want), "{:?}", kt);
        }
    }

    #[test]
    fn gates_and_scaling_are_their_definitions(
        tokens in 1usize..9, heads in 1usize..7, seed in any::<u64>(), s in 0.5f32..16.0
    ) {
        let mut decay = values(seed, tokens * heads);
        let mut beta = values(seed ^ 3, tokens * heads);
        let neg_a: Vec<f32> = values(seed ^ 5, heads).iter().map(|v| -v.abs()).collect();
        let dt_bias = values(seed ^ 7, heads);
        let want_decay: Vec<f32> = decay
            .iter()
            .enumerate()
            .map(|(i, &a)| neg_a[i % heads] * softplus(a + dt_bias[i % heads]))
            .collect();
        let want_beta: Vec<f32> = beta.iter().map(|&b| sigmoid(b)).collect();
        deltanet_gates(&mut decay, &mut beta, &neg_a, &dt_bias);
        prop_assert_eq!(bits(&decay), bits(&want_decay));
        prop_assert_eq!(bits(&beta), bits(&want_beta));

        let x = values(seed ^ 11, tokens * heads);
        let mut y = x.clone();
        scale_in_place(&mut y, s);
        prop_assert_eq!(bits(&y), bits(&x.iter().map(|v| v * s).collect::<Vec<_>>()));
        unscale_in_place(&mut y, s);
        let back: Vec<f32> = x.iter().map(|v| v * s / s).collect();
        prop_assert_eq!(bits(&y), bits(&back));
        let g = values(seed ^ 13, tokens * heads);
        let mut z = x.clone();
        mul_sigmoid_in_place(&mut z, &g);
        let want: Vec<f32> = x.iter().zip(&g).map(|(v, gv)| v * sigmoid(*gv)).collect();
        prop_assert_eq!(bits(&z), bits(&want));
    }
}
