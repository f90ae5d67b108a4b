//! The pest-based SecLang parser: text → [`Directive`]s → [`Item`]s.
//!
//! Parsing never fails as a whole: the grammar (`seclang.pest`) is total, and
//! every malformed piece becomes a [`Diagnostic`] while the rest of the file is
//! still parsed, so one run reports every problem.

use crate::ast::{
    ActionAst, Directive, Item, OperatorAst, RuleAst, RuleKind, RuleRef, SelectorAst, SelectorKind,
    TargetAst, Text,
};
use crate::diag::{closest, Code, Diagnostic, Diagnostics};
use crate::names;
use crate::source::{FileId, SourceMap, Span};
use pest::iterators::Pair;
use pest::Parser as _;

mod grammar {
    #[derive(pest_derive::Parser)]
    #[grammar = "parse/seclang.pest"]
    pub struct SecLang;
}
use grammar::{Rule as R, SecLang};

/// Layer 1: splits a file into directives.
pub fn directives(sources: &SourceMap, file: FileId, diags: &mut Diagnostics) -> Vec<Directive> {
    let text = &sources.file(file).text;
    let pairs = match SecLang::parse(R::file, text) {
        Ok(p) => p,
        Err(e) => {
            // The grammar is total; this is a bug, but still no panic.
            let pos = match e.location {
                pest::error::InputLocation::Pos(p) => p,
                pest::error::InputLocation::Span((s, _)) => s,
            };
            diags.push(Diagnostic::error(
                Code::Syntax,
                Span::new(file, pos, pos + 1),
                "cannot parse this file",
            ));
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    check_trailing_continuation(text, file, diags);
    for pair in pairs.flatten() {
        match pair.as_rule() {
            R::comment => check_comment(text, file, &pair, diags),
            R::directive => {
                if let Some(d) = directive(text, file, pair, diags) {
                    out.push(d);
                }
            }
            R::error_line => {
                let s = pair.as_span();
                let line = pair.as_str().as_bytes();
                let name_len = line
                    .iter()
                    .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
                    .count();
                if line.first().is_some_and(u8::is_ascii_alphabetic)
                    && matches!(line.get(name_len), Some(b'"' | b'\''))
                {
                    // `SecRule"ARGS" ...`: a name, then a quote with no blank between.
                    let at = s.start() + name_len;
                    diags.push(
                        Diagnostic::error(
                            Code::Syntax,
                            Span::new(file, at, at + 1),
                            "missing space after the directive name",
                        )
                        .with_label("a blank must separate the name from this argument")
                        .with_hint("write e.g. `SecRule ARGS \"@rx foo\" \"id:1\"`"),
                    );
                    continue;
                }
                let first = pair.as_str().chars().next().unwrap_or(' ');
                let span = Span::new(file, s.start(), s.start() + first.len_utf8());
                diags.push(
                    Diagnostic::error(Code::Syntax, span, "expected a directive name")
                        .with_label("a directive starts with its name, e.g. `SecRule`")
                        .with_hint("start the line with a directive, or with `#` for a comment"),
                );
            }
            _ => {}
        }
    }
    out
}

/// A `\` right before the final newline of a file joins nothing: say so.
fn check_trailing_continuation(text: &str, file: FileId, diags: &mut Diagnostics) {
    let trimmed = text.trim_end();
    if !trimmed.ends_with('\\') || !text[trimmed.len()..].starts_with(['\n', '\r']) {
        return;
    }
    let last_line = trimmed.rsplit(['\n', '\r']).next().unwrap_or("");
    if last_line.trim_start().starts_with('#') {
        return;
    }
    let at = trimmed.len() - 1;
    diags.push(
        Diagnostic::warning(
            Code::Syntax,
            Span::new(file, at, at + 1),
            "line continuation at the end of the file",
        )
        .with_label("continues nothing")
        .with_hint("remove the backslash"),
    );
}

/// v3 ends a comment at the end of its line; Apache (ModSecurity v2) would join
/// the next line into the comment. Say so when the two readings differ.
fn check_comment(text: &str, file: FileId, pair: &Pair<'_, R>, diags: &mut Diagnostics) {
    let body = pair.as_str().trim_end_matches(['\r', ' ', '\t']);
    if !body.ends_with('\\') {
        return;
    }
    let end = pair.as_span().end();
    let next_line = text[end..].split_inclusive('\n').nth(1).unwrap_or("");
    let next = next_line.trim_start();
    if !next.is_empty() && !next.starts_with('#') {
        let at = pair.as_span().start() + body.len() - 1;
        diags.push(
            Diagnostic::warning(Code::Suspicious, Span::new(file, at, at + 1), "comment ends with a line continuation")
                .with_label("this backslash does not continue the comment")
                .with_hint("ModSecurity v3 ends the comment here and reads the next line as a directive; Apache would join it into the comment: remove the backslash or comment out the next line"),
        );
    }
}

fn directive(
    text: &str,
    file: FileId,
    pair: Pair<'_, R>,
    diags: &mut Diagnostics,
) -> Option<Directive> {
    let span = pair.as_span();
    let mut inner = pair.into_inner();
    let name_pair = inner.next()?;
    let name_span = Span::new(file, name_pair.as_span().start(), name_pair.as_span().end());
    let mut args = Vec::new();
    let mut ok = true;
    let mut prev_end = name_pair.as_span().end();
    for arg in inner {
        let s = arg.as_span();
        let continued = text
            .get(prev_end..s.start())
            .is_some_and(|gap| gap.contains(['\n', '\r']));
        prev_end = s.end();
        if arg.as_rule() == R::bare && continued && s.as_str().starts_with('#') {
            diags.push(
                Diagnostic::error(Code::Syntax, Span::new(file, s.start(), s.start() + 1), "a comment cannot continue a directive")
                    .with_label("read as arguments, because the line before ends with `\\`")
                    .with_hint("remove the backslash at the end of the previous line, or move the comment above the directive"),
            );
            return None;
        }
        if arg.as_rule() == R::bare && s.as_str() == "\\" {
            let rest = &text[s.end()..];
            let line_rest = rest.split(['\n', '\r']).next().unwrap_or("");
            let at = Span::new(file, s.start(), s.end());
            if rest.trim().is_empty() {
                diags.push(
                    Diagnostic::warning(
                        Code::Syntax,
                        at,
                        "line continuation at the end of the file",
                    )
                    .with_label("continues nothing")
                    .with_hint("remove the backslash"),
                );
            } else if !line_rest.is_empty() && line_rest.trim().is_empty() {
                diags.push(
                    Diagnostic::error(Code::Syntax, at, "a backslash followed by spaces is not a line continuation")
                        .with_label("blanks after this backslash")
                        .with_hint("remove the spaces after `\\` so that the next line continues this directive"),
                );
                return None;
            }
            continue;
        }
        match arg.as_rule() {
            R::dq_string | R::sq_string => {
                let quote = if arg.as_rule() == R::dq_string {
                    b'"'
                } else {
                    b'\''
                };
                let body = arg.into_inner().next();
                let (start, raw) = body
                    .map(|b| (b.as_span().start(), b.as_str()))
                    .unwrap_or((s.start() + 1, ""));
                args.push(Text::unescape(file, start, raw, Some(quote)));
            }
            R::bare => args.push(Text::unescape(file, s.start(), s.as_str(), None)),
            R::error_unterminated => {
                let raw = s.as_str();
                let q = raw.as_bytes()[0];
                let closed = find_closing(raw.as_bytes(), q);
                // ModSecurity v3 reads a SecRule's or SecAction's action
                // list that lacks its closing `"` to the end of the line.
                let name = name_pair.as_str();
                let actions_arg = (name.eq_ignore_ascii_case("SecRule") && args.len() == 2)
                    || (name.eq_ignore_ascii_case("SecAction") && args.is_empty());
                if closed.is_none() && q == b'"' && actions_arg {
                    let body = raw[1..].trim_end_matches([' ', '\t', '\r']);
                    args.push(Text::unescape(file, s.start() + 1, body, Some(q)));
                    diags.push(
                        Diagnostic::warning(
                            Code::CompatUnterminatedQuote,
                            Span::new(file, s.start(), s.start() + 1),
                            "the action list's closing quote is missing",
                        )
                        .with_label("ModSecurity v3 reads the actions to the end of the line")
                        .with_hint("add the closing `\"` at the end of the line"),
                    );
                    continue;
                }
                ok = false;
                let d = match closed {
                    Some(close) => Diagnostic::error(
                        Code::Syntax,
                        {
                            // The glued text, up to the next blank.
                            let rest = &raw[close + 1..];
                            let len = rest.find([' ', '\t', '\r', '\n']).unwrap_or(rest.len()).max(1);
                            Span::new(file, s.start() + close + 1, s.start() + close + 1 + len)
                        },
                        "unexpected text right after a closing quote",
                    )
                    .with_label("separate arguments with a space")
                    .with_hint("a quoted argument ends at its closing quote; escape a quote inside it as `\\\"`"),
                    None => Diagnostic::error(Code::Syntax, Span::new(file, s.start(), s.start() + 1), "unterminated quoted string")
                        .with_label("this quote is never closed")
                        .with_hint("close the string on the same line, or end the line with `\\` to continue it on the next"),
                };
                diags.push(d);
            }
            _ => {}
        }
    }
    if !ok {
        return None;
    }
    Some(Directive {
        name: name_pair.as_str().to_string(),
        name_span,
        args,
        span: Span::new(file, span.start(), span.end()),
    })
}

/// Position of the quote closing `raw[0]`, honouring backslash escapes.
fn find_closing(raw: &[u8], q: u8) -> Option<usize> {
    let mut i = 1;
    while i < raw.len() {
        match raw[i] {
            b'\\' => i += 2,
            c if c == q => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// Parses a target list (`ARGS|!ARGS:foo|&TX:x`).
pub fn variables(text: &Text, diags: &mut Diagnostics) -> Vec<TargetAst> {
    let src = text.as_str();
    let pairs = match SecLang::parse(R::variables, src) {
        Ok(p) => p,
        Err(_) => {
            diags.push(Diagnostic::error(
                Code::Syntax,
                text.span(),
                "cannot parse this target list",
            ));
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for v in pairs.flatten().filter(|p| p.as_rule() == R::variable) {
        let vs = v.as_span();
        let span = text.span_of(vs.start()..vs.end());
        let mut exclude = false;
        let mut count = false;
        let mut name = None;
        let mut selector = None;
        for p in v.into_inner() {
            let ps = p.as_span();
            match p.as_rule() {
                R::var_exclude => exclude = true,
                R::var_count => count = true,
                R::var_name => {
                    name = Some((p.as_str().to_string(), text.span_of(ps.start()..ps.end())))
                }
                R::regex_selector => {
                    let body = p.into_inner().next();
                    let (s, e) = body
                        .map(|b| (b.as_span().start(), b.as_span().end()))
                        .unwrap_or((ps.start() + 1, ps.start() + 1));
                    selector = Some(SelectorAst {
                        kind: SelectorKind::Regex,
                        text: text.slice(s..e),
                        span: text.span_of(ps.start()..ps.end()),
                    });
                }
                R::key_selector => {
                    let t = text.slice(ps.start()..ps.end()).trimmed();
                    let tspan = if t.value.is_empty() {
                        text.span_of(ps.start().saturating_sub(1)..ps.start())
                    } else {
                        t.span()
                    };
                    selector = Some(SelectorAst {
                        kind: SelectorKind::Key,
                        text: t,
                        span: tspan,
                    });
                }
                R::error_variable => {
                    diags.push(
                        Diagnostic::error(Code::Syntax, span, format!("`{}` is not a variable", p.as_str().trim()))
                            .with_label("expected `NAME`, `NAME:key`, `NAME:/regex/`, `!NAME:key` or `&NAME`")
                            .with_hint("separate variables with `|`; a variable name has only letters, digits and `_`"),
                    );
                }
                _ => {}
            }
        }
        if let Some((name, name_span)) = name {
            out.push(TargetAst {
                span,
                exclude,
                count,
                name,
                name_span,
                selector,
            });
        }
    }
    out
}

/// Parses an operator argument (`!@rx foo`, `@detectSQLi`, `foo`).
pub fn operator(text: &Text, diags: &mut Diagnostics) -> Option<OperatorAst> {
    let src = text.as_str();
    let pairs = match SecLang::parse(R::operator, src) {
        Ok(p) => p,
        Err(_) => {
            diags.push(Diagnostic::error(
                Code::Syntax,
                text.span(),
                "cannot parse this operator",
            ));
            return None;
        }
    };
    let mut negated = false;
    let mut name = None;
    let mut argument = None;
    let mut implicit = false;
    for p in pairs.flatten() {
        let ps = p.as_span();
        match p.as_rule() {
            R::op_negation => negated = true,
            // The name's span includes its `@`, so the caret underlines `@rxx`.
            R::op_name => {
                name = Some((
                    p.as_str().to_string(),
                    text.span_of(ps.start().saturating_sub(1)..ps.end()),
                ))
            }
            R::op_argument => argument = Some(text.slice(ps.start()..ps.end())),
            R::op_implicit => {
                implicit = true;
                argument = Some(text.slice(ps.start()..ps.end()));
            }
            _ => {}
        }
    }
    let (name, name_span) = match name {
        Some(n) => n,
        // `"@"`, `"!@ foo"`: the grammar reads these as implicit regexes.
        None if implicit && !src[usize::from(negated)..].starts_with('@') => {
            ("rx".to_string(), text.span_of(0..usize::from(negated)))
        }
        None => {
            let at = usize::from(negated);
            diags.push(
                Diagnostic::error(Code::Syntax, text.span_of(at..at + 1), "missing operator name after `@`")
                    .with_label("expected an operator name right after `@`")
                    .with_hint("write e.g. `@rx pattern`; to match a literal `@` at the start, write `@rx @...`"),
            );
            return None;
        }
    };
    Some(OperatorAst {
        span: text.span(),
        negated,
        name,
        name_span,
        implicit,
        argument,
    })
}

/// Parses an action list (`id:1,phase:2,msg:'a, b'`).
pub fn actions(text: &Text, diags: &mut Diagnostics) -> Vec<ActionAst> {
    let src = text.as_str();
    let pairs = match SecLang::parse(R::actions, src) {
        Ok(p) => p,
        Err(e) => {
            let pos = match e.location {
                pest::error::InputLocation::Pos(p) => p,
                pest::error::InputLocation::Span((s, _)) => s,
            };
            diags.push(
                Diagnostic::error(Code::Syntax, text.span_of(pos..pos + 1), "cannot parse this action list")
                    .with_hint("actions are `name` or `name:value`, separated by commas; quote values with `'`"),
            );
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for a in pairs.flatten().filter(|p| p.as_rule() == R::action) {
        let as_ = a.as_span();
        let span = text.span_of(as_.start()..as_.end());
        let mut name = None;
        let mut value = None;
        for p in a.into_inner() {
            let ps = p.as_span();
            match p.as_rule() {
                R::action_name => {
                    name = Some((p.as_str().to_string(), text.span_of(ps.start()..ps.end())))
                }
                R::quoted_value => {
                    let body = p.into_inner().next();
                    let (s, e) = body
                        .map(|b| (b.as_span().start(), b.as_span().end()))
                        .unwrap_or((ps.start() + 1, ps.start() + 1));
                    value = Some(text.slice(s..e).unescape_again(b'\''));
                }
                R::bare_value => value = Some(text.slice(ps.start()..ps.end()).trimmed()),
                R::error_quote => {
                    let raw = p.as_str().as_bytes();
                    let d = match find_closing(raw, b'\'') {
                        Some(c) => Diagnostic::error(
                            Code::Syntax,
                            text.span_of(ps.start() + c + 1..ps.end()),
                            "unexpected text after a quoted action value",
                        )
                        .with_label("expected `,` or the end of the actions")
                        .with_hint("escape a quote inside a value as `\\'`"),
                        None => Diagnostic::error(
                            Code::Syntax,
                            text.span_of(ps.start()..ps.start() + 1),
                            "unterminated quoted action value",
                        )
                        .with_label("this quote is never closed")
                        .with_hint("close the value with `'`; escape a quote inside it as `\\'`"),
                    };
                    diags.push(d);
                    name = None;
                }
                R::error_action => {
                    diags.push(
                        Diagnostic::error(Code::Syntax, span, format!("`{}` is not an action", p.as_str().trim()))
                            .with_label("expected `name` or `name:value`")
                            .with_hint("action names have only letters, digits, `_` and `-`; quote values that contain commas with `'`"),
                    );
                }
                _ => {}
            }
        }
        if let Some((name, name_span)) = name {
            out.push(ActionAst {
                span,
                name,
                name_span,
                value,
            });
        }
    }
    out
}

/// Turns a directive into a typed item, checking its name and argument count.
pub fn item(d: &Directive, diags: &mut Diagnostics) -> Option<Item> {
    use names::Directive as D;
    let Some(kind) = D::lookup(&d.name) else {
        let mut diag = Diagnostic::error(
            Code::UnknownDirective,
            d.name_span,
            format!("unknown directive `{}`", d.name),
        )
        .with_label("not a ModSecurity directive");
        if let Some(c) = closest(&d.name, D::ALL.iter().map(|d| d.name())) {
            diag = diag.with_hint(format!("did you mean `{c}`?"));
        }
        diags.push(diag);
        return None;
    };
    let arity = kind.args();
    let n = d.args.len();
    if n < arity.min || arity.max.is_some_and(|m| n > m) {
        let expected = match arity.max {
            Some(m) if m == arity.min => format!("{m}"),
            Some(m) => format!("{} to {m}", arity.min),
            None => format!("at least {}", arity.min),
        };
        let span = if n > arity.max.unwrap_or(usize::MAX) {
            d.args[arity.max.unwrap_or(0)].span()
        } else {
            d.span
        };
        diags.push(
            Diagnostic::error(
                Code::BadArgument,
                span,
                format!(
                    "`{}` takes {expected} argument{}, found {n}",
                    kind.name(),
                    if expected == "1" { "" } else { "s" }
                ),
            )
            .with_hint(usage(kind)),
        );
        return None;
    }
    let item = match kind {
        D::SecRule => {
            let targets = variables(&d.args[0], diags);
            let operator = operator(&d.args[1], diags);
            let (actions, actions_span) = match d.args.get(2) {
                Some(a) => (actions(a, diags), a.span()),
                None => (Vec::new(), d.span),
            };
            if targets.is_empty() || operator.is_none() {
                return None;
            }
            Item::Rule(RuleAst {
                kind: RuleKind::SecRule,
                span: d.span,
                targets,
                operator,
                actions,
                actions_span,
            })
        }
        D::SecAction => {
            let acts = actions(&d.args[0], diags);
            Item::Rule(RuleAst {
                kind: RuleKind::SecAction,
                span: d.span,
                targets: Vec::new(),
                operator: None,
                actions: acts,
                actions_span: d.args[0].span(),
            })
        }
        D::SecDefaultAction => Item::DefaultAction {
            actions: actions(&d.args[0], diags),
            span: d.span,
        },
        D::SecMarker => Item::Marker {
            name: d.args[0].trimmed(),
            span: d.span,
        },
        D::SecRuleUpdateTargetById | D::SecRuleUpdateTargetByTag | D::SecRuleUpdateTargetByMsg => {
            let by = rule_ref(kind, &d.args[..1], diags)?;
            let targets = variables(&d.args[1], diags);
            let replaced = d.args.get(2).map(|t| variables(t, diags));
            Item::UpdateTarget {
                by,
                targets,
                replaced,
                span: d.span,
            }
        }
        D::SecRuleUpdateActionById => {
            let by = rule_ref(kind, &d.args[..1], diags)?;
            Item::UpdateAction {
                by,
                actions: actions(&d.args[1], diags),
                span: d.span,
            }
        }
        D::SecRuleRemoveById | D::SecRuleRemoveByTag | D::SecRuleRemoveByMsg => Item::Remove {
            by: rule_ref(kind, &d.args, diags)?,
            span: d.span,
        },
        _ => Item::Setting {
            directive: kind,
            args: d.args.clone(),
            span: d.span,
        },
    };
    Some(item)
}

fn usage(kind: names::Directive) -> String {
    use names::Directive as D;
    match kind {
        D::SecRule => "usage: SecRule VARIABLES \"OPERATOR\" \"ACTIONS\"".into(),
        D::SecAction => "usage: SecAction \"ACTIONS\"".into(),
        D::SecDefaultAction => "usage: SecDefaultAction \"phase:2,log,pass\"".into(),
        D::SecMarker => "usage: SecMarker NAME".into(),
        D::SecRuleUpdateTargetById => {
            "usage: SecRuleUpdateTargetById ID \"TARGETS\" [\"REPLACED\"]".into()
        }
        D::SecRuleUpdateActionById => "usage: SecRuleUpdateActionById ID \"ACTIONS\"".into(),
        _ => format!("see the ModSecurity reference manual for `{}`", kind.name()),
    }
}

/// Parses the rule selection of SecRuleRemove*/SecRuleUpdate* directives.
fn rule_ref(kind: names::Directive, args: &[Text], diags: &mut Diagnostics) -> Option<RuleRef> {
    use names::Directive as D;
    match kind {
        D::SecRuleRemoveByTag | D::SecRuleUpdateTargetByTag => Some(RuleRef::Tag(args[0].clone())),
        D::SecRuleRemoveByMsg | D::SecRuleUpdateTargetByMsg => Some(RuleRef::Msg(args[0].clone())),
        _ => {
            let mut ranges = Vec::new();
            let mut ok = true;
            for a in args {
                // SecRuleUpdateActionById accepts `ID:offset` for a chain link.
                let value = if kind == D::SecRuleUpdateActionById {
                    a.value.split(':').next().unwrap_or("")
                } else {
                    &a.value
                };
                ok &= parse_id_list(value, &mut ranges).map_err(|e| {
                    diags.push(
                        Diagnostic::error(Code::BadArgument, a.span(), format!("invalid rule id list: {e}"))
                            .with_hint("write ids and ranges separated by spaces, e.g. `920100 920200-920299`"),
                    )
                })
                .is_ok();
            }
            let span = args.first().map(|a| a.span()).unwrap_or_default();
            (ok && !ranges.is_empty()).then_some(RuleRef::Ids(ranges, span))
        }
    }
}

/// Why a rule id list does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IdListError {
    /// A token that is neither an id nor `FROM-TO`.
    NotAnId(String),
    /// A range whose start is after its end.
    EmptyRange(String),
}

impl std::fmt::Display for IdListError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IdListError::NotAnId(t) => write!(f, "`{t}` is not a rule id or range"),
            IdListError::EmptyRange(t) => write!(f, "the range `{t}` is empty"),
        }
    }
}

impl std::error::Error for IdListError {}

/// Parses `1 2,3 10-20` into inclusive ranges.
pub fn parse_id_list(s: &str, out: &mut Vec<(u64, u64)>) -> Result<(), IdListError> {
    for tok in s
        .split(|c: char| c == ',' || c.is_ascii_whitespace())
        .filter(|t| !t.is_empty())
    {
        let (a, b) = match tok.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (tok, tok),
        };
        let not_an_id = |_| IdListError::NotAnId(tok.to_string());
        let a: u64 = a.parse().map_err(not_an_id)?;
        let b: u64 = b.parse().map_err(not_an_id)?;
        if a > b {
            return Err(IdListError::EmptyRange(tok.to_string()));
        }
        out.push((a, b));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
