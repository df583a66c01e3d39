//! `report.html`: one self-contained page (inline CSS and SVG, no scripts, nothing fetched).

use std::fmt::Write;

use super::format::html;
use super::markdown::{reliability_table, DEFINITIONS};
use super::svg;
use super::tables;
use crate::summary::Summary;

const STYLE: &str = "body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1100px;padding:0 1em;color:#222;background:#fff}\
h1{font-size:1.6em}h2{margin-top:1.8em;border-bottom:1px solid #ccc;padding-bottom:.2em}\
table{border-collapse:collapse;margin:.8em 0;font-size:.9em}\
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}\
th{background:#f3f5f8}td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}\
tbody tr:nth-child(even){background:#fafbfc}\
figure{display:inline-block;vertical-align:top;margin:.5em 1em .5em 0}figcaption{font-size:.85em;color:#555}\
figure.dp{width:600px}figure.rel{width:440px}\
.note{font-size:.85em;color:#555}";

/// The whole HTML report.
pub fn report_html(s: &Summary) -> String {
    let title = tables::title(s);
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{t}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{t}</h1>\n<p>{r}</p>\n",
        t = html(&title),
        r = html(&tables::records_line(s)),
    );

    if let (Some(compare), Some(table)) = (&s.compare, tables::agreement_table(s)) {
        let reference = s.reference.as_deref().unwrap_or("reference");
        let _ = writeln!(out, "<h2>Agreement with {}</h2>", html(reference));
        out.push_str(&table.html("agreement"));
        let _ = write!(
            out,
            "<figure class=\"dp\">\n{}<figcaption>|p − p<sub>ref</sub>| for every option of every compared \
             question. Bins are log-scale (decades, upper edge included; the first bin holds exact \
             zeros); bar heights are linear counts.</figcaption>\n</figure>\n",
            svg::dp_histogram(&compare.abs_dp_histogram)
        );
        let _ = writeln!(
            out,
            "<h3>Disagreements ({})</h3>",
            compare.disagreements.len()
        );
        if compare.disagreements.is_empty() {
            out.push_str("<p>None.</p>\n");
        } else {
            out.push_str(
                &tables::flip_table(s, &compare.disagreements, usize::MAX).html("disagreements"),
            );
        }
        let _ = writeln!(
            out,
            "<h3>Near-ties: {} top two closer than {} ({})</h3>",
            html(reference),
            s.settings.near_tie_threshold,
            compare.near_tie_list.len()
        );
        if compare.near_tie_list.is_empty() {
            out.push_str("<p>None.</p>\n");
        } else {
            out.push_str(
                &tables::flip_table(s, &compare.near_tie_list, usize::MAX).html("near-ties"),
            );
        }
    }

    if let (Some(labels), Some(table)) = (&s.labels, tables::label_table(s)) {
        out.push_str("<h2>Accuracy against labels</h2>\n");
        let _ = writeln!(
            out,
            "<p>{} labelled questions, {} scored, {} not scored (failed record or unusable label).</p>",
            labels.labelled_questions, labels.overall.model.questions, labels.unscored_questions
        );
        out.push_str(&table.html("labels"));
        out.push_str("<h3>Reliability</h3>\n");
        let caption =
            "Bars: accuracy per confidence bin (15 equal-width bins, (lo, hi]); red: the \
                       gap to the bin's mean confidence; numbers: questions per bin; dashed: \
                       perfect calibration.";
        let mut diagrams = Vec::new();
        if let (Some(name), Some(reference)) = (&s.reference, &labels.overall.reference) {
            diagrams.push((name.as_str(), &reference.reliability, reference.ece));
        }
        let model = &labels.overall.model;
        diagrams.push((s.model.as_str(), &model.reliability, model.ece));
        for (name, bins, ece) in diagrams {
            let _ = write!(
                out,
                "<figure class=\"rel\">\n{}<figcaption>{}</figcaption>\n</figure>\n",
                svg::reliability(name, bins, ece),
                html(caption)
            );
        }
        out.push_str(&reliability_table(s).html("reliability"));
    }

    if !s.issues.is_empty() {
        let _ = writeln!(out, "<h2>Issues ({})</h2>", s.issues.len());
        out.push_str(&tables::issue_table(s, usize::MAX).html("issues"));
    }
    let _ = write!(
        out,
        "<p class=\"note\">{}</p>\n</body>\n</html>\n",
        html(DEFINITIONS)
    );
    out
}
