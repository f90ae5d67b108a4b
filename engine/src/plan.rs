//! The evaluation plan: the program's rules, links and value slots in the
//! dense form the rule loop reads, built once at load and owned by the
//! [`crate::Ruleset`].
//!
//! The IR (`waf_compiler::ir`) is shaped for compilation and reporting; the
//! rule loop reads a few fields of every rule, link and slot on every
//! request, so those are copied here into compact arrays. The IR's `Rule`
//! and `Link` are only reached when a rule matches, has exclusions, or is
//! removed by a `ctl`.

use crate::prefilter::Scanner;
use crate::sources::{is_volatile, stable_coll, Coll};
use crate::transform::Transform;
use std::collections::HashMap;
use std::sync::Arc;
use waf_compiler::ir::{NodeId, Program, RuleIdx, SlotId, TargetId};

use waf_compiler::names::Variable as V;

/// A rule's hot fields, dense (the rule loop reads these for every rule;
/// the IR's `Rule` is only touched when a rule matches or is removed).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlanRule {
    /// `plan_links[links..links + n_links]`.
    pub links: u32,
    pub n_links: u32,
    pub unconditional: bool,
}

/// A link's hot fields.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlanLink {
    pub op: waf_compiler::ir::OpId,
    pub gate: crate::prefilter::Gate,
    pub node: NodeId,
    /// `plan_slots[slots..slots + n_slots]`.
    pub slots: u32,
    pub n_slots: u32,
    /// Index of the link in its rule.
    pub index: u32,
    pub multi_match: bool,
    pub capture: bool,
    pub has_exclusions: bool,
    /// The operator's regex runs on PCRE2 under a match limit
    /// (`WafPcreFallback On`): its limit hits are to be counted.
    pub backtracking: bool,
    /// The link's slot group (see [`Plan::group_slots`]): set when the
    /// whole link can be ruled out by one test of its slots' combined
    /// verdicts (every slot memoized, and a prefilter gate or an operator
    /// whose result is a function of the value alone). A `multiMatch`
    /// link's group has a coarse union only (see [`Plan::group_exact`]).
    pub group: Option<u32>,
    /// The link's bit in a value's verdict (see [`Plan::class_links`]):
    /// set for grouped links, `u32::MAX` for the others.
    pub verdict: u32,
}

/// A grouped link as a class of values sees it (see [`Plan::class_links`]):
/// its verdict bit, its gate, and the node it tests a value at (with
/// `multiMatch`, every node of its chain: `Plan::chain_nodes(chain)`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ClassLink {
    pub bit: u32,
    pub gate: crate::prefilter::Gate,
    pub node: NodeId,
    /// `multiMatch`: the range of [`Plan::chain_nodes`] with the chain's
    /// nodes, root first; empty otherwise.
    pub chain: (u32, u32),
}

/// A slot's target and how its values are read.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SlotInfo {
    pub target: waf_compiler::ir::TargetId,
    /// Read afresh by every rule (a count, or a variable rules change).
    pub direct: bool,
    /// The request collection the target reads, if any.
    pub coll: Option<Coll>,
}

/// Where the values of a slot group's *coarse union* come from (see
/// [`Plan::group_list`]): all of a request collection's values or
/// names, whatever a target's selector keeps; or, for any other memoized
/// target, the target's own values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UnionSource {
    Coll { coll: Coll, names: bool, var: V },
    Target(TargetId),
}

/// What recording a rule's match reads of it, dense: about a quarter of
/// CRS's rules match on every request (its set-up and bookkeeping rules,
/// most replayed from partial evaluation), and reading these fields from
/// the IR's `Rule` cost a cache miss or more each per match. Tags, version
/// and location are shared by match reports rather than copied.
#[derive(Debug)]
pub(crate) struct RuleMeta {
    pub id: u64,
    pub phase: u8,
    pub severity: Option<waf_compiler::names::Severity>,
    /// Its disruptive action is `pass` (the IR's is read otherwise).
    pub pass: bool,
    pub log: bool,
    pub auditlog: bool,
    /// It has a `msg` or `logdata` (read from the IR when it does).
    pub text: bool,
    /// Some link has an action run once the rule matched (anything but
    /// `setvar`, which runs per matched value).
    pub after_actions: bool,
    /// Something of the rule reads `MATCHED_VARS` (a macro, a link's
    /// target or operator argument): only then do its matches fill it
    /// (every rule empties it as it starts, so nothing else can read it).
    pub matched_vars: bool,
    pub tags: Arc<[String]>,
    pub ver: Option<Arc<str>>,
    pub location: Arc<str>,
}

/// Whether anything of `rule` reads `MATCHED_VARS` or
/// `MATCHED_VARS_NAMES`: a macro of its texts or actions, or one of its
/// links' targets or operator arguments.
fn reads_matched_vars(program: &Program, rule: &waf_compiler::ir::Rule) -> bool {
    let matched = |v: V| matches!(v, V::MatchedVars | V::MatchedVarsNames);
    crate::fold::reads_matched_vars(rule)
        || rule.links.iter().any(|l| {
            let targets = l
                .targets
                .iter()
                .any(|s| matched(program.targets[program.slots[s.index()].target.index()].variable));
            let argument = match program.operators[l.operator.index()].kind.argument() {
                Some(waf_compiler::ir::Arg::Macro(m)) => m.parts.iter().any(|p| {
                    matches!(p, waf_compiler::ir::MacroPart::Var { variable, .. } if matched(*variable))
                }),
                _ => false,
            };
            targets || argument
        })
}

/// The plan of one program.
#[derive(Debug)]
pub(crate) struct Plan {
    rules: Vec<PlanRule>,
    links: Vec<PlanLink>,
    slots: Vec<SlotId>,
    /// Per value slot, what evaluation needs in a few bytes (read for every
    /// slot of every rule: kept dense instead of chasing the IR's structs).
    slot_info: Vec<SlotInfo>,
    /// Per rule: what recording its match reads.
    rule_meta: Vec<RuleMeta>,
    /// The transformations of each transform-tree node, first to last
    /// (built once: rules read them on every value they test directly).
    chains: Vec<Vec<Transform>>,
    /// Slot groups: the distinct slot lists of gated links,
    /// `group_slots[group_start[g]..group_start[g + 1]]`. CRS's attack
    /// rules read the same targets through the same chain (`ARGS`,
    /// `ARGS_NAMES`, `REQUEST_COOKIES`, ... at one node) with different
    /// operators: the union of a group's scan results, computed once per
    /// phase, rules most of those links out with one bit test instead of
    /// one per slot.
    group_start: Vec<u32>,
    group_slots: Vec<SlotId>,
    /// Per group: whether it has an exact union. A `multiMatch` link tests
    /// its values at every node of its chain, not only at its slots'
    /// nodes: its group (apart from other links') has no exact union, and
    /// its sources' classes span the whole chain (see `group_list`).
    group_exact: Vec<bool>,
    /// Per group: how many links read it. A group's unions pay off when
    /// three or more links test them; one or two links test the sources'
    /// and slots' unions one by one instead (84 of CRS PL1's 104 groups:
    /// building their unions cost more than the tests they replaced).
    group_links: Vec<u32>,
    /// The coarse unions' sources, and each group's: the list
    /// `l = group_list[g]`, whose sources
    /// `list_sources[source_start[l]..source_start[l + 1]]` index `sources`.
    /// Groups that read the same variables at different nodes of their
    /// chains have the same list, so that a list is brought up to date and
    /// folded once per generation, not once per group (see
    /// `Memo::list_folded`; CRS PL1 on benign requests: 53.8 folds per
    /// request instead of 85.8).
    /// A value's coarse union is the union of its scan results at every
    /// node its source is read at by a grouped slot (its *class*: sources
    /// with the same nodes share one), so one union per value, cached
    /// across transactions, stands for all the chains that read it. A
    /// group's coarse union (the union over its sources' values) contains
    /// its exact one, and rules most links out (on CRS and benign traffic,
    /// 96 % of those the exact union rules out) without building a target
    /// list or visiting a (value, node). The sources of `multiMatch`
    /// groups are apart from the others': their values
    /// are read at every node of the chains, and adding those nodes to the
    /// other sources' classes would fill their unions with what only
    /// `multiMatch` links read (bytes of `base64Decode`'s output...).
    sources: Vec<UnionSource>,
    source_class: Vec<u32>,
    /// Per class: the grouped links that read its values (see
    /// [`Plan::class_links`]).
    class_links: Vec<Vec<ClassLink>>,
    /// The nodes of `multiMatch` links' chains (see [`ClassLink::chain`]).
    chain_nodes: Vec<NodeId>,
    /// Per slot: the class of the values it reads, for ordinary links and
    /// for `multiMatch` ones (`u32::MAX`: none, the slot is in no group).
    slot_class: Vec<[u32; 2]>,
    /// Words of a verdict (one bit per grouped link).
    verdict_words: usize,
    /// Per source, `verdict_words` words: the bits of the links whose group
    /// reads it (see [`Plan::source_mask`]).
    source_masks: Vec<u64>,
    group_list: Vec<u32>,
    source_start: Vec<u32>,
    list_sources: Vec<u32>,
}

impl Plan {
    /// The plan of `program`, with the prefilter gates of `scanner`.
    pub(crate) fn new(program: &Program, scanner: &Scanner) -> Plan {
        let chains = (0..program.transforms.nodes.len())
            .map(|n| program.transforms.chain(NodeId(n as u32)))
            .collect();
        // Rules with the same tags or version share one of each: a match
        // record keeps its shared fields when the next rule to fill it has
        // the same (see `MatchedRule::assign`), and a clone of another
        // writes a reference count every worker thread touches.
        let mut tag_sets: HashMap<&[String], Arc<[String]>> = HashMap::new();
        let mut versions: HashMap<&str, Arc<str>> = HashMap::new();
        let rule_meta = program
            .rules
            .iter()
            .map(|r| RuleMeta {
                id: r.id,
                phase: r.phase,
                severity: r.meta.severity,
                pass: matches!(r.disruptive, waf_compiler::ir::Disruptive::Pass),
                log: r.log,
                auditlog: r.auditlog,
                text: r.meta.msg.is_some() || r.meta.logdata.is_some(),
                after_actions: r.links.iter().any(|l| {
                    l.actions
                        .iter()
                        .any(|a| !matches!(a, waf_compiler::ir::LinkAction::SetVar(_)))
                }),
                matched_vars: reads_matched_vars(program, r),
                tags: tag_sets
                    .entry(r.meta.tags.as_slice())
                    .or_insert_with(|| r.meta.tags.iter().cloned().collect())
                    .clone(),
                ver: r
                    .meta
                    .ver
                    .as_deref()
                    .map(|v| versions.entry(v).or_insert_with(|| Arc::from(v)).clone()),
                location: Arc::from(r.location.as_str()),
            })
            .collect();
        let slot_info: Vec<SlotInfo> = program
            .slots
            .iter()
            .map(|s| {
                let t = &program.targets[s.target.index()];
                SlotInfo {
                    target: s.target,
                    direct: t.count || is_volatile(t.variable),
                    coll: stable_coll(t.variable).map(|(c, _)| c),
                }
            })
            .collect();
        let (mut plan_rules, mut plan_links, mut plan_slots) = (Vec::new(), Vec::new(), Vec::new());
        let mut groups: std::collections::HashMap<(Vec<SlotId>, bool), u32> = Default::default();
        let (mut group_start, mut group_slots) = (vec![0u32], Vec::new());
        let mut group_exact = Vec::new();
        let mut group_links: Vec<u32> = Vec::new();
        let mut verdicts = 0usize;
        let mut links_of_group: Vec<Vec<usize>> = Vec::new();
        for r in &program.rules {
            plan_rules.push(PlanRule {
                links: plan_links.len() as u32,
                n_links: r.links.len() as u32,
                unconditional: r.unconditional,
            });
            for (k, l) in r.links.iter().enumerate() {
                let gate = scanner.gate(l.operator);
                // A link without a prefilter gate is grouped too when its
                // operator's result is a function of the value alone (no
                // macro in its argument; not a negated match with
                // `capture`, which sets `TX:0-9` where the link does not
                // match): its verdict bit is cleared once a value is known
                // not to match (see `Plan::class_links`).
                let op = &program.operators[l.operator.index()];
                let macro_arg = matches!(op.kind.argument(), Some(waf_compiler::ir::Arg::Macro(_)));
                let pure = !(macro_arg || (op.negated && l.capture));
                let groupable = (gate != crate::prefilter::Gate::Always || pure)
                    && !l.targets.is_empty()
                    && l.targets.iter().all(|s| !slot_info[s.index()].direct);
                let group = groupable.then(|| {
                    let mut key = l.targets.clone();
                    key.sort_unstable_by_key(|s| s.index());
                    key.dedup();
                    *groups
                        .entry((key, l.multi_match))
                        .or_insert_with_key(|(key, multi_match)| {
                            group_slots.extend_from_slice(key);
                            group_start.push(group_slots.len() as u32);
                            group_exact.push(!multi_match);
                            group_links.push(0);
                            (group_start.len() - 2) as u32
                        })
                });
                let mut verdict = u32::MAX;
                if let Some(g) = group {
                    group_links[g as usize] += 1;
                    verdict = verdicts as u32;
                    verdicts += 1;
                    links_of_group.resize(links_of_group.len().max(g as usize + 1), Vec::new());
                    links_of_group[g as usize].push(plan_links.len());
                }
                plan_links.push(PlanLink {
                    op: l.operator,
                    gate,
                    node: l.transforms,
                    slots: plan_slots.len() as u32,
                    n_slots: l.targets.len() as u32,
                    index: k as u32,
                    multi_match: l.multi_match,
                    capture: l.capture,
                    has_exclusions: !l.exclusions.is_empty(),
                    backtracking: program.operators[l.operator.index()]
                        .kind
                        .regex()
                        .is_some_and(|rx| program.regexes[rx.index()].is_backtracking()),
                    group,
                    verdict,
                });
                plan_slots.extend_from_slice(&l.targets);
            }
        }
        let mut sources: Vec<UnionSource> = Vec::new();
        let mut source_chain: Vec<bool> = Vec::new();
        // Per source: the key of its values' class. The values of a
        // request collection are one class whether a source reads all of
        // them or one key (an instance read both ways computes and caches
        // one verdict); other targets' values are a class each.
        let mut source_key: Vec<usize> = Vec::new();
        // A class key: a request collection's values or names, or another
        // target; and whether `multiMatch` links read it.
        type ClassKey = (Result<(Coll, bool), TargetId>, bool);
        let mut key_links: Vec<Vec<usize>> = Vec::new();
        let mut key_slots: Vec<Vec<SlotId>> = Vec::new();
        let mut keys: Vec<ClassKey> = Vec::new();
        let (mut source_start, mut list_sources) = (vec![0u32], Vec::new());
        let mut group_list = Vec::new();
        for g in 0..group_start.len() - 1 {
            let first = list_sources.len();
            let chain = !group_exact[g];
            for &slot in &group_slots[group_start[g] as usize..group_start[g + 1] as usize] {
                let target = slot_info[slot.index()].target;
                let t = &program.targets[target.index()];
                let var = t.variable;
                // A target of one key of a collection reads its values
                // alone: its own source, so that the other keys' values
                // (never tested by its links, so never known not to match)
                // do not fill its union.
                let one_key = matches!(t.selector, waf_compiler::ir::Selector::Key(_));
                let (source, key) = match stable_coll(var) {
                    Some((coll, names)) if one_key && !coll.keyless() => {
                        (UnionSource::Target(target), Ok((coll, names)))
                    }
                    Some((coll, names)) => {
                        (UnionSource::Coll { coll, names, var }, Ok((coll, names)))
                    }
                    None => (UnionSource::Target(target), Err(target)),
                };
                let k = match keys.iter().position(|k| *k == (key, chain)) {
                    Some(k) => k,
                    None => {
                        keys.push((key, chain));
                        key_links.push(Vec::new());
                        key_slots.push(Vec::new());
                        keys.len() - 1
                    }
                };
                let found = (sources.iter().zip(&source_chain))
                    .position(|(s, c)| (*s, *c) == (source, chain));
                let id = match found {
                    Some(i) => i,
                    None => {
                        sources.push(source);
                        source_chain.push(chain);
                        source_key.push(k);
                        sources.len() - 1
                    }
                };
                for &li in links_of_group.get(g).map_or(&[][..], Vec::as_slice) {
                    if !key_links[k].contains(&li) {
                        key_links[k].push(li);
                    }
                }
                key_slots[k].push(slot);
                if !list_sources[first..].contains(&(id as u32)) {
                    list_sources.push(id as u32);
                }
            }
            list_sources[first..].sort_unstable();
            let lists = source_start.len() - 1;
            let same = (0..lists).find(|&l| {
                list_sources[source_start[l] as usize..source_start[l + 1] as usize]
                    == list_sources[first..]
            });
            match same {
                Some(l) => {
                    list_sources.truncate(first);
                    group_list.push(l as u32);
                }
                None => {
                    source_start.push(list_sources.len() as u32);
                    group_list.push(lists as u32);
                }
            }
        }
        // Keys whose links are the same share a class (a value's verdict
        // is cached per class).
        let mut class_of_links: Vec<Vec<usize>> = Vec::new();
        let key_class: Vec<u32> = key_links
            .into_iter()
            .map(|mut links| {
                links.sort_unstable();
                match class_of_links.iter().position(|c| *c == links) {
                    Some(i) => i as u32,
                    None => {
                        class_of_links.push(links);
                        (class_of_links.len() - 1) as u32
                    }
                }
            })
            .collect();
        let source_class: Vec<u32> = source_key.iter().map(|&k| key_class[k]).collect();
        let mut slot_class = vec![[u32::MAX; 2]; program.slots.len()];
        for (k, slots) in key_slots.iter().enumerate() {
            for s in slots {
                slot_class[s.index()][usize::from(keys[k].1)] = key_class[k];
            }
        }
        let mut chain_nodes = Vec::new();
        let class_links: Vec<Vec<ClassLink>> = class_of_links
            .iter()
            .map(|links| {
                links
                    .iter()
                    .map(|&li| {
                        let l: &PlanLink = &plan_links[li];
                        let chain = if l.multi_match {
                            let start = chain_nodes.len() as u32;
                            let mut n = Some(l.node);
                            while let Some(cur) = n {
                                chain_nodes.push(cur);
                                n = program.transforms.nodes[cur.index()].parent;
                            }
                            chain_nodes[start as usize..].reverse();
                            (start, chain_nodes.len() as u32)
                        } else {
                            (0, 0)
                        };
                        ClassLink {
                            bit: l.verdict,
                            gate: l.gate,
                            node: l.node,
                            chain,
                        }
                    })
                    .collect()
            })
            .collect();
        let verdict_words = verdicts.div_ceil(64).max(1);
        let mut source_masks = vec![0u64; sources.len() * verdict_words];
        for (g, links) in links_of_group.iter().enumerate() {
            let l = group_list[g] as usize;
            for &s in &list_sources[source_start[l] as usize..source_start[l + 1] as usize] {
                for &li in links {
                    let bit = plan_links[li].verdict as usize;
                    source_masks[s as usize * verdict_words + bit / 64] |= 1 << (bit % 64);
                }
            }
        }
        Plan {
            rules: plan_rules,
            links: plan_links,
            slots: plan_slots,
            slot_info,
            rule_meta,
            chains,
            group_start,
            group_slots,
            group_exact,
            group_links,
            sources,
            source_class,
            class_links,
            chain_nodes,
            slot_class,
            verdict_words,
            source_masks,
            group_list,
            source_start,
            list_sources,
        }
    }

    /// The coarse unions' sources (see [`Plan::group_list`]).
    pub(crate) fn sources(&self) -> &[UnionSource] {
        &self.sources
    }

    /// The list of sources of group `g`'s coarse union (groups with the
    /// same sources share one).
    #[inline]
    pub(crate) fn group_list(&self, g: u32) -> u32 {
        self.group_list[g as usize]
    }

    /// Number of lists of sources (see [`Plan::group_list`]).
    pub(crate) fn source_lists(&self) -> usize {
        self.source_start.len() - 1
    }

    /// The sources of list `l` (see [`Plan::group_list`]), as indexes in
    /// [`Plan::sources`].
    pub(crate) fn list_sources(&self, l: u32) -> &[u32] {
        let l = l as usize;
        &self.list_sources[self.source_start[l] as usize..self.source_start[l + 1] as usize]
    }

    /// Source `s`'s class of values.
    pub(crate) fn source_class(&self, s: u32) -> u32 {
        self.source_class[s as usize]
    }

    /// The grouped links that read the values of class `c`. A value's
    /// *verdict* for its class has the bit of each of these links that
    /// may match it: its gate passes on the value at the link's node (at
    /// some node of its chain, with `multiMatch`) and the link is not
    /// known not to match it (its operator ran on the value, or its
    /// cached result was read, and the link did not match: see
    /// `Memo::clear_verdict`). Verdicts are cached across transactions;
    /// a source's union of them rules a link out with one bit test, and
    /// a value without the link's bit is skipped by the link's slot walk.
    pub(crate) fn class_links(&self, c: u32) -> &[ClassLink] {
        self.class_links.get(c as usize).map_or(&[], Vec::as_slice)
    }

    /// The nodes of a `multiMatch` link's chain (see [`ClassLink::chain`]).
    pub(crate) fn chain_nodes(&self, (start, end): (u32, u32)) -> &[NodeId] {
        &self.chain_nodes[start as usize..end as usize]
    }

    /// The class of the values slot `slot` reads (`multi`: for a
    /// `multiMatch` link), if it is in a group.
    pub(crate) fn slot_class(&self, slot: SlotId, multi: bool) -> Option<u32> {
        let c = self.slot_class[slot.index()][usize::from(multi)];
        (c != u32::MAX).then_some(c)
    }

    /// Words of a verdict: one bit per grouped link.
    pub(crate) fn verdict_words(&self) -> usize {
        self.verdict_words
    }

    /// The verdict bits of the links whose slot group reads source `s`: a
    /// link may match a value of its group's sources exactly when its bit
    /// is in the union, over those sources, of each source's union of
    /// verdicts masked by this (see `Memo::fold_source`).
    pub(crate) fn source_mask(&self, s: u32) -> &[u64] {
        let w = self.verdict_words;
        &self.source_masks[s as usize * w..(s as usize + 1) * w]
    }

    /// Number of slot groups.
    pub(crate) fn groups(&self) -> usize {
        self.group_start.len() - 1
    }

    /// Whether group `g` has an exact union (the union of its slots'), or
    /// only a coarse one (a `multiMatch` link's).
    pub(crate) fn group_exact(&self, g: u32) -> bool {
        self.group_exact[g as usize]
    }

    /// Whether group `g`'s unions are built: three or more links read it
    /// (see `group_links`).
    pub(crate) fn group_shared(&self, g: u32) -> bool {
        self.group_links[g as usize] > 2
    }

    /// The slots of group `g`.
    pub(crate) fn group_slots(&self, g: u32) -> &[SlotId] {
        let g = g as usize;
        &self.group_slots[self.group_start[g] as usize..self.group_start[g + 1] as usize]
    }

    pub(crate) fn rule(&self, ri: RuleIdx) -> PlanRule {
        self.rules[ri.index()]
    }

    pub(crate) fn link(&self, i: u32) -> PlanLink {
        self.links[i as usize]
    }

    pub(crate) fn slots(&self, l: &PlanLink) -> &[SlotId] {
        &self.slots[l.slots as usize..(l.slots + l.n_slots) as usize]
    }

    pub(crate) fn slot_info(&self, slot: SlotId) -> SlotInfo {
        self.slot_info[slot.index()]
    }

    pub(crate) fn rule_meta(&self, ri: RuleIdx) -> &RuleMeta {
        &self.rule_meta[ri.index()]
    }

    /// The transformations of transform-tree node `node`, first to last.
    pub(crate) fn chain(&self, node: NodeId) -> &[Transform] {
        self.chains.get(node.index()).map_or(&[], Vec::as_slice)
    }
}
