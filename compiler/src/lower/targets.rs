//! Checking and lowering of targets (variables, selectors, exclusions, counts).

use super::Lowerer;
use crate::ast::{RuleAst, SelectorAst, SelectorKind, TargetAst, Text};
use crate::diag::{closest, Code, Diagnostic};
use crate::ir::*;
use crate::names::{Support, Variable};

impl Lowerer<'_> {
    /// The value slots and exclusions of one link. `extra` are targets added
    /// by SecRuleUpdateTargetBy*, each with the targets it replaces (if any).
    pub(super) fn targets(
        &mut self,
        link: &RuleAst,
        extra: &[(&TargetAst, Option<&[TargetAst]>)],
        node: NodeId,
        phase: u8,
    ) -> (Vec<SlotId>, Vec<Exclusion>) {
        let mut slots = Vec::new();
        let mut exclusions = Vec::new();
        let mut resolved: Vec<Target> = Vec::new();
        for t in &link.targets {
            match self.target(t, phase) {
                Some(Resolved::Include(target)) => resolved.push(target),
                Some(Resolved::Exclude(e)) => exclusions.push(e),
                None => {}
            }
        }
        for (t, replaced) in extra {
            match (self.target(t, 0), replaced) {
                (Some(Resolved::Include(target)), Some(old)) => {
                    // Replace the named target(s) in place; append when absent.
                    let olds: Vec<Target> = old
                        .iter()
                        .filter_map(|o| match self.target(o, 0) {
                            Some(Resolved::Include(x)) => Some(x),
                            _ => None,
                        })
                        .collect();
                    match resolved.iter().position(|r| olds.contains(r)) {
                        Some(i) => resolved[i] = target,
                        None => resolved.push(target),
                    }
                }
                (Some(Resolved::Include(target)), None) => resolved.push(target),
                (Some(Resolved::Exclude(e)), _) => exclusions.push(e),
                (None, _) => {}
            }
        }
        for target in resolved {
            let tid = self.intern_target(target);
            slots.push(self.intern_slot(ValueSlot { target: tid, node }));
        }
        (slots, exclusions)
    }

    fn intern_target(&mut self, t: Target) -> TargetId {
        if let Some(&id) = self.target_index.get(&t) {
            return id;
        }
        let id = TargetId(self.p.targets.len() as u32);
        self.p.targets.push(t.clone());
        self.target_index.insert(t, id);
        id
    }

    fn intern_slot(&mut self, s: ValueSlot) -> SlotId {
        if let Some(&id) = self.slot_index.get(&s) {
            return id;
        }
        let id = SlotId(self.p.slots.len() as u32);
        self.p.slots.push(s);
        self.slot_index.insert(s, id);
        id
    }

    /// Resolves one target; `phase` 0 skips the phase-availability check.
    fn target(&mut self, t: &TargetAst, phase: u8) -> Option<Resolved> {
        let Some(variable) = Variable::lookup(&t.name) else {
            let mut d = Diagnostic::error(
                Code::UnknownVariable,
                t.name_span,
                format!("unknown variable `{}`", t.name),
            )
            .with_label("not a ModSecurity variable");
            if let Some(c) = closest(&t.name, Variable::ALL.iter().map(|v| v.name())) {
                d = d.with_hint(format!("did you mean `{c}`?"));
            }
            self.error(d);
            return None;
        };
        if variable.supported() == Support::Unsupported && !t.exclude {
            self.error(
                Diagnostic::warning(
                    Code::Suspicious,
                    t.name_span,
                    format!("`{}` is not supported by this engine", variable.name()),
                )
                .with_label("always unset here")
                .with_hint("nothing sets it in a self-contained engine; see docs/architecture.md"),
            );
        }
        if phase > 0 && phase < variable.earliest_phase() && !t.exclude {
            self.error(
                Diagnostic::warning(
                    Code::BadTarget,
                    t.name_span,
                    format!("`{}` has no value yet in phase {phase}", variable.name()),
                )
                .with_label(format!(
                    "available from phase {}",
                    variable.earliest_phase()
                ))
                .with_hint(format!(
                    "move the rule to phase {} or later",
                    variable.earliest_phase()
                )),
            );
        }
        let selector = match &t.selector {
            None => Selector::All,
            Some(sel) => {
                if !variable.is_collection() {
                    self.error(
                        Diagnostic::error(
                            Code::BadTarget,
                            sel.span,
                            format!(
                                "`{}` is not a collection and takes no selector",
                                variable.name()
                            ),
                        )
                        .with_hint(format!("write just `{}`", variable.name())),
                    );
                    return None;
                }
                self.selector(variable, sel)?
            }
        };
        if t.exclude {
            if t.count {
                self.error(
                    Diagnostic::error(
                        Code::BadTarget,
                        t.span,
                        "an exclusion cannot also be a count (`!&`)",
                    )
                    .with_hint("exclude with `!VAR:key`; count with `&VAR`"),
                );
                return None;
            }
            if selector == Selector::All {
                // ModSecurity v3 loads this, and the collection's values
                // are then all excluded from the rule.
                self.error(
                    Diagnostic::warning(
                        Code::CompatExcludeCollection,
                        t.span,
                        format!("`!{}` excludes every value", variable.name()),
                    )
                    .with_label(
                        "the rule reads nothing from this collection (as in ModSecurity v3)",
                    )
                    .with_hint(format!(
                        "exclude one key with `!{}:name` or `!{}:/regex/`, or remove the target",
                        variable.name(),
                        variable.name()
                    )),
                );
            }
            return Some(Resolved::Exclude(Exclusion { variable, selector }));
        }
        Some(Resolved::Include(Target {
            variable,
            selector,
            count: t.count,
        }))
    }

    fn selector(&mut self, variable: Variable, sel: &SelectorAst) -> Option<Selector> {
        if variable == Variable::Xml {
            return Some(Selector::XPath(sel.text.value.clone()));
        }
        match sel.kind {
            SelectorKind::Key => {
                if sel.text.value.is_empty() {
                    self.error(
                        Diagnostic::error(Code::BadTarget, sel.span, "empty selector after `:`")
                            .with_hint(format!(
                                "write `{}:name`, or drop the `:`",
                                variable.name()
                            )),
                    );
                    return None;
                }
                let key = if variable.keys_case_insensitive() {
                    sel.text.value.to_ascii_lowercase()
                } else {
                    sel.text.value.clone()
                };
                Some(Selector::Key(key))
            }
            SelectorKind::Regex => Some(Selector::Regex(self.selector_regex(&sel.text)?)),
        }
    }

    /// Compiles a key regex (case-insensitive, as ModSecurity v3 matches keys).
    fn selector_regex(&mut self, text: &Text) -> Option<SelectorRxId> {
        if let Some(&id) = self.selector_rx_index.get(&text.value) {
            return Some(id);
        }
        // Syntax errors and PCRE-only constructs, at their position in the selector.
        if let Err(e) = crate::rx::parse(&text.value) {
            self.regex_error(text, &e, false);
            return None;
        }
        let translated = match crate::rx::translate(&text.value) {
            Ok(t) => t,
            Err(e) => {
                self.regex_error(text, &e, false);
                return None;
            }
        };
        let rx = match crate::ir::SelectorRegex::new(&text.value, &translated) {
            Ok(r) => r,
            Err(e) => {
                self.error(
                    Diagnostic::error(
                        Code::InvalidRegex,
                        text.span(),
                        format!("invalid selector regex: {e}"),
                    )
                    .with_hint("fix the regex"),
                );
                return None;
            }
        };
        let id = SelectorRxId(self.p.selector_regexes.len() as u32);
        self.p.selector_regexes.push(rx);
        self.selector_rx_index.insert(text.value.clone(), id);
        Some(id)
    }

    /// Reports a regex error at its position inside `text`; `operator`: the
    /// pattern of an `@rx`-like operator (which `WafPcreFallback` can run on
    /// PCRE2), not of a selector.
    pub(super) fn regex_error(&mut self, text: &Text, e: &crate::rx::RxError, operator: bool) {
        use crate::rx::RxError;
        let opt_in = if operator {
            ". Rules migrated from ModSecurity may opt in with `WafPcreFallback On`, which runs such patterns on PCRE2 under a match limit"
        } else {
            ""
        };
        let d = match e {
            RxError::Unsupported { construct, range } => Diagnostic::error(
                Code::UnsupportedRegex,
                text.span_of(range.clone()),
                format!("{construct} is a PCRE feature that linear-time regex engines do not support"),
            )
            .with_label("not supported")
            .with_hint(format!("rewrite the pattern without it (e.g. a lookahead as a separate chained rule): DFA matching is what keeps rules safe from catastrophic backtracking{opt_in}")),
            RxError::Invalid { message, range } => Diagnostic::error(Code::InvalidRegex, text.span_of(range.clone()), format!("invalid regex: {message}"))
                .with_label("here")
                .with_hint("ModSecurity regexes are PCRE syntax, matched on bytes with `(?sm)`"),
            RxError::TooBig { message } => Diagnostic::error(Code::InvalidRegex, text.span(), format!("regex too big: {message}"))
                .with_hint("split the pattern over several rules or use `@pm` for word lists"),
        };
        self.error(d);
    }

    /// A single target for `ctl:ruleRemoveTargetBy*` (written without `!`).
    pub(super) fn exclusion_target(&mut self, text: &Text) -> Option<Exclusion> {
        let targets = crate::parse::variables(text, self.diags);
        let [t] = targets.as_slice() else {
            self.error(
                Diagnostic::error(Code::BadTarget, text.span(), "expected exactly one target")
                    .with_hint("e.g. `ARGS:password` or `REQUEST_COOKIES:/^_ga/`"),
            );
            return None;
        };
        let variable = Variable::lookup(&t.name);
        let Some(variable) = variable else {
            let mut d = Diagnostic::error(
                Code::UnknownVariable,
                t.name_span,
                format!("unknown variable `{}`", t.name),
            );
            if let Some(c) = closest(&t.name, Variable::ALL.iter().map(|v| v.name())) {
                d = d.with_hint(format!("did you mean `{c}`?"));
            }
            self.error(d);
            return None;
        };
        let selector = match &t.selector {
            None => Selector::All,
            Some(sel) => self.selector(variable, sel)?,
        };
        Some(Exclusion { variable, selector })
    }
}

enum Resolved {
    Include(Target),
    Exclude(Exclusion),
}
