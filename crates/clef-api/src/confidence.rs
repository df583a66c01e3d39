//! The `confidence` formulas of api.md §8. Every function takes the unrounded distribution of
//! one question (any order for choice; level order for score).

use std::fmt;
use std::str::FromStr;

/// Which formula fills `confidence`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ConfidenceFormula {
    /// p_max: what the released reference returns (default).
    #[default]
    Pmax,
    /// TypeSafe/Jev and llama-server: chance-corrected peak (choice) or level dispersion
    /// (score).
    Typesafe,
    /// Ollama: 1 − H(p)/ln n.
    Entropy,
}

impl ConfidenceFormula {
    pub fn as_str(self) -> &'static str {
        match self {
            ConfidenceFormula::Pmax => "pmax",
            ConfidenceFormula::Typesafe => "typesafe",
            ConfidenceFormula::Entropy => "entropy",
        }
    }

    /// Confidence of a choice distribution.
    pub fn choice(self, p: &[f64]) -> f64 {
        let n = p.len();
        if n <= 1 {
            return 1.0;
        }
        match self {
            ConfidenceFormula::Pmax => max(p),
            ConfidenceFormula::Typesafe => {
                let n = n as f64;
                ((n * max(p) - 1.0) / (n - 1.0)).max(0.0)
            }
            ConfidenceFormula::Entropy => entropy_confidence(p),
        }
    }

    /// Confidence of a score distribution (level order).
    pub fn score(self, p: &[f64]) -> f64 {
        let n = p.len();
        if n <= 1 {
            return 1.0;
        }
        match self {
            ConfidenceFormula::Pmax => max(p),
            ConfidenceFormula::Typesafe => {
                let m = first_argmax(p) as f64;
                let middle = (n as f64 - 1.0) / 2.0;
                let spread: f64 = p
                    .iter()
                    .enumerate()
                    .map(|(i, pi)| pi * (i as f64 - m).abs())
                    .sum();
                // Mean distance of the levels from the middle (1.0 for n = 4).
                let norm: f64 = (0..n).map(|i| (i as f64 - middle).abs()).sum::<f64>() / n as f64;
                (1.0 - spread / norm).max(0.0)
            }
            ConfidenceFormula::Entropy => entropy_confidence(p),
        }
    }
}

impl fmt::Display for ConfidenceFormula {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Error of [`ConfidenceFormula::from_str`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown confidence formula {0:?}: expected pmax, typesafe or entropy")]
pub struct UnknownConfidence(pub String);

impl FromStr for ConfidenceFormula {
    type Err = UnknownConfidence;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "pmax" => Ok(ConfidenceFormula::Pmax),
            "typesafe" => Ok(ConfidenceFormula::Typesafe),
            "entropy" => Ok(ConfidenceFormula::Entropy),
            _ => Err(UnknownConfidence(s.to_owned())),
        }
    }
}

fn max(p: &[f64]) -> f64 {
    p.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

/// Index of the first maximum (ties go to the earlier index).
pub fn first_argmax(p: &[f64]) -> usize {
    let mut best = 0;
    for (i, &v) in p.iter().enumerate() {
        if v > p[best] {
            best = i;
        }
    }
    best
}

fn entropy_confidence(p: &[f64]) -> f64 {
    // 0·ln 0 = 0.
    let h: f64 = p
        .iter()
        .filter(|&&pi| pi > 0.0)
        .map(|&pi| -pi * pi.ln())
        .sum();
    (1.0 - h / (p.len() as f64).ln()).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [ConfidenceFormula; 3] = [
        ConfidenceFormula::Pmax,
        ConfidenceFormula::Typesafe,
        ConfidenceFormula::Entropy,
    ];

    #[test]
    fn single_option_is_certain() {
        for f in ALL {
            assert_eq!(f.choice(&[1.0]), 1.0);
            assert_eq!(f.score(&[1.0]), 1.0);
        }
    }

    #[test]
    fn uniform_and_one_hot() {
        let uniform = [0.25; 4];
        assert_eq!(ConfidenceFormula::Pmax.choice(&uniform), 0.25);
        assert_eq!(ConfidenceFormula::Typesafe.choice(&uniform), 0.0);
        assert!(ConfidenceFormula::Entropy.choice(&uniform).abs() < 1e-12);
        let hot = [0.0, 1.0, 0.0, 0.0];
        for f in ALL {
            assert!((f.choice(&hot) - 1.0).abs() < 1e-12, "{f}");
            assert!((f.score(&hot) - 1.0).abs() < 1e-12, "{f}");
        }
    }

    #[test]
    fn typesafe_matches_jev_example() {
        // A 4-way choice with peak 0.33: (4·0.33 − 1)/3.
        let c = ConfidenceFormula::Typesafe.choice(&[0.33, 0.3, 0.2, 0.17]);
        assert!((c - 0.32 / 3.0).abs() < 1e-12);
        // Below chance clamps at 0.
        assert_eq!(
            ConfidenceFormula::Typesafe.choice(&[0.2, 0.2, 0.2, 0.2, 0.2]),
            0.0
        );
    }

    #[test]
    fn typesafe_score_uses_first_maximum_and_mean_distance() {
        // n = 4: denominator 1.0; tie between levels 1 and 3 → m = 1.
        let p = [0.1, 0.35, 0.2, 0.35];
        let spread = 0.1 * 1.0 + 0.35 * 0.0 + 0.2 * 1.0 + 0.35 * 2.0;
        assert!((ConfidenceFormula::Typesafe.score(&p) - (1.0 - spread)).abs() < 1e-12);
        // n = 2: denominator 0.5.
        let p = [0.7, 0.3];
        assert!((ConfidenceFormula::Typesafe.score(&p) - (1.0 - 0.3 / 0.5)).abs() < 1e-12);
        assert_eq!(first_argmax(&[0.5, 0.5]), 0);
    }

    #[test]
    fn parses_names() {
        for f in ALL {
            assert_eq!(f.to_string().parse::<ConfidenceFormula>(), Ok(f));
        }
        assert!("max".parse::<ConfidenceFormula>().is_err());
    }
}
