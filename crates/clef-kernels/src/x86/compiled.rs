//! The portable bodies of the element-wise families compiled for AVX2 and for AVX-512: the same
//! Rust (`#[inline(always)]` bodies in their family's module), so the same operations in the
//! same order and the same bits as the portable twin; the target features only widen the
//! vectors the compiler may use. (Rust never fuses a multiply and an add unless the source
//! says `mul_add`, so enabling FMA changes no result.)

use crate::cpu::table::{
    BinaryFn, ConvFn, DeltaChunkFn, FlashItemFn, GatedNormFn, SoftmaxStepFn, UnaryFn,
};
use crate::cpu::{Family, Kernels};

/// One level's instances of the bodies.
pub(crate) struct Compiled {
    name: &'static str,
    add: BinaryFn,
    swiglu: BinaryFn,
    sigmoid: UnaryFn,
    silu: UnaryFn,
    gelu_erf: UnaryFn,
    gelu_tanh: UnaryFn,
    exp: UnaryFn,
    gated_norm: GatedNormFn,
    conv: ConvFn,
    delta_chunk: DeltaChunkFn,
    flash_item: FlashItemFn,
    softmax_step: SoftmaxStepFn,
}

impl Compiled {
    /// Puts these instances into the table.
    pub(crate) fn install(&self, k: &mut Kernels) {
        k.add = self.add;
        k.swiglu = self.swiglu;
        k.sigmoid = self.sigmoid;
        k.silu = self.silu;
        k.gelu_erf = self.gelu_erf;
        k.gelu_tanh = self.gelu_tanh;
        k.exp = self.exp;
        k.gated_norm = self.gated_norm;
        k.conv = self.conv;
        k.delta_chunk = self.delta_chunk;
        k.flash_item = self.flash_item;
        k.softmax_step = self.softmax_step;
        for family in [
            Family::Elementwise,
            Family::Activation,
            Family::Norm,
            Family::Conv,
            Family::DeltaNet,
            Family::Attention,
        ] {
            k.set_name(family, self.name);
        }
    }
}

/// `$name` compiled with `$features`, calling the portable `$body` with the same arguments.
macro_rules! instance {
    ($features:literal, $name:ident = $body:path, ($($arg:ident: $ty:ty),*) $(-> $ret:ty)?) => {
        /// # Safety
        /// The CPU must have the target features (the kernel table checks them).
        #[target_feature(enable = $features)]
        pub(crate) unsafe fn $name($($arg: $ty),*) $(-> $ret)? {
            $body($($arg),*)
        }
    };
}

/// Every body compiled with `$features`, as a module `$module` and its [`Compiled`] `$table`.
macro_rules! level {
    ($module:ident, $table:ident, $label:literal, $features:literal) => {
        pub(crate) mod $module {
            use crate::attention::flash::{Flash, FlashShape};
            use crate::deltanet::chunked::{ChunkInputs, ChunkScratch};

            instance!($features, add = crate::elementwise::add_body, (a: &mut [f32], b: &[f32]));
            instance!($features, swiglu = crate::bulk::swiglu_body, (g: &mut [f32], u: &[f32]));
            instance!($features, sigmoid = crate::bulk::sigmoid_body, (x: &mut [f32]));
            instance!($features, silu = crate::bulk::silu_body, (x: &mut [f32]));
            instance!($features, gelu_erf = crate::bulk::gelu_erf_body, (x: &mut [f32]));
            instance!($features, gelu_tanh = crate::bulk::gelu_tanh_body, (x: &mut [f32]));
            instance!($features, exp = crate::vexp::exp_body, (x: &mut [f32]));
            instance!($features, gated_norm = crate::norm::gated_body,
                (x: &[f32], z: &[f32], dim: usize, weight: &[f32], eps: f32, out: &mut [f32]));
            instance!($features, conv = crate::conv::conv_body,
                (ext: &[f32], taps: &[f32], channels: usize, out: &mut [f32]));
            instance!($features, delta_chunk = crate::deltanet::chunked::chunk_body,
                (w: &mut ChunkScratch, x: &ChunkInputs, h: usize, t0: usize, c: usize,
                 s: &mut [f32], o: &mut [f32]));
            instance!($features, flash_item = crate::attention::flash::item_body,
                (f: &mut Flash, sh: &FlashShape, q: &[f32], k: &[f32], v: &[f32], i0: usize,
                 h: usize, dst: &mut [f32]));
            instance!($features, softmax_step = crate::attention::flash::softmax_step_body,
                (s_t: &mut [f32], ld: usize, bk: usize, rows: usize, row_max: &mut [f32],
                 row_sum: &mut [f32], correction: &mut [f32]));
        }

        pub(crate) const $table: Compiled = Compiled {
            name: $label,
            add: $module::add,
            swiglu: $module::swiglu,
            sigmoid: $module::sigmoid,
            silu: $module::silu,
            gelu_erf: $module::gelu_erf,
            gelu_tanh: $module::gelu_tanh,
            exp: $module::exp,
            gated_norm: $module::gated_norm,
            conv: $module::conv,
            delta_chunk: $module::delta_chunk,
            flash_item: $module::flash_item,
            softmax_step: $module::softmax_step,
        };
    };
}

level!(avx2, AVX2, "avx2", "avx2,fma");
level!(avx512, AVX512, "avx512", "avx512f");

// The rotation's rows are eight-wide: AVX2 covers them, so every x86 level above it runs this.
instance!("avx2", rotate_row_avx2 = crate::rotation::row_body, (src: &[f32], dst: &mut [f32]));
