//! The kernel table a golden suite runs with.
//!
//! `CLEF_ISA` lowers the kernels' choice, and `.ci/run` loops the golden suites over every
//! level the CPU has. Every suite of that loop starts with [`under_test`], which fails unless
//! the level asked for is the one the kernels use (an unknown or unavailable level is an error
//! of the kernels themselves, named here).

use clef_kernels::Kernels;

/// The kernel table this process runs. When `CLEF_ISA` is set it must name a level this CPU
/// has, and that level's table must be the one chosen; otherwise this panics, naming why.
pub fn under_test() -> &'static Kernels {
    let chosen = match Kernels::from_env() {
        Ok(k) => k,
        Err(e) => panic!("{e}"),
    };
    if let Ok(asked) = std::env::var("CLEF_ISA") {
        if let Err(why) = check(&asked, chosen) {
            panic!("{why}");
        }
    }
    chosen
}

/// Whether `asked` (a `CLEF_ISA` value) names the level of `chosen`.
pub fn check(asked: &str, chosen: &Kernels) -> Result<(), String> {
    let wanted = Kernels::named(asked).map_err(|e| e.to_string())?;
    if wanted != chosen {
        return Err(format!(
            "CLEF_ISA={asked:?} but the kernels chose {}",
            chosen.level()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_level_that_was_not_chosen_is_an_error() {
        let portable = Kernels::portable();
        assert!(check("scalar", portable).is_ok());
        assert!(check(" SCALAR ", portable).is_ok());
        let e = check("avx3", portable).unwrap_err();
        assert!(e.contains("names no"), "{e}");
        if let Some(other) = Kernels::available().into_iter().nth(1) {
            let e = check("scalar", other).unwrap_err();
            assert!(e.contains(&format!("chose {}", other.level())), "{e}");
        }
    }

    #[test]
    fn this_process_runs_what_it_was_asked() {
        // Whatever the environment: under the CI loop this checks the level took effect.
        let chosen = under_test();
        assert!(Kernels::available().contains(&chosen));
    }
}
