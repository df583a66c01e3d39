//! The plain-text summary printed at the end of a run.

use std::fmt::Write;

use super::tables;
use crate::summary::Summary;

/// Rows of the long lists shown in the terminal; the reports on disk have all of them.
const TERMINAL_LIST_ROWS: usize = 20;

/// Aligned text tables: agreement, disagreements, label metrics, issues.
pub fn terminal_table(s: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", tables::title(s));
    let _ = writeln!(out, "{}", tables::records_line(s));

    if let (Some(compare), Some(table)) = (&s.compare, tables::agreement_table(s)) {
        let reference = s.reference.as_deref().unwrap_or("reference");
        let _ = writeln!(out, "\nAgreement with {reference}");
        out.push_str(&table.text(2));
        if !compare.disagreements.is_empty() {
            let _ = writeln!(out, "\nDisagreements ({})", compare.disagreements.len());
            let flips = tables::flip_table(s, &compare.disagreements, TERMINAL_LIST_ROWS);
            out.push_str(&flips.text(2));
            more(&mut out, compare.disagreements.len(), flips.len());
        }
    }

    if let Some(table) = tables::label_table(s) {
        let _ = writeln!(out, "\nAccuracy against labels");
        out.push_str(&table.text(2));
    }

    if !s.issues.is_empty() {
        let _ = writeln!(out, "\nIssues ({})", s.issues.len());
        let issues = tables::issue_table(s, TERMINAL_LIST_ROWS);
        out.push_str(&issues.text(2));
        more(&mut out, s.issues.len(), issues.len());
    }
    out
}

fn more(out: &mut String, total: usize, shown: usize) {
    if total > shown {
        let _ = writeln!(out, "  … and {} more in report.md", total - shown);
    }
}
