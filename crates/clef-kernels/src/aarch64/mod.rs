//! AArch64: feature detection, the `CLEF_ISA` levels, and the kernel table's Arm entries (so
//! far the NEON f32 tile; every other family runs its portable twin, which the compiler
//! vectorizes for NEON, the target's baseline).

pub(crate) mod f32_tile;

use crate::cpu::{Family, Feature, Features, Kernels, Level};
use crate::gemm::TileKernel;

/// `scalar`, and `neon` with every extension the CPU has.
pub(crate) const LEVELS: &[Level] = &[
    Level {
        name: "scalar",
        requires: Features::NONE,
        allows: Features::NONE,
    },
    Level {
        name: "neon",
        requires: Features::of(&[Feature::Neon]),
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
    }
}

/// Nothing on AArch64 needs the operating system's permission.
pub(crate) fn refusal() -> Option<&'static str> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every AArch64 CPU has NEON (the emulator's `cortex-a72` and `max` alike): a table that
    /// silently kept the portable tile fails here.
    #[test]
    fn the_neon_level_runs_the_neon_tile() {
        assert!(Features::detected().has_all(Features::of(&[Feature::Neon])));
        let neon = Kernels::named("neon").expect("every AArch64 CPU has the neon level");
        assert_eq!(neon.implementation(Family::F32Tile), "neon 8x12");
        assert_eq!(
            Kernels::detected().implementation(Family::F32Tile),
            "neon 8x12"
        );
        let scalar = Kernels::named("scalar").expect("the scalar level is always there");
        assert_eq!(scalar.implementation(Family::F32Tile), "portable");
    }
}
