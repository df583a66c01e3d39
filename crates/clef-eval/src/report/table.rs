//! One table model rendered three ways, so the terminal, Markdown and HTML reports agree.

use super::format;

#[derive(Debug, Clone)]
pub(crate) struct Table {
    headers: Vec<String>,
    /// Right-aligned in the terminal (numbers).
    numeric: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// Headers with their alignment: `(title, numeric)`.
    pub fn new(columns: Vec<(String, bool)>) -> Self {
        let (headers, numeric) = columns.into_iter().unzip();
        Self {
            headers,
            numeric,
            rows: Vec::new(),
        }
    }

    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn markdown(&self) -> String {
        let line = |cells: &[String]| {
            let cells: Vec<String> = cells.iter().map(|c| format::markdown(c)).collect();
            format!("| {} |\n", cells.join(" | "))
        };
        let mut out = line(&self.headers);
        out.push_str(&format!("|{}\n", "---|".repeat(self.headers.len())));
        for row in &self.rows {
            out.push_str(&line(row));
        }
        out
    }

    /// Columns padded to their widest cell (in characters), two spaces apart.
    pub fn text(&self, indent: usize) -> String {
        let clean = |cells: &[String]| -> Vec<String> {
            cells.iter().map(|c| format::terminal(c)).collect()
        };
        let headers = clean(&self.headers);
        let rows: Vec<Vec<String>> = self.rows.iter().map(|r| clean(r)).collect();
        let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
        for row in &rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let render = |cells: &[String]| {
            let parts: Vec<String> = cells
                .iter()
                .zip(&widths)
                .zip(&self.numeric)
                .map(|((cell, &width), &numeric)| {
                    let pad = " ".repeat(width.saturating_sub(cell.chars().count()));
                    if numeric {
                        format!("{pad}{cell}")
                    } else {
                        format!("{cell}{pad}")
                    }
                })
                .collect();
            format!("{}{}\n", " ".repeat(indent), parts.join("  ").trim_end())
        };
        let mut out = render(&headers);
        for row in &rows {
            out.push_str(&render(row));
        }
        out
    }

    pub fn html(&self, class: &str) -> String {
        let mut out = format!("<table class=\"{}\">\n<thead><tr>", format::html(class));
        for header in &self.headers {
            out.push_str(&format!("<th>{}</th>", format::html(header)));
        }
        out.push_str("</tr></thead>\n<tbody>\n");
        for row in &self.rows {
            out.push_str("<tr>");
            for (cell, &numeric) in row.iter().zip(&self.numeric) {
                let class = if numeric { " class=\"num\"" } else { "" };
                out.push_str(&format!("<td{class}>{}</td>", format::html(cell)));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody>\n</table>\n");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        let mut t = Table::new(vec![("name".into(), false), ("max |dp|".into(), true)]);
        t.push(vec!["a<b".into(), "0.5".into()]);
        t.push(vec!["long name".into(), "12.25".into()]);
        t
    }

    #[test]
    fn renders_three_ways() {
        let t = sample();
        assert_eq!(
            t.markdown(),
            "| name | max \\|dp\\| |\n|---|---|\n| a&lt;b | 0.5 |\n| long name | 12.25 |\n"
        );
        assert_eq!(
            t.text(2),
            "  name       max |dp|\n  a<b             0.5\n  long name     12.25\n"
        );
        let html = t.html("x");
        assert!(html.contains("<th>max |dp|</th>"));
        assert!(html.contains("<td>a&lt;b</td><td class=\"num\">0.5</td>"));
        assert_eq!(t.len(), 2);
    }
}
