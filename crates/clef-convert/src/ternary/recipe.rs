//! The card's recipe as an input (`clef convert --format ternary --recipe FILE.json`). The
//! ternary card publishes its run as
//! `{"scale": "mse", "group": 64, "hi_names": "out_proj,q_proj,k_proj,v_proj,o_proj",
//!   "hi_bits": 4, "emb_bits": 4, "cloq_rank": 16, "calib": 128, "damp": 0.01}`;
//! a recipe file takes exactly these keys, each defaulting to the card's value, and an unknown
//! key is refused by name. So the card's "planned v2" (4-bit MLP `down_proj`) is a recipe
//! change: `{"hi_names": "out_proj,q_proj,k_proj,v_proj,o_proj,down_proj"}`.
//!
//! What clef-ternary-v1 fixes is checked rather than silently ignored: one BF16 scale per 64
//! inputs (`group`), 4-bit affine for the `hi_names` and the tables (`hi_bits`, `emb_bits`), the
//! mse range search (`scale`).

use super::plan::{Role, GROUP, HI_NAMES, TEXT_PREFIX};
use crate::error::{ConvertError, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The backbone linears a recipe can name, by their release names.
pub const LINEAR_NAMES: [&str; 10] = [
    "in_proj_qkv",
    "in_proj_z",
    "out_proj",
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
];

/// A conversion recipe: the card's keys and nothing else.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Recipe {
    /// How each group's range is chosen: `mse` (the card's grid search of clip ratios).
    pub scale: String,
    /// Input columns per scale group (clef-ternary-v1: 64).
    pub group: usize,
    /// Comma-separated linear names stored as 4-bit affine instead of ternary.
    pub hi_names: String,
    /// Bits of the `hi_names` linears (clef-ternary-v1: 4).
    pub hi_bits: u32,
    /// Bits of `embed_tokens` and `lm_head` (clef-ternary-v1: 4).
    pub emb_bits: u32,
    /// CLoQ adapter rank (less for a matrix smaller than it).
    pub cloq_rank: usize,
    /// Calibration records (`--calib-records` overrides it).
    pub calib: usize,
    /// GPTQ's relative Hessian damping λ.
    pub damp: f64,
}

impl Default for Recipe {
    /// The card's run.
    fn default() -> Self {
        Recipe {
            scale: "mse".into(),
            group: GROUP,
            hi_names: HI_NAMES.into(),
            hi_bits: 4,
            emb_bits: 4,
            cloq_rank: super::plan::CLOQ_RANK,
            calib: 128,
            damp: 0.01,
        }
    }
}

impl Recipe {
    /// Reads and checks a recipe file.
    pub fn read(path: &Path) -> Result<Recipe> {
        let text = std::fs::read_to_string(path).map_err(|e| ConvertError::Io {
            path: path.to_path_buf(),
            source: e,
        })?;
        Recipe::parse(&text)
            .map_err(|e| ConvertError::Invalid(format!("recipe {}: {e}", path.display())))
    }

    /// Parses and checks a recipe's JSON text.
    pub fn parse(text: &str) -> std::result::Result<Recipe, String> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if !value.is_object() {
            return Err("expected a JSON object of the card's keys".into());
        }
        let recipe: Recipe = serde_json::from_value(value).map_err(|e| e.to_string())?;
        recipe.check()?;
        Ok(recipe)
    }

    /// Refuses what clef-ternary-v1 cannot store or this converter does not compute.
    pub fn check(&self) -> std::result::Result<(), String> {
        if self.scale != "mse" {
            return Err(format!(
                "scale {:?}: only \"mse\" (the card's range search) is implemented",
                self.scale
            ));
        }
        if self.group != GROUP {
            return Err(format!(
                "group {}: clef-ternary-v1 stores one scale per {GROUP} inputs",
                self.group
            ));
        }
        for (key, bits) in [("hi_bits", self.hi_bits), ("emb_bits", self.emb_bits)] {
            if bits != 4 {
                return Err(format!(
                    "{key} {bits}: clef-ternary-v1 stores these tensors as 4-bit affine codes"
                ));
            }
        }
        if !(1..=256).contains(&self.cloq_rank) {
            return Err(format!("cloq_rank {}: expected 1 to 256", self.cloq_rank));
        }
        if self.calib == 0 {
            return Err("calib: at least 1 record".into());
        }
        if !(self.damp.is_finite() && self.damp > 0.0 && self.damp < 1.0) {
            return Err(format!("damp {}: expected a number in (0, 1)", self.damp));
        }
        self.roles().map(|_| ())
    }

    /// Which release tensors become what under this recipe.
    pub fn roles(&self) -> std::result::Result<Roles, String> {
        let mut hi = Vec::new();
        for name in self.hi_names.split(',').map(str::trim) {
            if name.is_empty() {
                continue;
            }
            if !LINEAR_NAMES.contains(&name) {
                return Err(format!(
                    "hi_names: unknown linear `{name}` (expected some of {})",
                    LINEAR_NAMES.join(", ")
                ));
            }
            if !hi.contains(&name) {
                hi.push(name);
            }
        }
        Ok(Roles {
            hi: LINEAR_NAMES.map(|n| hi.contains(&n)),
        })
    }
}

/// The storage of each backbone linear under a recipe's `hi_names`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Roles {
    /// Per [`LINEAR_NAMES`] entry: stored 4-bit (else ternary).
    hi: [bool; LINEAR_NAMES.len()],
}

impl Roles {
    /// The card's roles (`HI_NAMES`).
    pub fn card() -> Roles {
        Recipe::default()
            .roles()
            .expect("the card's hi_names are known linears")
    }

    /// The role of a release tensor by name (shape-independent).
    pub fn of(&self, name: &str) -> Role {
        if name == format!("{TEXT_PREFIX}.embed_tokens.weight") || name == "lm_head.weight" {
            return Role::Affine4Table;
        }
        let Some(rest) = name
            .strip_prefix(TEXT_PREFIX)
            .and_then(|r| r.strip_prefix(".layers."))
        else {
            return Role::Keep;
        };
        // "<i>.<module>.<linear>.weight"
        let mut parts = rest.split('.');
        let (Some(_layer), Some(module), Some(linear), Some("weight"), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Role::Keep;
        };
        let backbone_linear = matches!(
            (module, linear),
            ("linear_attn", "in_proj_qkv" | "in_proj_z" | "out_proj")
                | ("self_attn", "q_proj" | "k_proj" | "v_proj" | "o_proj")
                | ("mlp", "gate_proj" | "up_proj" | "down_proj")
        );
        if !backbone_linear {
            return Role::Keep;
        }
        match LINEAR_NAMES.iter().position(|&n| n == linear) {
            Some(i) if self.hi[i] => Role::Affine4Linear,
            _ => Role::Ternary,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cards_string_is_the_default_and_unknown_keys_are_named() {
        let card = r#"{"scale": "mse", "group": 64, "hi_names": "out_proj,q_proj,k_proj,v_proj,o_proj", "hi_bits": 4, "emb_bits": 4, "cloq_rank": 16, "calib": 128, "damp": 0.01}"#;
        assert_eq!(Recipe::parse(card).unwrap(), Recipe::default());
        assert_eq!(Recipe::parse("{}").unwrap(), Recipe::default());
        let e = Recipe::parse(r#"{"damp": 0.02, "dmap": 0.01}"#).unwrap_err();
        assert!(e.contains("unknown field `dmap`"), "{e}");
        let refused = [
            (r#"{"group": 128}"#, "group 128"),
            (r#"{"hi_bits": 3}"#, "hi_bits 3"),
            (r#"{"emb_bits": 8}"#, "emb_bits 8"),
            (r#"{"scale": "absmax"}"#, "\"absmax\""),
            (r#"{"hi_names": "out_proj,lm_head"}"#, "`lm_head`"),
            (r#"{"cloq_rank": 0}"#, "cloq_rank 0"),
            (r#"{"calib": 0}"#, "calib"),
            (r#"{"damp": 0}"#, "damp 0"),
            (r#"{"damp": "0.01"}"#, "invalid type"),
            (r#"[]"#, "JSON object"),
            (r#"{"group": 64,"#, "EOF"),
        ];
        for (text, want) in refused {
            let e = Recipe::parse(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn hi_names_decide_the_roles() {
        let l = |s: &str| format!("{TEXT_PREFIX}.layers.3.{s}.weight");
        let card = Roles::card();
        assert_eq!(card.of(&l("mlp.down_proj")), Role::Ternary);
        assert_eq!(card.of(&l("linear_attn.out_proj")), Role::Affine4Linear);
        let v2 = Recipe {
            hi_names: format!("{HI_NAMES},down_proj"),
            ..Default::default()
        }
        .roles()
        .unwrap();
        assert_eq!(v2.of(&l("mlp.down_proj")), Role::Affine4Linear);
        assert_eq!(v2.of(&l("mlp.up_proj")), Role::Ternary);
        assert_eq!(v2.of(&l("self_attn.q_proj")), Role::Affine4Linear);
        // an empty list makes every linear ternary; the tables stay 4-bit
        let none = Recipe {
            hi_names: String::new(),
            ..Default::default()
        }
        .roles()
        .unwrap();
        assert_eq!(none.of(&l("self_attn.o_proj")), Role::Ternary);
        assert_eq!(none.of("lm_head.weight"), Role::Affine4Table);
        // a linear name under another module is not a backbone linear
        assert_eq!(card.of(&l("mlp.q_proj")), Role::Keep);
        assert_eq!(card.of(&l("linear_attn.in_proj_a")), Role::Keep);
    }
}
