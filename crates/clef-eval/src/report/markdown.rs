//! `report.md`, in the seed cards' table style.

use std::fmt::Write;

use super::format::{self, opt};
use super::table::Table;
use super::tables;
use crate::summary::Summary;

pub(crate) const DEFINITIONS: &str =
    "Answers are the argmax (first maximum wins). |dp| is |p − p_ref| per option; \
mean |dp| averages every (question, option). KL(ref‖model) is in nats, from the logits in f64 with \
ln p clamped at ln 1e-12. Brier is Σ_k (p_k − 1[k = y])², not divided by K. ECE uses 15 \
equal-width confidence bins (lo, hi], confidence = max probability. % retained = 100 · \
model accuracy / reference accuracy. A near-tie is a question whose reference top two are \
closer than the threshold.";

/// The whole Markdown report.
pub fn report_markdown(s: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# {}\n", format::markdown(&tables::title(s)));
    let _ = writeln!(out, "{}\n", format::markdown(&tables::records_line(s)));

    if let (Some(compare), Some(table)) = (&s.compare, tables::agreement_table(s)) {
        let reference = s.reference.as_deref().unwrap_or("reference");
        let _ = writeln!(out, "## Agreement with {}\n", format::markdown(reference));
        let _ = writeln!(out, "{}", table.markdown());
        let _ = writeln!(out, "### Disagreements\n");
        if compare.disagreements.is_empty() {
            let _ = writeln!(out, "None.\n");
        } else {
            let flips = tables::flip_table(s, &compare.disagreements, usize::MAX);
            let _ = writeln!(out, "{}", flips.markdown());
        }
        let _ = writeln!(
            out,
            "### Near-ties ({} top two closer than {})\n",
            format::markdown(reference),
            s.settings.near_tie_threshold
        );
        if compare.near_tie_list.is_empty() {
            let _ = writeln!(out, "None.\n");
        } else {
            let flips = tables::flip_table(s, &compare.near_tie_list, usize::MAX);
            let _ = writeln!(out, "{}", flips.markdown());
        }
        let _ = writeln!(out, "### |dp| per option (log-scale bins)\n");
        let mut histogram = Table::new(vec![("|dp|".into(), false), ("Options".into(), true)]);
        for bin in &compare.abs_dp_histogram.bins {
            let label = if bin.hi == 0.0 {
                "0".to_owned()
            } else {
                format!("({}, {}]", format::edge(bin.lo), format::edge(bin.hi))
            };
            histogram.push(vec![label, bin.count.to_string()]);
        }
        let _ = writeln!(out, "{}", histogram.markdown());
    }

    if let (Some(labels), Some(table)) = (&s.labels, tables::label_table(s)) {
        let _ = writeln!(out, "## Accuracy against labels\n");
        let _ = writeln!(
            out,
            "{} labelled questions, {} scored, {} not scored (failed record or unusable label).\n",
            labels.labelled_questions, labels.overall.model.questions, labels.unscored_questions
        );
        let _ = writeln!(out, "{}", table.markdown());
        let _ = writeln!(out, "### Reliability (15 confidence bins)\n");
        let _ = writeln!(out, "{}", reliability_table(s).markdown());
    }

    if !s.issues.is_empty() {
        let _ = writeln!(out, "## Issues\n");
        let _ = writeln!(out, "{}", tables::issue_table(s, usize::MAX).markdown());
    }
    let _ = writeln!(out, "---\n\n{}", format::markdown(DEFINITIONS));
    out
}

/// Non-empty bins of the overall reliability diagram(s).
pub(crate) fn reliability_table(s: &Summary) -> Table {
    let Some(labels) = &s.labels else {
        return Table::new(Vec::new());
    };
    let mut models = vec![(s.model.clone(), &labels.overall.model.reliability)];
    if let (Some(name), Some(reference)) = (&s.reference, &labels.overall.reference) {
        models.insert(0, (name.clone(), &reference.reliability));
    }
    let mut columns = vec![("Confidence bin".to_owned(), false)];
    for (name, _) in &models {
        columns.push((format!("{name} n"), true));
        columns.push((format!("{name} acc"), true));
        columns.push((format!("{name} conf"), true));
    }
    let mut table = Table::new(columns);
    let bins = models.iter().map(|(_, b)| b.len()).max().unwrap_or(0);
    for i in 0..bins {
        let cells: Vec<_> = models.iter().filter_map(|(_, b)| b.get(i)).collect();
        if cells.iter().all(|b| b.count == 0) {
            continue;
        }
        let Some(first) = cells.first() else { continue };
        let mut row = vec![format!("({:.3}, {:.3}]", first.lo, first.hi)];
        for bin in cells {
            row.push(bin.count.to_string());
            row.push(opt(bin.accuracy, 3));
            row.push(opt(bin.mean_confidence, 3));
        }
        table.push(row);
    }
    table
}
