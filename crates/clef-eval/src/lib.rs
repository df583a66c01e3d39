//! clef-eval: metrics, model comparisons and reports for `clef eval` (formats.md §7).
//!
//! Typical wiring:
//!
//! ```no_run
//! use clef_eval::{read_records, write_reports, terminal_table, Evaluation, Progress, SummaryOptions};
//! # fn run(_: &str) -> Result<clef_eval::RecordOutput, String> { Err("no engine".into()) }
//! # fn main() -> std::io::Result<()> {
//! let text = std::fs::read_to_string("records.jsonl")?;
//! let (records, bad_lines) = read_records(&text);
//! let mut evaluation = Evaluation::new();
//! evaluation.add_bad_lines(&bad_lines);
//! let progress = Progress::new(records.len() as u64);
//! for record in &records {
//!     // The engine parses `request_json` itself (order-preserving) and returns the logits.
//!     let model = run(&record.request_json);
//!     let reference = Some(run(&record.request_json));
//!     evaluation.add(record, model, reference);
//!     progress.inc();
//! }
//! progress.finish();
//! let summary = evaluation.summary(&SummaryOptions::new("ternary", "BF16"));
//! print!("{}", terminal_table(&summary));
//! write_reports(&summary, std::path::Path::new("eval-out"))?;
//! # Ok(())
//! # }
//! ```

mod error;
mod evaluation;
mod histogram;
pub mod metrics;
mod output;
mod progress;
mod record;
mod report;
mod summary;

pub use error::{MetricError, OptionsError, OutputError};
pub use evaluation::{Evaluation, Issue, IssueKind};
pub use histogram::{DpHistogram, HistogramBin};
pub use output::{Kind, QuestionOutput, RecordOutput};
pub use progress::Progress;
pub use record::{
    parse_record_line, read_records, EvalRecord, Expected, RecordError, RecordReader,
    MAX_LINE_BYTES,
};
pub use report::{
    report_html, report_markdown, summary_json, terminal_table, write_reports, HTML_FILE,
    MARKDOWN_FILE, QUESTIONS_FILE, SUMMARY_FILE,
};
pub use summary::{
    CompareStats, CompareSummary, Flip, LabelMetrics, LabelStats, LabelSummary, QuestionRow,
    RecordCounts, Settings, Summary, SummaryOptions, DEFAULT_NEAR_TIE_THRESHOLD, NO_SOURCE,
};
