//! What this CPU can run, and which kernels therefore run.
//!
//! Detection runs once and yields the [`Features`] present: per architecture the extensions
//! some kernel here has (or will have) code for, as independent flags rather than a ladder,
//! because they do not nest (AVX-VNNI without AVX-512 on client cores, AVX-512 VNNI on servers,
//! AMX tiles beside both; dotprod and i8mm on Arm). `CLEF_ISA` names a [`Level`], a feature set
//! that can only lower what the CPU has (`avx2` on an AVX-512 machine measures what an AVX2-only
//! machine runs); a name this architecture does not know, or a level whose features this CPU
//! lacks, is an error ([`IsaError`]), never a silent fallback.
//!
//! From the feature set, [`Kernels`] picks one implementation per kernel family, in one place
//! per architecture (`x86::install`, `aarch64::install`): the only code that looks at features.

pub(crate) mod table;

pub use table::{Family, Kernels, VectorChoices};

use std::fmt;
use std::sync::OnceLock;

/// One instruction-set extension a kernel can depend on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Feature {
    /// x86-64 AVX2 with FMA and F16C: every 256-bit path here uses all three, and every CPU
    /// with AVX2 that clef.rs has met has the other two.
    Avx2,
    /// x86-64 AVX-512 Foundation.
    Avx512F,
    /// AVX-512 byte and word instructions.
    Avx512Bw,
    /// AVX-512 vector-length extensions (the 128/256-bit forms).
    Avx512Vl,
    /// AVX-512 VBMI byte permutes (the ternary decoder).
    Avx512Vbmi,
    /// AVX-512 VNNI `vpdpbusd` on 512-bit registers.
    Avx512Vnni,
    /// AVX-VNNI: `vpdpbusd` on 256-bit registers (client cores, Sapphire Rapids and later).
    AvxVnni,
    /// AVX-512 BF16 dot products.
    Avx512Bf16,
    /// AMX tile configuration and loads.
    AmxTile,
    /// AMX int8 tile products.
    AmxInt8,
    /// AMX bf16 tile products.
    AmxBf16,
    /// AArch64 Advanced SIMD.
    Neon,
    /// AArch64 `sdot`/`udot`.
    Dotprod,
    /// AArch64 int8 matrix multiply (`smmla`).
    I8mm,
    /// AArch64 bf16 (`bfdot`, `bfmmla`).
    Bf16,
    /// AArch64 Scalable Vector Extension.
    Sve,
}

impl Feature {
    /// Every feature: the x86-64 ones, then (from [`Feature::Neon`] on) the AArch64 ones.
    pub const ALL: [Feature; 16] = [
        Feature::Avx2,
        Feature::Avx512F,
        Feature::Avx512Bw,
        Feature::Avx512Vl,
        Feature::Avx512Vbmi,
        Feature::Avx512Vnni,
        Feature::AvxVnni,
        Feature::Avx512Bf16,
        Feature::AmxTile,
        Feature::AmxInt8,
        Feature::AmxBf16,
        Feature::Neon,
        Feature::Dotprod,
        Feature::I8mm,
        Feature::Bf16,
        Feature::Sve,
    ];

    /// Lowercase name, as `lscpu` spells the flag where it has one (`avx2` stands for
    /// avx2 + fma + f16c).
    pub fn name(self) -> &'static str {
        match self {
            Feature::Avx2 => "avx2",
            Feature::Avx512F => "avx512f",
            Feature::Avx512Bw => "avx512bw",
            Feature::Avx512Vl => "avx512vl",
            Feature::Avx512Vbmi => "avx512vbmi",
            Feature::Avx512Vnni => "avx512vnni",
            Feature::AvxVnni => "avxvnni",
            Feature::Avx512Bf16 => "avx512bf16",
            Feature::AmxTile => "amx-tile",
            Feature::AmxInt8 => "amx-int8",
            Feature::AmxBf16 => "amx-bf16",
            Feature::Neon => "neon",
            Feature::Dotprod => "dotprod",
            Feature::I8mm => "i8mm",
            Feature::Bf16 => "bf16",
            Feature::Sve => "sve",
        }
    }

    const fn bit(self) -> u32 {
        1 << self as u32
    }
}

/// A set of [`Feature`]s.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Features(u32);

impl Features {
    /// The empty set: portable code only.
    pub const NONE: Features = Features(0);

    /// Every x86-64 feature ([`Feature::ALL`] lists them first, up to [`Feature::Neon`]).
    pub const X86_64: Features = Features(Feature::Neon.bit() - 1);

    /// Every AArch64 feature.
    pub const AARCH64: Features = Features::of(&Feature::ALL).without(Features::X86_64);

    /// The set of the listed features.
    pub const fn of(list: &[Feature]) -> Features {
        let mut bits = 0;
        let mut i = 0;
        while i < list.len() {
            bits |= list[i].bit();
            i += 1;
        }
        Features(bits)
    }

    /// Whether `feature` is in the set.
    pub const fn has(self, feature: Feature) -> bool {
        self.0 & feature.bit() != 0
    }

    /// Whether every feature of `other` is in the set.
    pub const fn has_all(self, other: Features) -> bool {
        self.0 & other.0 == other.0
    }

    /// The features in both sets.
    pub const fn and(self, other: Features) -> Features {
        Features(self.0 & other.0)
    }

    /// The features in either set.
    pub const fn or(self, other: Features) -> Features {
        Features(self.0 | other.0)
    }

    /// The features of this set that are not in `other`.
    pub const fn without(self, other: Features) -> Features {
        Features(self.0 & !other.0)
    }

    /// The features of the set, in [`Feature::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = Feature> {
        Feature::ALL.into_iter().filter(move |f| self.has(*f))
    }

    /// What this CPU has, detected once.
    pub fn detected() -> Features {
        static DETECTED: OnceLock<Features> = OnceLock::new();
        *DETECTED.get_or_init(arch::detect)
    }
}

impl fmt::Display for Features {
    /// `avx2+avx512f+...`, or `none`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Features::NONE {
            return f.write_str("none");
        }
        let names: Vec<&str> = self.iter().map(Feature::name).collect();
        f.write_str(&names.join("+"))
    }
}

impl fmt::Debug for Features {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Features({self})")
    }
}

/// A named feature set, what `CLEF_ISA` selects: the kernels run with the features this CPU
/// has that the level [`allows`](Level::allows), and only on a CPU that has every feature it
/// [`requires`](Level::requires).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Level {
    /// Lowercase name (`scalar`, `avx2`, `avxvnni`, `avx512` on x86-64).
    pub name: &'static str,
    /// Features the CPU must have for the level to be available.
    pub requires: Features,
    /// Features the kernels may use at this level (a superset of `requires`).
    pub allows: Features,
}

impl Level {
    /// The levels of this architecture, lowest first (each allows at least what the ones
    /// before it allow).
    pub fn all() -> &'static [Level] {
        arch::LEVELS
    }

    /// Whether this CPU has what the level requires.
    pub fn on_this_cpu(&self) -> bool {
        Features::detected().has_all(self.requires)
    }

    /// The level named `name` (case-insensitive, surrounding spaces ignored), if this CPU has
    /// it.
    pub fn named(name: &str) -> Result<&'static Level, IsaError> {
        let wanted = name.trim().to_ascii_lowercase();
        let level = Level::all()
            .iter()
            .find(|l| l.name == wanted)
            .ok_or_else(|| IsaError::Unknown {
                asked: name.to_string(),
                known: Level::all().iter().map(|l| l.name).collect(),
            })?;
        if !level.on_this_cpu() {
            return Err(IsaError::Unavailable {
                asked: level.name,
                missing: level.requires.without(Features::detected()),
                available: Level::available().iter().map(|l| l.name).collect(),
            });
        }
        Ok(level)
    }

    /// The levels this CPU has, lowest first (what tests iterate over).
    pub fn available() -> Vec<&'static Level> {
        Level::all().iter().filter(|l| l.on_this_cpu()).collect()
    }

    /// The highest level this CPU has: the name of what runs when `CLEF_ISA` is not set.
    pub fn best() -> &'static Level {
        Level::available()
            .pop()
            .expect("the scalar level needs no feature")
    }

    /// The features the kernels use at this level on this CPU.
    pub fn features(&self) -> Features {
        Features::detected().and(self.allows)
    }
}

/// Why a feature this CPU reports is off, for the start-up log: on x86-64, the operating system
/// refused the AMX tile state (the AMX kernels are then not used, and the `amx` level is not
/// available). `None` when nothing was refused.
pub fn refusal() -> Option<&'static str> {
    Features::detected();
    arch::refusal()
}

/// The features that give this architecture a bf16 unit for `--matmul bf16`, for the message
/// that refuses the mode where none is present.
pub fn bf16_units() -> &'static str {
    arch::BF16_UNITS
}

/// A `CLEF_ISA` value that cannot be honoured.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IsaError {
    #[error("CLEF_ISA={asked:?} names no instruction-set level of this architecture (known: {})", known.join(", "))]
    Unknown {
        asked: String,
        known: Vec<&'static str>,
    },
    #[error("CLEF_ISA={asked}: this CPU lacks {missing} (levels it has: {})", available.join(", "))]
    Unavailable {
        asked: &'static str,
        missing: Features,
        available: Vec<&'static str>,
    },
}

/// The level `CLEF_ISA` asks for, or `None` when it is unset or empty.
pub(crate) fn level_from_env() -> Result<Option<&'static Level>, IsaError> {
    match std::env::var("CLEF_ISA") {
        Ok(v) if !v.trim().is_empty() => Level::named(&v).map(Some),
        _ => Ok(None),
    }
}

#[cfg(target_arch = "x86_64")]
use crate::x86 as arch;

#[cfg(target_arch = "aarch64")]
use crate::aarch64 as arch;

/// Architectures with no vector code here: portable kernels only.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
mod arch {
    use super::{Features, Level};

    pub(crate) const LEVELS: &[Level] = &[Level {
        name: "scalar",
        requires: Features::NONE,
        allows: Features::NONE,
    }];

    pub(crate) fn detect() -> Features {
        Features::NONE
    }

    pub(crate) fn install(_: &mut crate::Kernels, _: Features) {}

    pub(crate) fn refusal() -> Option<&'static str> {
        None
    }

    pub(crate) const BF16_UNITS: &str = "none on this architecture";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_ordered_and_named_consistently() {
        let all = Level::all();
        assert_eq!(all[0].name, "scalar");
        assert_eq!(all[0].requires, Features::NONE);
        for pair in all.windows(2) {
            assert!(pair[1].allows.has_all(pair[0].allows), "{pair:?}");
        }
        for level in all {
            assert!(level.allows.has_all(level.requires), "{level:?}");
            if level.on_this_cpu() {
                assert_eq!(Level::named(&level.name.to_uppercase()), Ok(level));
            }
        }
        assert!(Level::available().contains(&&all[0]));
        assert!(Level::best().on_this_cpu());
    }

    #[test]
    fn unknown_and_unavailable_names_are_errors() {
        let e = Level::named("avx3").unwrap_err();
        assert!(
            e.to_string().contains("avx3") && e.to_string().contains("scalar"),
            "{e}"
        );
        // A level this CPU lacks names what is missing.
        if let Some(level) = Level::all().iter().find(|l| !l.on_this_cpu()) {
            let e = Level::named(level.name).unwrap_err();
            assert!(matches!(e, IsaError::Unavailable { .. }), "{e}");
        }
    }

    #[test]
    fn the_architectures_split_the_features() {
        assert!(Features::X86_64.has(Feature::AmxBf16) && !Features::X86_64.has(Feature::Neon));
        assert!(Features::AARCH64.has(Feature::Sve) && !Features::AARCH64.has(Feature::Avx2));
        assert_eq!(
            Features::X86_64.or(Features::AARCH64),
            Features::of(&Feature::ALL)
        );
        assert_eq!(Features::X86_64.and(Features::AARCH64), Features::NONE);
    }

    #[test]
    fn feature_sets() {
        let s = Features::of(&[Feature::Avx2, Feature::AvxVnni]);
        assert!(s.has(Feature::Avx2) && !s.has(Feature::Avx512F));
        assert!(s.has_all(Features::of(&[Feature::AvxVnni])));
        assert_eq!(s.to_string(), "avx2+avxvnni");
        assert_eq!(Features::NONE.to_string(), "none");
        assert_eq!(
            s.and(Features::of(&[Feature::Avx2])),
            Features::of(&[Feature::Avx2])
        );
        assert_eq!(
            Features::NONE.or(s).iter().collect::<Vec<_>>(),
            vec![Feature::Avx2, Feature::AvxVnni]
        );
    }
}
