//! CPU kernels over plain f32 slices with explicit shapes: matmul against weights in their
//! stored format (expanded panel by panel), norms, activations, the Gated DeltaNet scan and
//! softmax attention.
//!
//! Activations are always f32, row-major and contiguous, and every reduction accumulates in
//! f32. SIMD paths are chosen at run time ([`Isa::detect`]) and each has a portable twin that
//! the tests compare it with. Parallel kernels run on the current rayon pool; none creates a
//! pool of its own.

// Kernels over slices with explicit shapes take many scalar arguments by design (the API
// contract); bundling them into structs would only hide the shapes.
#![allow(clippy::too_many_arguments)]

mod activation;
mod attention;
mod bulk;
mod conv;
mod decode;
mod deltanet;
mod elementwise;
mod error;
pub mod formats;
mod gemm;
pub mod int8;
mod isa;
mod matmul;
mod norm;
mod peak;
mod rotation;
mod scratch;
mod vexp;
mod weights;

pub use activation::{gelu_erf, gelu_tanh, sigmoid, silu, softmax_in_place, softplus};
pub use attention::{
    attention, attention_scalar, attention_with_isa, causal_attention, causal_attention_scalar,
    causal_attention_with_isa,
};
pub use bulk::{
    gelu_erf_in_place, gelu_tanh_in_place, sigmoid_in_place, silu_in_place, swiglu_in_place,
};
pub use conv::{causal_conv1d, causal_conv1d_with_isa};
pub use deltanet::{
    gated_delta_rule, gated_delta_rule_recurrent, gated_delta_rule_with_isa, DeltaNetDims, CHUNK,
};
pub use elementwise::{
    add_in_place, add_in_place_with_isa, deltanet_gates, mul_sigmoid_in_place, scale_in_place,
    unscale_in_place,
};
pub use error::KernelError;
pub use isa::Isa;
pub use matmul::{
    matmul, matmul_bias, matmul_bias_scalar, matmul_panels, matmul_scalar, matmul_with_isa,
};
pub use norm::{l2_normalize, layer_norm, rms_norm, rms_norm_gated, rms_norm_gated_with_isa};
pub use peak::{measure_fma_peak_gflops, measure_int8_peak_gops};
pub use rotation::{
    rotate_groups, rotate_groups_into, rotate_groups_into_with_isa, ROTATION_GROUP,
};
pub use weights::{PanelDecode, WeightData, WeightView};
