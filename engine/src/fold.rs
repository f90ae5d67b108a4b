//! Partial evaluation at load: the rules whose outcome every request shares.
//!
//! CRS's control flow hangs on `TX` variables that no request can change:
//! the paranoia level, the thresholds and the enabled features are set by
//! unconditional `SecAction`s (`crs-setup.conf`) or by `SecRule &TX:x "@eq 0"`
//! defaults (`REQUEST-901`), and every rule file starts with
//! `SecRule TX:DETECTION_PARANOIA_LEVEL "@lt N" "skipAfter:..."`. Each
//! transaction starts with an empty `TX` and runs the same rules in the same
//! order up to the first rule that reads the request, so what those rules
//! read is known when the rules load.
//!
//! [`analyse`] walks each request phase's rule list as a control-flow graph
//! (fall through, or jump on a match with `skip`/`skipAfter`), carrying for
//! each `TX` name either its value (or its absence) on every path, or
//! "unknown". A rule is *decided* when it is one link without
//! transformations, captures or exclusions, reading only `TX:name` values
//! that are known, with an operator argument that is constant or expands
//! from known `TX` values only: its operator can be run at load. A chain
//! whose first link is decided and never matches is decided too (it never
//! matches); one whose first link always matches is evaluated. A decided rule that cannot match on any request is marked
//! [`Decision::Never`], and the engine steps over it without
//! evaluating it (it would do nothing but clear `MATCHED_VARS`). A decided
//! rule that matches on every request reaching it gets its matched values
//! ([`Folding::replay`]): the engine runs its actions on them without
//! reading `TX` or running the operator (CRS runs about 60 such rules per
//! request: the `&TX:x "@eq 0"` defaults and the paranoia-level skips). A
//! rule that is not decided makes every `TX` name it may write unknown on
//! both of its exits (a chain may run a link's `setvar` and still fail).
//!
//! The analysis describes a transaction that runs the rules as written,
//! from phase 1 on, through phases 2, 3, 4 (which runs only for inspected
//! response bodies) and 5. The engine uses it only while that holds (see
//! `Transaction::fold_applies`): every phase before the current one ran
//! to its end (phase 4 excepted before phase 5, when it never started),
//! and no `ctl:ruleRemove*` or API removal selected a rule the analysis
//! decided (removing others is a case the analysis covers: see
//! [`Folding::touched_by_ids`]).

use std::collections::{BTreeMap, BTreeSet};
use waf_compiler::ir::{
    Arg, Disruptive, Link, LinkAction, MacroPart, MacroString, Program, Rule, Selector, SetVarOp,
};
use waf_compiler::names::Variable as V;

/// The phases analysed, in the order a transaction runs them. Phase 4 runs
/// only for inspected response bodies, so phase 5 starts from the join of
/// phase 3's end and phase 4's.
const PHASES: [u8; 5] = [1, 2, 3, 4, 5];

/// The outcome of [`analyse`].
#[derive(Debug, Default)]
pub(crate) struct Folding {
    /// Per rule index: what the analysis decided (when it applies), in one
    /// byte: the rule loop reads it for every rule, `replay` only for the
    /// rules it names.
    decision: Vec<Decision>,
    count: usize,
    /// Per rule index: the values it matches, in the order the engine
    /// would find them, for the rules that match on every request reaching
    /// them and can be replayed.
    replay: Vec<Option<Replay>>,
    replayable: usize,
    /// The replayed values, every rule's in turn: names in `hit_names`,
    /// values in `hit_values` (read in rule order on every request, so
    /// kept in three arrays, not in a string and a vector per value).
    hits: Vec<PackedHit>,
    hit_names: String,
    hit_values: Vec<u8>,
    /// The ids, tags and literal messages of the rules decided at load
    /// (matching or not): a `ctl:ruleRemove*` that selects none of them
    /// leaves the analysis true (see [`Folding::touched_by_ids`]).
    decided_ids: Vec<u64>,
    decided_tags: BTreeSet<String>,
    decided_msgs: BTreeSet<String>,
}

/// What partial evaluation decided about a rule (see [`Folding::decision`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Evaluated on each request.
    #[default]
    Evaluate,
    /// Never matches: stepped over.
    Never,
    /// Matches on every request reaching it: replayed.
    Replay,
}

impl Folding {
    /// What the analysis decided about rule `rule` (an index into
    /// `Program::rules`).
    #[inline]
    pub(crate) fn decision(&self, rule: usize) -> Decision {
        self.decision.get(rule).copied().unwrap_or_default()
    }

    /// How many rules never match.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// The values rule `rule` matches on every request reaching it (when
    /// the analysis applies), if it can be replayed from them.
    #[inline]
    pub(crate) fn replay(&self, rule: usize) -> Option<&Replay> {
        self.replay.get(rule).and_then(|h| h.as_ref())
    }

    /// Value `k` of a replay's `hits`: (`MATCHED_VAR_NAME`, `MATCHED_VAR`).
    #[inline]
    pub(crate) fn hit(&self, k: u32) -> (&str, &[u8]) {
        let Some(h) = self.hits.get(k as usize) else {
            return ("", b"");
        };
        let name = self.hit_names.get(h.name.0 as usize..h.name.1 as usize);
        let value = self.hit_values.get(h.value.0 as usize..h.value.1 as usize);
        (name.unwrap_or(""), value.unwrap_or(b""))
    }

    /// Keeps a rule's matched values in the folding's arrays.
    fn pack(&mut self, found: Found) -> Replay {
        let start = self.hits.len() as u32;
        for h in found.hits {
            let n = self.hit_names.len() as u32;
            self.hit_names.push_str(&h.name);
            let v = self.hit_values.len() as u32;
            self.hit_values.extend_from_slice(&h.value);
            self.hits.push(PackedHit {
                name: (n, self.hit_names.len() as u32),
                value: (v, self.hit_values.len() as u32),
            });
        }
        Replay {
            hits: start..self.hits.len() as u32,
            matched_vars: found.matched_vars,
        }
    }

    /// Whether the analysis has anything for the engine to use.
    pub(crate) fn any(&self) -> bool {
        self.count > 0 || self.replayable > 0
    }

    /// How many rules can be replayed.
    pub(crate) fn replayable(&self) -> usize {
        self.replayable
    }

    /// Whether removing the rules (or targets of the rules) with ids in
    /// `ranges` changes a rule the analysis decided. Removing undecided
    /// rules does not: the analysis already lets each of them match or not,
    /// writing any subset of what it may write, and a removed rule is one
    /// that did not match and wrote nothing. (CRS's 941010 removes
    /// `REQUEST_FILENAME` from the XSS rules on most requests.)
    pub(crate) fn touched_by_ids(&self, ranges: &[(u64, u64)]) -> bool {
        ranges.iter().any(|&(a, b)| {
            let from = self.decided_ids.partition_point(|&id| id < a);
            self.decided_ids.get(from).is_some_and(|&id| id <= b)
        })
    }

    /// As [`Folding::touched_by_ids`], for the rules tagged `tag`.
    pub(crate) fn touched_by_tag(&self, tag: &str) -> bool {
        self.decided_tags.contains(tag)
    }

    /// As [`Folding::touched_by_ids`], for the rules whose message is `msg`.
    pub(crate) fn touched_by_msg(&self, msg: &str) -> bool {
        self.decided_msgs.contains(msg)
    }
}

/// What a `TX` name holds at a point of the rule list, on every path there.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Val {
    /// This value, or absent (`None`), on every path.
    Known(Option<Vec<u8>>),
    /// Differs between paths or requests.
    Unknown,
}

/// The `TX` collection at a point: names not listed are absent (a
/// transaction starts with an empty `TX`), unless `all_unknown` or they
/// start with one of `unknown_prefixes` (what `setvar:tx.name_%{...}` may
/// have written).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct TxState {
    vars: BTreeMap<Vec<u8>, Val>,
    unknown_prefixes: Vec<Vec<u8>>,
    all_unknown: bool,
}

impl TxState {
    fn get(&self, name: &[u8]) -> Val {
        if self.all_unknown || self.unknown_prefixes.iter().any(|p| name.starts_with(p)) {
            return Val::Unknown;
        }
        self.vars.get(name).cloned().unwrap_or(Val::Known(None))
    }

    /// A write to a name computed at run time: every name starting with its
    /// literal beginning may have changed.
    fn forget_computed_name(&mut self, name: &MacroString) {
        match name.parts.first() {
            Some(MacroPart::Literal(prefix)) if !prefix.is_empty() => {
                let prefix = prefix.to_ascii_lowercase().into_bytes();
                if !self.unknown_prefixes.contains(&prefix) {
                    self.unknown_prefixes.push(prefix);
                }
            }
            _ => self.all_unknown = true,
        }
    }

    fn set(&mut self, name: Vec<u8>, v: Val) {
        if !self.all_unknown {
            self.vars.insert(name, v);
        }
    }

    /// The state at a point two paths reach: values both agree on stay.
    fn join(&mut self, other: &TxState) {
        if self.all_unknown || other.all_unknown {
            *self = TxState {
                all_unknown: true,
                ..TxState::default()
            };
            return;
        }
        // Compare before widening the prefixes: `get` applies them.
        let names: Vec<Vec<u8>> = self.vars.keys().chain(other.vars.keys()).cloned().collect();
        let mut unknown = Vec::new();
        for name in names {
            if self.get(&name) != other.get(&name) {
                unknown.push(name);
            }
        }
        for name in unknown {
            self.vars.insert(name, Val::Unknown);
        }
        for p in &other.unknown_prefixes {
            if !self.unknown_prefixes.contains(p) {
                self.unknown_prefixes.push(p.clone());
            }
        }
    }

    /// Every `TX` name the rule may write becomes unknown.
    fn forget_writes(&mut self, program: &Program, rule: &Rule) {
        for link in &rule.links {
            if backtracks(program, link) {
                // A search at the match limit sets it (see
                // `Eval::pcre_limit_hit`).
                self.set(b"msc_pcre_limits_exceeded".to_vec(), Val::Unknown);
            }
            if link.capture {
                for d in b'0'..=b'9' {
                    self.set(vec![d], Val::Unknown);
                }
            }
            for a in &link.actions {
                match a {
                    LinkAction::SetVar(sv) if sv.collection == V::Tx => {
                        match sv.name.as_literal() {
                            Some(n) => self.set(n.to_ascii_lowercase().into_bytes(), Val::Unknown),
                            None => self.forget_computed_name(&sv.name),
                        }
                    }
                    LinkAction::ExpireVar { name, .. } | LinkAction::DeprecateVar { name, .. } => {
                        match name.as_literal() {
                            Some(n) => {
                                let n = n.to_ascii_lowercase();
                                if let Some(k) = n.strip_prefix("tx.") {
                                    self.set(k.as_bytes().to_vec(), Val::Unknown);
                                }
                            }
                            None => self.all_unknown = true,
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    /// The `setvar`s of a rule that matched, applied in order.
    fn apply_writes(&mut self, link: &Link) {
        for a in &link.actions {
            let LinkAction::SetVar(sv) = a else { continue };
            if sv.collection != V::Tx {
                continue;
            }
            let Some(name) = sv.name.as_literal() else {
                self.forget_computed_name(&sv.name);
                continue;
            };
            let name = name.to_ascii_lowercase().into_bytes();
            let v = match &sv.op {
                SetVarOp::Set(m) => match self.expand(&m.parts) {
                    Some(v) => Val::Known(Some(v)),
                    None => Val::Unknown,
                },
                SetVarOp::Delete => Val::Known(None),
                // Arithmetic on values is left to run time.
                SetVarOp::Add(_) | SetVarOp::Sub(_) => Val::Unknown,
            };
            self.set(name, v);
        }
        // Other actions of a decided rule (ctl, initcol...) do not write
        // TX; a `ctl:ruleRemove*` makes the engine stop using the analysis.
    }

    /// A macro string whose references are all known `TX` values.
    fn expand(&self, parts: &[MacroPart]) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        for p in parts {
            match p {
                MacroPart::Literal(s) => out.extend_from_slice(s.as_bytes()),
                MacroPart::Var {
                    variable: V::Tx,
                    key: Some(k),
                } => match self.get(k.to_ascii_lowercase().as_bytes()) {
                    Val::Known(Some(v)) => out.extend_from_slice(&v),
                    _ => return None,
                },
                MacroPart::Var { .. } => return None,
            }
        }
        Some(out)
    }
}

/// Whether the link's regex runs on PCRE2: its result may be "limit
/// reached", which writes `TX:MSC_PCRE_LIMITS_EXCEEDED`.
fn backtracks(program: &Program, link: &Link) -> bool {
    program.operators[link.operator.index()]
        .kind
        .regex()
        .is_some_and(|rx| program.regexes[rx.index()].is_backtracking())
}

/// A value a replayed rule matches: what the engine sets `MATCHED_VAR_NAME`
/// and `MATCHED_VAR` to before the rule's per-match actions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Hit {
    pub(crate) name: String,
    pub(crate) value: Vec<u8>,
}

/// A [`Hit`] in the folding's arrays: the ranges of its name and value.
#[derive(Clone, Copy, Debug)]
struct PackedHit {
    name: (u32, u32),
    value: (u32, u32),
}

/// What the analysis found a replayable rule to match.
#[derive(Clone, Debug)]
struct Found {
    hits: Vec<Hit>,
    matched_vars: bool,
}

/// The values a rule matches on every request reaching it: indexes for
/// [`Folding::hit`].
#[derive(Clone, Debug)]
pub(crate) struct Replay {
    pub(crate) hits: std::ops::Range<u32>,
    /// The rule's own actions read `MATCHED_VARS` (or its names). That is
    /// the only place the collection is seen: every rule clears it as it
    /// starts, so it need not be filled otherwise.
    pub(crate) matched_vars: bool,
}

/// What a decided rule does on every request reaching it.
enum Outcome {
    Never,
    /// It matches: with the values it matches, when it can be replayed.
    Matches(Option<Found>),
}

/// Whether a macro of `rule` (its message, log data, disruptive action's
/// URL, or a link's action) reads `MATCHED_VARS` or `MATCHED_VARS_NAMES`.
pub(crate) fn reads_matched_vars(rule: &Rule) -> bool {
    let disruptive = match &rule.disruptive {
        Disruptive::Redirect(m) | Disruptive::Proxy(m) => Some(m),
        _ => None,
    };
    let actions = rule.links.iter().flat_map(|l| &l.actions).flat_map(|a| {
        let (x, y): (Option<&MacroString>, Option<&MacroString>) = match a {
            LinkAction::SetVar(sv) => (
                Some(&sv.name),
                match &sv.op {
                    SetVarOp::Set(m) | SetVarOp::Add(m) | SetVarOp::Sub(m) => Some(m),
                    SetVarOp::Delete => None,
                },
            ),
            LinkAction::InitCol { key, .. } => (Some(key), None),
            LinkAction::ExpireVar { name, seconds } => (Some(name), Some(seconds)),
            LinkAction::DeprecateVar { name, value } | LinkAction::SetEnv { name, value } => {
                (Some(name), Some(value))
            }
            LinkAction::SetUid(m) | LinkAction::SetSid(m) | LinkAction::SetRsc(m) => {
                (Some(m), None)
            }
            LinkAction::Ctl(_) | LinkAction::Ignored { .. } => (None, None),
        };
        x.into_iter().chain(y)
    });
    rule.meta
        .msg
        .iter()
        .chain(&rule.meta.logdata)
        .chain(disruptive)
        .chain(actions)
        .flat_map(|m| &m.parts)
        .any(|p| {
            matches!(
                p,
                MacroPart::Var {
                    variable: V::MatchedVars | V::MatchedVarsNames,
                    ..
                }
            )
        })
}

/// The outcome of `rule` on every request reaching it in state `st`, if it
/// is decided there.
fn decide(program: &Program, rule: &Rule, st: &TxState) -> Option<Outcome> {
    if rule.unconditional {
        // No operator to skip: the engine runs its actions directly.
        return Some(Outcome::Matches(None));
    }
    // A chain is decided when its first link never matches: the links
    // after it are then never reached (CRS's `SecRule &TX:MAX_NUM_ARGS
    // "@eq 1" "chain"` when the limit is not set).
    let (link, chained) = match rule.links.as_slice() {
        [link] => (link, false),
        [link, ..] => (link, true),
        [] => return None,
    };
    if link.capture || link.multi_match || !link.exclusions.is_empty() || backtracks(program, link)
    {
        return None;
    }
    if program.transforms.nodes[link.transforms.index()]
        .parent
        .is_some()
    {
        return None;
    }
    let op = &program.operators[link.operator.index()];
    // The string and numeric operators: pure functions of the value and
    // their argument, which must be constant, or expand from known `TX`
    // values only (`@lt %{tx.blocking_paranoia_level}`).
    let arg: Vec<u8> = match op.kind.argument() {
        Some(Arg::Const(arg)) => arg.as_bytes().to_vec(),
        Some(Arg::Macro(m)) => st.expand(&m.parts)?,
        None => return None,
    };
    let arg = arg.as_slice();
    // The values the rule tests, as `collect_into` reads them and
    // `push_name` names them: `TX` keys are stored lowercased by `setvar`
    // (the only writer of a known value), and a count is named `TX`.
    let mut values: Vec<(usize, Hit)> = Vec::new();
    let mut read: Vec<Vec<u8>> = Vec::new();
    for (slot_index, slot) in link.targets.iter().enumerate() {
        let target = &program.targets[program.slots[slot.index()].target.index()];
        let (V::Tx, Selector::Key(k)) = (target.variable, &target.selector) else {
            return None;
        };
        let key = k.to_ascii_lowercase().into_bytes();
        let Val::Known(v) = st.get(&key) else {
            return None;
        };
        let name = |key: &[u8]| {
            let mut n = String::new();
            crate::transaction::fmt::push_name(&mut n, V::Tx, key);
            n
        };
        match (target.count, v) {
            (true, v) => values.push((
                slot_index,
                Hit {
                    name: name(b""),
                    value: if v.is_some() { b"1" } else { b"0" }.to_vec(),
                },
            )),
            (false, Some(v)) => values.push((
                slot_index,
                Hit {
                    name: name(&key),
                    value: v,
                },
            )),
            (false, None) => {}
        }
        read.push(key);
    }
    let mut caps = crate::operator::Captures::default();
    let mut hits: Vec<Hit> = Vec::new();
    let mut first_hit_slot = None;
    for (slot_index, v) in values {
        let matched = crate::operator::matches(
            program,
            op,
            arg,
            &v.value,
            &crate::injection::Libinjection,
            false,
            &mut caps,
        );
        if matched != op.negated {
            first_hit_slot.get_or_insert(slot_index);
            hits.push(v);
        }
    }
    let Some(first_hit_slot) = first_hit_slot else {
        return Some(Outcome::Never);
    };
    if chained {
        // The first link matches: the rest of the chain reads the request.
        return None;
    }
    // The engine runs the per-match actions after each value it finds, and
    // reads a target's values as it comes to the target: a `setvar` to a
    // name a later target reads would change that target's values, so such
    // a rule is run, not replayed (its first match stands either way).
    // CRS's `SecRule &TX:x "@eq 0" "setvar:tx.x=..."` reads its one target
    // before it writes.
    let later = &read[first_hit_slot + 1..];
    let writes_what_it_reads = link.actions.iter().any(|a| match a {
        LinkAction::SetVar(sv) if sv.collection == V::Tx => match sv.name.as_literal() {
            Some(n) => later.contains(&n.to_ascii_lowercase().into_bytes()),
            None => !later.is_empty(),
        },
        _ => false,
    });
    Some(Outcome::Matches((!writes_what_it_reads).then(|| Found {
        hits,
        matched_vars: reads_matched_vars(rule),
    })))
}

/// Analyses the phases of `program` (see the module documentation).
pub(crate) fn analyse(program: &Program) -> Folding {
    let mut never = vec![false; program.rules.len()];
    let mut decided = vec![false; program.rules.len()];
    let mut found: Vec<Option<Found>> = vec![None; program.rules.len()];
    let mut start = Some(TxState::default());
    // Where phase 3 ended: phase 5 may follow it directly.
    let mut end_of_3: Option<TxState> = None;
    for phase in PHASES {
        if phase == 5 {
            start = match (start, end_of_3.take()) {
                (Some(mut a), Some(b)) => {
                    a.join(&b);
                    Some(a)
                }
                (a, b) => a.or(b),
            };
        }
        let rules = &program.phase(phase).rules;
        let n = rules.len();
        // in_state[i]: the join of every path reaching position i (None:
        // no path does); in_state[n] is the end of the phase.
        let mut in_state: Vec<Option<TxState>> = vec![None; n + 1];
        in_state[0] = start.take();
        for i in 0..n {
            let Some(st) = in_state[i].take() else {
                continue;
            };
            let rule = program.rule(rules[i]);
            let jump = rule
                .flow
                .as_ref()
                .map(|f| f.resume_at())
                .filter(|&j| j > i && j <= n);
            let mut edges: Vec<(usize, TxState)> = Vec::with_capacity(2);
            let outcome = decide(program, rule, &st);
            decided[rules[i].index()] |= outcome.is_some();
            match outcome {
                Some(Outcome::Never) => {
                    never[rules[i].index()] = true;
                    edges.push((i + 1, st.clone()));
                }
                Some(Outcome::Matches(hits)) => {
                    found[rules[i].index()] = hits;
                    let mut out = st.clone();
                    if let Some(link) = rule.links.first() {
                        out.apply_writes(link);
                    }
                    edges.push((jump.unwrap_or(i + 1), out));
                }
                None => {
                    let mut out = st.clone();
                    out.forget_writes(program, rule);
                    if let Some(j) = jump {
                        edges.push((j, out.clone()));
                    }
                    edges.push((i + 1, out));
                }
            }
            for (to, s) in edges {
                match &mut in_state[to] {
                    Some(existing) => existing.join(&s),
                    slot @ None => *slot = Some(s),
                }
            }
            in_state[i] = Some(st);
        }
        // The next phase starts where this one ended, when it ran to its
        // end (the engine checks that at run time).
        start = in_state[n].take();
        if phase == 3 {
            end_of_3 = start.clone();
        }
        if start.is_none() && phase != 4 {
            break;
        }
    }
    let count = never.iter().filter(|&&b| b).count();
    let replayable = found.iter().filter(|h| h.is_some()).count();
    let mut folding = Folding {
        count,
        replayable,
        ..Folding::default()
    };
    folding.replay = found
        .into_iter()
        .map(|f| f.map(|f| folding.pack(f)))
        .collect();
    folding.decision = never
        .iter()
        .zip(&folding.replay)
        .map(|(&never, replay)| match (never, replay) {
            (true, _) => Decision::Never,
            (false, Some(_)) => Decision::Replay,
            (false, None) => Decision::Evaluate,
        })
        .collect();
    for (rule, _) in program.rules.iter().zip(&decided).filter(|(_, &d)| d) {
        folding.decided_ids.push(rule.id);
        folding.decided_tags.extend(rule.meta.tags.iter().cloned());
        if let Some(m) = rule.meta.msg.as_ref().and_then(|m| m.as_literal()) {
            folding.decided_msgs.insert(m.to_owned());
        }
    }
    folding.decided_ids.sort_unstable();
    folding
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Ruleset;

    fn never(rules: &str) -> Vec<u64> {
        let rs = match Ruleset::from_str("t.conf", rules) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        };
        let p = rs.program();
        let f = analyse(p);
        p.rules
            .iter()
            .enumerate()
            .filter(|(i, _)| f.decision(*i) == Decision::Never)
            .map(|(_, r)| r.id)
            .collect()
    }

    #[test]
    fn paranoia_level_skips_are_decided() {
        let ids = never(
            "SecAction \"id:1,phase:1,pass,nolog,setvar:tx.detection_paranoia_level=1\"\n\
             SecRule &TX:blocking_paranoia_level \"@eq 0\" \"id:2,phase:1,pass,nolog,setvar:tx.blocking_paranoia_level=1\"\n\
             SecRule &TX:detection_paranoia_level \"@eq 0\" \"id:3,phase:1,pass,nolog,setvar:tx.detection_paranoia_level=%{TX.blocking_paranoia_level}\"\n\
             SecRule TX:DETECTION_PARANOIA_LEVEL \"@lt 1\" \"id:11,phase:1,pass,nolog,skipAfter:END\"\n\
             SecRule TX:DETECTION_PARANOIA_LEVEL \"@lt 2\" \"id:13,phase:1,pass,nolog,skipAfter:END\"\n\
             SecRule ARGS \"@rx x\" \"id:20,phase:1,pass,nolog\"\n\
             SecRule TX:DETECTION_PARANOIA_LEVEL \"@lt 3\" \"id:14,phase:1,pass,nolog\"\n\
             SecMarker END\n\
             SecRule TX:DETECTION_PARANOIA_LEVEL \"@lt 1\" \"id:12,phase:2,pass,nolog\"\n\
             SecRule TX:BLOCKING_PARANOIA_LEVEL \"@ge 1\" \"id:15,phase:2,pass,nolog\"\n",
        );
        // 2: the level is unset before it, so `&TX` is 0: it matches. 3:
        // set by 1. 11 and 12: level 1 is not below 1. 13 always jumps, so
        // 20 and 14 are never reached (and not marked: unreachable rules
        // are simply not run). 15 matches.
        assert_eq!(ids, [3, 11, 12]);
    }

    #[test]
    fn request_data_makes_values_unknown() {
        let ids = never(
            "SecAction \"id:1,phase:1,pass,nolog,setvar:tx.level=1\"\n\
             SecRule ARGS:pl \"@rx ^2$\" \"id:2,phase:1,pass,nolog,setvar:tx.level=2\"\n\
             SecRule TX:LEVEL \"@lt 1\" \"id:3,phase:1,pass,nolog\"\n\
             SecRule REQUEST_URI \"@rx a\" \"id:4,phase:1,pass,nolog,chain\"\n\
             SecRule ARGS \"@rx b\" \"setvar:tx.other=1\"\n\
             SecRule TX:OTHER \"@eq 5\" \"id:5,phase:1,pass,nolog\"\n\
             SecRule REQUEST_URI \"@rx a\" \"id:6,phase:1,pass,nolog,setvar:tx.%{ARGS.n}=1\"\n\
             SecRule TX:UNRELATED \"@eq 5\" \"id:7,phase:1,pass,nolog\"\n\
             SecRule REQUEST_URI \"@rx (a)\" \"id:8,phase:2,pass,nolog,capture\"\n\
             SecRule TX:1 \"@eq 5\" \"id:9,phase:2,pass,nolog\"\n",
        );
        // 3: TX:level is 1 or 2, never below 1, but the analysis only
        // knows one value per name: unknown. 5: `tx.other` is 1 or unset:
        // unknown. 7: a setvar with a macro name may write any name. 9:
        // capture writes TX:0-9.
        assert_eq!(ids, Vec::<u64>::new());
    }

    #[test]
    fn phase_five_starts_from_either_end_of_phase_three_or_four() {
        let ids = never(
            "SecAction \"id:1,phase:1,pass,nolog,setvar:tx.a=1,setvar:tx.b=1\"\n\
             SecRule TX:A \"@eq 2\" \"id:31,phase:3,pass,nolog\"\n\
             SecAction \"id:41,phase:4,pass,nolog,setvar:tx.b=2\"\n\
             SecRule TX:B \"@eq 1\" \"id:42,phase:4,pass,nolog\"\n\
             SecRule TX:A \"@eq 2\" \"id:51,phase:5,pass,nolog\"\n\
             SecRule TX:B \"@eq 3\" \"id:52,phase:5,pass,nolog\"\n",
        );
        // 31, 51: a is 1 throughout. 42: b is 2 after 41. 52: b is 1 if
        // phase 4 did not run, 2 if it did: unknown.
        assert_eq!(ids, [31, 42, 51]);
    }

    #[test]
    fn chains_and_macro_arguments_are_decided() {
        let ids = never(
            "SecAction \"id:1,phase:1,pass,nolog,setvar:tx.level=1,setvar:tx.limit=2\"\n\
             SecRule &TX:MAX \"@eq 1\" \"id:2,phase:1,pass,nolog,chain\"\n\
             SecRule &ARGS \"@gt %{tx.max}\" \"setvar:tx.x=1\"\n\
             SecRule &TX:LIMIT \"@eq 1\" \"id:3,phase:1,pass,nolog,chain\"\n\
             SecRule &ARGS \"@gt %{tx.limit}\" \"setvar:tx.x=1\"\n\
             SecRule TX:LEVEL \"@lt %{tx.limit}\" \"id:4,phase:1,pass,nolog,skipAfter:END\"\n\
             SecRule TX:LEVEL \"@ge %{tx.limit}\" \"id:5,phase:1,pass,nolog\"\n\
             SecRule TX:LEVEL \"@ge %{tx.unset}\" \"id:6,phase:1,pass,nolog\"\n\
             SecRule TX:LEVEL \"@ge %{request_uri}\" \"id:7,phase:1,pass,nolog\"\n\
             SecMarker END\n\
             SecRule TX:X \"@eq 1\" \"id:8,phase:1,pass,nolog\"\n",
        );
        // 2: `tx.max` is unset, its count 0: the chain never goes on. 3:
        // its first link matches, the rest reads the request: evaluated,
        // and `tx.x` unknown after it (8). 4 always jumps (1 < 2), so 5
        // to 7 are never reached. 6 and 7 would not be decided anyway: an
        // unset name, a request variable.
        assert_eq!(ids, [2]);
        let rs = match Ruleset::from_str(
            "t.conf",
            "SecAction \"id:1,phase:1,pass,nolog,setvar:tx.level=1,setvar:tx.limit=2\"\n\
             SecRule TX:LEVEL \"@ge %{tx.limit}\" \"id:5,phase:1,pass,nolog\"\n\
             SecRule TX:LEVEL \"@ge %{tx.unset}\" \"id:6,phase:1,pass,nolog\"\n\
             SecRule TX:LEVEL \"@ge %{request_uri}\" \"id:7,phase:1,pass,nolog\"\n\
             SecRule TX:LEVEL \"@lt %{tx.limit}\" \"id:9,phase:1,pass,nolog\"\n",
        ) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        };
        let f = analyse(rs.program());
        let decisions: Vec<Decision> = (0..5).map(|i| f.decision(i)).collect();
        assert_eq!(
            decisions,
            [
                // A `SecAction` runs its actions directly.
                Decision::Evaluate,
                Decision::Never,
                Decision::Evaluate,
                Decision::Evaluate,
                Decision::Replay
            ]
        );
    }

    #[test]
    fn joins_keep_what_every_path_agrees_on() {
        let ids = never(
            "SecAction \"id:1,phase:1,pass,nolog,setvar:tx.a=1,setvar:tx.b=1\"\n\
             SecRule REQUEST_URI \"@rx x\" \"id:2,phase:1,pass,nolog,skipAfter:M\"\n\
             SecAction \"id:3,phase:1,pass,nolog,setvar:tx.b=2\"\n\
             SecMarker M\n\
             SecRule TX:A \"@eq 2\" \"id:4,phase:1,pass,nolog\"\n\
             SecRule TX:B \"@eq 3\" \"id:5,phase:1,pass,nolog\"\n\
             SecRule TX:A \"!@eq 1\" \"id:6,phase:1,pass,nolog\"\n\
             SecRule TX:NONE \"!@eq 1\" \"id:7,phase:1,pass,nolog\"\n\
             SecRule &TX:NONE \"@eq 1\" \"id:8,phase:1,pass,nolog\"\n",
        );
        // 4: a is 1 on both paths. 5: b is 1 or 2: unknown. 6: negated, a
        // is 1. 7: no value, so even a negated operator cannot match. 8:
        // the count is 0.
        assert_eq!(ids, [4, 6, 7, 8]);
    }
}
