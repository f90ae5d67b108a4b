//! Text edits on rule files: building them so that the layout survives, and
//! applying a set of them to the sources.
//!
//! Edits replace byte ranges of the original text, so everything a
//! suggestion does not touch (comments, continuation lines, indentation,
//! quoting) is kept byte for byte.

use crate::model::{Edit, Suggestion};
use std::collections::BTreeMap;
use std::path::PathBuf;
use waf_compiler::source::{FileId, SourceMap, Span};

/// Inserts `text` at `at`.
pub fn insert(at: u32, file: FileId, text: impl Into<String>) -> Edit {
    Edit {
        span: Span {
            file,
            start: at,
            end: at,
        },
        text: text.into(),
    }
}

/// Replaces `span` by `text`.
pub fn replace(span: Span, text: impl Into<String>) -> Edit {
    Edit {
        span,
        text: text.into(),
    }
}

/// Removes item `i` of a list whose items are at `spans` (actions separated
/// by `,`, targets by `|`), with one separator, so the list stays valid.
///
/// The separator removed is the one that keeps the layout: the one after the
/// item when it is on the same line, else the one before it; an item alone
/// on a continuation line takes its whole line with it.
pub fn remove_item(src: &str, spans: &[Span], i: usize) -> Edit {
    let s = spans[i];
    let gap = |a: u32, b: u32| src.get(a as usize..b as usize).unwrap_or("");
    if let Some(next) = spans.get(i + 1) {
        let between = gap(s.end, next.start);
        if !between.contains('\n') {
            return replace(
                Span {
                    end: next.start,
                    ..s
                },
                "",
            );
        }
        // `\<newline>` follows: drop the line if the item is alone on it.
        let line_start = src[..s.start as usize].rfind('\n').map_or(0, |p| p + 1);
        let before = &src[line_start..s.start as usize];
        if before.trim().is_empty() && i > 0 {
            let line_end = src[s.end as usize..]
                .find('\n')
                .map_or(src.len(), |p| s.end as usize + p + 1);
            return replace(
                Span {
                    start: line_start as u32,
                    end: line_end as u32,
                    ..s
                },
                "",
            );
        }
    }
    if i > 0 {
        let prev = spans[i - 1];
        if !gap(prev.end, s.start).contains('\n') || spans.get(i + 1).is_none() {
            return replace(
                Span {
                    start: prev.end,
                    ..s
                },
                "",
            );
        }
    }
    match spans.get(i + 1) {
        Some(next) => replace(
            Span {
                end: next.start,
                ..s
            },
            "",
        ),
        None => replace(s, ""),
    }
}

/// What applying suggestions to the sources gives.
pub struct Applied {
    /// The new text of every changed file.
    pub files: BTreeMap<PathBuf, String>,
    /// Suggestions applied (indices into the input).
    pub applied: Vec<usize>,
    /// Suggestions left out because an edit overlapped one already taken.
    pub conflicts: Vec<usize>,
}

/// Applies the edits of `suggestions` (in order; a suggestion whose edits
/// overlap those of an earlier one is left out whole).
pub fn apply(sources: &SourceMap, suggestions: &[&Suggestion]) -> Applied {
    let mut taken: BTreeMap<FileId, Vec<(Span, &str)>> = BTreeMap::new();
    let mut applied = Vec::new();
    let mut conflicts = Vec::new();
    for (n, s) in suggestions.iter().enumerate() {
        if s.edits.is_empty() {
            continue;
        }
        let clash = s.edits.iter().any(|e| {
            taken
                .get(&e.span.file)
                .is_some_and(|v| v.iter().any(|(o, _)| overlaps(*o, e.span)))
                || s.edits
                    .iter()
                    .any(|f| !std::ptr::eq(e, f) && overlaps(e.span, f.span))
        });
        if clash {
            conflicts.push(n);
            continue;
        }
        for e in &s.edits {
            taken
                .entry(e.span.file)
                .or_default()
                .push((e.span, e.text.as_str()));
        }
        applied.push(n);
    }
    let mut files = BTreeMap::new();
    for (file, mut edits) in taken {
        let Some(f) = sources.get(file) else { continue };
        let text = f.text.as_str();
        // Insertions at one point keep the order they were made in.
        edits.sort_by_key(|(s, _)| (s.start, s.end));
        let mut out = String::with_capacity(text.len());
        let mut at = 0usize;
        for (span, new) in edits {
            let r = span.range();
            out.push_str(&text[at..r.start]);
            out.push_str(new);
            at = r.end;
        }
        out.push_str(&text[at..]);
        files.insert(f.path.clone(), out);
    }
    Applied {
        files,
        applied,
        conflicts,
    }
}

/// Two edits conflict when their ranges share a byte, or when both insert
/// at the same point (their order would be a guess).
fn overlaps(a: Span, b: Span) -> bool {
    a.file == b.file
        && if a.start == a.end || b.start == b.end {
            a.start == b.start
                || (a.start > b.start && a.start < b.end)
                || (b.start > a.start && b.start < a.end)
        } else {
            a.start < b.end && b.start < a.end
        }
}

/// A unified diff of `old` → `new`, with `---`/`+++` headers naming `path`.
pub fn unified_diff(path: &str, old: &str, new: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(2)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans_of(src: &str, items: &[&str]) -> Vec<Span> {
        let mut from = 0;
        items
            .iter()
            .map(|it| {
                let p = src[from..].find(it).expect("item in text") + from;
                from = p + it.len();
                Span::new(FileId(0), p, p + it.len())
            })
            .collect()
    }

    fn remove(src: &str, items: &[&str], i: usize) -> String {
        let e = remove_item(src, &spans_of(src, items), i);
        let r = e.span.range();
        format!("{}{}{}", &src[..r.start], e.text, &src[r.end..])
    }

    #[test]
    fn removes_an_item_with_one_separator() {
        let src = "id:1,t:none,t:lowercase,deny";
        let items = ["id:1", "t:none", "t:lowercase", "deny"];
        assert_eq!(remove(src, &items, 2), "id:1,t:none,deny");
        assert_eq!(remove(src, &items, 3), "id:1,t:none,t:lowercase");
        assert_eq!(remove(src, &items, 0), "t:none,t:lowercase,deny");
        assert_eq!(remove("ARGS|ARGS_GET", &["ARGS", "ARGS_GET"], 1), "ARGS");
        assert_eq!(remove("only", &["only"], 0), "");
    }

    #[test]
    fn keeps_continuation_lines() {
        let src = "\"id:1,\\\n    t:none,\\\n    t:lowercase,\\\n    deny\"";
        let items = ["id:1", "t:none", "t:lowercase", "deny"];
        assert_eq!(
            remove(src, &items, 2),
            "\"id:1,\\\n    t:none,\\\n    deny\""
        );
        let src = "\"id:1,t:none,\\\n    t:lowercase\"";
        assert_eq!(
            remove(src, &["id:1", "t:none", "t:lowercase"], 2),
            "\"id:1,t:none\""
        );
        let src = "\"id:1,t:lowercase,\\\n    deny\"";
        assert_eq!(
            remove(src, &["id:1", "t:lowercase", "deny"], 1),
            "\"id:1,\\\n    deny\""
        );
    }

    #[test]
    fn overlap_rules() {
        let s = |a, b| Span::new(FileId(0), a, b);
        assert!(overlaps(s(1, 4), s(3, 6)));
        assert!(!overlaps(s(1, 3), s(3, 6)));
        assert!(overlaps(s(3, 3), s(3, 3)));
        assert!(overlaps(s(4, 4), s(3, 6)));
        assert!(!overlaps(s(3, 3), s(1, 3)));
    }
}
