//! Performance findings for `waf lint`: a static cost estimate per rule,
//! regexes the prefilter cannot use, and redundant transformations.
//!
//! The estimate is in **value tests**: the work of running one DFA over one
//! typical value. A rule's estimate is, per statement of its chain, the
//! expected number of values its targets hold times the cost of a test
//! (new transformations plus the operator, the operator discounted when a
//! prefilter can skip it), with chain links after the first weighted by how
//! rarely they run. The constants are round figures from CRS on the benign
//! corpus (`waf profile`): about 8 arguments, 10 headers and 4 cookies per
//! request, and 84% of prefiltered operator runs skipped. It ranks rules; it
//! does not predict microseconds.

use crate::model::{Kind, Safety};
use crate::Analysis;
use waf_compiler::diag::{Code, Diagnostic};
use waf_compiler::ir::{Link, OpKind, Prefilter, Program, Rule, Selector};
use waf_compiler::names::Variable;
use waf_compiler::rx::Strategy;

/// The default budget of `waf lint --perf-budget`, in value tests per request.
pub const DEFAULT_BUDGET: f64 = 100.0;

/// What `waf lint` checks for performance.
#[derive(Clone, Copy, Debug)]
pub struct PerfOptions {
    /// Report rules whose estimate exceeds this many value tests.
    pub budget: f64,
}

impl Default for PerfOptions {
    fn default() -> Self {
        PerfOptions {
            budget: DEFAULT_BUDGET,
        }
    }
}

/// Share of operator runs a literal prefilter lets through (measured on CRS).
const PREFILTER_PASS: f64 = 0.16;
/// Weight of a chain link after the first: it runs only when the ones before matched.
const CHAIN_LINK_WEIGHT: f64 = 0.1;
/// One transformation over a value, relative to one DFA pass.
const TRANSFORM_COST: f64 = 0.3;

/// Values a target is expected to hold in one request.
fn expected_values(v: Variable, selector: &Selector, count: bool) -> f64 {
    use Variable as V;
    if count {
        return 0.05;
    }
    if *selector != Selector::All && v.is_collection() {
        return 1.0;
    }
    match v {
        V::Args | V::ArgsNames => 8.0,
        V::ArgsGet | V::ArgsGetNames | V::ArgsPost | V::ArgsPostNames => 4.0,
        V::RequestHeaders | V::RequestHeadersNames => 10.0,
        V::RequestCookies | V::RequestCookiesNames => 4.0,
        V::ResponseHeaders | V::ResponseHeadersNames => 8.0,
        // Whole bodies: one value, many typical values long.
        V::RequestBody | V::ResponseBody | V::FilesTmpContent => 16.0,
        V::Xml => 8.0,
        V::Tx => 2.0,
        _ if v.is_collection() => 4.0,
        _ => 1.0,
    }
}

/// The operator's cost per value, in DFA passes, before the prefilter.
fn operator_cost(p: &Program, kind: &OpKind) -> f64 {
    match kind {
        OpKind::Rx(id) | OpKind::Verify { rx: id, .. } => match p.regexes[id.index()].strategy() {
            Strategy::FullDfa { .. } => 1.0,
            Strategy::LazyDfa | Strategy::Pending => 2.0,
            // Unbounded but for the match limit; at least a lazy DFA's cost.
            Strategy::Backtracking => 4.0,
        },
        OpKind::Pm(_) => 0.6,
        OpKind::DetectSqli | OpKind::DetectXss => 3.0,
        OpKind::ValidateByteRange(_)
        | OpKind::ValidateUrlEncoding
        | OpKind::ValidateUtf8Encoding => 0.4,
        OpKind::UnconditionalMatch | OpKind::NoMatch | OpKind::Unsupported { .. } => 0.0,
        _ => 0.2,
    }
}

fn link_cost(p: &Program, link: &Link) -> f64 {
    let op = &p.operators[link.operator.index()];
    let filtered = !op.negated && op.prefilter != Prefilter::None;
    let test = operator_cost(p, &op.kind) * if filtered { PREFILTER_PASS } else { 1.0 };
    let transforms = p.transforms.depth(link.transforms) as f64 * TRANSFORM_COST;
    let values: f64 = link
        .targets
        .iter()
        .map(|s| {
            let t = &p.targets[p.slots[s.index()].target.index()];
            expected_values(t.variable, &t.selector, t.count)
        })
        .sum();
    values * (transforms + test)
}

/// The estimated cost of one evaluation of `rule`, in value tests.
pub fn rule_cost(p: &Program, rule: &Rule) -> f64 {
    rule.links
        .iter()
        .enumerate()
        .map(|(i, l)| link_cost(p, l) * if i == 0 { 1.0 } else { CHAIN_LINK_WEIGHT })
        .sum()
}

/// The performance warnings of `waf lint`.
pub fn diagnostics(a: &Analysis, opts: &PerfOptions) -> Vec<Diagnostic> {
    let Some(p) = a.program() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for rule in &p.rules {
        if rule.unconditional {
            continue;
        }
        let cost = rule_cost(p, rule);
        if cost > opts.budget {
            out.push(
                Diagnostic::warning(
                    Code::PerfCost,
                    rule.span,
                    format!(
                        "rule {} costs about {cost:.0} value tests per request (budget {:.0})",
                        rule.id, opts.budget
                    ),
                )
                .with_label("estimated from its targets, transformations and operator")
                .with_hint(
                    "read fewer or narrower targets, give the regex a literal the prefilter can \
                     use, or run `waf profile` to see its measured cost",
                ),
            );
        }
        for link in &rule.links {
            let op = &p.operators[link.operator.index()];
            // Only a regex with no literal at all: one with short literals
            // is still gated by byte sets, and whether its bytes are rare is
            // a question for a corpus (`waf suggest --corpus` lists it).
            if let OpKind::Rx(_) = op.kind {
                if !op.negated && op.prefilter == Prefilter::None {
                    out.push(
                        Diagnostic::warning(
                            Code::PerfNoPrefilter,
                            op.span,
                            "no literal occurs in every match of this regex: the prefilter \
                             cannot skip it, so it runs on every value",
                        )
                        .with_label("runs on every value")
                        .with_hint(
                            "`waf suggest` names the branches without a literal and the bytes \
                             they always contain",
                        ),
                    );
                }
            }
        }
    }
    for (s, _) in a.suggestions() {
        if s.kind == Kind::RedundantTransform && s.safety == Safety::Equivalent {
            out.push(
                Diagnostic::warning(Code::PerfRedundantTransform, s.span, s.change.clone())
                    .with_label("changes nothing the rule can observe")
                    .with_hint(format!(
                        "{} (`waf suggest --apply` makes this change)",
                        s.why
                    )),
            );
        }
    }
    out
}
