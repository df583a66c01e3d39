//! A small writer of MIL program text (iOS 18 syntax, `program(1.3)`): typed variables, one op
//! per line, constants declared as ops, weights referenced in the blob file.

use crate::MIL_WEIGHT_PATH;
use std::fmt::Write;

/// A MIL value type: a scalar when `shape` is None.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ty {
    pub dtype: &'static str,
    pub shape: Option<Vec<usize>>,
}

impl Ty {
    pub fn tensor(dtype: &'static str, shape: &[usize]) -> Ty {
        Ty {
            dtype,
            shape: Some(shape.to_vec()),
        }
    }

    pub fn scalar(dtype: &'static str) -> Ty {
        Ty { dtype, shape: None }
    }

    pub fn text(&self) -> String {
        match &self.shape {
            Some(s) => format!("tensor<{}, [{}]>", self.dtype, join(s)),
            None => self.dtype.to_string(),
        }
    }
}

fn join<T: std::fmt::Display>(v: &[T]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A named, typed value of the program.
#[derive(Clone, Debug)]
pub struct Var {
    pub name: String,
    pub ty: Ty,
}

impl Var {
    pub fn shape(&self) -> Vec<usize> {
        self.ty.shape.clone().unwrap_or_default()
    }
}

/// A C99 hexadecimal float literal of `v` (exact), as MIL writes floating constants.
pub fn hex_float(v: f32) -> String {
    if v == 0.0 {
        return if v.is_sign_negative() {
            "-0x0p+0"
        } else {
            "0x0p+0"
        }
        .into();
    }
    if !v.is_finite() {
        return if v.is_nan() {
            "nan".into()
        } else if v > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    let bits = v.to_bits();
    let sign = if bits >> 31 == 1 { "-" } else { "" };
    let exp_bits = ((bits >> 23) & 0xff) as i32;
    let mut mant = bits & 0x7f_ffff;
    let mut exp = exp_bits - 127;
    if exp_bits == 0 {
        // subnormal: normalise
        exp = -126;
        while mant & 0x80_0000 == 0 {
            mant <<= 1;
            exp -= 1;
        }
        mant &= 0x7f_ffff;
    }
    // 23 fraction bits → 6 hex digits (24 bits, one padding zero bit)
    let mut digits = format!("{:06x}", mant << 1);
    while digits.ends_with('0') {
        digits.pop();
    }
    let frac = if digits.is_empty() {
        String::new()
    } else {
        format!(".{digits}")
    };
    format!("{sign}0x1{frac}p{exp:+}")
}

/// Builds the body of one function.
#[derive(Default)]
pub struct MilWriter {
    body: String,
    next: usize,
}

/// An op argument: a variable or an inline literal.
pub enum Arg<'a> {
    V(&'a Var),
    Tuple(Vec<&'a Var>),
}

impl MilWriter {
    fn fresh(&mut self, hint: &str) -> String {
        self.next += 1;
        format!("{hint}_{}", self.next)
    }

    fn line(&mut self, ty: &Ty, name: &str, rhs: &str) {
        let _ = writeln!(
            self.body,
            "        {} {name} = {rhs}[name = string(\"{name}\")];",
            ty.text()
        );
    }

    fn constant(&mut self, hint: &str, ty: Ty, val: String) -> Var {
        let name = self.fresh(hint);
        let _ = writeln!(
            self.body,
            "        {} {name} = const()[name = string(\"{name}\"), val = {val}];",
            ty.text()
        );
        Var { name, ty }
    }

    /// An fp16 scalar constant (rounded to FP16).
    pub fn f16(&mut self, hint: &str, v: f32) -> Var {
        let r = half::f16::from_f32(v).to_f32();
        self.constant(hint, Ty::scalar("fp16"), format!("fp16({})", hex_float(r)))
    }

    pub fn int(&mut self, hint: &str, v: i64) -> Var {
        self.constant(hint, Ty::scalar("int32"), format!("int32({v})"))
    }

    pub fn boolean(&mut self, hint: &str, v: bool) -> Var {
        self.constant(hint, Ty::scalar("bool"), format!("bool({v})"))
    }

    pub fn string(&mut self, hint: &str, v: &str) -> Var {
        self.constant(hint, Ty::scalar("string"), format!("string(\"{v}\")"))
    }

    pub fn ints(&mut self, hint: &str, v: &[i64]) -> Var {
        let ty = Ty::tensor("int32", &[v.len()]);
        let val = format!("{}([{}])", ty.text(), join(v));
        self.constant(hint, ty, val)
    }

    /// A constant read from the blob file (the reference points at the metadata record).
    pub fn blob(&mut self, hint: &str, ty: Ty, offset: u64) -> Var {
        let val = format!("{}({})", ty.text(), blobfile(offset));
        self.constant(hint, ty, val)
    }

    /// A LUT-6 weight `[rows, cols]` expanded by `constexpr_lut_to_dense` from uint6 indices
    /// and one fp16 table per 16 rows (formats.md §2.4).
    pub fn lut_weight(
        &mut self,
        hint: &str,
        rows: usize,
        cols: usize,
        indices: u64,
        lut: u64,
    ) -> Var {
        let name = self.fresh(hint);
        let ty = Ty::tensor("fp16", &[rows, cols]);
        let rhs = format!(
            "constexpr_lut_to_dense(indices = {}({}), lut = {}({}))",
            Ty::tensor("uint6", &[rows, cols]).text(),
            blobfile(indices),
            Ty::tensor("fp16", &[rows / 16, 1, 64, 1]).text(),
            blobfile(lut)
        );
        self.line(&ty, &name, &rhs);
        Var { name, ty }
    }

    /// `ty name = op(k = v, …)` with a fresh name from `hint`, or exactly `named` when given
    /// (program outputs).
    pub fn op(
        &mut self,
        hint: &str,
        named: Option<&str>,
        ty: Ty,
        op: &str,
        args: &[(&str, Arg)],
    ) -> Var {
        let name = match named {
            Some(n) => n.to_string(),
            None => self.fresh(hint),
        };
        let args: Vec<String> = args
            .iter()
            .map(|(k, a)| match a {
                Arg::V(v) => format!("{k} = {}", v.name),
                Arg::Tuple(vs) => format!(
                    "{k} = ({})",
                    vs.iter()
                        .map(|v| v.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
            .collect();
        self.line(&ty, &name, &format!("{op}({})", args.join(", ")));
        Var { name, ty }
    }

    pub fn finish(self) -> String {
        self.body
    }
}

fn blobfile(offset: u64) -> String {
    format!("BLOBFILE(path = string(\"{MIL_WEIGHT_PATH}\"), offset = uint64({offset}))")
}

/// A whole program: header, `main` with its inputs, the body, the output tuple.
pub fn program_text(inputs: &[Var], body: &str, outputs: &[&str]) -> String {
    let params: Vec<String> = inputs
        .iter()
        .map(|v| format!("{} {}", v.ty.text(), v.name))
        .collect();
    format!(
        "program(1.3)\n[buildInfo = dict<string, string>({{{{\"coremlc-component-MIL\", \"clef.rs\"}}, {{\"coremlc-version\", \"clef.rs\"}}}})]\n{{\n    func main<ios18>({}) {{\n{}    }} -> ({});\n}}\n",
        params.join(", "),
        body,
        outputs.join(", ")
    )
}

/// A blob reference found in program text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlobRef {
    pub dtype: String,
    pub shape: Vec<usize>,
    pub path: String,
    pub offset: u64,
}

/// Every `tensor<dtype, [shape]>(BLOBFILE(path = string("…"), offset = uint64(N)))` of `text`,
/// in order (used to check emitted programs against their blob file).
pub fn blob_references(text: &str) -> Vec<BlobRef> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("(BLOBFILE(") {
        let before = &rest[..at];
        let after = &rest[at + "(BLOBFILE(".len()..];
        rest = after;
        let Some(start) = before.rfind("tensor<") else {
            continue;
        };
        let ty = &before[start + "tensor<".len()..];
        let Some((dtype, shape)) = ty.split_once(", [") else {
            continue;
        };
        let shape: Vec<usize> = shape
            .trim_end_matches("]>")
            .split(", ")
            .filter(|s| !s.is_empty())
            .filter_map(|s| s.parse().ok())
            .collect();
        let path = after
            .split_once("string(\"")
            .and_then(|(_, p)| p.split_once('"'))
            .map(|(p, _)| p.to_string())
            .unwrap_or_default();
        let offset = after
            .split_once("uint64(")
            .and_then(|(_, o)| o.split_once(')'))
            .and_then(|(o, _)| o.parse().ok())
            .unwrap_or(u64::MAX);
        out.push(BlobRef {
            dtype: dtype.to_string(),
            shape,
            path,
            offset,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_floats_are_exact() {
        for (v, s) in [
            (1.0f32, "0x1p+0"),
            (0.5, "0x1p-1"),
            (-3.0, "-0x1.8p+1"),
            (0.0625, "0x1p-4"),
            (65504.0, "0x1.ffcp+15"),
            (0.0, "0x0p+0"),
        ] {
            assert_eq!(hex_float(v), s);
        }
        // subnormal f32
        assert_eq!(hex_float(f32::from_bits(1)), "0x1p-149");
    }

    #[test]
    fn ops_and_references_round_trip() {
        let mut w = MilWriter::default();
        let x = Var {
            name: "x".into(),
            ty: Ty::tensor("fp16", &[1, 128, 64]),
        };
        let wt = w.lut_weight("w_up", 32, 64, 64, 1664);
        let b = w.blob("bias", Ty::tensor("fp16", &[32]), 1984);
        let y = w.op(
            "up",
            Some("y"),
            Ty::tensor("fp16", &[1, 128, 32]),
            "linear",
            &[
                ("x", Arg::V(&x)),
                ("weight", Arg::V(&wt)),
                ("bias", Arg::V(&b)),
            ],
        );
        let text = program_text(&[x], &w.finish(), &[&y.name]);
        assert!(text.starts_with("program(1.3)\n"));
        assert!(text.contains("func main<ios18>(tensor<fp16, [1, 128, 64]> x)"));
        assert!(text.contains("tensor<fp16, [1, 128, 32]> y = linear(x = x, weight = w_up_1, bias = bias_2)[name = string(\"y\")];"));
        assert!(text.trim_end().ends_with("} -> (y);\n}"));
        let refs = blob_references(&text);
        assert_eq!(
            refs.iter()
                .map(|r| (r.dtype.as_str(), r.shape.clone(), r.offset))
                .collect::<Vec<_>>(),
            vec![
                ("uint6", vec![32, 64], 64),
                ("fp16", vec![2, 1, 64, 1], 1664),
                ("fp16", vec![32], 1984)
            ]
        );
        assert!(refs.iter().all(|r| r.path == MIL_WEIGHT_PATH));
    }
}
