//! x86-64: feature detection, the `CLEF_ISA` levels, and the kernel table's x86 entries.
//!
//! Every `#[target_feature]` function of the crate is in this module's files, and [`install`]
//! is the only code that reads a feature set to choose among them.

pub(crate) mod amx;
pub(crate) mod amx_tiles;
pub(crate) mod bf16_dot;
pub(crate) mod compiled;
pub(crate) mod decode;
pub(crate) mod f32_tile;
pub(crate) mod float_env;
pub(crate) mod int8;
pub(crate) mod int8_tiles;
pub(crate) mod lowrank;
pub(crate) mod peak;
pub(crate) mod ternary;

use crate::bf16::tile::Bf16Tile;
use crate::bf16::Bf16Order;
use crate::cpu::table::Vector;
use crate::cpu::{Family, Feature, Features, Kernels, Level};
use crate::gemm::TileKernel;
use crate::int8::tile::Int8Tile;
use std::arch::x86_64::{__cpuid, __cpuid_count, _xgetbv};
use std::sync::OnceLock;

const AMX: Features = Features::of(&[Feature::AmxTile, Feature::AmxInt8, Feature::AmxBf16]);

/// The `CLEF_ISA` levels: what an AVX2-only machine runs, one with AVX-VNNI but no AVX-512
/// (Intel client cores), every AVX-512 extension, and the AMX tiles beside them (Intel Xeon
/// from Sapphire Rapids on).
pub(crate) const LEVELS: &[Level] = &[
    Level {
        name: "scalar",
        requires: Features::NONE,
        allows: Features::NONE,
    },
    Level {
        name: "avx2",
        requires: Features::of(&[Feature::Avx2]),
        allows: Features::of(&[Feature::Avx2]),
    },
    Level {
        name: "avxvnni",
        requires: Features::of(&[Feature::Avx2, Feature::AvxVnni]),
        allows: Features::of(&[Feature::Avx2, Feature::AvxVnni]),
    },
    Level {
        name: "avx512",
        requires: Features::of(&[Feature::Avx2, Feature::Avx512F]),
        allows: Features::X86_64.without(AMX),
    },
    Level {
        name: "amx",
        requires: Features::of(&[
            Feature::Avx2,
            Feature::Avx512F,
            Feature::Avx512Bw,
            Feature::AmxTile,
            Feature::AmxInt8,
            Feature::AmxBf16,
        ]),
        allows: Features::X86_64,
    },
];

/// The features this CPU (and its operating system) supports.
pub(crate) fn detect() -> Features {
    let mut found = Features::NONE;
    let mut add = |present: bool, f: Feature| {
        if present {
            found = found.or(Features::of(&[f]));
        }
    };
    add(
        is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c"),
        Feature::Avx2,
    );
    add(is_x86_feature_detected!("avx512f"), Feature::Avx512F);
    add(is_x86_feature_detected!("avx512bw"), Feature::Avx512Bw);
    add(is_x86_feature_detected!("avx512vl"), Feature::Avx512Vl);
    add(is_x86_feature_detected!("avx512vbmi"), Feature::Avx512Vbmi);
    add(is_x86_feature_detected!("avx512vnni"), Feature::Avx512Vnni);
    add(is_x86_feature_detected!("avxvnni"), Feature::AvxVnni);
    add(is_x86_feature_detected!("avx512bf16"), Feature::Avx512Bf16);
    found.or(amx())
}

/// What gives `--matmul bf16` a unit here (`crate::cpu::bf16_units`).
pub(crate) const BF16_UNITS: &str = "amx-bf16, or avx512bf16";

/// Why AMX, which this CPU has, is off (the operating system refused the tile state), if it is.
pub(crate) fn refusal() -> Option<&'static str> {
    REFUSAL.get().map(String::as_str)
}

static REFUSAL: OnceLock<String> = OnceLock::new();

/// The AMX features the CPU reports (CPUID, XCR0), kept only when the operating system grants
/// the tile state: otherwise none, and the reason is kept for the start-up log ([`refusal`]).
fn amx() -> Features {
    let (admitted, refused) = admit_amx(amx_reported(), amx::request_permission);
    if let Some(reason) = refused {
        let _ = REFUSAL.set(reason);
    }
    admitted
}

/// `reported` AMX features if there are none or `permission` grants them; else none and the
/// reason.
fn admit_amx(
    reported: Features,
    permission: impl FnOnce() -> Result<(), String>,
) -> (Features, Option<String>) {
    if reported == Features::NONE {
        return (Features::NONE, None);
    }
    match permission() {
        Ok(()) => (reported, None),
        Err(reason) => (Features::NONE, Some(reason)),
    }
}

/// The AMX features, from CPUID leaf 7 and XCR0 (the standard library's detection of them is
/// not stable): the CPU must have them and the OS must save the tile state.
fn amx_reported() -> Features {
    // SAFETY: CPUID is available on every x86-64 CPU. (`__cpuid` is safe from Rust 1.90 on and
    // unsafe before; the workspace supports 1.89.)
    #[allow(unused_unsafe)]
    let leaf1 = unsafe { __cpuid(1) };
    if leaf1.ecx & (1 << 27) == 0 {
        return Features::NONE; // no OSXSAVE: XCR0 cannot be read
    }
    /// # Safety
    /// XSAVE must be available (OSXSAVE checked by the caller).
    #[target_feature(enable = "xsave")]
    unsafe fn xcr0() -> u64 {
        _xgetbv(0)
    }
    // SAFETY: OSXSAVE checked above.
    let xcr0 = unsafe { xcr0() };
    const TILECFG_AND_DATA: u64 = (1 << 17) | (1 << 18);
    if xcr0 & TILECFG_AND_DATA != TILECFG_AND_DATA {
        return Features::NONE;
    }
    // SAFETY: as above.
    #[allow(unused_unsafe)]
    let edx = unsafe { __cpuid_count(7, 0) }.edx;
    let mut found = Vec::new();
    for (bit, f) in [
        (24, Feature::AmxTile),
        (25, Feature::AmxInt8),
        (22, Feature::AmxBf16),
    ] {
        if edx & (1 << bit) != 0 {
            found.push(f);
        }
    }
    Features::of(&found)
}

/// Replaces the portable entries of `k` with the x86 code that `f` allows: the one place that
/// reads a feature set to choose a kernel.
pub(crate) fn install(k: &mut Kernels, f: Features) {
    use Feature::*;
    let has = |list: &[Feature]| f.has_all(Features::of(list));
    if has(&[Avx2]) {
        let c = &compiled::AVX2;
        k.vector = Vector::Avx2;
        k.f32_tile = TileKernel::avx2();
        k.transpose = f32_tile::transpose_avx2;
        k.widen_bf16 = decode::bf16_avx2;
        k.widen_f16 = decode::f16_avx2;
        k.q8_row = decode::q8_avx2;
        k.ternary_panel = ternary::panel_avx2;
        k.lut6_run = decode::lut6_avx2;
        k.affine4_run = decode::affine4_avx2;
        k.group_sums = int8::group_sums_avx2;
        k.nibbles = int8::nibbles_avx2;
        k.planes = int8::planes_avx2;
        k.quantize_group = int8::quantize_group_avx2;
        (k.int8_ternary, k.int8_nibble, k.int8_byte) = int8::avx2_tiles();
        k.int8_superblock = Some(int8::avx2_superblock_tiles());
        c.install(k);
        k.rotate_row = compiled::rotate_row_avx2;
        k.project = lowrank::project_avx2;
        k.expand = lowrank::expand_avx2;
        k.expand_row = Some(lowrank::expand_row_avx2);
        k.fma_peak = peak::fma_avx2;
        k.int8_peak = peak::int8_avx2;
        for family in [
            Family::WeightDecode,
            Family::Quantize,
            Family::LowRank,
            Family::Rotation,
        ] {
            k.set_name(family, "avx2");
        }
        k.set_name(Family::F32Tile, "avx2 6x16");
        k.set_name(Family::Int8Tile, "avx2");
    }
    if has(&[Avx2, AvxVnni]) {
        let t = int8::avxvnni_tile();
        (k.int8_ternary, k.int8_nibble, k.int8_byte) = (t, t, t);
        // ggml's K-quants stay on the AVX2 level's super-block tiles rather than running the
        // VNNI tile a super-block at a time (`run_superblocks`), which cost the AVX2 tiles
        // 0.85-0.9× of their super-block forms (performance.md, "The K-quants under a
        // super-block contract"; no machine here has AVX-VNNI to measure its tile that way).
        k.int8_peak = peak::int8_avxvnni;
        k.set_name(Family::Int8Tile, "avxvnni");
    }
    if has(&[Avx2, Avx512F]) {
        let c = &compiled::AVX512;
        k.vector = Vector::Avx512;
        k.f32_tile = TileKernel::avx512();
        k.widen_bf16 = decode::bf16_avx512;
        k.widen_f16 = decode::f16_avx512;
        k.q8_row = decode::q8_avx512;
        k.lut6_run = decode::lut6_avx512;
        k.affine4_run = decode::affine4_avx512;
        c.install(k);
        k.project = lowrank::project_avx512;
        k.expand = lowrank::expand_avx512;
        k.expand_row = Some(lowrank::expand_row_avx512);
        k.fma_peak = peak::fma_avx512;
        k.set_name(Family::F32Tile, "avx512 12x32");
        k.set_name(Family::WeightDecode, "avx512");
        k.set_name(Family::LowRank, "avx512");
    }
    if has(&[Avx2, Avx512F, Avx512Bw, Avx512Vbmi]) {
        k.ternary_panel = ternary::panel_vbmi;
        k.set_name(Family::WeightDecode, "avx512 (ternary: vbmi)");
    }
    if has(&[Avx2, Avx512F, Avx512Bw, Avx512Vnni]) {
        let (wide, narrow) = (int8::avx512vnni_tile(), int8::avx512vnni_narrow_tile());
        // 4-bit codes carry an offset per group, one more float update per group end, and
        // there the narrow tile (outputs in registers across the groups) is 1.2× the
        // wide one at 64 columns too; for ternary and q8 the two measure the same
        // (performance.md, "The VNNI narrow tile for 4-bit weights").
        (k.int8_ternary, k.int8_nibble, k.int8_byte) = (wide, narrow, wide);
        k.int8_peak = peak::int8_avx512vnni;
        k.set_name(Family::Int8Tile, "avx512vnni (4-bit: avx512vnni-narrow)");
        // ggml's 32- and 16-column groups: the same instruction, so the same peak.
        k.int8_any_group = narrow;
        k.int8_any_group_name = "avx512vnni-narrow";
        k.int8_any_group_peak = peak::int8_avx512vnni;
        // ggml's K-quants (the super-block contract); the AMX level keeps this tile for them.
        k.int8_superblock = Some(int8::avx512vnni_superblock_tiles());
    }
    if has(&[Avx2, Avx512F, Avx512Bf16]) {
        k.bf16_tile = Bf16Tile {
            mr: bf16_dot::MR,
            mp: bf16_dot::MP,
            order: Bf16Order::Pairs,
            run: bf16_dot::tile,
        };
        k.bf16_peak = Some(peak::bf16_avx512);
        k.set_name(Family::Bf16Tile, "avx512bf16");
    }
    if has(&[Avx2, Avx512F, AmxTile, AmxInt8]) {
        let t = Int8Tile {
            mr: amx_tiles::MR,
            mp: amx_tiles::MP,
            x_bias: 0,
            min_group: amx_tiles::int8::MIN_GROUP,
            plain: amx_tiles::int8::tile::<false>,
            affine: amx_tiles::int8::tile::<true>,
        };
        // The groups narrower than the AMX tile's `MIN_GROUP` stay on the level below's tile
        // for them: VNNI's narrow tile (every AMX CPU has AVX-512 VNNI), else its main tile.
        if !has(&[Avx2, Avx512F, Avx512Bw, Avx512Vnni]) {
            k.int8_any_group = k.int8_byte;
            k.int8_any_group_name = k.implementation(Family::Int8Tile);
            k.int8_any_group_peak = k.int8_peak;
        }
        (k.int8_ternary, k.int8_nibble, k.int8_byte) = (t, t, t);
        k.int8_peak = peak::int8_amx;
        k.set_name(Family::Int8Tile, "amx");
    }
    if has(&[AmxTile, AmxBf16]) {
        k.bf16_tile = Bf16Tile {
            mr: amx_tiles::MR,
            mp: amx_tiles::MP,
            order: Bf16Order::Tile,
            run: amx_tiles::bf16::tile,
        };
        k.bf16_peak = Some(peak::bf16_amx);
        k.set_name(Family::Bf16Tile, "amx");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ggml's 32- and 16-column groups go to the VNNI tile that keeps its outputs in
    /// registers (AMX keeps the 32-column ones); the project's 64-column groups to the level's
    /// own tile.
    #[test]
    fn narrow_groups_take_the_narrow_vnni_tile() {
        for k in Kernels::available() {
            let f = k.features();
            if !f.has(Feature::Avx512Vnni) {
                continue;
            }
            let own = k.implementation(Family::Int8Tile);
            assert_eq!(k.int8_implementation(64), own);
            assert_eq!(k.int8_implementation(16), "avx512vnni-narrow");
            let at_32 = if f.has(Feature::AmxInt8) {
                own
            } else {
                "avx512vnni-narrow"
            };
            assert_eq!(k.int8_implementation(32), at_32);
            // Below AMX, 4-bit codes take the narrow tile at every width (told apart from the
            // wide one by its lane count).
            if !f.has(Feature::AmxInt8) {
                use crate::int8::CodeRange;
                let (wide, narrow) = (
                    int8::avx512vnni_tile().mp,
                    int8::avx512vnni_narrow_tile().mp,
                );
                assert_ne!(wide, narrow);
                assert_eq!(k.int8_tile(CodeRange::Nibble, 64).mp, narrow);
                assert_eq!(k.int8_tile(CodeRange::Int8, 64).mp, wide);
                assert_eq!(k.int8_tile(CodeRange::Ternary, 64).mp, wide);
            }
            // ggml's K-quants take the super-block tile, AMX machines too.
            assert_eq!(
                k.int8_superblock_implementation(16),
                "avx512vnni-superblock"
            );
            assert!(k
                .int8_superblock_tile(crate::int8::CodeRange::Nibble)
                .is_some());
        }
    }

    /// The AVX2 and AVX-VNNI levels run ggml's K-quants on the AVX2 super-block tiles, per
    /// code range.
    #[test]
    fn kquants_take_the_levels_superblock_tiles() {
        use crate::int8::CodeRange;
        for k in Kernels::available() {
            let f = k.features();
            if f.has(Feature::Avx512Vnni) || !f.has(Feature::Avx2) {
                continue;
            }
            assert_eq!(k.int8_superblock_implementation(16), "avx2");
            let (nibble, byte) = (
                k.int8_superblock_tile(CodeRange::Nibble).unwrap(),
                k.int8_superblock_tile(CodeRange::Int8).unwrap(),
            );
            assert_eq!((nibble.mr, byte.mr), (int8_tiles::nibbles::MR, 5));
        }
    }

    #[test]
    fn a_refused_tile_state_turns_amx_off_with_its_reason() {
        let reported = Features::of(&[Feature::AmxTile, Feature::AmxInt8]);
        assert_eq!(admit_amx(reported, || Ok(())), (reported, None));
        assert_eq!(
            admit_amx(Features::NONE, || panic!("not asked")),
            (Features::NONE, None)
        );
        let (admitted, reason) = admit_amx(reported, || {
            Err("arch_prctl: Operation not permitted".into())
        });
        assert_eq!(admitted, Features::NONE);
        assert_eq!(
            reason.as_deref(),
            Some("arch_prctl: Operation not permitted")
        );
        // This process's own detection: AMX is on exactly when nothing refused it.
        let detected = Features::detected();
        if refusal().is_some() {
            assert!(!detected.has(Feature::AmxTile));
        }
    }
}
