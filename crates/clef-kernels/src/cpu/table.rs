//! The kernel table: one implementation per kernel family, chosen once from a feature set.
//!
//! Every entry starts as the portable twin ([`Kernels::portable`]); the architecture's
//! `install` (`x86::install`, `aarch64::install`) replaces the entries it has faster code for,
//! reading the feature set in that one place. Kernels receive a table and call its entries;
//! they never ask the CPU anything themselves.
//!
//! The entries are `unsafe fn` pointers because the vector ones are `#[target_feature]`
//! functions. Calling one is sound because a table is only built from features this CPU has
//! ([`Features::detected`], lowered by a [`Level`]) and `install` only puts in functions whose
//! features that set holds; each call site's remaining obligations (pointer extents) are the
//! ones its function documents.

use super::{level_from_env, Features, IsaError, Level};
use crate::attention::flash::{Flash, FlashShape};
use crate::bf16::tile::Bf16Tile;
use crate::deltanet::chunked::{ChunkInputs, ChunkScratch};
use crate::formats::affine4::RowParts;
use crate::formats::lut6::TABLE_LEN;
use crate::formats::ternary::TernaryView;
use crate::gemm::TileKernel;
use crate::int8::tile::{Int8Tile, SuperblockTiles};
use crate::int8::CodeRange;
use crate::weights::Block;
use std::sync::OnceLock;

/// `x ← f(x)` elementwise.
pub(crate) type UnaryFn = unsafe fn(&mut [f32]);
/// `a ← f(a, b)` elementwise over equal lengths.
pub(crate) type BinaryFn = unsafe fn(&mut [f32], &[f32]);
/// Little-endian stored values (bf16, f16) widened to f32, `dst.len()` of them.
pub(crate) type WidenFn = unsafe fn(&[u8], &mut [f32]);
/// `dst[i·ldd + a] = src[a·lds + i]` for `a < rows`, `i < cols` (dst through a pointer: the
/// integer product's blocks write disjoint columns of shared rows).
pub(crate) type TransposeFn =
    unsafe fn(src: &[f32], lds: usize, rows: usize, cols: usize, dst: *mut f32, ldd: usize);
/// One q8 row's columns `col0..col0 + dst.len()` (the row's codes and FP16 scales).
pub(crate) type Q8RowFn = unsafe fn(codes: &[u8], scales: &[u8], col0: usize, dst: &mut [f32]);
/// A block of a ternary matrix into `out[r·ld + c]`.
pub(crate) type TernaryPanelFn =
    unsafe fn(v: &TernaryView<&[u8]>, b: Block, out: &mut [f32], ld: usize);
/// A LUT-6 run of `out.len()` indices from stream position `start` (a multiple of 4).
pub(crate) type Lut6RunFn =
    unsafe fn(packed: &[u8], start: usize, table: &[f32; TABLE_LEN], out: &mut [f32]);
/// A 4-bit affine row's columns `c0..c0 + out.len()` (`c0` even).
pub(crate) type Affine4RunFn = unsafe fn(p: &RowParts, c0: usize, out: &mut [f32]);
/// One group of activations quantized to codes of at most `max`: (scale, Σ codes).
pub(crate) type QuantizeGroupFn = unsafe fn(max: f32, src: &[f32], dst: &mut [i8]) -> (f32, i32);
/// `out[g] = Σ codes[g·64..(g + 1)·64]`.
pub(crate) type GroupSumsFn = unsafe fn(codes: &[i8], group: usize, out: &mut [i32]);
/// 4-bit codes, two per byte, to one byte each; `out.len()` of them.
pub(crate) type NibblesFn = unsafe fn(src: &[u8], out: &mut [i8]);
/// Whole groups of 2-bit planes to ternary codes, with each group's code sum.
pub(crate) type PlanesFn = unsafe fn(src: &[u8], out: &mut [i8], sums: &mut [i32]);
/// DeltaNet's causal depthwise conv over a block of output rows.
pub(crate) type ConvFn = unsafe fn(ext: &[f32], taps: &[f32], channels: usize, out: &mut [f32]);
/// DeltaNet's gated RMSNorm over whole rows.
pub(crate) type GatedNormFn =
    unsafe fn(x: &[f32], z: &[f32], dim: usize, weight: &[f32], eps: f32, out: &mut [f32]);
/// One chunk of one head of the chunked DeltaNet scan.
pub(crate) type DeltaChunkFn = unsafe fn(
    w: &mut ChunkScratch,
    x: &ChunkInputs,
    h: usize,
    t0: usize,
    c: usize,
    s: &mut [f32],
    o: &mut [f32],
);
/// One query block of one kv head of flash attention.
pub(crate) type FlashItemFn = unsafe fn(
    f: &mut Flash,
    sh: &FlashShape,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    i0: usize,
    h: usize,
    dst: &mut [f32],
);
/// One online-softmax step over a transposed score block.
pub(crate) type SoftmaxStepFn = unsafe fn(
    s_t: &mut [f32],
    ld: usize,
    bk: usize,
    rows: usize,
    row_max: &mut [f32],
    row_sum: &mut [f32],
    correction: &mut [f32],
);
/// The adapter's first product for a block of rows (and, with `copy`, `[x | t]`).
pub(crate) type ProjectFn =
    unsafe fn(x: &[f32], cols: usize, a: &[f32], r: usize, t: &mut [f32], copy: Option<&mut [f32]>);
/// The adapter's second product `y += t Bᵀ` for a block of rows.
pub(crate) type ExpandFn = unsafe fn(t: &[f32], bt: &[f32], r: usize, rows: usize, y: &mut [f32]);
/// One output row of the adapter term added to a block held output row by output row.
pub(crate) type ExpandRowFn = unsafe fn(tt: &[f32], ldt: usize, b: &[f32], c: &mut [f32]);
/// One row's whole groups rotated from `src` into `dst`, a partial last group copied.
pub(crate) type RotateRowFn = unsafe fn(src: &[f32], dst: &mut [f32]);
/// `iters` iterations of a register-resident loop; returns the operations done.
pub(crate) type PeakFn = fn(iters: u64) -> u64;

/// The vector width the table's element-wise bodies are compiled for: what
/// [`Kernels::pick`] chooses by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Vector {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

/// Implementations of a family that lives outside this crate (the converter's range-search
/// score, say), one per vector width of this architecture: [`Kernels::pick`] returns the one
/// the table runs its own element-wise bodies at, so that the choice stays in the table.
/// Each vector entry may be a `#[target_feature]` function of its width's features (x86-64:
/// `avx2` with `fma` and `f16c`; `avx512f` with those).
pub struct VectorChoices<T> {
    pub portable: T,
    #[cfg(target_arch = "x86_64")]
    pub avx2: T,
    #[cfg(target_arch = "x86_64")]
    pub avx512: T,
}

/// A kernel family, as [`Kernels::describe`] names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// The f32 matrix-product micro-kernel (and its operand transposition).
    F32Tile,
    /// The integer matrix-product micro-kernels.
    Int8Tile,
    /// The bf16 matrix-product micro-kernel (`--matmul bf16`).
    Bf16Tile,
    /// Stored weights expanded to f32 (dense, LUT-6, ternary, 4-bit, q8) or to int8 codes.
    WeightDecode,
    /// Activations quantized to int8 codes.
    Quantize,
    /// Residual adds and the like.
    Elementwise,
    /// Bulk activations and `exp`.
    Activation,
    /// The gated RMSNorm.
    Norm,
    /// The causal depthwise conv.
    Conv,
    /// The chunked DeltaNet scan's element-wise work.
    DeltaNet,
    /// Flash attention's element-wise work.
    Attention,
    /// Low-rank adapter products.
    LowRank,
    /// The Hadamard rotation of inputs.
    Rotation,
}

/// One implementation per kernel family for one feature set.
pub struct Kernels {
    level: &'static str,
    features: Features,
    /// What each family runs, for logs and `clef bench`.
    pub(crate) names: Vec<(Family, &'static str)>,
    /// The width the element-wise bodies run at ([`Kernels::pick`]).
    pub(crate) vector: Vector,

    // matrix products
    pub(crate) f32_tile: TileKernel,
    pub(crate) transpose: TransposeFn,
    pub(crate) int8_ternary: Int8Tile,
    pub(crate) int8_nibble: Int8Tile,
    pub(crate) int8_byte: Int8Tile,
    /// For groups narrower than the code range's tile takes ([`Int8Tile::min_group`], AMX):
    /// the VNNI tile the AMX level builds on.
    pub(crate) int8_any_group: Int8Tile,
    pub(crate) int8_any_group_name: &'static str,
    pub(crate) int8_any_group_peak: PeakFn,
    /// The tiles of the super-block contract (`crate::int8`'s module docs); `None` where the
    /// level runs that contract on its per-group tiles (`crate::int8::tile::run_superblocks`).
    pub(crate) int8_superblock: Option<SuperblockTiles>,
    pub(crate) bf16_tile: Bf16Tile,

    // weight decoding
    pub(crate) widen_bf16: WidenFn,
    pub(crate) widen_f16: WidenFn,
    pub(crate) q8_row: Q8RowFn,
    pub(crate) ternary_panel: TernaryPanelFn,
    pub(crate) lut6_run: Lut6RunFn,
    pub(crate) affine4_run: Affine4RunFn,
    pub(crate) group_sums: GroupSumsFn,
    pub(crate) nibbles: NibblesFn,
    pub(crate) planes: PlanesFn,

    // activations on the integer path
    pub(crate) quantize_group: QuantizeGroupFn,

    // element-wise work of the blocks
    pub(crate) add: BinaryFn,
    pub(crate) swiglu: BinaryFn,
    pub(crate) sigmoid: UnaryFn,
    pub(crate) silu: UnaryFn,
    pub(crate) gelu_erf: UnaryFn,
    pub(crate) gelu_tanh: UnaryFn,
    pub(crate) exp: UnaryFn,
    pub(crate) gated_norm: GatedNormFn,
    pub(crate) conv: ConvFn,
    pub(crate) delta_chunk: DeltaChunkFn,
    pub(crate) flash_item: FlashItemFn,
    pub(crate) softmax_step: SoftmaxStepFn,

    // low-rank adapters and rotations
    pub(crate) project: ProjectFn,
    pub(crate) expand: ExpandFn,
    /// `None`: the portable loop (which also serves ranks the vector rows do not).
    pub(crate) expand_row: Option<ExpandRowFn>,
    pub(crate) rotate_row: RotateRowFn,

    // peak measurements
    pub(crate) fma_peak: PeakFn,
    pub(crate) int8_peak: PeakFn,
    /// `None` where the bf16 tile is the portable one (no unit to measure).
    pub(crate) bf16_peak: Option<PeakFn>,
}

impl Kernels {
    /// The portable twins of every family: what runs with no feature at all.
    fn portable_rows(level: &'static str) -> Kernels {
        use crate::{
            attention, bulk, conv, deltanet, elementwise, formats, gemm, int8, norm, peak,
            rotation, vexp,
        };
        Kernels {
            level,
            features: Features::NONE,
            vector: Vector::Portable,
            names: vec![
                (Family::F32Tile, "portable"),
                (Family::Int8Tile, "portable"),
                (Family::Bf16Tile, "portable"),
                (Family::WeightDecode, "portable"),
                (Family::Quantize, "portable"),
                (Family::Elementwise, "portable"),
                (Family::Activation, "portable"),
                (Family::Norm, "portable"),
                (Family::Conv, "portable"),
                (Family::DeltaNet, "portable"),
                (Family::Attention, "portable"),
                (Family::LowRank, "portable"),
                (Family::Rotation, "portable"),
            ],
            f32_tile: gemm::portable_tile(),
            transpose: gemm::transpose::transpose_portable,
            int8_ternary: int8::tile::portable_tile(),
            int8_nibble: int8::tile::portable_tile(),
            int8_byte: int8::tile::portable_tile(),
            int8_any_group: int8::tile::portable_tile(),
            int8_any_group_name: "portable",
            int8_any_group_peak: peak::int8_batch_portable,
            int8_superblock: None,
            bf16_tile: crate::bf16::tile::portable_tile(),
            widen_bf16: crate::decode::bf16_scalar,
            widen_f16: crate::decode::f16_scalar,
            q8_row: formats::q8::decode_scalar,
            ternary_panel: formats::ternary::panel_scalar,
            lut6_run: formats::lut6::decode_scalar,
            affine4_run: formats::affine4::decode_scalar,
            group_sums: int8::decode::group_sums_scalar,
            nibbles: int8::decode::nibbles_scalar,
            planes: int8::decode::planes_scalar,
            quantize_group: int8::quantize::group_scalar,
            add: elementwise::add_body,
            swiglu: bulk::swiglu_body,
            sigmoid: bulk::sigmoid_body,
            silu: bulk::silu_body,
            gelu_erf: bulk::gelu_erf_body,
            gelu_tanh: bulk::gelu_tanh_body,
            exp: vexp::exp_body,
            gated_norm: norm::gated_body,
            conv: conv::conv_body,
            delta_chunk: deltanet::chunked::chunk_body,
            flash_item: attention::flash::item_body,
            softmax_step: attention::flash::softmax_step_body,
            project: formats::lowrank::project,
            expand: formats::lowrank::expand,
            expand_row: None,
            rotate_row: rotation::row_body,
            fma_peak: peak::fma_batch_portable,
            int8_peak: peak::int8_batch_portable,
            bf16_peak: None,
        }
    }

    /// The table for `level` on this CPU (whose availability the caller checked).
    fn build(level: &'static Level) -> Kernels {
        let features = level.features();
        let mut table = Kernels::portable_rows(level.name);
        table.features = features;
        super::arch::install(&mut table, features);
        table
    }

    /// Records that `family` now runs `name` (called by `install` as it replaces entries).
    #[cfg_attr(
        not(any(target_arch = "x86_64", target_arch = "aarch64")),
        allow(dead_code)
    )]
    pub(crate) fn set_name(&mut self, family: Family, name: &'static str) {
        if let Some(entry) = self.names.iter_mut().find(|(f, _)| *f == family) {
            entry.1 = name;
        }
    }

    /// Every level's table this CPU has, built once.
    fn tables() -> &'static [Kernels] {
        static TABLES: OnceLock<Vec<Kernels>> = OnceLock::new();
        TABLES.get_or_init(|| Level::available().into_iter().map(Kernels::build).collect())
    }

    /// The table of the level named `name` (as `CLEF_ISA` takes it), or why this CPU cannot
    /// run it.
    pub fn named(name: &str) -> Result<&'static Kernels, IsaError> {
        let level = Level::named(name)?;
        Ok(Kernels::tables()
            .iter()
            .find(|k| k.level == level.name)
            .expect("a table is built for every available level"))
    }

    /// The table this process runs, or why `CLEF_ISA` cannot be honoured; decided once.
    fn chosen() -> &'static Result<&'static Kernels, IsaError> {
        static CHOSEN: OnceLock<Result<&'static Kernels, IsaError>> = OnceLock::new();
        CHOSEN.get_or_init(|| match level_from_env()? {
            Some(level) => Kernels::named(level.name),
            None => Kernels::named(Level::best().name),
        })
    }

    /// The table this process runs: the best level this CPU has, lowered by `CLEF_ISA`; an
    /// unknown or unavailable `CLEF_ISA` is an error. Binaries call this first and stop on the
    /// error, so that [`Kernels::detected`] never meets one.
    pub fn from_env() -> Result<&'static Kernels, IsaError> {
        Kernels::chosen().clone()
    }

    /// [`Kernels::from_env`]'s table (every product asks, so no copy is made). Panics, naming
    /// the problem, when `CLEF_ISA` is invalid: the binaries refuse such a value at start-up.
    pub fn detected() -> &'static Kernels {
        match Kernels::chosen() {
            Ok(k) => k,
            Err(e) => panic!("{e}"),
        }
    }

    /// The tables of every level this CPU has, lowest first (what tests compare).
    pub fn available() -> Vec<&'static Kernels> {
        Kernels::tables().iter().collect()
    }

    /// The portable table (no feature): the scalar twins.
    pub fn portable() -> &'static Kernels {
        &Kernels::tables()[0]
    }

    /// The level's name (`scalar`, `avx2`, ...).
    pub fn level(&self) -> &'static str {
        self.level
    }

    /// The features this table's kernels may use.
    pub fn features(&self) -> Features {
        self.features
    }

    /// What each family runs, e.g. `(F32Tile, "avx512 12x32")`.
    pub fn describe(&self) -> &[(Family, &'static str)] {
        &self.names
    }

    /// What `family` runs.
    pub fn implementation(&self, family: Family) -> &'static str {
        self.names
            .iter()
            .find(|(f, _)| *f == family)
            .map_or("portable", |(_, n)| n)
    }

    /// The entry of `choices` for the width this table's element-wise bodies run at. A
    /// `#[target_feature]` entry may be called (unsafely) on the strength of this choice: the
    /// table only runs on CPUs with its width's features.
    pub fn pick<T: Copy>(&self, choices: &VectorChoices<T>) -> T {
        match self.vector {
            Vector::Portable => choices.portable,
            #[cfg(target_arch = "x86_64")]
            Vector::Avx2 => choices.avx2,
            #[cfg(target_arch = "x86_64")]
            Vector::Avx512 => choices.avx512,
        }
    }

    /// The order this table's bf16 tile adds in: what its `--matmul bf16` bits are.
    pub fn bf16_order(&self) -> crate::bf16::Bf16Order {
        self.bf16_tile.order
    }

    /// The unit that runs `--matmul bf16` at this level (`amx`, `avx512bf16`), or `None` where only
    /// the portable tile would: the mode is then refused rather than run at a fraction of the
    /// exact path's speed.
    pub fn bf16_unit(&self) -> Option<&'static str> {
        match self.implementation(Family::Bf16Tile) {
            "portable" => None,
            name => Some(name),
        }
    }

    /// What runs the integer products of weights with scale groups of `group` columns (the
    /// [`Family::Int8Tile`] name, or the tile that takes the groups too narrow for AMX's).
    pub fn int8_implementation(&self, group: usize) -> &'static str {
        if self.int8_narrow(group) {
            self.int8_any_group_name
        } else {
            self.implementation(Family::Int8Tile)
        }
    }

    /// The peak loop of the tile that runs `group`-column groups.
    pub(crate) fn int8_peak_for(&self, group: usize) -> PeakFn {
        if self.int8_narrow(group) {
            self.int8_any_group_peak
        } else {
            self.int8_peak
        }
    }

    /// Whether `group` is narrower than the level's own integer tile takes (the code ranges
    /// share one minimum: every level has one tile kind).
    fn int8_narrow(&self, group: usize) -> bool {
        group < self.int8_byte.min_group
    }

    /// The tile of the super-block contract for codes in `range`, if the level has one of its
    /// own.
    pub(crate) fn int8_superblock_tile(&self, range: CodeRange) -> Option<&Int8Tile> {
        self.int8_superblock.as_ref().map(|t| match range {
            CodeRange::Int8 => &t.byte,
            CodeRange::Ternary | CodeRange::Nibble => &t.nibble,
        })
    }

    /// What runs the integer products of super-block formats (ggml's K-quants) with groups
    /// of `group` columns.
    pub fn int8_superblock_implementation(&self, group: usize) -> &'static str {
        match self.int8_superblock {
            Some(t) => t.name,
            None => self.int8_implementation(group),
        }
    }

    /// The integer tile for weight codes in `range` with scale groups of `group` columns.
    pub(crate) fn int8_tile(&self, range: CodeRange, group: usize) -> &Int8Tile {
        let tile = match range {
            CodeRange::Ternary => &self.int8_ternary,
            CodeRange::Nibble => &self.int8_nibble,
            CodeRange::Int8 => &self.int8_byte,
        };
        if group < tile.min_group {
            &self.int8_any_group
        } else {
            tile
        }
    }
}

impl std::fmt::Debug for Kernels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Kernels({}: {})", self.level, self.features)
    }
}

impl PartialEq for Kernels {
    fn eq(&self, other: &Self) -> bool {
        self.level == other.level && self.features == other.features
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_table_per_available_level_and_the_portable_one_first() {
        let all = Kernels::available();
        assert_eq!(all.len(), Level::available().len());
        assert_eq!(all[0].level(), "scalar");
        assert_eq!(all[0].features(), Features::NONE);
        assert!(all[0].describe().iter().all(|(_, n)| *n == "portable"));
        for k in &all {
            assert!(Features::detected().has_all(k.features()), "{k:?}");
            assert_eq!(Kernels::named(k.level()).unwrap(), *k);
        }
        assert!(Kernels::named("no-such-level").is_err());
    }
}
