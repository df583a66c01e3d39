//! CPU kernels over plain f32 slices with explicit shapes: matmul against weights in their
//! stored format (expanded panel by panel), norms, activations, the Gated DeltaNet scan and
//! softmax attention.
//!
//! Activations are always f32, row-major and contiguous, and every reduction accumulates in
//! f32. Each kernel family's implementation is chosen once, from the features this CPU has, in a
//! kernel table ([`Kernels`], [`cpu`]); every vector implementation has a portable twin that the
//! tests compare it with, and the per-architecture code lives in per-architecture modules
//! (`x86`, `aarch64`). Parallel kernels run on the current rayon pool; none creates a pool of
//! its own.

// Kernels over slices with explicit shapes take many scalar arguments by design (the API
// contract); bundling them into structs would only hide the shapes.
#![allow(clippy::too_many_arguments)]

#[cfg(target_arch = "aarch64")]
mod aarch64;
mod activation;
mod attention;
pub mod bf16;
mod bulk;
mod conv;
pub mod cpu;
mod decode;
mod deltanet;
mod elementwise;
mod error;
mod float_env;
pub mod formats;
mod gemm;
pub mod int8;
mod matmul;
mod norm;
mod peak;
mod rotation;
mod scratch;
mod vexp;
mod weights;
#[cfg(target_arch = "x86_64")]
mod x86;

pub use activation::{gelu_erf, gelu_tanh, sigmoid, silu, softmax_in_place, softplus};
pub use attention::{
    attention, attention_scalar, attention_with, causal_attention, causal_attention_scalar,
    causal_attention_with,
};
pub use bulk::{
    gelu_erf_in_place, gelu_tanh_in_place, sigmoid_in_place, silu_in_place, swiglu_in_place,
};
pub use conv::{causal_conv1d, causal_conv1d_with};
pub use cpu::{IsaError, Kernels};
pub use deltanet::{
    gated_delta_rule, gated_delta_rule_recurrent, gated_delta_rule_with, DeltaNetDims, HeadOrder,
    CHUNK,
};
pub use elementwise::{
    add_in_place, add_in_place_with, deltanet_gates, mul_sigmoid_in_place, scale_in_place,
    unscale_in_place,
};
pub use error::KernelError;
pub use matmul::{
    matmul, matmul_bias, matmul_bias_scalar, matmul_panels, matmul_scalar, matmul_with,
};
pub use norm::{l2_normalize, layer_norm, rms_norm, rms_norm_gated, rms_norm_gated_with};
pub use peak::{
    measure_bf16_peak_gflops, measure_fma_peak_gflops, measure_int8_peak_gops,
    measure_int8_peak_gops_for,
};
pub use rotation::{rotate_groups_into, rotate_groups_into_with, ROTATION_GROUP};
pub use weights::{Block, PanelDecode, WeightData, WeightView};
