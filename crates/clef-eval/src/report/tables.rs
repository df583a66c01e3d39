//! The report's tables, built once from a summary for every output format.

use super::format::{self, fixed, opt, pair, percent};
use super::table::Table;
use crate::evaluation::IssueKind;
use crate::summary::{CompareStats, Flip, LabelStats, Summary};

fn col(title: impl Into<String>, numeric: bool) -> (String, bool) {
    (title.into(), numeric)
}

/// "300 records: 298 evaluated, 2 failed (1 model error, ...); 312 questions."
pub(crate) fn records_line(s: &Summary) -> String {
    let r = &s.records;
    let mut details = Vec::new();
    if r.model_errors > 0 {
        details.push(format!("{} refused by {}", r.model_errors, s.model));
    }
    if let Some(reference) = &s.reference {
        if r.reference_errors > 0 {
            details.push(format!("{} refused by {reference}", r.reference_errors));
        }
    }
    let details = if details.is_empty() {
        String::new()
    } else {
        format!(" ({})", details.join(", "))
    };
    let bad = if r.bad_lines > 0 {
        format!(", {} unreadable lines", r.bad_lines)
    } else {
        String::new()
    };
    format!(
        "{} records: {} evaluated, {} failed{details}{bad}; {} questions.",
        r.added, r.evaluated, r.failed, r.questions
    )
}

pub(crate) fn title(s: &Summary) -> String {
    match &s.reference {
        Some(reference) => format!("Evaluation: {} against {reference}", s.model),
        None => format!("Evaluation: {}", s.model),
    }
}

/// The LUT-6 card's table: set, top-1 agreement with mismatch margins, max |dp|, plus the
/// mean |dp|, KL and near-tie count.
pub(crate) fn agreement_table(s: &Summary) -> Option<Table> {
    let compare = s.compare.as_ref()?;
    let reference = s.reference.as_deref().unwrap_or("reference");
    let mut table = Table::new(vec![
        col("Set", false),
        col("Questions", true),
        col("Top-1 agreement", false),
        col("max |dp|", true),
        col("mean |dp|", true),
        col(format!("KL({reference}‖{})", s.model), true),
        col(
            format!("Near-ties (gap < {})", s.settings.near_tie_threshold),
            true,
        ),
    ]);
    let row = |name: &str, stats: &CompareStats, gaps: &[f64]| {
        vec![
            name.to_owned(),
            stats.questions.to_string(),
            format::agreement(stats.agree, stats.questions, gaps, reference),
            opt(stats.max_abs_dp, 3),
            opt(stats.mean_abs_dp, 4),
            opt(stats.mean_kl, 3),
            stats.near_ties.to_string(),
        ]
    };
    let gaps = |source: Option<&str>| -> Vec<f64> {
        compare
            .disagreements
            .iter()
            .filter(|f| source.is_none_or(|s| f.source.as_deref().unwrap_or(crate::NO_SOURCE) == s))
            .map(|f| f.reference_gap)
            .collect()
    };
    table.push(row("all", &compare.overall, &gaps(None)));
    if compare.by_source.len() > 1 {
        for (source, stats) in &compare.by_source {
            table.push(row(source, stats, &gaps(Some(source))));
        }
    }
    Some(table)
}

/// Disagreements or near-ties, at most `limit` rows.
pub(crate) fn flip_table(s: &Summary, flips: &[Flip], limit: usize) -> Table {
    let reference = s.reference.as_deref().unwrap_or("reference");
    let mut table = Table::new(vec![
        col("Line", true),
        col("Record", false),
        col("Source", false),
        col("Question", false),
        col(format!("{reference} answer"), false),
        col(format!("{} answer", s.model), false),
        col(format!("{reference} top-2 gap"), true),
        col("Near-tie", false),
        col("max |dp|", true),
        col("KL", true),
    ]);
    for flip in flips.iter().take(limit) {
        table.push(vec![
            flip.line.to_string(),
            flip.record.clone(),
            flip.source.clone().unwrap_or_default(),
            flip.question.clone(),
            format!("{} {}", flip.reference_answer, fixed(flip.reference_p, 3)),
            format!("{} {}", flip.model_answer, fixed(flip.model_p, 3)),
            fixed(flip.reference_gap, 3),
            if flip.near_tie { "near-tie" } else { "" }.into(),
            fixed(flip.max_abs_dp, 3),
            opt(flip.kl, 3),
        ]);
    }
    table
}

/// The ternary card's table: clean questions, reference and model accuracy, % retained, and
/// "reference → model" pairs for the lower-is-better metrics. Without a reference, one model's
/// figures.
pub(crate) fn label_table(s: &Summary) -> Option<Table> {
    let labels = s.labels.as_ref()?;
    let model = &s.model;
    let mut table = match &s.reference {
        Some(reference) => Table::new(vec![
            col("Source", false),
            col("Clean questions", true),
            col(format!("{reference} acc"), true),
            col(format!("{model} acc"), true),
            col("% retained", true),
            col(format!("Brier {reference} → {model}"), true),
            col(format!("ECE {reference} → {model}"), true),
            col(format!("Mean confidence {reference} → {model}"), true),
            col(format!("KL({reference}‖{model})"), true),
        ]),
        None => Table::new(vec![
            col("Source", false),
            col("Clean questions", true),
            col("Accuracy", true),
            col("Brier", true),
            col("ECE", true),
            col("Mean confidence", true),
        ]),
    };
    let row = |name: &str, stats: &LabelStats| -> Vec<String> {
        let m = &stats.model;
        match &stats.reference {
            Some(r) if s.reference.is_some() => vec![
                name.to_owned(),
                m.questions.to_string(),
                opt(r.accuracy, 4),
                opt(m.accuracy, 4),
                percent(stats.retained_percent),
                pair(r.brier, m.brier, 4),
                pair(r.ece, m.ece, 3),
                pair(r.mean_confidence, m.mean_confidence, 3),
                opt(stats.mean_kl, 3),
            ],
            _ if s.reference.is_some() => vec![
                name.to_owned(),
                m.questions.to_string(),
                format::MISSING.into(),
                opt(m.accuracy, 4),
                format::MISSING.into(),
                pair(None, m.brier, 4),
                pair(None, m.ece, 3),
                pair(None, m.mean_confidence, 3),
                format::MISSING.into(),
            ],
            _ => vec![
                name.to_owned(),
                m.questions.to_string(),
                opt(m.accuracy, 4),
                opt(m.brier, 4),
                opt(m.ece, 3),
                opt(m.mean_confidence, 3),
            ],
        }
    };
    table.push(row("all", &labels.overall));
    if labels.by_source.len() > 1 {
        for (source, stats) in &labels.by_source {
            table.push(row(source, stats));
        }
    }
    Some(table)
}

pub(crate) fn issue_kind(kind: IssueKind) -> &'static str {
    match kind {
        IssueKind::BadLine => "unreadable line",
        IssueKind::ModelError => "model refused",
        IssueKind::ReferenceError => "reference refused",
        IssueKind::InvalidModelOutput => "bad model output",
        IssueKind::InvalidReferenceOutput => "bad reference output",
        IssueKind::Mismatch => "outputs differ",
        IssueKind::MissingReference => "no reference output",
        IssueKind::Label => "label ignored",
    }
}

pub(crate) fn issue_table(s: &Summary, limit: usize) -> Table {
    let mut table = Table::new(vec![
        col("Line", true),
        col("Record", false),
        col("Problem", false),
        col("Message", false),
    ]);
    for issue in s.issues.iter().take(limit) {
        table.push(vec![
            issue.line.to_string(),
            issue.record.clone().unwrap_or_default(),
            issue_kind(issue.kind).into(),
            issue.message.clone(),
        ]);
    }
    table
}
