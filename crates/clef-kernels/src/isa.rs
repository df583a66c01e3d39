//! Run-time choice of instruction set.
//!
//! Binaries are built for the baseline target, so every SIMD kernel is compiled with
//! `#[target_feature]` and only called after `is_x86_feature_detected!` said yes. `CLEF_ISA`
//! (`scalar`, `avx2`, `avxvnni`, `avx512`) lowers the choice, e.g. to exercise the AVX2 path on an AVX-512
//! machine; it can never raise it above what the CPU has.

use std::sync::OnceLock;

/// An instruction-set level the kernels have code paths for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Isa {
    /// Portable Rust (the compiler may still auto-vectorise for the baseline target).
    Scalar,
    /// x86-64 AVX2 + FMA + F16C.
    Avx2,
    /// x86-64 AVX-512F (+ the AVX2 set).
    Avx512,
}

impl Isa {
    /// All levels, lowest first.
    pub const ALL: [Isa; 3] = [Isa::Scalar, Isa::Avx2, Isa::Avx512];

    /// Whether this CPU can run the level's code.
    pub fn is_available(self) -> bool {
        match self {
            Isa::Scalar => true,
            Isa::Avx2 => has_avx2(),
            Isa::Avx512 => has_avx512(),
        }
    }

    /// The best available level, lowered by `CLEF_ISA` when set; cached after the first call.
    pub fn detect() -> Isa {
        static CHOSEN: OnceLock<Isa> = OnceLock::new();
        *CHOSEN.get_or_init(|| {
            let best = Isa::ALL
                .into_iter()
                .rev()
                .find(|isa| isa.is_available())
                .unwrap_or(Isa::Scalar);
            match std::env::var("CLEF_ISA")
                .ok()
                .as_deref()
                .and_then(Isa::parse)
            {
                Some(wanted) if wanted < best => wanted,
                _ => best,
            }
        })
    }

    /// Parses `scalar`, `avx2` or `avx512` (case-insensitive).
    pub fn parse(name: &str) -> Option<Isa> {
        match name.trim().to_ascii_lowercase().as_str() {
            "scalar" => Some(Isa::Scalar),
            // `avxvnni` asks for the AVX2 f32 level with the 256-bit VNNI integer tile.
            "avx2" | "avxvnni" => Some(Isa::Avx2),
            "avx512" => Some(Isa::Avx512),
            _ => None,
        }
    }

    /// The available levels, lowest first (what tests iterate over).
    pub fn available() -> Vec<Isa> {
        Isa::ALL
            .into_iter()
            .filter(|isa| isa.is_available())
            .collect()
    }

    /// Lowercase name, as accepted by [`Isa::parse`].
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn has_avx2() -> bool {
    is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c")
}

#[cfg(not(target_arch = "x86_64"))]
fn has_avx2() -> bool {
    false
}

#[cfg(target_arch = "x86_64")]
fn has_avx512() -> bool {
    has_avx2() && is_x86_feature_detected!("avx512f")
}

#[cfg(not(target_arch = "x86_64"))]
fn has_avx512() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_detection_is_available() {
        for isa in Isa::ALL {
            assert_eq!(Isa::parse(isa.name()), Some(isa));
        }
        assert_eq!(Isa::parse(" AVX2 "), Some(Isa::Avx2));
        assert_eq!(Isa::parse("neon"), None);
        assert!(Isa::available().contains(&Isa::Scalar));
        assert!(Isa::detect().is_available());
    }
}
