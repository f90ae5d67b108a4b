//! The syntax tree of a SecLang configuration, with a source span on every node.
//!
//! The AST is what the text says, before any check: names are kept as written
//! (and looked up in [`crate::names`] only where that lookup is unambiguous),
//! values are unescaped [`Text`]s that remember where each byte came from, so a
//! regex error found three layers down (file → quoted argument → operator
//! argument) still points at the right column.

use crate::source::{FileId, Span};
use std::ops::Range;

/// An unescaped string together with the source position of each of its bytes.
///
/// Quoting, `\"`/`\'` escapes and `\`-newline continuations make the value
/// differ from the file text; `offsets[i]` is the file offset of value byte `i`
/// (and `offsets[len]` the offset just past the last one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Text {
    /// The unescaped value.
    pub value: String,
    file: FileId,
    offsets: Vec<u32>,
}

impl Text {
    /// A text that is a verbatim copy of the file bytes starting at `start`.
    pub fn verbatim(file: FileId, start: usize, value: &str) -> Text {
        let start = start as u32;
        let offsets = (0..=value.len() as u32).map(|i| start + i).collect();
        Text {
            value: value.to_string(),
            file,
            offsets,
        }
    }

    /// Builds a text from `raw` (file bytes starting at `start`), dropping
    /// `\`-newline continuations and turning `\<quote>` into `<quote>`.
    /// Every other backslash is kept: regexes need their `\\`.
    pub fn unescape(file: FileId, start: usize, raw: &str, quote: Option<u8>) -> Text {
        let bytes = raw.as_bytes();
        let mut value = Vec::with_capacity(bytes.len());
        let mut offsets = Vec::with_capacity(bytes.len() + 1);
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'\\' {
                if let Some(skip) = newline_len(&bytes[i + 1..]) {
                    i += 1 + skip;
                    continue;
                }
                if quote.is_some() && bytes.get(i + 1).copied() == quote {
                    value.push(bytes[i + 1]);
                    offsets.push((start + i + 1) as u32);
                    i += 2;
                    continue;
                }
            }
            value.push(bytes[i]);
            offsets.push((start + i) as u32);
            i += 1;
        }
        offsets.push((start + bytes.len()) as u32);
        // Only ASCII bytes were removed, so the value is still UTF-8.
        let value = String::from_utf8(value)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        Text {
            value,
            file,
            offsets,
        }
    }

    /// The sub-text for `range` of the value, keeping the source positions.
    pub fn slice(&self, range: Range<usize>) -> Text {
        let end = range.end.min(self.value.len());
        let start = range.start.min(end);
        Text {
            value: self.value.get(start..end).unwrap_or("").to_string(),
            file: self.file,
            offsets: self.offsets[start..=end].to_vec(),
        }
    }

    /// Applies [`Text::unescape`] to this text's value, composing positions.
    pub fn unescape_again(&self, quote: u8) -> Text {
        let inner = Text::unescape(self.file, 0, &self.value, Some(quote));
        let offsets = inner
            .offsets
            .iter()
            .map(|&o| self.offsets[o as usize])
            .collect();
        Text {
            value: inner.value,
            file: self.file,
            offsets,
        }
    }

    /// The source span of a byte range of the value.
    pub fn span_of(&self, range: Range<usize>) -> Span {
        let len = self.value.len();
        let s = range.start.min(len);
        let e = range.end.clamp(s, len);
        let start = self.offsets[s];
        // The end of a non-empty range is just past its last byte's source position.
        let end = if e > s {
            self.offsets[e - 1] + 1
        } else {
            start
        };
        Span {
            file: self.file,
            start,
            end: end.max(start),
        }
    }

    /// The source span of the whole value.
    pub fn span(&self) -> Span {
        self.span_of(0..self.value.len())
    }

    /// The unescaped value.
    pub fn as_str(&self) -> &str {
        &self.value
    }

    /// A copy with leading and trailing ASCII whitespace removed.
    pub fn trimmed(&self) -> Text {
        let v = self.value.as_str();
        let start = v.len() - v.trim_start().len();
        let end = v.trim_end().len().max(start);
        self.slice(start..end)
    }
}

fn newline_len(b: &[u8]) -> Option<usize> {
    match b {
        [b'\r', b'\n', ..] => Some(2),
        [b'\n', ..] | [b'\r', ..] => Some(1),
        _ => None,
    }
}

/// A directive as written: its name and its arguments.
#[derive(Clone, Debug)]
pub struct Directive {
    /// The directive's name as written (case is not significant).
    pub name: String,
    /// Where the name is written.
    pub name_span: Span,
    /// The arguments, unquoted and unescaped.
    pub args: Vec<Text>,
    /// The whole directive, name to last argument.
    pub span: Span,
}

/// One target of a rule: `!&NAME:selector`.
#[derive(Clone, Debug)]
pub struct TargetAst {
    /// The whole target, `!` and `&` included.
    pub span: Span,
    /// `!`: remove matching values from the rule's targets.
    pub exclude: bool,
    /// `&`: the number of values, not the values.
    pub count: bool,
    /// The variable's name as written.
    pub name: String,
    /// Where the name is written.
    pub name_span: Span,
    /// `:key` or `:/regex/`, if any.
    pub selector: Option<SelectorAst>,
}

/// How a target selects members of a collection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SelectorKind {
    /// `:name` (or an XPath expression for `XML`).
    Key,
    /// `:/regex/`; the text is the regex without the slashes.
    Regex,
}

/// The `:...` part of a target.
#[derive(Clone, Debug)]
pub struct SelectorAst {
    /// A key (or XPath) or a regex.
    pub kind: SelectorKind,
    /// The key, XPath or regex text.
    pub text: Text,
    /// Including the slashes of a regex selector.
    pub span: Span,
}

/// The operator argument of a SecRule: `!@name argument`.
#[derive(Clone, Debug)]
pub struct OperatorAst {
    /// The whole operator argument.
    pub span: Span,
    /// `!@op`: the result is inverted.
    pub negated: bool,
    /// Without the `@`; `rx` when implicit.
    pub name: String,
    /// Where the name is written (the `@` excluded).
    pub name_span: Span,
    /// No `@`: the whole string is a regex.
    pub implicit: bool,
    /// The operator's argument, if any.
    pub argument: Option<Text>,
}

/// One action: `name` or `name:value` (the value unquoted and unescaped).
#[derive(Clone, Debug)]
pub struct ActionAst {
    /// The whole action, name and value.
    pub span: Span,
    /// The action's name as written (case is not significant).
    pub name: String,
    /// Where the name is written.
    pub name_span: Span,
    /// The value after `:`, unquoted, if any.
    pub value: Option<Text>,
}

/// Which directive wrote a rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleKind {
    /// `SecRule TARGETS OPERATOR [ACTIONS]`.
    SecRule,
    /// `SecAction ACTIONS`: no targets, always matches.
    SecAction,
}

/// A `SecRule` or `SecAction`.
#[derive(Clone, Debug)]
pub struct RuleAst {
    /// `SecRule` or `SecAction`.
    pub kind: RuleKind,
    /// The whole directive.
    pub span: Span,
    /// The targets, in the order written (none for `SecAction`).
    pub targets: Vec<TargetAst>,
    /// The operator (none for `SecAction`).
    pub operator: Option<OperatorAst>,
    /// The actions, in the order written.
    pub actions: Vec<ActionAst>,
    /// The span of the actions argument (or of the directive when absent).
    pub actions_span: Span,
}

impl RuleAst {
    /// The first action called `name` (case-insensitive), if any.
    pub fn action(&self, name: &str) -> Option<&ActionAst> {
        self.actions
            .iter()
            .find(|a| a.name.eq_ignore_ascii_case(name))
    }

    /// Whether an action called `name` is present.
    pub fn has_action(&self, name: &str) -> bool {
        self.action(name).is_some()
    }
}

/// A configuration item after directive dispatch.
#[derive(Clone, Debug)]
pub enum Item {
    /// A `SecRule` or `SecAction`.
    Rule(RuleAst),
    /// `SecDefaultAction "phase:2,log,pass"`.
    DefaultAction {
        /// The default actions.
        actions: Vec<ActionAst>,
        /// The whole directive.
        span: Span,
    },
    /// `SecMarker NAME`.
    Marker {
        /// The marker's name.
        name: Text,
        /// The whole directive.
        span: Span,
    },
    /// `SecRuleUpdateTargetById/ByTag/ByMsg SELECTOR TARGETS [REPLACED]`.
    UpdateTarget {
        /// The rules updated.
        by: RuleRef,
        /// The targets added (or, with `replaced`, the new ones).
        targets: Vec<TargetAst>,
        /// The targets replaced, when the directive has a third argument.
        replaced: Option<Vec<TargetAst>>,
        /// The whole directive.
        span: Span,
    },
    /// `SecRuleUpdateActionById ID[:chain-offset] ACTIONS`.
    UpdateAction {
        /// The rule (and chain link) updated.
        by: RuleRef,
        /// The actions replacing or added to the rule's.
        actions: Vec<ActionAst>,
        /// The whole directive.
        span: Span,
    },
    /// `SecRuleRemoveById/ByTag/ByMsg`.
    Remove {
        /// The rules removed.
        by: RuleRef,
        /// The whole directive.
        span: Span,
    },
    /// Every other known directive, with its raw arguments.
    Setting {
        /// Which directive.
        directive: crate::names::Directive,
        /// Its arguments, unquoted and unescaped.
        args: Vec<Text>,
        /// The whole directive.
        span: Span,
    },
}

impl Item {
    /// The span of the whole item.
    pub fn span(&self) -> Span {
        match self {
            Item::Rule(r) => r.span,
            Item::DefaultAction { span, .. }
            | Item::Marker { span, .. }
            | Item::UpdateTarget { span, .. }
            | Item::UpdateAction { span, .. }
            | Item::Remove { span, .. }
            | Item::Setting { span, .. } => *span,
        }
    }
}

/// How `SecRuleRemove*`/`SecRuleUpdate*` and `ctl:ruleRemove*` name rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RuleRef {
    /// Ids and inclusive id ranges (`1 2 10-20`).
    Ids(Vec<(u64, u64)>, Span),
    /// A tag, matched as a regex by ModSecurity v3 for SecRuleRemoveByTag.
    Tag(Text),
    /// A msg, matched as a regex.
    Msg(Text),
}

impl RuleRef {
    /// Whether `id` is one of the ids or in one of the ranges (never for tags and messages).
    pub fn matches_id(&self, id: u64) -> bool {
        match self {
            RuleRef::Ids(ranges, _) => ranges.iter().any(|&(a, b)| a <= id && id <= b),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescape_maps_positions_through_escapes_and_continuations() {
        // file text:  "a\"b\<nl>  c"   (body starts at offset 1)
        let raw = "a\\\"b\\\n  c";
        let t = Text::unescape(FileId(0), 1, raw, Some(b'"'));
        assert_eq!(t.value, "a\"b  c");
        assert_eq!(t.span_of(1..2), Span::new(FileId(0), 3, 4)); // the escaped quote
        assert_eq!(t.span_of(5..6), Span::new(FileId(0), 9, 10)); // c, after the continuation
        let s = t.slice(2..6);
        assert_eq!(s.value, "b  c");
        assert_eq!(s.span_of(0..1), Span::new(FileId(0), 4, 5));
    }

    #[test]
    fn unescape_keeps_other_backslashes() {
        let t = Text::unescape(FileId(0), 0, r"\\d\x5c\'", Some(b'"'));
        assert_eq!(t.value, r"\\d\x5c\'");
        let q = t.unescape_again(b'\'');
        assert_eq!(q.value, r"\\d\x5c'");
        assert_eq!(q.span_of(7..8), Span::new(FileId(0), 8, 9));
    }

    #[test]
    fn trimmed_keeps_positions() {
        let t = Text::verbatim(FileId(0), 10, "  ab ");
        let tt = t.trimmed();
        assert_eq!(tt.value, "ab");
        assert_eq!(tt.span(), Span::new(FileId(0), 12, 14));
    }
}
