//! The instruction set a golden suite runs under.
//!
//! `CLEF_ISA` lowers the kernels' choice, and `.ci/run` loops the golden suites over every
//! level the CPU has. An unknown or unavailable value would quietly give the best level
//! instead, so every suite of that loop starts with [`under_test`], which fails unless the level
//! asked for is the one the kernels use.

use clef_kernels::Isa;

/// The level the kernels use in this process. When `CLEF_ISA` is set it must name a level
/// this CPU has, and that level must be the one chosen; otherwise this panics, naming both.
pub fn under_test() -> Isa {
    let chosen = Isa::detect();
    if let Ok(asked) = std::env::var("CLEF_ISA") {
        if let Err(why) = check(&asked, chosen, Isa::available()) {
            panic!("{why}");
        }
    }
    chosen
}

/// Whether `asked` (a `CLEF_ISA` value) names an available level and it is `chosen`.
pub fn check(asked: &str, chosen: Isa, available: Vec<Isa>) -> Result<(), String> {
    let Some(wanted) = Isa::parse(asked) else {
        return Err(format!(
            "CLEF_ISA={asked:?} names no instruction-set level (scalar, avx2, avxvnni, avx512)"
        ));
    };
    if !available.contains(&wanted) {
        return Err(format!(
            "CLEF_ISA={asked:?}: this CPU has no {} (it has {:?})",
            wanted.name(),
            available.iter().map(|i| i.name()).collect::<Vec<_>>()
        ));
    }
    if wanted != chosen {
        return Err(format!(
            "CLEF_ISA={asked:?} but the kernels chose {}",
            chosen.name()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_level_that_was_not_chosen_is_an_error() {
        let all = vec![Isa::Scalar, Isa::Avx2, Isa::Avx512];
        assert!(check("avx2", Isa::Avx2, all.clone()).is_ok());
        assert!(check("AVX512", Isa::Avx512, all.clone()).is_ok());
        let e = check("avx2", Isa::Avx512, all.clone()).unwrap_err();
        assert!(e.contains("chose avx512"), "{e}");
        let e = check("avx3", Isa::Avx512, all).unwrap_err();
        assert!(e.contains("names no"), "{e}");
        let e = check("avx512", Isa::Avx2, vec![Isa::Scalar, Isa::Avx2]).unwrap_err();
        assert!(e.contains("has no avx512"), "{e}");
    }

    #[test]
    fn this_process_runs_what_it_was_asked() {
        // Whatever the environment: under the CI loop this checks the level took effect.
        let isa = under_test();
        assert!(isa.is_available());
    }
}
