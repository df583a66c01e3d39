//! Reports of a summary: terminal text, `summary.json`, `questions.jsonl`, `report.md`,
//! `report.html`.

mod format;
mod html;
mod markdown;
mod svg;
mod table;
mod tables;
mod terminal;

use std::fs;
use std::io::{self, Write};
use std::path::Path;

pub use html::report_html;
pub use markdown::report_markdown;
pub use terminal::terminal_table;

use crate::summary::Summary;

/// Names of the files `write_reports` creates.
pub const SUMMARY_FILE: &str = "summary.json";
pub const QUESTIONS_FILE: &str = "questions.jsonl";
pub const MARKDOWN_FILE: &str = "report.md";
pub const HTML_FILE: &str = "report.html";

/// `summary.json` text (pretty-printed).
pub fn summary_json(s: &Summary) -> io::Result<String> {
    serde_json::to_string_pretty(s).map_err(io::Error::other)
}

/// Writes `summary.json`, `questions.jsonl` (one line per evaluated question), `report.md` and
/// `report.html` into `dir`, creating it if needed. Each file is written under a temporary
/// name and renamed, so an interrupted run never leaves a half-written report.
pub fn write_reports(s: &Summary, dir: &Path) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    let mut questions = Vec::new();
    for row in &s.questions {
        serde_json::to_writer(&mut questions, row).map_err(io::Error::other)?;
        questions.push(b'\n');
    }
    write_atomic(&dir.join(SUMMARY_FILE), summary_json(s)?.as_bytes())?;
    write_atomic(&dir.join(QUESTIONS_FILE), &questions)?;
    write_atomic(&dir.join(MARKDOWN_FILE), report_markdown(s).as_bytes())?;
    write_atomic(&dir.join(HTML_FILE), report_html(s).as_bytes())?;
    Ok(())
}

fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    let temporary = path.with_file_name(name);
    let mut file = fs::File::create(&temporary)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    fs::rename(&temporary, path)
}
