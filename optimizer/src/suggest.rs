//! The suggestion passes: one walk over every link of every rule.
//!
//! Each pass looks at one link (a `SecRule` statement: the rule or one of its
//! chain links) on the IR, decides whether a rewrite applies and whether it
//! is equivalent, and turns it into text edits on the statement's AST. The
//! kinds and their safety conditions are described in `docs/optimizer.md`;
//! the comments here say where each condition is checked.

use crate::algebra;
use crate::edit;
use crate::model::{Edit, Kind, Safety, Suggestion};
use crate::rules::{observes_matched_value, own_chain, OwnChain, SourceIndex};
use std::collections::{HashMap, HashSet};
use waf_compiler::ast::{Item, RuleAst, SelectorKind, TargetAst};
use waf_compiler::ir::{
    dump::target_text, Link, NodeId, OpKind, Program, Rule, Selector, SlotId, Target,
};
use waf_compiler::names::{Transform, Variable};
use waf_compiler::rx::{analysis, MIN_SCAN_LEN};
use waf_compiler::source::Span;

/// Where a suggestion came from in the IR, to measure its gain on a corpus.
#[derive(Clone, Debug, Default)]
pub struct Origin {
    /// Index into `Program::rules`.
    pub rule: usize,
    /// Transform nodes that no link would need any more on the link's values.
    pub freed_nodes: Vec<NodeId>,
    /// Value slots the rewrite stops reading.
    pub dropped_slots: Vec<SlotId>,
}

/// All suggestions for a compiled configuration, in rule order, with the
/// IR origin of each (same index).
pub fn suggest(program: &Program, items: &[Item]) -> Vec<(Suggestion, Origin)> {
    let cx = Cx::new(program, items);
    let mut out = Vec::new();
    for (ri, rule) in program.rules.iter().enumerate() {
        if rule.unconditional {
            continue;
        }
        for li in 0..rule.links.len() {
            cx.link(ri, rule, li, &mut out);
        }
    }
    out
}

struct Cx<'a> {
    p: &'a Program,
    src: SourceIndex<'a>,
    /// Links whose chain has this prefix, per variable read, once the planned
    /// chain rewrites are made.
    uses: Uses,
    /// The chain each link will have once the planned rewrites are made.
    current: HashMap<(usize, usize), Vec<Transform>>,
    /// Planned chain rewrites: (rule, link) → (new chain, work before, work after).
    plan: HashMap<(usize, usize), (Vec<Transform>, usize, usize)>,
    children: HashMap<(NodeId, Transform), NodeId>,
}

/// How many links compute each chain prefix on each variable.
#[derive(Default)]
struct Uses(HashMap<(Vec<Transform>, Variable), u32>);

impl Uses {
    fn add(&mut self, chain: &[Transform], vars: &[Variable], delta: i32) {
        for k in 1..=chain.len() {
            for &v in vars {
                let e = self.0.entry((chain[..k].to_vec(), v)).or_default();
                *e = e.saturating_add_signed(delta);
            }
        }
    }

    fn get(&self, prefix: &[Transform], v: Variable) -> u32 {
        self.0.get(&(prefix.to_vec(), v)).copied().unwrap_or(0)
    }

    /// Transformations per value that a link now computing `own` would
    /// compute alone were its chain `c`: the steps after the longest prefix
    /// of `c` that another link computes on one of the same variables.
    fn new_work(&self, own: &[Transform], vars: &[Variable], c: &[Transform]) -> usize {
        let mut shared = 0;
        for k in 1..=c.len() {
            let prefix = &c[..k];
            let mine = u32::from(own.starts_with(prefix));
            if vars.iter().any(|&v| self.get(prefix, v) > mine) {
                shared = k;
            } else {
                break;
            }
        }
        c.len() - shared
    }
}

/// One link being looked at.
struct At<'a> {
    ri: usize,
    li: usize,
    rule: &'a Rule,
    link: &'a Link,
    ast: &'a RuleAst,
    own: OwnChain<'a>,
    chain: Vec<Transform>,
    vars: Vec<Variable>,
    observed: bool,
}

impl<'a> Cx<'a> {
    fn new(p: &'a Program, items: &'a [Item]) -> Cx<'a> {
        let src = SourceIndex::new(items);
        let mut uses = Uses::default();
        let mut current = HashMap::new();
        let mut movable = Vec::new();
        for (ri, rule) in p.rules.iter().enumerate() {
            for (li, link) in rule.links.iter().enumerate() {
                let chain = p.transforms.chain(link.transforms);
                let vars = link_vars(p, link);
                uses.add(&chain, &vars, 1);
                // A chain the text spells, on a link that sees only the final value.
                let editable = !rule.unconditional
                    && !link.multi_match
                    && !chain.is_empty()
                    && src
                        .rule(link.span)
                        .is_some_and(|ast| own_chain(ast).transforms() == chain);
                if editable {
                    movable.push((ri, li, vars));
                }
                current.insert((ri, li), chain);
            }
        }
        let plan = plan_chains(&mut uses, &mut current, &movable);
        let children = p
            .transforms
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| Some(((n.parent?, n.transform?), NodeId(i as u32))))
            .collect();
        Cx {
            p,
            src,
            uses,
            current,
            plan,
            children,
        }
    }

    fn link(&self, ri: usize, rule: &'a Rule, li: usize, out: &mut Vec<(Suggestion, Origin)>) {
        let p = self.p;
        let link = &rule.links[li];
        let Some(ast) = self.src.rule(link.span) else {
            return;
        };
        if link.targets.is_empty() {
            return;
        }
        let at = At {
            ri,
            li,
            rule,

            link,
            ast,
            own: own_chain(ast),
            chain: p.transforms.chain(link.transforms),
            vars: link_vars(p, link),
            observed: observes_matched_value(rule, |i| {
                rule.links[i]
                    .targets
                    .iter()
                    .map(|s| p.targets[p.slots[s.index()].target.index()].variable)
                    .collect()
            }),
        };
        if at.own.transforms() != at.chain {
            self.missing_t_none(&at, out);
            // The text does not spell the chain: no transform edit can be trusted.
            self.regex_literal(&at, out);
            self.targets(&at, out);
            return;
        }
        self.dead_transforms(&at, out);
        // `@pm` also takes over the lowercasing when it can: then the case
        // pass has nothing left to do.
        let lowercase_done = self.rx_to_pm(&at, out) || self.case(&at, out);
        if !lowercase_done {
            self.chain_rewrite(&at, out);
        }
        self.regex_literal(&at, out);
        self.targets(&at, out);
    }

    fn base(&self, at: &At<'_>, kind: Kind, safety: Safety, span: Span) -> Suggestion {
        let f = self.p.sources.file(span.file);
        Suggestion {
            kind,
            safety,
            rule_id: at.rule.id,
            location: format!("{}:{}", f.name(), f.line_col(span.start as usize).line),
            span,
            change: String::new(),
            why: String::new(),
            edits: Vec::new(),
            gain: None,
        }
    }

    fn origin(&self, at: &At<'_>) -> Origin {
        Origin {
            rule: at.ri,
            ..Origin::default()
        }
    }

    fn action_spans(&self, at: &At<'_>) -> Vec<Span> {
        at.ast.actions.iter().map(|a| a.span).collect()
    }

    fn action_index(&self, at: &At<'_>, span: Span) -> Option<usize> {
        at.ast.actions.iter().position(|a| a.span == span)
    }

    /// SecDefaultAction transformations reach the chain: the rule says no `t:none`.
    fn missing_t_none(&self, at: &At<'_>, out: &mut Vec<(Suggestion, Origin)>) {
        let own = at.own.transforms();
        if at.own.resets || !at.chain.ends_with(&own) || at.chain.len() == own.len() {
            return;
        }
        let defaults = &at.chain[..at.chain.len() - own.len()];
        let mut s = self.base(
            at,
            Kind::MissingTNone,
            Safety::NeedsReview,
            at.ast.actions_span,
        );
        s.change = format!(
            "add `t:none` to drop the default transformations {}",
            chain_text(defaults)
        );
        s.why = format!(
            "SecDefaultAction of phase {} adds {} before this statement's own \
             transformations, because it does not start with `t:none`; each of them \
             runs on every value the rule reads. Removing them changes what the rule \
             sees: keep them only if they are meant.",
            at.rule.phase,
            chain_text(defaults)
        );
        let file = at.ast.actions_span.file;
        s.edits = match (at.own.actions.first(), at.ast.actions.last()) {
            (Some((a, _)), _) => vec![edit::insert(a.span.start, file, "t:none,")],
            (None, Some(last)) => vec![edit::insert(last.span.end, file, ",t:none")],
            (None, None) => Vec::new(),
        };
        let mut o = self.origin(at);
        o.freed_nodes = self.exclusive_nodes(at, &at.chain, &own);
        out.push((s, o));
    }

    /// `t:` actions before the last `t:none` never run.
    fn dead_transforms(&self, at: &At<'_>, out: &mut Vec<(Suggestion, Origin)>) {
        if at.own.dead.is_empty() {
            return;
        }
        let spans = self.action_spans(at);
        let src = &self.p.sources.file(at.ast.span.file).text;
        let names: Vec<String> = at
            .own
            .dead
            .iter()
            .map(|a| format!("`{}`", self.p.sources.snippet(a.span)))
            .collect();
        let mut s = self.base(
            at,
            Kind::RedundantTransform,
            Safety::Equivalent,
            at.own.dead[0].span,
        );
        s.change = format!("remove {} (before `t:none`)", names.join(", "));
        s.why = "`t:none` discards every transformation listed before it, so these never run; \
                 they only mislead the reader."
            .into();
        s.edits = at
            .own
            .dead
            .iter()
            .filter_map(|a| self.action_index(at, a.span))
            .map(|i| edit::remove_item(src, &spans, i))
            .collect();
        out.push((s, self.origin(at)));
    }

    /// The index of the `t:lowercase` that decides the case of the final
    /// value: only transformations that commute with lowercase follow it.
    fn deciding_lowercase(chain: &[Transform]) -> Option<usize> {
        let j = chain
            .iter()
            .rposition(|&t| matches!(t, Transform::Lowercase | Transform::Uppercase))?;
        (chain[j] == Transform::Lowercase
            && chain[j + 1..]
                .iter()
                .all(|&t| algebra::commutes_with_lowercase(t)))
        .then_some(j)
    }

    /// `t:lowercase` before a case-insensitive operator (redundant), or before
    /// a regex that `(?i)` makes case-insensitive (regex-flag). Returns
    /// whether a suggestion was made (the chain pass then stays out).
    fn case(&self, at: &At<'_>, out: &mut Vec<(Suggestion, Origin)>) -> bool {
        let Some(j) = Self::deciding_lowercase(&at.chain) else {
            return false;
        };
        if at.link.multi_match
            || at
                .chain
                .iter()
                .filter(|&&t| t == Transform::Lowercase)
                .count()
                != 1
        {
            return false;
        }
        let op = &self.p.operators[at.link.operator.index()];
        let (lower_action, _) = at.own.actions[j];
        let spans = self.action_spans(at);
        let src = &self.p.sources.file(at.ast.span.file).text;
        let Some(ai) = self.action_index(at, lower_action.span) else {
            return false;
        };
        let remove = edit::remove_item(src, &spans, ai);
        let mut new_chain = at.chain.clone();
        new_chain.remove(j);
        let safety = if at.observed {
            Safety::NeedsReview
        } else {
            Safety::Equivalent
        };
        let observed_note = if at.observed {
            " The rule lets a later action see the matched value (capture, MATCHED_VAR in \
             setvar, or a chain link reading MATCHED_VARS), which would no longer be lowercased: \
             check that nothing depends on its case."
        } else {
            ""
        };
        let mut o = self.origin(at);
        o.freed_nodes = self.exclusive_nodes(at, &at.chain, &new_chain);
        match &op.kind {
            OpKind::Pm(_) => {
                let mut s = self.base(at, Kind::RedundantTransform, safety, lower_action.span);
                s.change = "remove `t:lowercase`".into();
                s.why = format!(
                    "`@{}` compares ASCII case-insensitively, so lowercasing first changes \
                     nothing it can match.{observed_note}",
                    op.name.name()
                );
                s.edits = vec![remove];
                out.push((s, o));
                true
            }
            OpKind::Rx(rx) => {
                let pattern = self.p.regexes[rx.index()].pattern();
                if analysis::ignores_lowercasing(pattern) {
                    let mut s = self.base(at, Kind::RedundantTransform, safety, lower_action.span);
                    s.change = "remove `t:lowercase`".into();
                    s.why = format!(
                        "the pattern ignores case (`(?i)` throughout, or classes that already \
                         hold both cases), so it matches a value exactly when it matches the \
                         value lowercased.{observed_note}"
                    );
                    s.edits = vec![remove];
                    out.push((s, o));
                    return true;
                }
                let Some(new_pattern) = analysis::case_flag_rewrite(pattern) else {
                    return false;
                };
                let mut s = self.base(at, Kind::RegexFlag, safety, lower_action.span);
                s.change = match new_pattern.strip_suffix(pattern) {
                    Some(prefix) => {
                        format!("remove `t:lowercase` and start the pattern with `{prefix}`")
                    }
                    None => format!(
                        "remove `t:lowercase` and match with `{}`",
                        shorten(&new_pattern, 80)
                    ),
                };
                s.why = format!(
                    "`t:lowercase` makes a lowercased copy of every value the rule reads{}; \
                     the regex has no upper-case letter in any literal or class, so `(?i)` \
                     gives the same match on the value as it is.{observed_note}",
                    if o.freed_nodes.is_empty() {
                        " (here other rules read the same copy, so this engine, which shares \
                         it, saves little; engines that transform per rule, ModSecurity and \
                         Coraza, save the copy)"
                    } else {
                        " and no other rule reads that copy"
                    }
                );
                let arg = at.ast.operator.as_ref().and_then(|op| op.argument.as_ref());
                if let (Some(arg), Some(rest)) = (arg, new_pattern.strip_suffix(pattern)) {
                    let at_start = arg.span_of(0..0).start;
                    s.edits = vec![remove, edit::insert(at_start, arg.span().file, rest)];
                }
                out.push((s, o));
                true
            }
            _ => false,
        }
    }

    /// Rewrites of the chain by the laws of [`algebra`]: drop what is
    /// redundant, or insert/reorder to end on nodes other rules compute on
    /// the same variables.
    fn chain_rewrite(&self, at: &At<'_>, out: &mut Vec<(Suggestion, Origin)>) {
        // With multiMatch the operator sees every intermediate value, so
        // changing the steps changes what it sees.
        if at.link.multi_match || at.chain.is_empty() {
            return;
        }
        let Some((new_chain, old_work, work)) = self.plan.get(&(at.ri, at.li)).cloned() else {
            return;
        };
        let only_removals = is_subsequence(&new_chain, &at.chain);
        let kind = if only_removals {
            Kind::RedundantTransform
        } else {
            Kind::SharePrefix
        };
        let span = at
            .own
            .actions
            .first()
            .map_or(at.ast.actions_span, |(a, _)| a.span);
        let mut s = self.base(at, kind, Safety::Equivalent, span);
        s.change = format!("{} → {}", chain_text(&at.chain), chain_text(&new_chain));
        s.why = if only_removals {
            format!(
                "the dropped transformations change nothing next to their neighbours (a \
                 repeated idempotent one, or one that the next one absorbs), so the value is \
                 the same with {} transformation(s) instead of {}; {} of them computed for \
                 this rule alone instead of {}.",
                new_chain.len(),
                at.chain.len(),
                work,
                old_work
            )
        } else {
            format!(
                "the new chain computes the same value (by transformation laws: {}), and its \
                 prefix is already computed for other rules on the same variables, so only {} \
                 transformation(s) per value are new instead of {}.",
                laws_used(&at.chain, &new_chain),
                work,
                old_work
            )
        };
        s.edits = self.chain_edits(at, &new_chain);
        let mut o = self.origin(at);
        o.freed_nodes = self.exclusive_nodes(at, &at.chain, &new_chain);
        out.push((s, o));
    }

    /// Text edits turning the statement's `t:` actions into `new_chain`:
    /// the actions kept by a longest common subsequence stay as written.
    fn chain_edits(&self, at: &At<'_>, new_chain: &[Transform]) -> Vec<Edit> {
        let old = &at.chain;
        let keep = lcs(old, new_chain);
        let spans = self.action_spans(at);
        let file = at.ast.span.file;
        let src = &self.p.sources.file(file).text;
        let mut edits = Vec::new();
        let mut kept_old = vec![false; old.len()];
        for &(i, _) in &keep {
            kept_old[i] = true;
        }
        for (i, k) in kept_old.iter().enumerate() {
            if !k {
                if let Some(ai) = self.action_index(at, at.own.actions[i].0.span) {
                    edits.push(edit::remove_item(src, &spans, ai));
                }
            }
        }
        // Insertions go before the next kept old action, or after the last action of the chain.
        let mut pending: Vec<Transform> = Vec::new();
        let mut ki = 0;
        let mut inserts: Vec<(u32, String)> = Vec::new();
        for (j, &t) in new_chain.iter().enumerate() {
            if ki < keep.len() && keep[ki].1 == j {
                if !pending.is_empty() {
                    let a = at.own.actions[keep[ki].0].0;
                    let text: String = pending.iter().map(|t| format!("t:{},", t.name())).collect();
                    inserts.push((a.span.start, text));
                    pending.clear();
                }
                ki += 1;
            } else {
                pending.push(t);
            }
        }
        if !pending.is_empty() {
            let last = at.own.actions.last().map(|(a, _)| a.span.end);
            if let Some(end) = last {
                let text: String = pending.iter().map(|t| format!(",t:{}", t.name())).collect();
                inserts.push((end, text));
            }
        }
        edits.extend(inserts.into_iter().map(|(p, t)| edit::insert(p, file, t)));
        edits
    }

    /// `@rx` that is a list of plain words → `@pm`. Returns whether the
    /// suggestion also removes the chain's deciding `t:lowercase` (`@pm`
    /// ignores case, so the words being lowercase is all that mattered).
    fn rx_to_pm(&self, at: &At<'_>, out: &mut Vec<(Suggestion, Origin)>) -> bool {
        let op = &self.p.operators[at.link.operator.index()];
        let OpKind::Rx(rx) = &op.kind else {
            return false;
        };
        let pattern = self.p.regexes[rx.index()].pattern();
        let Some(words) = analysis::word_alternation(pattern) else {
            return false;
        };
        let Some(op_ast) = at.ast.operator.as_ref() else {
            return false;
        };
        let lowercase = Self::deciding_lowercase(&at.chain).filter(|_| {
            !at.link.multi_match
                && at
                    .chain
                    .iter()
                    .filter(|&&t| t == Transform::Lowercase)
                    .count()
                    == 1
        });
        let all_lower = words
            .words
            .iter()
            .all(|w| !w.bytes().any(|b| b.is_ascii_uppercase()));
        let case_ok = words.case_insensitive || (lowercase.is_some() && all_lower);
        let safety = if case_ok && !at.link.capture {
            Safety::Equivalent
        } else {
            Safety::NeedsReview
        };
        // Dropping the lowercase changes the matched value: only when nothing sees it.
        let drop_lower = lowercase.filter(|_| all_lower && case_ok && !at.observed);
        let mut s = self.base(at, Kind::RxToPm, safety, op_ast.span);
        let list = words.words.join(" ");
        s.change = format!(
            "`@rx {}` → `@pm {}`{}",
            shorten(pattern, 80),
            shorten(&list, 80),
            if drop_lower.is_some() {
                ", and remove `t:lowercase`"
            } else {
                ""
            }
        );
        s.why = format!(
            "the pattern only asks whether one of {} words occurs; `@pm` finds them with one \
             Aho-Corasick scan and no regex engine (PCRE in ModSecurity, a DFA here).{}{}{}",
            words.words.len(),
            if case_ok {
                ""
            } else {
                " `@pm` compares case-insensitively and this pattern does not: it would also \
                 match other spellings."
            },
            if drop_lower.is_some() {
                " `@pm` ignores case, so the lowercased copy of each value is not needed either."
            } else {
                ""
            },
            if at.link.capture {
                " With `capture`, TX.0 would hold the phrase found, and TX.1.. nothing."
            } else {
                ""
            }
        );
        let safe_words = words
            .words
            .iter()
            .all(|w| !w.contains(['"', '\'', '\\', '%']) && !w.is_empty());
        let mut o = self.origin(at);
        if let (Some(arg), true) = (op_ast.argument.as_ref(), safe_words) {
            let start = if op_ast.implicit {
                arg.span().start
            } else {
                op_ast.name_span.start
            };
            let span = Span {
                start,
                ..arg.span()
            };
            s.edits = vec![edit::replace(span, format!("@pm {list}"))];
            if let Some(j) = drop_lower {
                let spans = self.action_spans(at);
                let src = &self.p.sources.file(at.ast.span.file).text;
                if let Some(ai) = self.action_index(at, at.own.actions[j].0.span) {
                    s.edits.push(edit::remove_item(src, &spans, ai));
                    let mut new_chain = at.chain.clone();
                    new_chain.remove(j);
                    o.freed_nodes = self.exclusive_nodes(at, &at.chain, &new_chain);
                }
            }
        }
        let consumed = drop_lower.is_some() && !s.edits.is_empty();
        out.push((s, o));
        consumed
    }

    /// An `@rx` the prefilter cannot skip: say which branches lack a literal.
    fn regex_literal(&self, at: &At<'_>, out: &mut Vec<(Suggestion, Origin)>) {
        let op = &self.p.operators[at.link.operator.index()];
        let OpKind::Rx(rx) = &op.kind else { return };
        if op.negated || op.prefilter.min_len().is_some_and(|n| n >= MIN_SCAN_LEN) {
            return;
        }
        let pattern = self.p.regexes[rx.index()].pattern();
        let Some(advice) = analysis::literal_advice(pattern) else {
            return;
        };
        let mut blamed = Vec::new();
        for b in &advice.branches {
            let strong = b
                .literals
                .iter()
                .map(Vec::len)
                .min()
                .is_some_and(|n| n >= MIN_SCAN_LEN);
            if strong {
                continue;
            }
            let text = pattern.get(b.range.clone()).unwrap_or("");
            let what = if !b.literals.is_empty() {
                format!(
                    "only requires one of {} — shorter than {MIN_SCAN_LEN} bytes, so the prefilter can only check for their bytes, which many values contain",
                    literal_list(&b.literals)
                )
            } else if b.matches_empty {
                "can match the empty string".to_string()
            } else if let Some(bytes) = &b.required_bytes {
                format!(
                    "always contains one of {} — a literal there (or a separate rule for this branch) would let the prefilter skip it",
                    byte_list(bytes)
                )
            } else {
                "has no required byte at all".to_string()
            };
            blamed.push(format!("`{}` {what}", shorten(text, 60)));
        }
        if blamed.is_empty() {
            return;
        }
        let span = at.ast.operator.as_ref().map_or(at.ast.span, |o| o.span);
        let mut s = self.base(at, Kind::MissingLiteral, Safety::NeedsReview, span);
        s.change = format!(
            "give every branch a required literal: {}",
            blamed.join("; ")
        );
        s.why = "no literal of 3 bytes or more occurs in every match of this regex, so the \
                 prefilter cannot skip it: it runs on (nearly) every value of every target. Splitting off the branches without \
                 a literal, or adding the literal they always contain, lets one multi-literal \
                 scan rule it out on most values."
            .into();
        out.push((s, self.origin(at)));
    }

    /// Targets that read the same values twice, or more than needed.
    fn targets(&self, at: &At<'_>, out: &mut Vec<(Suggestion, Origin)>) {
        let p = self.p;
        let slots: Vec<(SlotId, &Target)> = at
            .link
            .targets
            .iter()
            .map(|&s| (s, &p.targets[p.slots[s.index()].target.index()]))
            .collect();
        let ast_targets: Vec<&TargetAst> = at.ast.targets.iter().collect();
        let spans: Vec<Span> = ast_targets.iter().map(|t| t.span).collect();
        let src = &p.sources.file(at.ast.span.file).text;
        let find_ast = |t: &Target| ast_targets.iter().rposition(|a| !a.exclude && ast_is(a, t));
        let per_match = "every matched value runs the statement's setvar actions (the anomaly \
                         score counts each one), so reading a value twice can count it twice";
        let has_excl = |v: Variable| at.link.exclusions.iter().any(|e| e.variable == v);
        let mut seen: Vec<&Target> = Vec::new();
        for &(slot, t) in &slots {
            let mut why: Option<(String, String)> = None;
            if seen.contains(&t) {
                why = Some((
                    format!("remove the second `{}`", target_text(p, t)),
                    format!("the target is listed twice; {per_match}."),
                ));
            } else if !t.count {
                let covered_by = slots.iter().find(|(_, o)| {
                    !std::ptr::eq(*o, t)
                        && !o.count
                        && o.selector == Selector::All
                        && covers(o.variable, t)
                });
                if let Some((_, o)) = covered_by {
                    if !has_excl(o.variable) {
                        why = Some((
                            format!("remove `{}`", target_text(p, t)),
                            format!(
                                "`{}` already reads every value of `{}`, with the same \
                                 transformations; {per_match} — the rule matches the same \
                                 requests, but its score may differ.",
                                target_text(p, o),
                                target_text(p, t)
                            ),
                        ));
                    }
                }
            }
            if why.is_none() && t.selector == Selector::All && !t.count {
                let has = |v: Variable| slots.iter().any(|(_, o)| o.variable == v && !o.count);
                why = match t.variable {
                    Variable::RequestFilename if has(Variable::RequestUri) => Some((
                        "remove `REQUEST_FILENAME`".into(),
                        "REQUEST_URI contains the path REQUEST_FILENAME holds, so an unanchored \
                         pattern that matches the path matches the URI too; not equivalent for \
                         a pattern anchored at the path's end (`\\.php$`), and the score counts \
                         both matches."
                            .into(),
                    )),
                    Variable::RequestBasename
                        if has(Variable::RequestFilename) || has(Variable::RequestUri) =>
                    {
                        Some((
                            "remove `REQUEST_BASENAME`".into(),
                            "the file name is also part of REQUEST_FILENAME/REQUEST_URI, which the \
                             rule reads; not equivalent for anchored patterns, and the score counts \
                             both matches."
                                .into(),
                        ))
                    }
                    Variable::QueryString if has(Variable::RequestUri) => Some((
                        "remove `QUERY_STRING`".into(),
                        "REQUEST_URI already contains the query string; not equivalent for \
                         anchored patterns, and the score counts both matches."
                            .into(),
                    )),
                    Variable::RequestUri
                        if has(Variable::Args)
                            || has(Variable::ArgsGet)
                            || has(Variable::QueryString) =>
                    {
                        Some((
                            "read `REQUEST_FILENAME` instead of `REQUEST_URI`".into(),
                            "the query string is already read through ARGS/ARGS_GET/QUERY_STRING; \
                             REQUEST_FILENAME is the URI without it, so the rule scans it once. \
                             Not equivalent: ARGS values are decoded, the URI's query is not."
                                .into(),
                        ))
                    }
                    _ => None,
                };
            }
            seen.push(t);
            let Some((change, why)) = why else { continue };
            let Some(ai) = find_ast(t) else { continue };
            let a = ast_targets[ai];
            let mut s = self.base(at, Kind::CheaperTarget, Safety::NeedsReview, a.span);
            s.edits = if change.starts_with("read `REQUEST_FILENAME`") {
                vec![edit::replace(a.name_span, "REQUEST_FILENAME")]
            } else {
                vec![edit::remove_item(src, &spans, ai)]
            };
            s.change = change;
            s.why = why;
            let mut o = self.origin(at);
            o.dropped_slots = vec![slot];
            out.push((s, o));
        }
    }

    /// Nodes of `old`'s path that `new`'s path does not have and that no other
    /// link computes on the same variables: the work the rewrite removes.
    fn exclusive_nodes(&self, at: &At<'_>, old: &[Transform], new: &[Transform]) -> Vec<NodeId> {
        let now = self
            .current
            .get(&(at.ri, at.li))
            .map_or(old, |c| c.as_slice());
        self.walk(old)
            .into_iter()
            .enumerate()
            .filter(|&(k, _)| !new.starts_with(&old[..=k]))
            .filter(|&(k, _)| {
                let prefix = &old[..=k];
                let mine = u32::from(now.starts_with(prefix));
                at.vars.iter().all(|&v| self.uses.get(prefix, v) <= mine)
            })
            .map(|(_, n)| n)
            .collect()
    }

    /// The existing nodes along `chain` from the root (stops where the tree does).
    fn walk(&self, chain: &[Transform]) -> Vec<NodeId> {
        let mut node = NodeId::ROOT;
        let mut out = Vec::new();
        for &t in chain {
            match self.children.get(&(node, t)) {
                Some(&n) => {
                    out.push(n);
                    node = n;
                }
                None => break,
            }
        }
        out
    }
}

/// Decides the chain rewrites of all links together, so that they agree:
/// first every link drops what is redundant (moving towards the shortest
/// equivalent chain), then the links left may insert or reorder steps to
/// reach a chain the others compute. Each decision updates `uses`, so a
/// later link sees where the earlier ones went, and two links are never sent
/// towards each other's old chain. (A link whose `t:lowercase` a `regex-flag`
/// or `rx-to-pm` rewrite takes over instead keeps its planned chain in these
/// counts: that changes how much another link's rewrite would share, never
/// whether it is equivalent.)
fn plan_chains(
    uses: &mut Uses,
    current: &mut HashMap<(usize, usize), Vec<Transform>>,
    movable: &[(usize, usize, Vec<Variable>)],
) -> HashMap<(usize, usize), (Vec<Transform>, usize, usize)> {
    let mut plan = HashMap::new();
    for removals_only in [true, false] {
        for (ri, li, vars) in movable {
            let key = (*ri, *li);
            let Some(now) = current.get(&key).cloned() else {
                continue;
            };
            let cost = |c: &[Transform]| (uses.new_work(&now, vars, c), c.len());
            let base = cost(&now);
            let mut best: Option<(Vec<Transform>, (usize, usize))> = None;
            let mut seen: HashSet<Vec<Transform>> = HashSet::new();
            let mut frontier = vec![now.clone()];
            for _ in 0..3 {
                let mut next = Vec::new();
                for c in &frontier {
                    for v in neighbours(c) {
                        if removals_only && !is_subsequence(&v, c) {
                            continue;
                        }
                        if seen.insert(v.clone()) {
                            let k = cost(&v);
                            if k < base && best.as_ref().is_none_or(|(_, b)| k < *b) {
                                best = Some((v.clone(), k));
                            }
                            next.push(v);
                        }
                    }
                }
                frontier = next;
            }
            let Some((new_chain, (work, _))) = best else {
                continue;
            };
            uses.add(&now, vars, -1);
            uses.add(&new_chain, vars, 1);
            let before = plan.get(&key).map_or(base.0, |&(_, b, _)| b);
            plan.insert(key, (new_chain.clone(), before, work));
            current.insert(key, new_chain);
        }
    }
    plan
}

/// The variables a link reads (values, not counts), without repeats.
fn link_vars(p: &Program, link: &Link) -> Vec<Variable> {
    let mut vars = Vec::new();
    for s in &link.targets {
        let t = &p.targets[p.slots[s.index()].target.index()];
        if !t.count && !vars.contains(&t.variable) {
            vars.push(t.variable);
        }
    }
    vars
}

/// Chains one law away from `c`.
fn neighbours(c: &[Transform]) -> Vec<Vec<Transform>> {
    let mut out = Vec::new();
    for i in 0..c.len() {
        let drop = (i > 0 && algebra::noop_after(c[i - 1], c[i]))
            || (i + 1 < c.len() && algebra::absorbed_before(c[i], c[i + 1]));
        if drop {
            let mut v = c.to_vec();
            v.remove(i);
            out.push(v);
        }
        if i + 1 < c.len() && c[i] != c[i + 1] && algebra::commute(c[i], c[i + 1]) {
            let mut v = c.to_vec();
            v.swap(i, i + 1);
            out.push(v);
        }
        for &a in Transform::ALL {
            if a != Transform::None && a != c[i] && algebra::absorbed_before(a, c[i]) {
                let mut v = c.to_vec();
                v.insert(i, a);
                out.push(v);
            }
        }
    }
    out
}

fn laws_used(old: &[Transform], new: &[Transform]) -> String {
    let mut laws = Vec::new();
    for w in new.windows(2) {
        if algebra::absorbed_before(w[0], w[1]) && !old.windows(2).any(|o| o == w) {
            laws.push(format!(
                "{} after {} is {}",
                w[1].name(),
                w[0].name(),
                w[1].name()
            ));
        }
    }
    let swapped = old.len() == new.len() && old != new;
    if swapped {
        laws.push("the swapped transformations commute".into());
    }
    if laws.is_empty() {
        "redundant steps dropped".into()
    } else {
        laws.join("; ")
    }
}

/// Longest common subsequence as (old index, new index) pairs.
fn lcs(a: &[Transform], b: &[Transform]) -> Vec<(usize, usize)> {
    let (n, m) = (a.len(), b.len());
    let mut t = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            t[i][j] = if a[i] == b[j] {
                t[i + 1][j + 1] + 1
            } else {
                t[i + 1][j].max(t[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < n && j < m {
        if a[i] == b[j] {
            out.push((i, j));
            i += 1;
            j += 1;
        } else if t[i + 1][j] >= t[i][j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

fn is_subsequence(small: &[Transform], big: &[Transform]) -> bool {
    let mut it = big.iter();
    small.iter().all(|s| it.any(|b| b == s))
}

pub(crate) fn chain_text(c: &[Transform]) -> String {
    let names: Vec<&str> = c.iter().map(|t| t.name()).collect();
    format!("[{}]", names.join(", "))
}

/// Whether the values of `t` are among the values of collection `v` (read whole).
fn covers(v: Variable, t: &Target) -> bool {
    use Variable as V;
    match (v, t.variable) {
        (a, b) if a == b => t.selector != Selector::All && v.is_collection(),
        (V::Args, V::ArgsGet | V::ArgsPost) => true,
        (V::ArgsNames, V::ArgsGetNames | V::ArgsPostNames) => true,
        _ => false,
    }
}

/// Whether an AST target is the IR target `t`.
fn ast_is(a: &TargetAst, t: &Target) -> bool {
    if a.count != t.count || Variable::lookup(&a.name) != Some(t.variable) {
        return false;
    }
    match (&a.selector, &t.selector) {
        (None, Selector::All) => true,
        (Some(s), Selector::Key(k)) => {
            s.kind == SelectorKind::Key && s.text.as_str().eq_ignore_ascii_case(k)
        }
        (Some(s), Selector::Regex(_)) => s.kind == SelectorKind::Regex,
        (Some(s), Selector::XPath(x)) => s.text.as_str() == x,
        _ => false,
    }
}

fn byte_list(bytes: &[u8]) -> String {
    let shown: Vec<String> = bytes
        .iter()
        .take(12)
        .map(|&b| {
            if b.is_ascii_graphic() {
                format!("`{}`", b as char)
            } else {
                format!("`\\x{b:02x}`")
            }
        })
        .collect();
    let more = if bytes.len() > 12 {
        format!(" and {} more", bytes.len() - 12)
    } else {
        String::new()
    };
    format!("{}{more}", shown.join(" "))
}

fn escaped(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&b| {
            if b.is_ascii_graphic() {
                (b as char).to_string()
            } else {
                format!("\\x{b:02x}")
            }
        })
        .collect()
}

fn literal_list(lits: &[Vec<u8>]) -> String {
    let shown: Vec<String> = lits
        .iter()
        .take(8)
        .map(|l| format!("`{}`", escaped(l)))
        .collect();
    let more = if lits.len() > 8 {
        format!(" and {} more", lits.len() - 8)
    } else {
        String::new()
    };
    format!("{}{more}", shown.join(" "))
}

fn shorten(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let cut: String = s.chars().take(n).collect();
        format!("{cut}…")
    }
}
