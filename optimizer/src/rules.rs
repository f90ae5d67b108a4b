//! Where each compiled link was written, and what a rule lets later actions
//! observe of its matches.
//!
//! Suggestions are found on the IR (chains are interned there, so sharing is
//! visible) and applied to the text (so comments and layout survive). A link
//! of the IR keeps the span of the `SecRule` it came from, which finds its
//! AST; the link's own `t:` actions are trusted to describe its chain only
//! when they spell exactly the chain the IR has (no `SecDefaultAction`
//! transformations, no `SecRuleUpdateActionById` that added some).

use std::collections::HashMap;
use waf_compiler::ast::{ActionAst, Item, RuleAst};
use waf_compiler::ir::{LinkAction, MacroPart, MacroString, Rule, SetVarOp};
use waf_compiler::names::{Transform, Variable};
use waf_compiler::source::Span;

/// The AST of every rule statement, by span.
pub struct SourceIndex<'a> {
    by_span: HashMap<Span, &'a RuleAst>,
}

impl<'a> SourceIndex<'a> {
    /// Indexes the `SecRule`/`SecAction` items of `items`.
    pub fn new(items: &'a [Item]) -> SourceIndex<'a> {
        let by_span = items
            .iter()
            .filter_map(|i| match i {
                Item::Rule(r) => Some((r.span, r)),
                _ => None,
            })
            .collect();
        SourceIndex { by_span }
    }

    /// The rule statement with exactly this span, if any.
    pub fn rule(&self, span: Span) -> Option<&'a RuleAst> {
        self.by_span.get(&span).copied()
    }
}

/// The `t:` actions of a statement that make its chain: those after the last
/// `t:none`, in order.
pub struct OwnChain<'a> {
    /// Each effective `t:` action with its transformation.
    pub actions: Vec<(&'a ActionAst, Transform)>,
    /// The statement says `t:none` (so no default transformation applies).
    pub resets: bool,
    /// `t:` actions before the last `t:none`: they have no effect.
    pub dead: Vec<&'a ActionAst>,
}

impl OwnChain<'_> {
    /// The effective transformations, in order.
    pub fn transforms(&self) -> Vec<Transform> {
        self.actions.iter().map(|&(_, t)| t).collect()
    }
}

/// The chain a statement's own `t:` actions make (defaults from `SecDefaultAction` not included).
pub fn own_chain(ast: &RuleAst) -> OwnChain<'_> {
    let mut chain = OwnChain {
        actions: Vec::new(),
        resets: false,
        dead: Vec::new(),
    };
    for a in &ast.actions {
        if !a.name.eq_ignore_ascii_case("t") {
            continue;
        }
        let Some(v) = a.value.as_ref() else { continue };
        match Transform::lookup(v.as_str().trim()) {
            Some(Transform::None) => {
                chain.dead.extend(chain.actions.drain(..).map(|(a, _)| a));
                chain.resets = true;
            }
            Some(t) => chain.actions.push((a, t)),
            None => {}
        }
    }
    chain
}

/// Whether anything after a match of `rule` can see the matched *value*
/// (not only that there was a match): a `capture`, a macro that expands
/// `MATCHED_VAR`/`MATCHED_VARS`/`TX.0`-`TX.9` in an action that changes
/// state, or a chain link that reads `MATCHED_VAR(S)`. A rewrite that changes
/// the matched value (dropping `t:lowercase`) is equivalent only if nothing
/// does. Log texts (`msg`, `logdata`) are not state: they are not counted.
pub fn observes_matched_value(rule: &Rule, targets_of: impl Fn(usize) -> Vec<Variable>) -> bool {
    rule.links.iter().enumerate().any(|(i, link)| {
        link.capture
            || link.actions.iter().any(action_reads_match)
            || (i > 0
                && targets_of(i)
                    .iter()
                    .any(|v| matches!(v, Variable::MatchedVar | Variable::MatchedVars)))
    })
}

fn action_reads_match(a: &LinkAction) -> bool {
    let any = |m: &MacroString| macro_reads_match(m);
    match a {
        LinkAction::SetVar(sv) => {
            any(&sv.name)
                || match &sv.op {
                    SetVarOp::Set(m) | SetVarOp::Add(m) | SetVarOp::Sub(m) => any(m),
                    SetVarOp::Delete => false,
                }
        }
        LinkAction::InitCol { key, .. } => any(key),
        LinkAction::ExpireVar { name, seconds } => any(name) || any(seconds),
        LinkAction::DeprecateVar { name, value } | LinkAction::SetEnv { name, value } => {
            any(name) || any(value)
        }
        LinkAction::SetUid(m) | LinkAction::SetSid(m) | LinkAction::SetRsc(m) => any(m),
        LinkAction::Ctl(_) | LinkAction::Ignored { .. } => false,
    }
}

fn macro_reads_match(m: &MacroString) -> bool {
    m.parts.iter().any(|p| match p {
        MacroPart::Literal(_) => false,
        MacroPart::Var { variable, key } => match variable {
            Variable::MatchedVar | Variable::MatchedVars => true,
            Variable::Tx => key
                .as_deref()
                .is_some_and(|k| k.len() == 1 && k.as_bytes()[0].is_ascii_digit()),
            _ => false,
        },
    })
}
