//! AArch64: feature detection, the `CLEF_ISA` levels, and the kernel table's Arm entries: the
//! NEON f32 tile, the `SDOT` and `SMMLA` integer tiles, the `BFMMLA` bf16 tile, the weight
//! decoders and the integer path's byte work. The element-wise families run their portable
//! twins, which the compiler vectorizes for NEON, the target's baseline.

mod bf16_tile;
mod decode;
pub(crate) mod f32_tile;
mod int8_codes;
pub(crate) mod int8_tiles;
mod mmla;
mod peak;
mod ternary;

use crate::cpu::{Family, Feature, Features, Kernels, Level};
use crate::gemm::TileKernel;

/// `scalar`, `neon`, `dotprod` and `i8mm`, each allowing every extension the CPU has but those
/// of the levels above it: `CLEF_ISA=neon` on a Graviton 3 runs what a Cortex-A72 runs.
pub(crate) const LEVELS: &[Level] = &[
    Level {
        name: "scalar",
        requires: Features::NONE,
        allows: Features::NONE,
    },
    Level {
        name: "neon",
        requires: Features::of(&[Feature::Neon]),
        allows: Features::AARCH64.without(Features::of(&[
            Feature::Dotprod,
            Feature::I8mm,
            Feature::Bf16,
        ])),
    },
    Level {
        name: "dotprod",
        requires: Features::of(&[Feature::Neon, Feature::Dotprod]),
        allows: Features::AARCH64.without(Features::of(&[Feature::I8mm, Feature::Bf16])),
    },
    Level {
        name: "i8mm",
        requires: Features::of(&[Feature::Neon, Feature::Dotprod, Feature::I8mm]),
        allows: Features::AARCH64,
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
        std::arch::is_aarch64_feature_detected!("neon"),
        Feature::Neon,
    );
    add(
        std::arch::is_aarch64_feature_detected!("dotprod"),
        Feature::Dotprod,
    );
    add(
        std::arch::is_aarch64_feature_detected!("i8mm"),
        Feature::I8mm,
    );
    add(
        std::arch::is_aarch64_feature_detected!("bf16"),
        Feature::Bf16,
    );
    add(std::arch::is_aarch64_feature_detected!("sve"), Feature::Sve);
    found
}

/// Replaces the portable entries of `k` with the Arm code that `f` allows: the one place that
/// reads a feature set to choose a kernel.
pub(crate) fn install(k: &mut Kernels, f: Features) {
    if f.has_all(Features::of(&[Feature::Neon])) {
        k.f32_tile = TileKernel::neon();
        k.set_name(Family::F32Tile, "neon 8x12");
        k.fma_peak = peak::fma_neon;
        k.widen_f16 = decode::f16_neon;
        k.q8_row = decode::q8_neon;
        k.lut6_run = decode::lut6_neon;
        k.affine4_run = decode::affine4_neon;
        k.ternary_panel = ternary::panel_neon;
        k.group_sums = int8_codes::group_sums_neon;
        k.nibbles = int8_codes::nibbles_neon;
        k.planes = int8_codes::planes_neon;
        k.quantize_group = int8_codes::quantize_group_neon;
        k.set_name(Family::WeightDecode, "neon");
        k.set_name(Family::Quantize, "neon");
    }
    if f.has_all(Features::of(&[Feature::Neon, Feature::Dotprod])) {
        let t = int8_tiles::dotprod_tile();
        (k.int8_ternary, k.int8_nibble, k.int8_byte) = (t, t, t);
        k.set_name(Family::Int8Tile, "dotprod 6x16");
        k.int8_peak = peak::int8_dotprod;
    }
    if f.has_all(Features::of(&[Feature::Neon, Feature::I8mm])) {
        let t = int8_tiles::i8mm_tile();
        (k.int8_ternary, k.int8_nibble, k.int8_byte) = (t, t, t);
        k.set_name(Family::Int8Tile, "i8mm 8x8");
        k.int8_peak = peak::int8_i8mm;
    }
    if f.has_all(Features::of(&[Feature::Neon, Feature::Bf16])) {
        k.bf16_tile = bf16_tile::bfmmla_tile();
        k.set_name(Family::Bf16Tile, "bfmmla");
        k.bf16_peak = Some(peak::bf16_bfmmla);
    }
}

/// What gives `--matmul bf16` a unit here (`crate::cpu::bf16_units`).
pub(crate) const BF16_UNITS: &str = "bf16, at the i8mm level";

/// Nothing on AArch64 needs the operating system's permission.
pub(crate) fn refusal() -> Option<&'static str> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the table must have chosen at each level. `CLEF_TEST_QEMU_CPU` (set by `.ci/run` for
    /// each emulated CPU model) says what the CPU has, so that a detection that silently found
    /// less fails; without it the test holds the tables to what detection found.
    #[test]
    fn each_level_runs_the_arm_tiles_the_cpu_has() {
        let found = Features::detected();
        assert!(found.has(Feature::Neon));
        // (dotprod, i8mm) of the emulated CPU model
        let (dotprod, i8mm) = match std::env::var("CLEF_TEST_QEMU_CPU").as_deref() {
            Ok("cortex-a72") => (false, false),
            Ok("neoverse-n1") => (true, false),
            Ok("max") => (true, true),
            Ok(other) => {
                panic!("CLEF_TEST_QEMU_CPU={other}: expected cortex-a72, neoverse-n1 or max")
            }
            Err(_) => (found.has(Feature::Dotprod), found.has(Feature::I8mm)),
        };
        assert_eq!(found.has(Feature::Dotprod), dotprod);
        assert_eq!(found.has(Feature::I8mm), i8mm);
        // qemu's `max` has the bf16 extension with i8mm, as every Armv8.6 core does
        assert_eq!(found.has(Feature::Bf16), i8mm);

        let scalar = Kernels::named("scalar").expect("the scalar level is always there");
        assert_eq!(scalar.implementation(Family::F32Tile), "portable");
        assert_eq!(scalar.implementation(Family::Int8Tile), "portable");
        let neon = Kernels::named("neon").expect("every AArch64 CPU has the neon level");
        assert_eq!(neon.implementation(Family::F32Tile), "neon 8x12");
        assert_eq!(neon.implementation(Family::Int8Tile), "portable");
        assert_eq!(neon.implementation(Family::WeightDecode), "neon");
        assert_eq!(neon.implementation(Family::Quantize), "neon");
        assert!(!neon.features().has(Feature::Dotprod));
        match Kernels::named("dotprod") {
            Ok(k) => {
                assert!(dotprod);
                assert_eq!(k.implementation(Family::F32Tile), "neon 8x12");
                assert_eq!(k.implementation(Family::Int8Tile), "dotprod 6x16");
                assert!(!k.features().has(Feature::I8mm));
            }
            Err(e) => {
                assert!(!dotprod);
                assert!(e.to_string().contains("dotprod"), "{e}");
            }
        }
        match Kernels::named("i8mm") {
            Ok(k) => {
                assert!(i8mm);
                assert_eq!(k.implementation(Family::F32Tile), "neon 8x12");
                assert_eq!(k.implementation(Family::Int8Tile), "i8mm 8x8");
            }
            Err(e) => {
                assert!(!i8mm);
                assert!(e.to_string().contains("i8mm"), "{e}");
            }
        }
        // The peak loops `clef bench` divides by are the level's own units (the operations
        // per iteration name the loop; running one executes its instruction here).
        assert_eq!((neon.fma_peak)(1), 16 * 4 * 2, "neon: the FMLA loop");
        assert_eq!((neon.int8_peak)(1), 16, "neon: the portable integer loop");
        if let Ok(k) = Kernels::named("dotprod") {
            assert_eq!((k.int8_peak)(1), 16 * 16 * 2, "dotprod: the SDOT loop");
        }
        if let Ok(k) = Kernels::named("i8mm") {
            assert_eq!((k.int8_peak)(1), 16 * 32 * 2, "i8mm: the SMMLA loop");
        }
        // bf16 products: BFMMLA at the i8mm level (the bf16 extension comes with i8mm, Armv8.6);
        // the levels below refuse the mode, as a CPU without the unit does.
        for (level, unit) in [("neon", None), ("dotprod", None), ("i8mm", Some("bfmmla"))] {
            if let Ok(k) = Kernels::named(level) {
                let unit = unit.filter(|_| found.has(Feature::Bf16));
                assert_eq!(k.bf16_unit(), unit, "{level}");
                if unit.is_some() {
                    assert_eq!(k.bf16_order(), crate::bf16::Bf16Order::Bfdot);
                    let peak = k.bf16_peak.expect("the BFMMLA peak loop");
                    assert_eq!(peak(1), 16 * 16 * 2, "{level}: the BFMMLA loop");
                }
            }
        }
        let best = Level::best().name;
        let best_int8 = match (dotprod, i8mm) {
            (_, true) => "i8mm 8x8",
            (true, false) => "dotprod 6x16",
            (false, false) => "portable",
        };
        assert_eq!(
            Kernels::named(best)
                .unwrap()
                .implementation(Family::Int8Tile),
            best_int8
        );
        if std::env::var_os("CLEF_ISA").is_none() {
            assert_eq!(Kernels::detected().level(), best);
        }
    }

    #[test]
    fn an_x86_level_or_a_missing_extension_is_refused_by_name() {
        let e = Kernels::named("avx2").unwrap_err().to_string();
        assert!(e.contains("avx2") && e.contains("neon"), "{e}");
        if !Features::detected().has(Feature::I8mm) {
            let e = Kernels::named("i8mm").unwrap_err().to_string();
            assert!(e.contains("i8mm"), "{e}");
        }
    }
}
