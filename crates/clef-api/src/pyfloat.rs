//! Python's float spelling and rounding, which the reference's `json.dumps` and `round(x, 4)`
//! produce and which the model was trained on / clients compare against.

/// Python `repr(float)`: shortest round-trip digits, fixed notation for decimal exponents in
/// `-4..16` (with `.0` for integral values), otherwise `d[.ddd]e±XX`. Non-finite values are
/// spelled as Python's `json.dumps` spells them (`NaN`, `Infinity`, `-Infinity`).
pub fn python_float_repr(x: f64) -> String {
    let mut out = String::new();
    write_python_float(&mut out, x);
    out
}

/// Appends [`python_float_repr`] of `x` to `out`.
pub fn write_python_float(out: &mut String, x: f64) {
    if x.is_nan() {
        out.push_str("NaN");
        return;
    }
    if x.is_infinite() {
        out.push_str(if x > 0.0 { "Infinity" } else { "-Infinity" });
        return;
    }
    if x == 0.0 {
        out.push_str(if x.is_sign_negative() { "-0.0" } else { "0.0" });
        return;
    }
    let (digits, exponent) = shortest_digits(x.abs());
    if x < 0.0 {
        out.push('-');
    }
    if (-4..16).contains(&exponent) {
        if exponent >= 0 {
            let int_len = exponent as usize + 1;
            if digits.len() <= int_len {
                out.push_str(&digits);
                out.extend(std::iter::repeat_n('0', int_len - digits.len()));
                out.push_str(".0");
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        } else {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-exponent - 1) as usize));
            out.push_str(&digits);
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exponent < 0 { '-' } else { '+' });
        let magnitude = exponent.unsigned_abs();
        if magnitude < 10 {
            out.push('0');
        }
        out.push_str(&magnitude.to_string());
    }
}

/// The shortest round-trip digits of a finite, positive `x` and the decimal exponent of the
/// first digit, chosen as Python's `repr` (David Gay's dtoa, mode 0) chooses them.
///
/// Rust's `{:e}` gives the shortest digit count, but when `x` lies exactly halfway between two
/// round-tripping strings of that length it rounds the tie up, where Python rounds it to the
/// even digit (`1267860061485775.25` → `…775.2`, not `…775.3`). Rust's fixed-precision `{:.Ne}`
/// rounds the exact binary value with ties to even, so at the same length it gives Python's
/// pick whenever that string round-trips (it is the nearest one). Near a power of two the
/// nearest string may fall outside the asymmetric rounding interval; the shortest form is then
/// the only candidate and stays.
fn shortest_digits(x: f64) -> (String, i32) {
    let split = |sci: &str| -> (String, i32) {
        let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci, "0"));
        let digits = mantissa.chars().filter(|c| *c != '.').collect();
        (digits, exponent.parse().unwrap_or(0))
    };
    let shortest = format!("{x:e}");
    let (digits, exponent) = split(&shortest);
    let nearest = format!("{:.*e}", digits.len() - 1, x);
    if nearest != shortest && nearest.parse::<f64>() == Ok(x) {
        return split(&nearest);
    }
    (digits, exponent)
}

/// Python `round(x, ndigits)` for floats: the exact binary value rounded to the nearest multiple
/// of 10^-ndigits, ties to even. Rust's fixed-precision formatting converts the exact binary
/// value with ties to even, so formatting and parsing back is exact; scaling by 10^n is not.
pub fn python_round(x: f64, ndigits: u32) -> f64 {
    if !x.is_finite() {
        return x;
    }
    let text = format!("{:.*}", ndigits as usize, x);
    text.parse().unwrap_or(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repr_matches_python_switch_points() {
        let cases = [
            (1250.0, "1250.0"),
            (1e-5, "1e-05"),
            (2.5e-7, "2.5e-07"),
            (0.0001, "0.0001"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (1e15, "1000000000000000.0"),
            (9999999999999998.0, "9999999999999998.0"),
            (1e22, "1e+22"),
            (0.30000000000000004, "0.30000000000000004"),
            (-0.0, "-0.0"),
            (0.0, "0.0"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (-1.5, "-1.5"),
            (123456789.125, "123456789.125"),
            (0.00012, "0.00012"),
            (1e100, "1e+100"),
        ];
        for (x, want) in cases {
            assert_eq!(python_float_repr(x), want, "{x:e}");
        }
    }

    /// encoding.md §2 (line 36): floats are written as Python `repr(float)`. When the value lies
    /// exactly halfway between the two shortest round-tripping digit strings, Python (David
    /// Gay's dtoa, mode 0) picks the even last digit; Rust's `{:e}` rounds the tie up.
    /// Expected strings are Python 3's own `repr` of these values.
    #[test]
    fn repr_breaks_shortest_digit_ties_to_even() {
        let cases = [
            ("1267860061485775.25", "1267860061485775.2"),
            ("-625666732998560.25", "-625666732998560.2"),
            ("704671096823540.25", "704671096823540.2"),
            ("19657848128154.8125", "19657848128154.812"),
            ("33080065697692.5625", "33080065697692.562"),
            ("174182809801704.625", "174182809801704.62"),
            ("-126430982921026.625", "-126430982921026.62"),
        ];
        for (literal, want) in cases {
            let x: f64 = literal.parse().unwrap();
            assert_eq!(python_float_repr(x), want, "{literal}");
        }
    }

    #[test]
    fn round_is_exact_binary_half_even() {
        assert_eq!(python_round(0.03125, 4), 0.0312);
        assert_eq!(python_round(0.96875, 4), 0.9688);
        assert_eq!(python_round(0.00005, 4), 0.0001);
        assert_eq!(python_round(2.675, 2), 2.67);
        assert_eq!(python_round(0.5, 0), 0.0);
        assert_eq!(python_round(1.5, 0), 2.0);
        assert!(python_round(f64::NAN, 4).is_nan());
    }
}
