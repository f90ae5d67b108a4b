//! Diagnostics: typed findings with a location, a source snippet and a hint.
//!
//! The compiler never stops at the first problem: every check pushes a
//! [`Diagnostic`] into [`Diagnostics`] and goes on, so one `waf lint` run shows
//! everything wrong with a pull request. Rendering for people is done here (so
//! that snapshot tests and the CLI show the same text); machine formats (JSON,
//! SARIF) are built by the CLI from the same values.

use crate::source::{SourceMap, Span};
use codespan_reporting::diagnostic as cs;
use codespan_reporting::files::{Error as FilesError, Files};
use codespan_reporting::term;
use std::fmt;

/// Terminal colour support, re-exported for callers of [`Diagnostic::emit`].
pub use codespan_reporting::term::termcolor;
use std::ops::Range;

/// How serious a finding is: errors stop compilation, warnings do not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// A problem worth fixing; the configuration still compiles.
    Warning,
    /// The configuration cannot be compiled as written.
    Error,
}

impl Severity {
    /// `error` or `warning`, as printed and in JSON/SARIF.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every kind of finding, with a stable code (used in JSON, SARIF rule ids and docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Code {
    /// The text does not follow SecLang syntax (unbalanced quote, stray token...).
    Syntax,
    /// A directive ModSecurity v3 does not know.
    UnknownDirective,
    /// An operator ModSecurity v3 does not know.
    UnknownOperator,
    /// A transformation ModSecurity v3 does not know.
    UnknownTransformation,
    /// A variable ModSecurity v3 does not know.
    UnknownVariable,
    /// An action ModSecurity v3 does not know.
    UnknownAction,
    /// A directive, operator or action was given the wrong number or kind of arguments.
    BadArgument,
    /// A `SecRule` or `SecAction` without an `id` action.
    MissingId,
    /// Two rules with the same `id`.
    DuplicateId,
    /// A rule without a `phase` (and no `SecDefaultAction` that gives one).
    MissingPhase,
    /// `chain` on the last rule of a file, or followed by something that is not a `SecRule`.
    DanglingChain,
    /// `skipAfter` names a marker that is not defined.
    UnknownMarker,
    /// `skipAfter` names a marker that lies before the rule (or in another phase).
    BackwardSkip,
    /// A disruptive, phase or other head-only action in a chain link.
    ActionInChainLink,
    /// A regex that does not compile.
    InvalidRegex,
    /// A PCRE feature (lookaround, backreference, atomic group...) that no DFA can run.
    UnsupportedRegex,
    /// A data file (`@pmFromFile`, `@ipMatchFromFile`) that cannot be read.
    MissingDataFile,
    /// An `Include` that cannot be read, or matches nothing, or includes itself.
    Include,
    /// A selector, exclusion or count that cannot apply to this variable.
    BadTarget,
    /// A rule id named by `SecRuleUpdate*`/`SecRuleRemove*`/`ctl` that does not exist.
    UnknownRuleRef,
    /// A construct that is accepted but has no effect or is probably a mistake.
    Suspicious,
    /// Invalid UTF-8, NUL bytes or other encoding trouble in a rule file.
    Encoding,
    /// Performance: a rule whose estimated cost per request exceeds the budget.
    PerfCost,
    /// Performance: an `@rx` with no literal the prefilter can use (it runs on every value).
    PerfNoPrefilter,
    /// Performance: a transformation that changes nothing the rule can observe.
    PerfRedundantTransform,
    /// ModSecurity v3 accepts it, so the rules load (with this warning), but
    /// it is a mistake: an action list whose closing `"` is missing.
    CompatUnterminatedQuote,
    /// v3 accepts a `chain` on the last rule: the rule never matches.
    CompatDanglingChain,
    /// v3 accepts `!ARGS` (a whole collection): the target reads nothing.
    CompatExcludeCollection,
    /// v3 accepts `block` in SecDefaultAction beside another disruptive action, and ignores it.
    CompatDefaultBlock,
    /// A PCRE-only pattern that runs on PCRE2 (backtracking) because the
    /// configuration says `WafPcreFallback On`.
    PcreBacktracking,
}

impl Code {
    /// Every code, in a stable order (the SARIF rule list).
    pub const ALL: &'static [Code] = &[
        Code::Syntax,
        Code::UnknownDirective,
        Code::UnknownOperator,
        Code::UnknownTransformation,
        Code::UnknownVariable,
        Code::UnknownAction,
        Code::BadArgument,
        Code::MissingId,
        Code::DuplicateId,
        Code::MissingPhase,
        Code::DanglingChain,
        Code::UnknownMarker,
        Code::BackwardSkip,
        Code::ActionInChainLink,
        Code::InvalidRegex,
        Code::UnsupportedRegex,
        Code::MissingDataFile,
        Code::Include,
        Code::BadTarget,
        Code::UnknownRuleRef,
        Code::Suspicious,
        Code::Encoding,
        Code::PerfCost,
        Code::PerfNoPrefilter,
        Code::PerfRedundantTransform,
        Code::CompatUnterminatedQuote,
        Code::CompatDanglingChain,
        Code::CompatExcludeCollection,
        Code::CompatDefaultBlock,
        Code::PcreBacktracking,
    ];

    /// The stable kebab-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Syntax => "syntax",
            Code::UnknownDirective => "unknown-directive",
            Code::UnknownOperator => "unknown-operator",
            Code::UnknownTransformation => "unknown-transformation",
            Code::UnknownVariable => "unknown-variable",
            Code::UnknownAction => "unknown-action",
            Code::BadArgument => "bad-argument",
            Code::MissingId => "missing-id",
            Code::DuplicateId => "duplicate-id",
            Code::MissingPhase => "missing-phase",
            Code::DanglingChain => "dangling-chain",
            Code::UnknownMarker => "unknown-marker",
            Code::BackwardSkip => "backward-skip",
            Code::ActionInChainLink => "action-in-chain-link",
            Code::InvalidRegex => "invalid-regex",
            Code::UnsupportedRegex => "unsupported-regex",
            Code::MissingDataFile => "missing-data-file",
            Code::Include => "include",
            Code::BadTarget => "bad-target",
            Code::UnknownRuleRef => "unknown-rule-ref",
            Code::Suspicious => "suspicious",
            Code::Encoding => "encoding",
            Code::PerfCost => "perf-cost",
            Code::PerfNoPrefilter => "perf-no-prefilter",
            Code::PerfRedundantTransform => "perf-redundant-transform",
            Code::CompatUnterminatedQuote => "compat-unterminated-quote",
            Code::CompatDanglingChain => "compat-dangling-chain",
            Code::CompatExcludeCollection => "compat-exclude-collection",
            Code::CompatDefaultBlock => "compat-default-block",
            Code::PcreBacktracking => "pcre-backtracking",
        }
    }

    /// One sentence for SARIF's rule descriptions and the docs.
    pub fn description(self) -> &'static str {
        match self {
            Code::Syntax => "The text does not follow SecLang syntax.",
            Code::UnknownDirective => "A directive name that ModSecurity v3 does not know.",
            Code::UnknownOperator => "An operator name that ModSecurity v3 does not know.",
            Code::UnknownTransformation => {
                "A transformation name that ModSecurity v3 does not know."
            }
            Code::UnknownVariable => {
                "A variable or collection name that ModSecurity v3 does not know."
            }
            Code::UnknownAction => "An action name that ModSecurity v3 does not know.",
            Code::BadArgument => {
                "A directive, operator or action has a missing or invalid argument."
            }
            Code::MissingId => "A rule without an `id` action.",
            Code::DuplicateId => "Two rules with the same id.",
            Code::MissingPhase => "A rule without a `phase` where no SecDefaultAction gives one.",
            Code::DanglingChain => "A rule with `chain` that no SecRule follows.",
            Code::UnknownMarker => "`skipAfter` names a marker that is not defined.",
            Code::BackwardSkip => {
                "`skipAfter` names a marker that does not lie after the rule in its phase."
            }
            Code::ActionInChainLink => "An action that only the first rule of a chain may carry.",
            Code::InvalidRegex => "A regular expression that does not compile.",
            Code::UnsupportedRegex => {
                "A PCRE-only regex feature that a linear-time (DFA) engine cannot run."
            }
            Code::MissingDataFile => "A data file named by an operator cannot be read.",
            Code::Include => "An Include that cannot be resolved.",
            Code::BadTarget => "A target selector, exclusion or count that does not apply.",
            Code::UnknownRuleRef => "A rule id, tag or message that matches no rule.",
            Code::Suspicious => {
                "A construct that is valid but has no effect or is likely a mistake."
            }
            Code::Encoding => "A rule file that is not valid UTF-8 text.",
            Code::PerfCost => "A rule whose estimated cost per request exceeds the budget.",
            Code::PerfNoPrefilter => {
                "A regex with no literal the prefilter can use: it runs on every value."
            }
            Code::PerfRedundantTransform => {
                "A transformation that changes nothing the rule can observe."
            }
            Code::CompatUnterminatedQuote => {
                "An action list whose closing quote is missing (ModSecurity v3 reads it to the end of the line)."
            }
            Code::CompatDanglingChain => {
                "A `chain` on the last rule (ModSecurity v3 loads it; the rule never matches)."
            }
            Code::CompatExcludeCollection => {
                "An exclusion of a whole collection (ModSecurity v3 loads it; the target reads nothing)."
            }
            Code::CompatDefaultBlock => {
                "`block` in SecDefaultAction beside another disruptive action (ModSecurity v3 ignores it)."
            }
            Code::PcreBacktracking => {
                "A PCRE-only regex run on PCRE2, a backtracking engine, under a match limit (`WafPcreFallback On`)."
            }
        }
    }

    /// Accepted for compatibility with ModSecurity v3 (the rules load with a
    /// warning) but not to be written: `waf lint` reports these as errors.
    pub fn is_compat(self) -> bool {
        self.as_str().starts_with("compat-")
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One finding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// The kind of finding, with its stable name.
    pub code: Code,
    /// The one-line summary (at most 300 bytes of quoted rule text).
    pub message: String,
    /// Where the problem is; the caret of the rendered snippet.
    pub span: Span,
    /// Short text under the caret.
    pub label: String,
    /// What to do about it (for unknown names: the closest known one).
    pub hint: Option<String>,
    /// Related places (e.g. the first definition of a duplicate id).
    pub related: Vec<(Span, String)>,
}

impl Diagnostic {
    /// A new error at `span`.
    pub fn error(code: Code, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            code,
            message: bounded(message.into()),
            span,
            label: String::new(),
            hint: None,
            related: Vec::new(),
        }
    }

    /// A new warning at `span`.
    pub fn warning(code: Code, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(code, span, message)
        }
    }

    /// Sets the text shown under the caret.
    pub fn with_label(mut self, label: impl Into<String>) -> Diagnostic {
        self.label = bounded(label.into());
        self
    }

    /// Sets what to do about it.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Diagnostic {
        self.hint = Some(bounded(hint.into()));
        self
    }

    /// Adds a related place, with its text.
    pub fn with_related(mut self, span: Span, text: impl Into<String>) -> Diagnostic {
        self.related.push((span, bounded(text.into())));
        self
    }

    /// Renders this diagnostic for a terminal (without colour): a header, the
    /// `file:line:col`, the source line with a caret, and the hint.
    pub fn render(&self, sources: &SourceMap) -> String {
        let mut out = term::termcolor::NoColor::new(Vec::new());
        self.emit(sources, &mut out);
        String::from_utf8_lossy(&out.into_inner()).into_owned()
    }

    /// Writes the rendered diagnostic to a terminal stream; colour is the
    /// stream's choice (`NoColor` for plain text).
    pub fn emit(&self, sources: &SourceMap, out: &mut dyn term::termcolor::WriteColor) {
        let sev = match self.severity {
            Severity::Error => cs::Severity::Error,
            Severity::Warning => cs::Severity::Warning,
        };
        let mut view = Renderable {
            sources,
            windows: Vec::new(),
        };
        let primary = view.clip(self.span);
        let mut labels =
            vec![cs::Label::primary(self.span.file.0, primary).with_message(self.label.clone())];
        for (span, text) in &self.related {
            let range = view.clip(*span);
            labels.push(cs::Label::secondary(span.file.0, range).with_message(text.clone()));
        }
        let mut d = cs::Diagnostic::new(sev)
            .with_code(self.code.as_str())
            .with_message(&self.message)
            .with_labels(labels);
        if let Some(h) = &self.hint {
            d = d.with_notes(vec![format!("hint: {h}")]);
        }
        let config = term::Config::default();
        // An I/O error on the output stream is not the compiler's to report.
        let _ = term::emit(out, &config, &view, &d);
    }
}

/// Longest source line shown whole under a diagnostic. A longer line (CRS
/// has regexes of several kilobytes on one line; a corrupted or binary file
/// has lines of megabytes) is shown as a window around each label, so that
/// one diagnostic's output stays a few lines whatever the input.
const LONG_LINE: usize = 240;
/// Bytes of context shown on each side of a label on a long line, and the
/// most of a label's own bytes shown.
const WINDOW_CONTEXT: usize = 60;
const WINDOW_LABEL: usize = 100;

/// Adapts [`SourceMap`] to codespan's file database, showing long lines
/// through windows (see [`LONG_LINE`]).
struct Renderable<'a> {
    sources: &'a SourceMap,
    /// (file, line index, byte range shown) for each long line with a label.
    windows: Vec<(u32, usize, Range<usize>)>,
}

impl<'a> Files<'a> for Renderable<'a> {
    type FileId = u32;
    type Name = String;
    type Source = &'a str;

    fn name(&'a self, id: u32) -> Result<String, FilesError> {
        let f = self
            .sources
            .get(crate::source::FileId(id))
            .ok_or(FilesError::FileMissing)?;
        Ok(f.name())
    }

    fn source(&'a self, id: u32) -> Result<&'a str, FilesError> {
        let f = self
            .sources
            .get(crate::source::FileId(id))
            .ok_or(FilesError::FileMissing)?;
        Ok(&f.text)
    }

    fn line_index(&'a self, id: u32, byte_index: usize) -> Result<usize, FilesError> {
        let f = self
            .sources
            .get(crate::source::FileId(id))
            .ok_or(FilesError::FileMissing)?;
        Ok(f.line_index(byte_index.min(f.text.len())))
    }

    fn line_range(&'a self, id: u32, line_index: usize) -> Result<Range<usize>, FilesError> {
        let f = self
            .sources
            .get(crate::source::FileId(id))
            .ok_or(FilesError::FileMissing)?;
        if line_index >= f.line_count() {
            return Err(FilesError::LineTooLarge {
                given: line_index,
                max: f.line_count() - 1,
            });
        }
        if let Some((.., w)) = self
            .windows
            .iter()
            .find(|(file, line, _)| *file == id && *line == line_index)
        {
            return Ok(w.clone());
        }
        // codespan wants the range including the terminator.
        let r = f.line_range(line_index);
        let next = if line_index + 1 < f.line_count() {
            self.line_start(f, line_index + 1)
        } else {
            f.text.len()
        };
        Ok(r.start..next)
    }

    /// Columns count from the real start of the line, not from a window's.
    fn column_number(
        &'a self,
        id: u32,
        _line_index: usize,
        byte_index: usize,
    ) -> Result<usize, FilesError> {
        let f = self
            .sources
            .get(crate::source::FileId(id))
            .ok_or(FilesError::FileMissing)?;
        Ok(f.line_col(byte_index).col)
    }
}

impl Renderable<'_> {
    /// The byte range to label for `span`: the span itself on a short line;
    /// on a long line, at most [`WINDOW_LABEL`] bytes of it on its first
    /// line, with a window of context recorded for [`Files::line_range`].
    fn clip(&mut self, span: Span) -> Range<usize> {
        let range = span.range();
        let Some(f) = self.sources.get(span.file) else {
            return range;
        };
        let start = range.start.min(f.text.len());
        let line = f.line_index(start);
        let whole = f.line_range(line);
        if whole.len() <= LONG_LINE {
            return range;
        }
        let end = range.end.clamp(start, whole.end).min(start + WINDOW_LABEL);
        let end = ceil_char_boundary(&f.text, end);
        let from = floor_char_boundary(
            &f.text,
            start.saturating_sub(WINDOW_CONTEXT).max(whole.start),
        );
        let to = ceil_char_boundary(&f.text, (end + WINDOW_CONTEXT).min(whole.end));
        let id = span.file.0;
        match self
            .windows
            .iter_mut()
            .find(|(file, l, _)| *file == id && *l == line)
        {
            // A second label on the same line widens the window (by at most
            // one label and its context).
            Some((.., w)) => *w = w.start.min(from)..w.end.max(to),
            None => self.windows.push((id, line, from..to)),
        }
        start..end
    }

    fn line_start(&self, f: &crate::source::SourceFile, line: usize) -> usize {
        f.line_range(line).start
    }
}

/// The findings of one compilation, in the order they were found.
#[derive(Clone, Debug, Default)]
pub struct Diagnostics {
    items: Vec<Diagnostic>,
}

impl Diagnostics {
    /// No diagnostics.
    pub fn new() -> Diagnostics {
        Diagnostics::default()
    }

    /// Adds one.
    pub fn push(&mut self, d: Diagnostic) {
        self.items.push(d);
    }

    /// Makes the [`Code::is_compat`] findings errors (what a review of new
    /// rules wants; loading keeps them warnings).
    pub fn escalate_compat(&mut self) {
        for d in &mut self.items {
            if d.code.is_compat() {
                d.severity = Severity::Error;
            }
        }
    }

    /// How many are errors.
    pub fn error_count(&self) -> usize {
        self.items
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count()
    }

    /// How many are warnings.
    pub fn warning_count(&self) -> usize {
        self.items
            .iter()
            .filter(|d| d.severity == Severity::Warning)
            .count()
    }

    /// Whether any is an error (the configuration does not compile).
    pub fn has_errors(&self) -> bool {
        self.error_count() > 0
    }

    /// The diagnostics, in their current order.
    pub fn iter(&self) -> std::slice::Iter<'_, Diagnostic> {
        self.items.iter()
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Sorts by file, then position, keeping the discovery order of ties.
    pub fn sort(&mut self) {
        self.items.sort_by_key(|d| (d.span.file, d.span.start));
    }

    /// The diagnostics, by value.
    pub fn into_vec(self) -> Vec<Diagnostic> {
        self.items
    }

    /// All diagnostics rendered for a terminal, separated by blank lines.
    pub fn render(&self, sources: &SourceMap) -> String {
        self.items
            .iter()
            .map(|d| d.render(sources))
            .collect::<Vec<_>>()
            .join("")
    }
}

impl<'a> IntoIterator for &'a Diagnostics {
    type Item = &'a Diagnostic;
    type IntoIter = std::slice::Iter<'a, Diagnostic>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

/// The known name closest to `name` (case-insensitive), if close enough to be a
/// plausible typo. Used for the hints of every "unknown X" diagnostic.
pub fn closest<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lower = name.to_ascii_lowercase();
    let mut best: Option<(f64, &str)> = None;
    for k in known {
        let score = strsim::jaro_winkler(&lower, &k.to_ascii_lowercase());
        if best.is_none_or(|(b, _)| score > b) {
            best = Some((score, k));
        }
    }
    best.filter(|(s, _)| *s >= 0.8).map(|(_, k)| k)
}

/// Longest message, label or hint kept whole. They quote the user's text
/// (an unknown action's name, a bad argument), which can be any length in a
/// corrupted file; the location and snippet say where the rest is.
const MAX_TEXT: usize = 300;

/// `text`, cut at [`MAX_TEXT`] bytes (on a char boundary) with an ellipsis.
fn bounded(mut text: String) -> String {
    if text.len() > MAX_TEXT {
        text.truncate(floor_char_boundary(&text, MAX_TEXT));
        text.push('…');
    }
    text
}

/// The largest char boundary of `text` at or before `i`.
fn floor_char_boundary(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The smallest char boundary of `text` at or after `i`.
fn ceil_char_boundary(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::FileId;

    #[test]
    fn renders_location_snippet_caret_and_hint() {
        let mut sm = SourceMap::new();
        let f = sm.add(
            "rules/a.conf",
            "SecRule ARGS \"@rxx foo\" \"id:1\"\n".into(),
        );
        let d = Diagnostic::error(
            Code::UnknownOperator,
            Span::new(f, 15, 18),
            "unknown operator `@rxx`",
        )
        .with_label("not an operator")
        .with_hint("did you mean `@rx`?");
        let text = d.render(&sm);
        assert!(text.contains("rules/a.conf:1:16"), "{text}");
        assert!(text.contains("^^^"), "{text}");
        assert!(text.contains("hint: did you mean `@rx`?"), "{text}");
        assert_eq!(FileId(0), f);
    }

    #[test]
    fn closest_finds_typos_only() {
        let known = ["urlDecodeUni", "lowercase", "removeNulls"];
        assert_eq!(closest("urldecodeuni", known), Some("urlDecodeUni"));
        assert_eq!(closest("lowercse", known), Some("lowercase"));
        assert_eq!(closest("zzz", known), None);
    }

    #[test]
    fn every_code_has_a_unique_name() {
        let mut names: Vec<_> = Code::ALL.iter().map(|c| c.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Code::ALL.len());
    }
}

#[cfg(test)]
mod docs_tests {
    use super::Code;

    /// docs/lint.md documents every diagnostic code.
    #[test]
    fn every_code_is_documented() {
        let doc = include_str!("../../docs/lint.md");
        for c in Code::ALL {
            assert!(
                doc.contains(&format!("| `{}` |", c.as_str())),
                "docs/lint.md lacks `{}`",
                c.as_str()
            );
        }
    }
}
