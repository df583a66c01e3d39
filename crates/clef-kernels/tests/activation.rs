//! Activations against values computed in f64 (Python `math`), and softmax properties.

use clef_kernels::{gelu_erf, gelu_tanh, sigmoid, silu, softmax_in_place, softplus};

/// |a − b| within `ulps` units in the last place of the f32 nearest `b`.
fn close_ulps(a: f32, b: f64, ulps: f32) -> bool {
    let b32 = b as f32;
    let ulp = (f32::from_bits(b32.abs().to_bits() + 1) - b32.abs()).max(f32::MIN_POSITIVE);
    (a - b32).abs() <= ulps * ulp
}

#[test]
fn gelu_erf_matches_f64() {
    // 0.5 · x · (1 + erf(x / √2)) in f64.
    let cases = [
        (-3.0, -0.00404969409489031),
        (-1.0, -0.15865525393145707),
        (-0.5, -0.15426876936299344),
        (0.0, 0.0),
        (0.5, 0.34573123063700656),
        (1.0, 0.8413447460685429),
        (2.0, 1.9544997361036416),
        (4.0, 3.9998733150326675),
    ];
    for (x, want) in cases {
        let got = gelu_erf(x);
        assert!(
            close_ulps(got, want, 1.0),
            "gelu_erf({x}) = {got}, want {want}"
        );
    }
}

#[test]
fn gelu_tanh_matches_f64() {
    let cases = [
        (-3.0, -0.0036373920817729943),
        (-1.0, -0.15880800939172324),
        (0.5, 0.34571400982514394),
        (1.0, 0.8411919906082768),
        (2.0, 1.954597694087775),
        (4.0, 3.9999297540518075),
    ];
    for (x, want) in cases {
        let got = gelu_tanh(x);
        assert!(
            close_ulps(got, want, 1.0),
            "gelu_tanh({x}) = {got}, want {want}"
        );
    }
}

#[test]
fn sigmoid_silu_softplus_match_f64() {
    // (x, σ(x), x·σ(x), softplus(x) with PyTorch's threshold 20)
    let cases = [
        (
            -30.0,
            9.357622968839299e-14,
            -2.8072868906517896e-12,
            9.357622968839737e-14,
        ),
        (
            -5.0,
            0.0066928509242848554,
            -0.03346425462142428,
            0.006715348489118068,
        ),
        (
            -1.0,
            0.2689414213699951,
            -0.2689414213699951,
            0.31326168751822286,
        ),
        (0.0, 0.5, 0.0, std::f64::consts::LN_2),
        (
            1.0,
            0.7310585786300049,
            0.7310585786300049,
            1.3132616875182228,
        ),
        (
            5.0,
            0.9933071490757153,
            4.966535745378576,
            5.006715348489118,
        ),
        (
            19.0,
            0.9999999943972036,
            18.999999893546867,
            19.000000005602796,
        ),
        (21.0, 0.9999999992417439, 20.99999998407662, 21.0),
    ];
    for (x, s, si, sp) in cases {
        assert!(
            close_ulps(sigmoid(x), s, 1.0),
            "sigmoid({x}) = {}",
            sigmoid(x)
        );
        assert!(close_ulps(silu(x), si, 1.0), "silu({x}) = {}", silu(x));
        assert!(
            close_ulps(softplus(x), sp, 1.0),
            "softplus({x}) = {}",
            softplus(x)
        );
    }
    // Above the threshold softplus is the identity, bit for bit.
    assert_eq!(softplus(20.5), 20.5);
}

#[test]
fn softmax_sums_to_one_and_orders() {
    let mut x = vec![1.0f32, 3.0, -2.0, 3.0, 0.5];
    let orig = x.clone();
    softmax_in_place(&mut x);
    let total: f32 = x.iter().sum();
    assert!((total - 1.0).abs() < 1e-6);
    let denom: f64 = orig.iter().map(|&v| f64::from(v - 3.0).exp()).sum();
    for (p, &v) in x.iter().zip(&orig) {
        let want = f64::from(v - 3.0).exp() / denom;
        assert!((f64::from(*p) - want).abs() < 1e-7, "{p} vs {want}");
    }
    // Large inputs do not overflow.
    let mut big = vec![1000.0f32, 999.0];
    softmax_in_place(&mut big);
    assert!((big[0] - 0.731_058_6).abs() < 1e-6);
    // Fully masked rows give zeros, not NaN.
    let mut masked = vec![f32::NEG_INFINITY; 3];
    softmax_in_place(&mut masked);
    assert_eq!(masked, vec![0.0; 3]);
}
