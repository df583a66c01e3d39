//! The x86-64 forms of the range search's score ([`super::score`]): the scalar twin's
//! operations lane by lane, so the same bits; [`clef_kernels::Kernels::pick`] chooses between
//! them by the kernel table's vector width.

pub(crate) mod score_avx2;
pub(crate) mod score_avx512;
