//! AArch64: feature detection and the `CLEF_ISA` levels. No kernel has Arm code yet, so
//! [`install`] leaves every portable entry of the table in place; the levels already name what
//! Arm kernels will be chosen by.

use crate::cpu::{Feature, Features, Kernels, Level};

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

/// Arm entries of the kernel table: none yet (portable code throughout).
pub(crate) fn install(_k: &mut Kernels, _f: Features) {}

/// Nothing on AArch64 needs the operating system's permission.
pub(crate) fn refusal() -> Option<&'static str> {
    None
}
