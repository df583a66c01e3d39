//! The instruction sets of the integer tiles: a feature set beside the f32 ladder ([`Isa`]),
//! because VNNI comes in two independent forms (256-bit AVX-VNNI on client cores, AVX-512 VNNI
//! on servers) that do not follow the f32 levels.

use crate::isa::Isa;
use std::sync::OnceLock;

/// An integer tile implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Int8Isa {
    /// Portable Rust.
    Portable,
    /// AVX2 `vpmaddubsw` + `vpmaddwd` (every AVX2 machine).
    Avx2,
    /// AVX-VNNI `vpdpbusd` on 256-bit registers.
    AvxVnni,
    /// AVX-512 VNNI `vpdpbusd` on 512-bit registers (with AVX-512BW).
    Avx512Vnni,
}

impl Int8Isa {
    /// All of them, lowest first.
    pub const ALL: [Int8Isa; 4] = [
        Int8Isa::Portable,
        Int8Isa::Avx2,
        Int8Isa::AvxVnni,
        Int8Isa::Avx512Vnni,
    ];

    /// Whether this CPU can run it.
    pub fn is_available(self) -> bool {
        match self {
            Int8Isa::Portable => true,
            Int8Isa::Avx2 => Isa::Avx2.is_available(),
            Int8Isa::AvxVnni => Isa::Avx2.is_available() && has_avx_vnni(),
            Int8Isa::Avx512Vnni => Isa::Avx512.is_available() && has_avx512_vnni(),
        }
    }

    /// The best available tile under the f32 level [`Isa::detect`] chose, so that `CLEF_ISA`
    /// lowers both together: `scalar` gives the portable tile, `avx2` the plain AVX2 tile (what
    /// an AVX2-only machine runs, even on a CPU with AVX-VNNI), `avxvnni` the 256-bit VNNI
    /// tile, and `avx512` (or no setting) the best this CPU has. Cached after the first call.
    pub fn detect() -> Int8Isa {
        static CHOSEN: OnceLock<Int8Isa> = OnceLock::new();
        *CHOSEN.get_or_init(|| {
            let wanted = std::env::var("CLEF_ISA").ok();
            Self::choose(Isa::detect(), wanted.as_deref())
        })
    }

    /// [`Int8Isa::detect`]'s rule for a given f32 level and `CLEF_ISA` value.
    fn choose(level: Isa, clef_isa: Option<&str>) -> Int8Isa {
        let best = |candidates: &[Int8Isa]| {
            candidates
                .iter()
                .copied()
                .find(|i| i.is_available())
                .unwrap_or(Int8Isa::Portable)
        };
        let avxvnni_asked = clef_isa.is_some_and(|v| v.trim().eq_ignore_ascii_case("avxvnni"));
        match level {
            Isa::Scalar => Int8Isa::Portable,
            Isa::Avx2 if avxvnni_asked => best(&[Int8Isa::AvxVnni, Int8Isa::Avx2]),
            Isa::Avx2 => {
                // Not lowered by CLEF_ISA means the CPU tops out at AVX2: use VNNI if present.
                if clef_isa.is_none() {
                    best(&[Int8Isa::AvxVnni, Int8Isa::Avx2])
                } else {
                    best(&[Int8Isa::Avx2])
                }
            }
            Isa::Avx512 => best(&[Int8Isa::Avx512Vnni, Int8Isa::AvxVnni, Int8Isa::Avx2]),
        }
    }

    /// The available ones, lowest first (what tests iterate over).
    pub fn available() -> Vec<Int8Isa> {
        Self::ALL.into_iter().filter(|i| i.is_available()).collect()
    }

    /// Lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Int8Isa::Portable => "portable",
            Int8Isa::Avx2 => "avx2",
            Int8Isa::AvxVnni => "avxvnni",
            Int8Isa::Avx512Vnni => "avx512vnni",
        }
    }

    /// The f32 level whose code (quantizer, decoders) runs beside this tile.
    pub fn f32_level(self) -> Isa {
        match self {
            Int8Isa::Portable => Isa::Scalar,
            Int8Isa::Avx2 | Int8Isa::AvxVnni => Isa::Avx2,
            Int8Isa::Avx512Vnni => Isa::Avx512,
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn has_avx_vnni() -> bool {
    is_x86_feature_detected!("avxvnni")
}

#[cfg(not(target_arch = "x86_64"))]
fn has_avx_vnni() -> bool {
    false
}

#[cfg(target_arch = "x86_64")]
fn has_avx512_vnni() -> bool {
    is_x86_feature_detected!("avx512vnni") && is_x86_feature_detected!("avx512bw")
}

#[cfg(not(target_arch = "x86_64"))]
fn has_avx512_vnni() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clef_isa_lowers_the_integer_tile_with_the_f32_level() {
        assert_eq!(Int8Isa::choose(Isa::Scalar, None), Int8Isa::Portable);
        assert_eq!(
            Int8Isa::choose(Isa::Scalar, Some("scalar")),
            Int8Isa::Portable
        );
        if Isa::Avx2.is_available() {
            // An explicit `avx2` means "as on an AVX2-only machine": never VNNI.
            assert_eq!(Int8Isa::choose(Isa::Avx2, Some("avx2")), Int8Isa::Avx2);
            let vnni = Int8Isa::choose(Isa::Avx2, Some("avxvnni"));
            assert_eq!(vnni == Int8Isa::AvxVnni, Int8Isa::AvxVnni.is_available());
        }
        assert!(Int8Isa::detect().is_available());
        assert!(Int8Isa::available().contains(&Int8Isa::Portable));
    }
}
