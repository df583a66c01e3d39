//! Bundle formats as a manifest names them (formats.md §1) and how a linear weight is laid out
//! in tensors.

use crate::error::{FormatError, Result};

/// `format_version` of every format this clef.rs writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// The `format` of a bundle's `manifest.json`. A release folder (no manifest) has none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BundleFormat {
    /// Every float tensor re-stored as BF16.
    Bf16,
    /// Every float tensor re-stored as FP16.
    F16,
    /// Clef-ANE-LUT6 (formats.md §2): MIL blob storage with 6-bit palettized linears.
    Lut6,
    /// clef-ternary-v1 (formats.md §3): ternary and 4-bit codes with CLoQ adapters.
    Ternary,
    /// clef-q8-v2 (docs/formats.md, "clef-q8"): every backbone linear as int8 codes with an
    /// FP16 scale per 64 inputs, DeltaNet `out_proj` and MLP `down_proj` on rotated inputs;
    /// everything else as released. Bundles written as clef-q8-v1 (no rotated linears) read as
    /// this format: their tensors say which layout each linear has.
    Q8,
}

impl BundleFormat {
    /// Every format, in the order error messages list them.
    pub const ALL: [BundleFormat; 5] = [
        BundleFormat::Bf16,
        BundleFormat::F16,
        BundleFormat::Lut6,
        BundleFormat::Ternary,
        BundleFormat::Q8,
    ];

    /// The manifest's spelling.
    pub fn name(self) -> &'static str {
        match self {
            BundleFormat::Bf16 => crate::dense::BF16,
            BundleFormat::F16 => crate::dense::F16,
            BundleFormat::Lut6 => "clef-lut6-v1",
            BundleFormat::Ternary => "clef-ternary-v1",
            BundleFormat::Q8 => "clef-q8-v2",
        }
    }

    /// Earlier names this clef.rs still reads, with the format that reads them: clef-q8-v1 is
    /// clef-q8-v2 without rotated linears.
    const EARLIER: [(&'static str, BundleFormat); 1] = [("clef-q8-v1", BundleFormat::Q8)];

    /// The format a manifest's `format` and `format_version` name, or an error naming both and
    /// what this clef.rs reads.
    pub fn parse(name: &str, version: u32) -> Result<BundleFormat> {
        Self::ALL
            .into_iter()
            .map(|f| (f.name(), f))
            .chain(Self::EARLIER)
            .find(|&(n, _)| n == name && version == FORMAT_VERSION)
            .map(|(_, f)| f)
            .ok_or_else(|| FormatError::UnknownFormat {
                name: name.to_string(),
                version,
                known: format!("{} at version {FORMAT_VERSION}", Self::known_names()),
            })
    }

    /// The format names, comma-separated.
    pub fn known_names() -> String {
        Self::ALL.map(|f| f.name()).join(", ")
    }
}

impl std::fmt::Display for BundleFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How the weight of a linear layer with tensor prefix `p` is stored, recognised from the tensor
/// names a folder holds (formats.md §2.3, §3.6; docs/formats.md for clef-q8-v1). The loader asks
/// once per linear and takes the tensors its arm names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightLayout {
    /// `<p>.weight`, a dense matrix in its stored float dtype.
    Dense,
    /// `<p>.lut6.indices` and `<p>.lut6.lut` (a LUT-6 bundle's text tensors).
    Lut6,
    /// `<p>.trits` and `<p>.scales` (+ `<p>.lora_a`/`<p>.lora_b`).
    Ternary,
    /// `<p>.q4`, `<p>.scales` and `<p>.biases` (+ adapter).
    Affine4,
    /// `<p>.q8` and `<p>.q8_scales` (a clef-q8 bundle's linears).
    Q8,
    /// `<p>.q8h` and `<p>.q8_scales`: q8 codes of `W·H`, multiplied with rotated inputs.
    Q8Rotated,
}

impl WeightLayout {
    /// The layout of linear `prefix` in a folder whose tensor names `has` answers for.
    pub fn of(prefix: &str, has: impl Fn(&str) -> bool) -> WeightLayout {
        if has(&crate::lut6::indices_name(prefix)) {
            WeightLayout::Lut6
        } else if has(&crate::ternary::trits_name(prefix)) {
            WeightLayout::Ternary
        } else if has(&crate::affine4::codes_name(prefix)) {
            WeightLayout::Affine4
        } else if has(&crate::q8::codes_name(prefix)) {
            WeightLayout::Q8
        } else if has(&crate::q8::rotated_codes_name(prefix)) {
            WeightLayout::Q8Rotated
        } else {
            WeightLayout::Dense
        }
    }
}

/// `<prefix>.weight`: a dense linear weight or embedding table.
pub fn dense_name(prefix: &str) -> String {
    format!("{prefix}.weight")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_ones_are_named() {
        for f in BundleFormat::ALL {
            assert_eq!(BundleFormat::parse(f.name(), FORMAT_VERSION).unwrap(), f);
        }
        let e = BundleFormat::parse("clef-ternary-v1", 2).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("clef-ternary-v1") && text.contains("version 2"),
            "{text}"
        );
        assert!(
            text.contains("bf16, f16, clef-lut6-v1, clef-ternary-v1, clef-q8-v2"),
            "{text}"
        );
        assert!(BundleFormat::parse("clef-ternary-v2", 1).is_err());
        // the earlier q8 name still reads, as the same format
        for name in ["clef-q8-v1", "clef-q8-v2"] {
            assert_eq!(BundleFormat::parse(name, 1).unwrap(), BundleFormat::Q8);
            assert!(BundleFormat::parse(name, 2).is_err());
        }
        assert!(BundleFormat::parse("clef-q8-v3", 1).is_err());
        // every name is distinct, so parse finds exactly the variant that wrote it
        let mut names = BundleFormat::ALL.map(|f| f.name()).to_vec();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), BundleFormat::ALL.len());
    }

    #[test]
    fn layouts_are_recognised_by_their_first_tensor() {
        let names = [
            "a.lut6.indices",
            "b.trits",
            "c.q4",
            "d.weight",
            "e.q8",
            "g.q8h",
        ];
        let has = |n: &str| names.contains(&n);
        assert_eq!(WeightLayout::of("a", has), WeightLayout::Lut6);
        assert_eq!(WeightLayout::of("b", has), WeightLayout::Ternary);
        assert_eq!(WeightLayout::of("c", has), WeightLayout::Affine4);
        assert_eq!(WeightLayout::of("d", has), WeightLayout::Dense);
        assert_eq!(WeightLayout::of("e", has), WeightLayout::Q8);
        assert_eq!(WeightLayout::of("g", has), WeightLayout::Q8Rotated);
        // `<p>.q8_scales` alone is not the layout's first tensor
        assert_eq!(
            WeightLayout::of("f", |n| n == "f.q8_scales"),
            WeightLayout::Dense
        );
    }
}
