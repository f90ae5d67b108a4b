//! Writing diagnostics: for people (rustc-style), as JSON, or as SARIF 2.1.0
//! (so findings show up as pull-request annotations in code-scanning tools).

use serde_json::{json, Value};
use std::io::{self, Write};
use std::path::Path;
use waf_compiler::diag::termcolor::{ColorChoice, StandardStream};
use waf_compiler::diag::{Code, Diagnostic, Diagnostics, Severity};
use waf_compiler::source::{SourceMap, Span};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Human,
    Json,
    Sarif,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Color {
    Auto,
    Always,
    Never,
}

/// Diagnostics shown per file unless `--max-diagnostics` says otherwise: a
/// file with more (a binary or badly corrupted file gives one per line) would
/// bury the first, most useful ones.
pub const DEFAULT_MAX_PER_FILE: usize = 50;

/// What is printed: at most a number of diagnostics per file, with the count
/// of those left out, and the totals over all of them.
pub struct Shown {
    diags: Diagnostics,
    /// (file name, diagnostics not shown), in file order.
    suppressed: Vec<(String, usize)>,
    max_per_file: usize,
    errors: usize,
    warnings: usize,
}

impl Shown {
    /// The first `max_per_file` diagnostics of each file (by primary span),
    /// in their order in `all`.
    pub fn capped(sources: &SourceMap, all: &Diagnostics, max_per_file: usize) -> Shown {
        let mut per_file: Vec<usize> = Vec::new();
        let mut diags = Diagnostics::new();
        for d in all {
            let i = d.span.file.0 as usize;
            if per_file.len() <= i {
                per_file.resize(i + 1, 0);
            }
            per_file[i] += 1;
            if per_file[i] <= max_per_file {
                diags.push(d.clone());
            }
        }
        let suppressed = per_file
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > max_per_file)
            .map(|(i, n)| {
                let name = sources
                    .get(waf_compiler::source::FileId(i as u32))
                    .map(|f| f.name())
                    .unwrap_or_default();
                (name, n - max_per_file)
            })
            .collect();
        Shown {
            diags,
            suppressed,
            max_per_file,
            errors: all.error_count(),
            warnings: all.warning_count(),
        }
    }
}

pub fn write(format: Format, color: Color, sources: &SourceMap, shown: &Shown) -> io::Result<()> {
    match format {
        Format::Human => human(color, sources, shown),
        Format::Json => {
            let mut out = io::stdout().lock();
            writeln!(
                out,
                "{}",
                serde_json::to_string_pretty(&json_report(sources, shown))?
            )
        }
        Format::Sarif => {
            let mut out = io::stdout().lock();
            writeln!(
                out,
                "{}",
                serde_json::to_string_pretty(&sarif_report(sources, shown))?
            )
        }
    }
}

fn human(color: Color, sources: &SourceMap, shown: &Shown) -> io::Result<()> {
    use std::io::IsTerminal;
    let choice = match color {
        Color::Always => ColorChoice::Always,
        Color::Never => ColorChoice::Never,
        Color::Auto if io::stdout().is_terminal() => ColorChoice::Auto,
        Color::Auto => ColorChoice::Never,
    };
    let mut out = StandardStream::stdout(choice);
    for d in &shown.diags {
        d.emit(sources, &mut out);
    }
    for (file, n) in &shown.suppressed {
        writeln!(
            out,
            "note: {n} more diagnostic(s) in {file} not shown (--max-diagnostics {})",
            shown.max_per_file
        )?;
    }
    let files = sources.files().count();
    writeln!(
        out,
        "{files} file(s) checked: {} error(s), {} warning(s)",
        shown.errors, shown.warnings
    )
}

/// Diagnostics of rules that failed to compile, for a command that is not
/// `lint`: on standard error, plain, at most [`DEFAULT_MAX_PER_FILE`] per
/// file.
pub fn eprint(sources: &SourceMap, diags: &Diagnostics) {
    let shown = Shown::capped(sources, diags, DEFAULT_MAX_PER_FILE);
    let mut err = io::stderr().lock();
    for d in &shown.diags {
        let _ = err.write_all(d.render(sources).as_bytes());
    }
    for (file, n) in &shown.suppressed {
        let _ = writeln!(err, "note: {n} more diagnostic(s) in {file} not shown");
    }
}

fn suppressed_json(shown: &Shown) -> Vec<Value> {
    shown
        .suppressed
        .iter()
        .map(|(file, n)| json!({"file": file, "count": n}))
        .collect()
}

/// Line/column (1-based) of the start and end of a span.
fn region(sources: &SourceMap, span: Span) -> Option<(usize, usize, usize, usize, String)> {
    let f = sources.get(span.file)?;
    let s = f.line_col(span.start as usize);
    let e = f.line_col(span.end as usize);
    let line = f.text.get(f.line_range(s.line - 1)).unwrap_or("");
    Some((s.line, s.col, e.line, e.col, snippet(line, s.col)))
}

/// Longest snippet quoted whole; a longer line is quoted as the
/// [`SNIPPET_CHARS`] characters around the column.
const SNIPPET_CHARS: usize = 240;

/// The line, or a window of it around `col` (1-based, in characters) when it
/// is long: JSON and SARIF reports stay small on files with huge lines.
fn snippet(line: &str, col: usize) -> String {
    if line.len() <= SNIPPET_CHARS {
        return line.to_string();
    }
    let skip = col.saturating_sub(1 + SNIPPET_CHARS / 4);
    line.chars().skip(skip).take(SNIPPET_CHARS).collect()
}

fn file_name(sources: &SourceMap, span: Span) -> String {
    sources.get(span.file).map(|f| f.name()).unwrap_or_default()
}

fn json_diag(sources: &SourceMap, d: &Diagnostic) -> Value {
    let (line, col, end_line, end_col, _) =
        region(sources, d.span).unwrap_or((0, 0, 0, 0, String::new()));
    json!({
        "severity": d.severity.as_str(),
        "code": d.code.as_str(),
        "message": d.message,
        "file": file_name(sources, d.span),
        "line": line,
        "column": col,
        "end_line": end_line,
        "end_column": end_col,
        "label": d.label,
        "hint": d.hint,
        "related": d.related.iter().map(|(s, m)| {
            let (l, c, ..) = region(sources, *s).unwrap_or((0, 0, 0, 0, String::new()));
            json!({"file": file_name(sources, *s), "line": l, "column": c, "message": m})
        }).collect::<Vec<_>>(),
    })
}

pub fn json_report(sources: &SourceMap, shown: &Shown) -> Value {
    json!({
        "errors": shown.errors,
        "warnings": shown.warnings,
        "diagnostics": shown.diags.iter().map(|d| json_diag(sources, d)).collect::<Vec<_>>(),
        "suppressed": suppressed_json(shown),
    })
}

/// A SARIF artifact URI: relative to the working directory when the file is
/// under it (what code-scanning tools expect), a `file://` URI otherwise.
fn artifact_uri(path: &Path) -> String {
    let cwd = std::env::current_dir().ok();
    let abs = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    if let Some(rel) = cwd.as_ref().and_then(|c| abs.strip_prefix(c).ok()) {
        return rel.to_string_lossy().replace('\\', "/");
    }
    if abs.is_absolute() {
        return format!("file://{}", abs.to_string_lossy().replace('\\', "/"));
    }
    path.to_string_lossy().replace('\\', "/")
}

fn sarif_location(sources: &SourceMap, span: Span, message: Option<&str>) -> Value {
    let uri = sources
        .get(span.file)
        .map(|f| artifact_uri(&f.path))
        .unwrap_or_default();
    let (line, col, end_line, end_col, snippet) =
        region(sources, span).unwrap_or((1, 1, 1, 1, String::new()));
    let mut loc = json!({
        "physicalLocation": {
            "artifactLocation": {"uri": uri},
            "region": {
                "startLine": line,
                "startColumn": col,
                "endLine": end_line,
                "endColumn": end_col.max(if end_line == line { col + 1 } else { 1 }),
                "snippet": {"text": snippet},
            }
        }
    });
    if let Some(m) = message {
        loc["message"] = json!({"text": m});
    }
    loc
}

pub fn sarif_report(sources: &SourceMap, shown: &Shown) -> Value {
    let rules: Vec<Value> = Code::ALL
        .iter()
        .map(|c| {
            json!({
                "id": c.as_str(),
                "name": c.as_str(),
                "shortDescription": {"text": c.description()},
            })
        })
        .collect();
    let results: Vec<Value> = shown
        .diags
        .iter()
        .map(|d| {
            let index = Code::ALL.iter().position(|c| *c == d.code).unwrap_or(0);
            let mut text = d.message.clone();
            if let Some(h) = &d.hint {
                text.push_str(&format!(" (hint: {h})"));
            }
            json!({
                "ruleId": d.code.as_str(),
                "ruleIndex": index,
                "level": match d.severity { Severity::Error => "error", Severity::Warning => "warning" },
                "message": {"text": text},
                "locations": [sarif_location(sources, d.span, None)],
                "relatedLocations": d.related.iter().enumerate().map(|(i, (s, m))| {
                    let mut l = sarif_location(sources, *s, Some(m));
                    l["id"] = json!(i);
                    l
                }).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "waf",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "columnKind": "unicodeCodePoints",
            "results": results,
            "properties": {"suppressed": suppressed_json(shown)},
        }]
    })
}
