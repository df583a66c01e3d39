//! Number formatting in the cards' style, and escaping for Markdown and HTML.

/// Shown for a figure that does not exist (no questions, no reference, ...).
pub const MISSING: &str = "–";

/// `x` with `decimals` places, as the cards print (0.8861, 0.090, 95.9%). Exactly 0 prints as
/// "0" (a self-comparison is visibly exact) and a non-zero value too small for the fixed places
/// switches to scientific notation ("3.2e-6") instead of printing a misleading "0.000".
pub fn fixed(x: f64, decimals: usize) -> String {
    if x == 0.0 {
        return "0".into();
    }
    let smallest = 0.5 * 10f64.powi(-(decimals as i32));
    if x.abs() < smallest {
        format!("{x:.1e}")
    } else {
        format!("{x:.decimals$}")
    }
}

pub fn opt(x: Option<f64>, decimals: usize) -> String {
    x.map_or_else(|| MISSING.into(), |x| fixed(x, decimals))
}

/// "ref → model", the cards' form for lower-is-better metrics.
pub fn pair(reference: Option<f64>, model: Option<f64>, decimals: usize) -> String {
    format!("{} → {}", opt(reference, decimals), opt(model, decimals))
}

pub fn percent(x: Option<f64>) -> String {
    x.map_or_else(|| MISSING.into(), |x| format!("{x:.1}%"))
}

/// "28 of 29 (the mismatch: BF16 top two 0.019 apart)", as the LUT-6 card writes it.
pub fn agreement(agree: usize, questions: usize, gaps: &[f64], reference: &str) -> String {
    let head = format!("{agree} of {questions}");
    let list = |gaps: &[f64]| {
        let parts: Vec<String> = gaps.iter().map(|g| fixed(*g, 3)).collect();
        match parts.as_slice() {
            [] => String::new(),
            [one] => one.clone(),
            [init @ .., last] => format!("{} and {last}", init.join(", ")),
        }
    };
    match gaps.len() {
        0 => head,
        1 => format!(
            "{head} (the mismatch: {reference} top two {} apart)",
            list(gaps)
        ),
        2..=3 => format!(
            "{head} (mismatches: {reference} top two {} apart)",
            list(gaps)
        ),
        n => format!("{head} ({n} mismatches)"),
    }
}

/// A histogram edge, short: 0, 1e-6 … 1e-2, 0.1, 1.
pub fn edge(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else if x >= 0.1 {
        fixed(x, 2)
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_owned()
    } else {
        format!("{x:.0e}")
    }
}

/// Escapes text for a Markdown table cell: table pipes, inline markup and line breaks.
pub fn markdown(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' | '|' | '*' | '_' | '`' | '[' | ']' | '#' => {
                out.push('\\');
                out.push(c);
            }
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\n' | '\r' => out.push(' '),
            _ => out.push(c),
        }
    }
    out
}

/// Escapes text for HTML content and attribute values.
pub fn html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Replaces control characters so a record id cannot garble the terminal.
pub fn terminal(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_follows_the_cards() {
        assert_eq!(fixed(0.88614, 4), "0.8861");
        assert_eq!(fixed(0.09, 3), "0.090");
        assert_eq!(fixed(0.0, 3), "0");
        assert_eq!(fixed(3.2e-6, 3), "3.2e-6");
        assert_eq!(fixed(0.0004, 3), "4.0e-4");
        assert_eq!(fixed(0.0005, 3), "0.001");
        assert_eq!(opt(None, 3), MISSING);
        assert_eq!(pair(Some(0.1694), Some(0.2056), 4), "0.1694 → 0.2056");
        assert_eq!(percent(Some(95.94)), "95.9%");
    }

    #[test]
    fn agreement_reads_like_the_lut6_card() {
        assert_eq!(agreement(27, 27, &[], "reference"), "27 of 27");
        assert_eq!(
            agreement(28, 29, &[0.019], "reference"),
            "28 of 29 (the mismatch: reference top two 0.019 apart)"
        );
        assert_eq!(
            agreement(26, 29, &[0.019, 0.2, 0.05], "BF16"),
            "26 of 29 (mismatches: BF16 top two 0.019, 0.200 and 0.050 apart)"
        );
        assert_eq!(agreement(1, 5, &[0.1; 4], "r"), "1 of 5 (4 mismatches)");
    }

    #[test]
    fn escaping() {
        assert_eq!(markdown("a|b_c\nd<e>"), "a\\|b\\_c d&lt;e&gt;");
        assert_eq!(
            html("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(terminal("a\u{1b}[2Jb\n"), "a [2Jb ");
    }
}
