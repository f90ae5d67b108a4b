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

pub fn write(
    format: Format,
    color: Color,
    sources: &SourceMap,
    diags: &Diagnostics,
) -> io::Result<()> {
    match format {
        Format::Human => human(color, sources, diags),
        Format::Json => {
            let mut out = io::stdout().lock();
            writeln!(
                out,
                "{}",
                serde_json::to_string_pretty(&json_report(sources, diags))?
            )
        }
        Format::Sarif => {
            let mut out = io::stdout().lock();
            writeln!(
                out,
                "{}",
                serde_json::to_string_pretty(&sarif_report(sources, diags))?
            )
        }
    }
}

fn human(color: Color, sources: &SourceMap, diags: &Diagnostics) -> io::Result<()> {
    use std::io::IsTerminal;
    let choice = match color {
        Color::Always => ColorChoice::Always,
        Color::Never => ColorChoice::Never,
        Color::Auto if io::stdout().is_terminal() => ColorChoice::Auto,
        Color::Auto => ColorChoice::Never,
    };
    let mut out = StandardStream::stdout(choice);
    for d in diags {
        d.emit(sources, &mut out);
    }
    let (e, w) = (diags.error_count(), diags.warning_count());
    let files = sources.files().count();
    writeln!(out, "{files} file(s) checked: {e} error(s), {w} warning(s)")
}

/// Line/column (1-based) of the start and end of a span.
fn region(sources: &SourceMap, span: Span) -> Option<(usize, usize, usize, usize, String)> {
    let f = sources.get(span.file)?;
    let s = f.line_col(span.start as usize);
    let e = f.line_col(span.end as usize);
    let line = f
        .text
        .get(f.line_range(s.line - 1))
        .unwrap_or("")
        .to_string();
    Some((s.line, s.col, e.line, e.col, line))
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

pub fn json_report(sources: &SourceMap, diags: &Diagnostics) -> Value {
    json!({
        "errors": diags.error_count(),
        "warnings": diags.warning_count(),
        "diagnostics": diags.iter().map(|d| json_diag(sources, d)).collect::<Vec<_>>(),
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

pub fn sarif_report(sources: &SourceMap, diags: &Diagnostics) -> Value {
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
    let results: Vec<Value> = diags
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
        }]
    })
}
