//! Rule evaluation: phases, links, operators on (memoized) values, actions.

use super::fmt::{push_i64, push_lossy, push_name};
use super::memo::{Inst, Origin};
use super::state::{Allow, RuleSel};
use super::values::ValList;
use super::vars::{epoch_secs, for_each_stable, origin_key, selector_matches, Vars};
use super::xcache::{self, OpResult};
use super::Transaction;
use crate::blocks::NONE;
use crate::body::Processor;
use crate::collection::Collection;
use crate::fold::{Decision, Replay};
use crate::operator;
use crate::outcome::{share, Cause, Intervention, MatchRef, MatchedRule};
use crate::plan::{PlanLink, UnionSource};
use crate::prefilter::{byte_mask, ByteMask, Gate, Scanner};
use crate::sources::{stable_coll, Coll};
use crate::stats::EvalStats;
use crate::store::StoreOp;
use std::time::Instant;
use waf_compiler::ir::*;
use waf_compiler::names::Variable as V;

impl<'r> Transaction<'r> {
    pub(super) fn run_phase(&mut self, phase: u8) {
        if self.state.mode == EngineMode::Off {
            return;
        }
        self.borrow_xcache();
        self.run_rules(phase);
        self.return_xcache();
    }

    /// Takes this thread's cross-transaction cache for the phase (a new one
    /// if the thread has none for this ruleset).
    fn borrow_xcache(&mut self) {
        let records = self.options.xcache_records;
        let m = &mut self.cache.memo;
        if !m.x_on {
            return;
        }
        // Replaces the placeholder (or, after a panic in a phase, a cache
        // that may be half-updated: it is dropped).
        m.x = xcache::home_take(self.rs.id()).unwrap_or_else(|| m.new_xcache(records));
        m.x_taken = Some((m.x.hits, m.x.misses, m.x.resets));
    }

    /// Gives the cache back to the thread, its counts added to the stats.
    fn return_xcache(&mut self) {
        let m = &mut self.cache.memo;
        let Some((hits, misses, resets)) = m.x_taken.take() else {
            return;
        };
        let x = std::mem::take(&mut m.x);
        self.stats.xcache_hits += x.hits - hits;
        self.stats.xcache_misses += x.misses - misses;
        self.stats.xcache_resets += x.resets - resets;
        xcache::home_give(self.rs.id(), x);
    }

    fn run_rules(&mut self, phase: u8) {
        if phase == 2 && !self.inputs.body_done {
            self.parse_body();
        }
        self.next_generation();
        let program = self.program();
        if self.options.profile {
            self.profile.ensure(program.rules.len());
            self.cache
                .memo
                .prof
                .ensure(program.transforms.nodes.len(), program.slots.len());
        }
        let steps = self.rs.steps().phase(phase);
        let (folding, blocks) = (self.rs.folding(), self.rs.blocks());
        let mut fold = self.options.fold && folding.any() && self.fold_applies(phase);
        // Rules ruled out by their first link's coarse union (see `ruled_out`).
        let coarse = self.grouped();
        if (1..=8).contains(&phase) {
            self.state.phases_started |= 1 << (phase - 1);
        }
        let mut i = 0;
        let mut completed = true;
        while let Some(&step) = steps.get(i) {
            if self.state.stops(phase) {
                completed = false;
                break;
            }
            // A run of decided rules whose effect is known: copied at once
            // (their rules are decided, so no removal touched them).
            if step.block != NONE && fold && self.state.fold_intact && !self.options.profile {
                if let Some(b) = blocks.get(step.block) {
                    if self.run_block(program, step.block, b) {
                        i = b.end;
                        continue;
                    }
                }
            }
            let ri = step.rule;
            if self.state.any_removed() && self.state.is_removed(program.rule(ri)) {
                i += 1;
                continue;
            }
            let decision = if fold {
                step.decision
            } else {
                Decision::Evaluate
            };
            if decision == Decision::Never {
                // A removal makes the run differ from the analysis.
                fold = self.state.fold_intact;
                if fold {
                    // All an evaluation that does not match would do.
                    self.state.matched_vars.clear();
                    self.stats.rules_folded += 1;
                    i += 1;
                    continue;
                }
            }
            // A rule that matches on every request reaching it: its matched
            // values are known, its operator need not run.
            let replay = if decision == Decision::Replay {
                fold = self.state.fold_intact;
                folding.replay(ri.index()).filter(|_| fold)
            } else {
                None
            };
            let matched = if self.options.profile {
                let t = Instant::now();
                let before = self.stats;
                let m = match replay {
                    Some(r) => self.replay_rule(program, ri, r),
                    None => self.eval_rule(program, ri),
                };
                let r = ri.index();
                self.profile.nanos[r] += t.elapsed().as_nanos() as u64;
                self.profile.evals[r] += 1;
                self.profile.matches[r] += u64::from(m);
                self.profile.op_runs[r] += self.stats.op_runs - before.op_runs;
                self.profile.skips[r] += self.stats.prefilter_skips - before.prefilter_skips;
                m
            } else {
                match replay {
                    Some(r) => self.replay_rule(program, ri, r),
                    None if coarse
                        && step.group != NONE
                        && self.ruled_out(program, step.group, step.verdict) =>
                    {
                        false
                    }
                    None => self.eval_rule(program, ri),
                }
            };
            if matched {
                if let Some(flow) = &program.rule(ri).flow {
                    i = flow.resume_at();
                    continue;
                }
            }
            i += 1;
        }
        if completed && (1..=8).contains(&phase) {
            self.state.phases_completed |= 1 << (phase - 1);
        }
        if self.state.allow == Allow::Phase {
            self.state.allow = Allow::None;
        }
    }

    /// Whether partial evaluation's picture of the run holds as `phase`
    /// starts: it describes rules run as written from the start of phase 1
    /// (see `crate::fold`), so this phase must not have started before,
    /// every earlier phase must have run to its end (phase 4, which runs
    /// only for inspected response bodies, may also not have started at
    /// all before phase 5), and no removal of a rule, or of a rule's
    /// targets, may have selected a rule the analysis decided.
    fn fold_applies(&self, phase: u8) -> bool {
        let (started, completed) = (self.state.phases_started, self.state.phases_completed);
        let earlier_ran_through = match phase {
            1..=4 => {
                let before = (1u8 << (phase - 1)) - 1;
                started == before && completed == before
            }
            5 => started == completed && (completed == 0b0111 || completed == 0b1111),
            _ => false,
        };
        earlier_ran_through && self.state.fold_intact
    }

    /// A rule or target removal took effect: partial evaluation stops
    /// applying if it selects a rule the analysis decided.
    pub(super) fn note_removal(&mut self, sel: RuleSel<'_>) {
        let folding = self.rs.folding();
        let touched = match sel {
            RuleSel::Ids(r) => folding.touched_by_ids(r),
            RuleSel::Tag(t) => folding.touched_by_tag(t),
            RuleSel::Msg(m) => folding.touched_by_msg(m),
        };
        if touched {
            self.state.fold_intact = false;
        }
    }

    /// Invalidates slot states and scalar values (a new phase, or a `ctl`
    /// that changes what variables hold).
    fn next_generation(&mut self) {
        self.cache.generation = self.cache.generation.wrapping_add(1);
        if self.cache.generation == 0 {
            self.cache.memo.forget_generations();
            self.cache.generation = 1;
        }
    }

    /// Whether the rule whose first link is in slot group `group`, with
    /// verdict bit `verdict`, is ruled out by the group's coarse union (see
    /// [`Self::coarse_rules_out`]): then the rule is done, counted as
    /// `eval_rule` would count it, without entering it. Most of CRS's rules
    /// end here on benign requests (~140 of ~230 evaluated).
    #[inline]
    fn ruled_out(&mut self, program: &'r Program, group: u32, verdict: u32) -> bool {
        if !self.coarse_rules_out(program, group, verdict) {
            return false;
        }
        self.stats.rules_evaluated += 1;
        self.state.matched_vars.clear();
        true
    }

    /// Whether links are ruled out by their slot groups' unions (off when
    /// statistics per slot and node are wanted, which need the
    /// slot-by-slot path).
    #[inline]
    fn grouped(&self) -> bool {
        self.options.memo && self.options.prefilter && !self.cache.memo.prof_on
    }

    pub(super) fn eval_rule(&mut self, program: &'r Program, ri: RuleIdx) -> bool {
        self.stats.rules_evaluated += 1;
        self.state.matched_vars.clear();
        let pr = self.rs.plan().rule(ri);
        if pr.unconditional {
            self.state.matched_var.clear();
            self.state.matched_var_name.clear();
            self.per_match_actions(&program.rule(ri).links[0]);
        } else {
            for li in pr.links..pr.links + pr.n_links {
                let lr = LinkRef {
                    program,
                    ri,
                    pl: self.rs.plan().link(li),
                };
                if !self.eval_link(lr) {
                    return false;
                }
            }
        }
        self.after_match(program, ri);
        true
    }

    /// A rule matched: its links' once-per-match actions, then its match
    /// recorded.
    fn after_match(&mut self, program: &'r Program, ri: RuleIdx) {
        let rule = program.rule(ri);
        if self.rs.plan().rule_meta(ri).after_actions {
            for link in &rule.links {
                self.after_match_actions(link);
            }
        }
        self.full_match(rule, ri);
    }

    /// Evaluates a rule partial evaluation found to match on every request
    /// reaching it (see `crate::fold`), from its known matched values: as
    /// `eval_rule` and `eval_slot_direct` would, each value becomes
    /// `MATCHED_VAR` and runs the per-match actions, then the rule's match
    /// is recorded.
    pub(super) fn replay_rule(
        &mut self,
        program: &'r Program,
        ri: RuleIdx,
        replay: &Replay,
    ) -> bool {
        self.stats.rules_evaluated += 1;
        self.stats.rules_replayed += 1;
        self.state.matched_vars.clear();
        let rule = program.rule(ri);
        let Some(link) = rule.links.first() else {
            return false;
        };
        let folding = self.rs.folding();
        for k in replay.hits.clone() {
            let (name, value) = folding.hit(k);
            self.state.matched_var_name.clear();
            self.state.matched_var_name.push_str(name);
            self.state.matched_var.clear();
            self.state.matched_var.extend_from_slice(value);
            if replay.matched_vars {
                self.state.matched_vars.push(name.as_bytes(), value);
            }
            self.per_match_actions(link);
        }
        self.after_match(program, ri);
        true
    }

    fn eval_link(&mut self, lr: LinkRef<'r>) -> bool {
        if let Some(g) = lr.pl.group {
            if self.grouped() && !self.group_passes(lr, g) {
                return false;
            }
        }
        self.eval_link_slots(lr)
    }

    /// The link's slots, value by value, once its slot group's unions did
    /// not rule it out. Kept out of line: most links never get here, and
    /// inlined into the rule loop this path's working set (tens of field
    /// addresses, computed before the loop and kept on the stack) was set
    /// up for every rule.
    #[inline(never)]
    fn eval_link_slots(&mut self, lr: LinkRef<'r>) -> bool {
        let program = lr.program;
        // The argument is expanded only if the operator runs at all (most
        // links are ruled out by the prefilter first).
        let mut arg = Arg_ {
            buf: std::mem::take(&mut self.cache.scratch.arg),
            ready: false,
            within_runs: 0,
            pairs_ready: false,
            pairs: self.cache.scratch.pairs.take(),
            impure: false,
        };
        let gate = if self.options.prefilter {
            lr.pl.gate
        } else {
            Gate::Always
        };
        let mut any = false;
        let rs = self.rs;
        for &slot in rs.plan().slots(&lr.pl) {
            let info = rs.plan().slot_info(slot);
            any |= if self.options.memo && !info.direct {
                self.eval_slot_memo(lr, &mut arg, gate, slot)
            } else {
                let target = &program.targets[info.target.index()];
                self.eval_slot_direct(lr, &mut arg, gate, slot, target)
            };
        }
        self.cache.scratch.arg = arg.buf;
        self.cache.scratch.pairs = arg.pairs;
        any
    }

    /// A slot of request data: values come from the memo table, and the
    /// slot's union of scan results can rule the whole slot out at once.
    fn eval_slot_memo(
        &mut self,
        lr: LinkRef<'r>,
        arg: &mut Arg_,
        gate: Gate,
        slot: SlotId,
    ) -> bool {
        let program = lr.program;
        let node = lr.pl.node;
        let list = self.slot_list(program, slot);
        let (start, len) = list;
        self.stats.memo_hits += u64::from(len);
        if self.cache.memo.prof_on {
            let p = &mut self.cache.memo.prof;
            p.lookups[node.index()] += u64::from(len);
            p.slot_lookups[slot.index()] += u64::from(len);
        }
        // The class of the slot's values, whose verdicts (computed for the
        // link's coarse union) rule values out one by one: sharper than the
        // slot's union of scan results, which is then not needed.
        let class = match lr.pl.group {
            Some(_) if self.grouped() => self.rs.plan().slot_class(slot, lr.pl.multi_match),
            _ => None,
        };
        let scanner = self.rs.scanner();
        if gate != Gate::Always
            && class.is_none()
            && !lr.pl.multi_match
            && !self.cache.memo.slot_passes(
                slot,
                node,
                list,
                gate,
                scanner,
                &program.transforms,
                &mut self.stats,
            )
        {
            self.stats.prefilter_skips += u64::from(len);
            return false;
        }
        let mut any = false;
        for k in start..start + len {
            let inst = self.cache.memo.list_inst(k);
            if let Some(c) = class {
                if self.cache.memo.verdict_rules_out(inst, c, lr.pl.verdict) {
                    self.stats.prefilter_skips += 1;
                    continue;
                }
            }
            let info = self.cache.memo.inst(inst);
            if self.excluded_inst(lr, info) {
                continue;
            }
            if !lr.pl.multi_match {
                // The common case: the node's value alone, without the
                // chain walk below.
                let e = self
                    .cache
                    .memo
                    .value(inst, node, &program.transforms, &mut self.stats);
                any |= self.test_entry(lr, arg, gate, info, e);
                continue;
            }
            // multiMatch: every distinct value along the chain, the
            // original first.
            let mut path = std::mem::take(&mut self.cache.scratch.multi);
            path.clear();
            let mut n = Some(node);
            while let Some(cur) = n {
                path.push((cur.index(), 0));
                n = program.transforms.nodes[cur.index()].parent;
            }
            path.reverse();
            let mut last = u32::MAX;
            let mut hit = false;
            arg.impure = false;
            for &(n, _) in &path {
                // multiMatch also serves the chain's intermediate values.
                if self.cache.memo.prof_on && n != node.index() {
                    self.cache.memo.prof.lookups[n] += 1;
                }
                let e = self.cache.memo.value(
                    inst,
                    NodeId(n as u32),
                    &program.transforms,
                    &mut self.stats,
                );
                if e == last {
                    continue;
                }
                last = e;
                hit |= self.test_entry(lr, arg, gate, info, e);
            }
            any |= hit;
            // Known not to match at any node of the chain: the value loses
            // the link's verdict bit.
            if !hit && !arg.impure && class.is_some() {
                self.cache.memo.clear_verdict_inst(inst, lr.pl.verdict);
            }
            self.cache.scratch.multi = path;
        }
        any
    }

    /// Memo entry `e` (a value of instance `info`) against the link: its
    /// gate, then its operator; a match becomes `MATCHED_VAR` and runs the
    /// per-match actions.
    #[inline]
    fn test_entry(
        &mut self,
        lr: LinkRef<'r>,
        arg: &mut Arg_,
        gate: Gate,
        info: Inst,
        e: u32,
    ) -> bool {
        if gate != Gate::Always {
            let scanner = self.rs.scanner();
            self.cache
                .memo
                .ensure_gate_data(e, scanner, &mut self.stats);
            let (bits, mask) = self.cache.memo.gate_data(e);
            if !scanner.passes(gate, bits, mask) {
                self.stats.prefilter_skips += 1;
                return false;
            }
        }
        if !self.run_operator(lr, arg, Source::Memo(e)) {
            return false;
        }
        let name = &mut self.state.matched_var_name;
        name.clear();
        push_name(
            name,
            info.var,
            origin_key(&self.inputs, info.var, info.origin),
        );
        self.state.matched_var.clear();
        self.state
            .matched_var
            .extend_from_slice(self.cache.memo.bytes(e));
        self.record_match(lr);
        true
    }

    /// Whether the link's operator may match a value of its slot group
    /// (the union of the group's scan results, computed once per
    /// generation); when not, the link is ruled out, counted as if each
    /// slot had been.
    fn group_passes(&mut self, lr: LinkRef<'r>, g: u32) -> bool {
        if self.coarse_rules_out(lr.program, g, lr.pl.verdict) {
            return false;
        }
        let (program, rs) = (lr.program, self.rs);
        // A `multiMatch` group has no exact union, and a group of one or two
        // links builds none: `eval_slot_memo` tests the link's slots' unions
        // one by one, which rules out as much. A link without a gate has
        // nothing to test in a union of scan results.
        if !rs.plan().group_exact(g) || !rs.plan().group_shared(g) || lr.pl.gate == Gate::Always {
            return true;
        }
        let generation = self.cache.generation;
        if self.cache.memo.group(g, generation).is_none() {
            self.cache.memo.group_begin(g, generation);
            for &slot in rs.plan().group_slots(g) {
                let list = self.slot_list(program, slot);
                self.cache.memo.group_add(
                    g,
                    slot,
                    program.slots[slot.index()].node,
                    list,
                    rs.scanner(),
                    &program.transforms,
                    &mut self.stats,
                );
            }
        }
        let union = self.cache.memo.group(g, generation);
        !rules_out(rs.scanner(), lr.pl.gate, union, &mut self.stats)
    }

    /// Whether no value of slot group `group`'s coarse union (see
    /// `Plan::group_list`) has verdict bit `verdict` (see
    /// `Plan::class_links`), i.e. the link with that bit cannot match. The
    /// first test of a group in each generation brings its sources up to
    /// date and folds each (once for all groups) into the bits of the links
    /// that may match; after that, a test is one bit test. When ruled out,
    /// the link is done without its slots' target lists or exact unions,
    /// counted as a skip of every value of those sources.
    #[inline(always)]
    fn coarse_rules_out(&mut self, program: &'r Program, group: u32, verdict: u32) -> bool {
        let (generation, list) = (self.cache.generation, self.rs.plan().group_list(group));
        let len = match self.cache.memo.list_folded(list, generation) {
            Some(len) => len,
            None => self.fold_list(program, list),
        };
        if self.cache.memo.passes(verdict) {
            return false;
        }
        self.stats.memo_hits += u64::from(len);
        self.stats.prefilter_skips += u64::from(len);
        self.stats.coarse_skips += 1;
        true
    }

    /// [`Self::coarse_rules_out`]'s work the first time a group with the
    /// list of sources `l` (see `Plan::group_list`) is tested in a
    /// generation: its sources brought up to date and folded in. Returns
    /// the number of values of its sources.
    #[inline(never)]
    fn fold_list(&mut self, program: &'r Program, l: u32) -> u32 {
        let (rs, generation) = (self.rs, self.cache.generation);
        let mut len = 0;
        for &s in rs.plan().list_sources(l) {
            if !self.cache.memo.source_folded(s, generation) {
                self.update_source(program, s);
                self.cache
                    .memo
                    .fold_source(s, rs.plan().source_mask(s), generation);
            }
            len += self.cache.memo.source_has(s, 0).1;
        }
        self.cache.memo.set_list_folded(l, generation, len);
        len
    }

    /// Brings source `s`'s union up to date: a collection's new entries
    /// are added (collections only grow), a target's values are read again
    /// in each generation.
    #[inline(always)]
    fn update_source(&mut self, program: &'r Program, s: u32) {
        // Called for every source of every link a coarse union is tested
        // for: the test that finds it up to date is kept inline.
        let stale = match self.rs.plan().sources()[s as usize] {
            UnionSource::Coll { coll, .. } => {
                (self.cache.memo.source_covered(s) as usize) < self.inputs.coll(coll).len()
            }
            UnionSource::Target(_) => self.cache.memo.source_gen(s) != self.cache.generation,
        };
        if stale {
            self.refresh_source(program, s);
        }
    }

    /// [`Self::update_source`]'s work, once it found the source stale: a
    /// collection's entries past those covered are added, a target's
    /// values are read again.
    #[inline(never)]
    fn refresh_source(&mut self, program: &'r Program, s: u32) {
        let rs = self.rs;
        let generation = self.cache.generation;
        let (plan, scanner, tree) = (rs.plan(), rs.scanner(), &program.transforms);
        let class = plan.source_class(s);
        match rs.plan().sources()[s as usize] {
            UnionSource::Coll { coll, names, var } => {
                let entries = self.inputs.coll(coll);
                let covered = self.cache.memo.source_covered(s) as usize;
                let memo = &mut self.cache.memo;
                for (i, e) in entries.iter().enumerate().skip(covered) {
                    let origin = Origin::Coll {
                        coll,
                        names,
                        idx: i as u32,
                    };
                    let raw: &[u8] = if names { &e.key } else { &e.value };
                    let inst = memo.instance(var, origin, raw, generation);
                    memo.source_add(s, inst, class, plan, scanner, tree, &mut self.stats);
                }
                memo.set_source_covered(s, entries.len() as u32);
            }
            UnionSource::Target(target) => {
                // Not a request collection (those are `Coll` sources).
                let (start, len) = self.target_list(program, target, None);
                let memo = &mut self.cache.memo;
                memo.source_begin(s, generation);
                for k in start..start + len {
                    let inst = memo.list_inst(k);
                    memo.source_add(s, inst, class, plan, scanner, tree, &mut self.stats);
                }
            }
        }
    }

    /// The instance list of a memoized slot's target, built if it is not
    /// valid in this generation; the slot's union is marked stale when the
    /// list is not the one it was computed from.
    #[inline]
    fn slot_list(&mut self, program: &'r Program, slot: SlotId) -> (u32, u32) {
        let info = self.rs.plan().slot_info(slot);
        let list = self.target_list(program, info.target, info.coll);
        self.cache.memo.slot_touch(slot, info.target);
        list
    }

    /// The instance list of a memoized target (`coll`: the request
    /// collection it reads, if any), built if it is not valid in this
    /// generation.
    fn target_list(
        &mut self,
        program: &'r Program,
        target: TargetId,
        coll: Option<Coll>,
    ) -> (u32, u32) {
        let src_len = coll.map(|id| self.inputs.coll(id).len() as u32);
        match self
            .cache
            .memo
            .target(target, self.cache.generation, src_len)
        {
            Some(r) => r,
            None => self.build_target(program, target, src_len),
        }
    }

    /// Builds the instance list of a target for this generation. Entries of
    /// request collections are read in place (their instances persist for
    /// the transaction); scalars are read into a scratch list.
    /// `src_len`: the length of the collection the target reads, if any
    /// (collections only grow while rules run, so the list stays valid
    /// across phases while that length is unchanged).
    fn build_target(
        &mut self,
        program: &'r Program,
        tid: TargetId,
        src_len: Option<u32>,
    ) -> (u32, u32) {
        let target = &program.targets[tid.index()];
        let var = target.variable;
        let generation = self.cache.generation;
        // The collections are read while the memo grows: two parts of the
        // transaction, borrowed apart.
        let memo = &mut self.cache.memo;
        let start = memo.list_begin();
        if let Some((id, names)) = stable_coll(var) {
            for_each_stable(
                &self.inputs,
                program,
                target,
                id,
                names,
                |origin, _, raw| {
                    let inst = memo.instance(var, origin, raw, generation);
                    memo.list_push(inst);
                },
            );
        } else {
            let vals = &mut self.cache.scratch.vals;
            vals.clear();
            Vars {
                i: &self.inputs,
                s: &self.state,
            }
            .collect_into(program, target, vals);
            for i in 0..vals.items.len() {
                let item = vals.items[i];
                // Stable targets only yield memoizable values.
                let origin = item.origin.unwrap_or(Origin::Scalar(item.var));
                let inst = memo.instance(item.var, origin, vals.value(i), generation);
                memo.list_push(inst);
            }
        }
        memo.list_end(tid, start, generation, src_len)
    }

    /// A slot read directly (volatile variables, counts, or memo off): the
    /// values are collected and transformed for this link alone.
    #[inline(never)]
    fn eval_slot_direct(
        &mut self,
        lr: LinkRef<'r>,
        arg: &mut Arg_,
        gate: Gate,
        slot: SlotId,
        target: &'r Target,
    ) -> bool {
        let program = lr.program;
        let multi_match = lr.pl.multi_match;
        let mut vals = std::mem::take(&mut self.cache.scratch.vals);
        vals.clear();
        self.vars().collect_into(program, target, &mut vals);
        let chain = self.rs.chain(lr.pl.node);
        // Profiling: the node of each transformation of the chain.
        let prof = self.cache.memo.prof_on;
        if chain.is_empty() && gate == Gate::Always && !prof {
            // The common case (CRS's `TX` and count checks): each value as
            // read, without copies into the transformation buffers.
            let any = self.test_direct_values(lr, arg, &vals);
            self.cache.scratch.vals = vals;
            return any;
        }
        let mut nodes = std::mem::take(&mut self.cache.scratch.nodes);
        nodes.clear();
        if prof {
            let mut n = lr.pl.node;
            while let Some(parent) = program.transforms.nodes[n.index()].parent {
                nodes.push(n.0);
                n = parent;
            }
            nodes.reverse();
            debug_assert_eq!(nodes.len(), chain.len());
        }
        let scanner = self.rs.scanner();
        let map = self.rs.unicode_map().map(|m| &**m);
        let (mut cur, mut tmp, mut multi) = (
            std::mem::take(&mut self.cache.scratch.a),
            std::mem::take(&mut self.cache.scratch.b),
            std::mem::take(&mut self.cache.scratch.c),
        );
        let mut bits = std::mem::take(&mut self.cache.scratch.bits);
        bits.resize(scanner.words(), 0);
        let mut ends = std::mem::take(&mut self.cache.scratch.multi);
        let mut any = false;
        for i in 0..vals.items.len() {
            let item = vals.items[i];
            if self.excluded_lr(lr, item.var, vals.key(i)) {
                continue;
            }
            // Candidates: `multi[ends[j-1]..ends[j]]`, the transformed value
            // (or with multiMatch every distinct intermediate value).
            cur.clear();
            cur.extend_from_slice(vals.value(i));
            multi.clear();
            ends.clear();
            if multi_match {
                multi.extend_from_slice(&cur);
                ends.push((0, multi.len()));
            }
            for (k, &t) in chain.iter().enumerate() {
                let changed = if prof {
                    let t0 = Instant::now();
                    let changed = crate::transform::apply_with_map(t, &cur, &mut tmp, map);
                    let (p, n) = (&mut self.cache.memo.prof, nodes[k] as usize);
                    p.nanos[n] += t0.elapsed().as_nanos() as u64;
                    p.computed[n] += 1;
                    p.bytes_in[n] += cur.len() as u64;
                    changed
                } else {
                    crate::transform::apply_with_map(t, &cur, &mut tmp, map)
                };
                if changed {
                    std::mem::swap(&mut cur, &mut tmp);
                    if multi_match {
                        let s = multi.len();
                        multi.extend_from_slice(&cur);
                        ends.push((s, multi.len()));
                    }
                }
            }
            if !multi_match {
                multi.extend_from_slice(&cur);
                ends.push((0, multi.len()));
            }
            self.stats.memo_misses += 1;
            if prof {
                // Every value is read and transformed anew: each node it is
                // tested at is a lookup and a miss.
                let p = &mut self.cache.memo.prof;
                p.slot_lookups[slot.index()] += 1;
                let node = lr.pl.node.index();
                p.lookups[node] += 1;
                p.misses[node] += 1;
                if multi_match && node != 0 {
                    // The root and the intermediate nodes (the last is `node`).
                    p.lookups[0] += 1;
                    p.misses[0] += 1;
                    for &n in &nodes[..nodes.len() - 1] {
                        p.lookups[n as usize] += 1;
                        p.misses[n as usize] += 1;
                    }
                }
            }
            for &(s, e) in ends.iter() {
                let value = &multi[s..e];
                if gate != Gate::Always {
                    let (need_bits, need_mask) = Scanner::needs(gate);
                    if need_bits {
                        self.stats.scans += 1;
                        scanner.scan(value, &mut bits, &mut self.cache.scratch.lowered);
                    }
                    let mask = if need_mask { byte_mask(value) } else { [0; 4] };
                    if !scanner.passes(gate, &bits, &mask) {
                        self.stats.prefilter_skips += 1;
                        continue;
                    }
                }
                if self.run_operator(lr, arg, Source::Bytes(value)) {
                    any = true;
                    self.direct_match(lr, item.var, vals.key(i), value);
                }
            }
        }
        self.cache.scratch.a = cur;
        self.cache.scratch.b = tmp;
        self.cache.scratch.c = multi;
        self.cache.scratch.bits = bits;
        self.cache.scratch.multi = ends;
        self.cache.scratch.vals = vals;
        self.cache.scratch.nodes = nodes;
        any
    }

    /// [`Self::eval_slot_direct`] for a link without transformations or a
    /// gate: the operator on each value as read (with `multiMatch` too,
    /// as there is no other value along an empty chain).
    fn test_direct_values(&mut self, lr: LinkRef<'r>, arg: &mut Arg_, vals: &ValList) -> bool {
        let mut any = false;
        for i in 0..vals.items.len() {
            let item = vals.items[i];
            if self.excluded_lr(lr, item.var, vals.key(i)) {
                continue;
            }
            self.stats.memo_misses += 1;
            let value = vals.value(i);
            if self.run_operator(lr, arg, Source::Bytes(value)) {
                any = true;
                self.direct_match(lr, item.var, vals.key(i), value);
            }
        }
        any
    }

    /// A value read directly (of `var`, under `key`) matched the link: it
    /// becomes `MATCHED_VAR` and runs the per-match actions.
    fn direct_match(&mut self, lr: LinkRef<'r>, var: V, key: &[u8], value: &[u8]) {
        let name = &mut self.state.matched_var_name;
        name.clear();
        push_name(name, var, key);
        self.state.matched_var.clear();
        self.state.matched_var.extend_from_slice(value);
        self.record_match(lr);
    }

    /// Runs the operator on one value; when it matches with `capture`
    /// (negated or not), fills TX:0-9.
    fn run_operator(&mut self, lr: LinkRef<'r>, arg: &mut Arg_, value: Source<'_>) -> bool {
        let program = lr.program;
        let op = &program.operators[lr.pl.op.index()];
        self.stats.op_runs += 1;
        if !arg.ready {
            arg.buf.clear();
            match op.kind.argument() {
                Some(Arg::Const(s)) => arg.buf.extend_from_slice(s.as_bytes()),
                Some(Arg::Macro(m)) => self.expand_into(m, &mut arg.buf),
                None => {}
            }
            arg.ready = true;
        }
        let capture = lr.pl.capture;
        // An operator with a constant argument is a pure function of the
        // value: its result may come from the cross-transaction cache.
        let cache_key = match value {
            Source::Memo(e) if !matches!(op.kind.argument(), Some(Arg::Macro(_))) => {
                self.cache.memo.op_key(e)
            }
            _ => None,
        };
        let opid = lr.pl.op.0;
        // Whether the result is a function of the value alone (a PCRE2
        // search that reached its limit is not).
        let mut pure = cache_key.is_some();
        arg.impure |= !pure;
        let cached = cache_key.and_then(|(rec, node)| self.cache.memo.x.op(rec, node, opid));
        let matched = match (cached, value) {
            // The groups of a whole-value match follow from the value.
            (Some(OpResult::MatchWhole), Source::Memo(e)) if capture => {
                self.stats.xcache_op_hits += 1;
                self.state.caps.set0(self.cache.memo.bytes(e));
                true
            }
            // Other results are stored only when no captures are wanted,
            // or when there are none (no match).
            (Some(r), _) if !capture || r == OpResult::NoMatch => {
                self.stats.xcache_op_hits += 1;
                self.state.caps.clear();
                r.matched()
            }
            _ => {
                if matches!(op.kind, OpKind::Rx(_) | OpKind::Verify { .. }) {
                    self.stats.regex_evals += 1;
                }
                let value = match value {
                    Source::Memo(e) => self.cache.memo.bytes(e),
                    Source::Bytes(b) => b,
                };
                if matches!(op.kind, OpKind::Within(_)) && arg.within_ruled_out(value) {
                    // What the search would answer (it sets no captures).
                    self.state.caps.clear();
                    return op.negated;
                }
                if lr.pl.backtracking {
                    // A count left by a search elsewhere on this thread
                    // (partial evaluation at load) is not this search's.
                    waf_compiler::rx::take_limit_hits();
                }
                let r = operator::matches(
                    program,
                    op,
                    &arg.buf,
                    value,
                    self.rs.injection(),
                    capture,
                    &mut self.state.caps,
                );
                // Only a result the cache can keep is worth the comparison.
                let whole =
                    r && capture && cache_key.is_some() && self.state.caps.whole_only(value);
                // A PCRE2 search that reached its limit answered "no
                // match": flag it as ModSecurity does, and keep the answer
                // out of the cache (the flag must be set on every such
                // request).
                let limited = lr.pl.backtracking && self.pcre_limit_hit();
                pure &= !limited;
                arg.impure |= limited;
                if let Some((rec, node)) = cache_key.filter(|_| !limited) {
                    let result = if !(r && capture) {
                        Some(OpResult::from(r))
                    } else if whole {
                        Some(OpResult::MatchWhole)
                    } else {
                        None
                    };
                    if let Some(result) = result {
                        self.cache.memo.x.set_op(rec, node, opid, result);
                    }
                }
                r
            }
        };
        let hit = matched != op.negated;
        // A link known not to match a value (a result that depends on the
        // value alone, without captures) loses its bit in the value's
        // cached verdicts. A `multiMatch` link may still match at another
        // node: `eval_slot_memo` clears its bit once every node was tested.
        let known = pure && !(matched && capture);
        if known && !hit && lr.pl.verdict != u32::MAX && !lr.pl.multi_match {
            if let Source::Memo(e) = value {
                self.cache.memo.clear_verdict(e, lr.pl.verdict);
            }
        }
        // The groups are stored whenever the operator matched, also when
        // it is negated and the value therefore does not match the rule:
        // what libmodsecurity 3.0.9 does (found by corpus/diff_fuzz.py).
        if matched && capture {
            self.state.store_captures();
        }
        hit
    }

    /// Whether the last PCRE2 search on this thread reached its limit; if so,
    /// counts it and sets `TX:MSC_PCRE_LIMITS_EXCEEDED` to 1 (ModSecurity's
    /// name for it, which `modsecurity.conf-recommended` tests in rule 200005).
    fn pcre_limit_hit(&mut self) -> bool {
        let hits = waf_compiler::rx::take_limit_hits();
        if hits == 0 {
            return false;
        }
        self.stats.pcre_limit_hits += hits;
        self.state.tx_pristine = false;
        self.state.tx.set(b"MSC_PCRE_LIMITS_EXCEEDED", b"1");
        true
    }

    /// A value matched: MATCHED_VARS grows (when the rule reads it) and
    /// the link's setvars run.
    fn record_match(&mut self, lr: LinkRef<'r>) {
        if self.rs.plan().rule_meta(lr.ri).matched_vars {
            self.state.matched_vars.push(
                self.state.matched_var_name.as_bytes(),
                &self.state.matched_var,
            );
        }
        self.per_match_actions(lr.link());
    }

    fn excluded_inst(&self, lr: LinkRef<'r>, info: Inst) -> bool {
        // Cheap tests first: most values are of a variable nothing excludes.
        let by_link =
            lr.pl.has_exclusions && lr.link().exclusions.iter().any(|e| e.variable == info.var);
        let by_ctl = lr.pl.index == 0
            && self
                .state
                .removed_targets
                .iter()
                .any(|(_, e)| e.variable == info.var);
        if !by_link && !by_ctl {
            return false;
        }
        let key = origin_key(&self.inputs, info.var, info.origin);
        self.excluded(lr, info.var, key)
    }

    fn excluded_lr(&self, lr: LinkRef<'r>, var: V, key: &[u8]) -> bool {
        if !lr.pl.has_exclusions && self.state.removed_targets.is_empty() {
            return false;
        }
        self.excluded(lr, var, key)
    }

    /// Whether the link's exclusions, or a `ctl:ruleRemoveTargetBy*` in
    /// effect, remove this value. The `ctl` removals apply to the first
    /// link of a chain only, as in libmodsecurity 3.0.9 (its other links
    /// read their targets whatever the `ctl` said; as
    /// `SecRuleUpdateTargetBy*`, which changes the first link only).
    fn excluded(&self, lr: LinkRef<'r>, var: V, key: &[u8]) -> bool {
        let (program, rule) = (lr.program, lr.rule());
        let hit = |e: &Exclusion| e.variable == var && selector_matches(program, &e.selector, key);
        lr.link().exclusions.iter().any(hit)
            || (lr.pl.index == 0
                && self.state.removed_targets.iter().any(|(sel, e)| {
                    if e.variable != var {
                        return false;
                    }
                    sel.applies(rule) && hit(e)
                }))
    }

    fn per_match_actions(&mut self, link: &Link) {
        for a in &link.actions {
            if let LinkAction::SetVar(sv) = a {
                self.setvar(sv);
            }
        }
    }

    /// Expands `m` into the scratch value buffer.
    fn expand_to_scratch(&mut self, m: &MacroString) {
        let value = &mut self.cache.scratch.value;
        value.clear();
        Vars {
            i: &self.inputs,
            s: &self.state,
        }
        .expand_into(m, value);
    }

    /// `name=value` actions (`setenv`, `expirevar`): both macro-expanded,
    /// into `scratch.name` and `scratch.value`.
    fn expand_pair_to_scratch(&mut self, name: &MacroString, value: &MacroString) {
        let scratch = &mut self.cache.scratch;
        let (n, v) = (&mut scratch.name, &mut scratch.value);
        n.clear();
        v.clear();
        let vars = Vars {
            i: &self.inputs,
            s: &self.state,
        };
        vars.expand_into(name, n);
        vars.expand_into(value, v);
    }

    fn after_match_actions(&mut self, link: &'r Link) {
        for a in &link.actions {
            match a {
                LinkAction::Ctl(c) => self.ctl(c),
                LinkAction::InitCol { collection, key } => {
                    self.expand_to_scratch(key);
                    self.open_collection(*collection);
                }
                LinkAction::SetEnv { name, value } => {
                    self.expand_pair_to_scratch(name, value);
                    let scratch = &self.cache.scratch;
                    self.state.env.set(&scratch.name, &scratch.value);
                }
                // v3: the id becomes SESSIONID/USERID and opens the
                // SESSION/USER/RESOURCE collection under that key.
                LinkAction::SetSid(m) => {
                    self.expand_to_scratch(m);
                    let id = &mut self.state.session_id;
                    id.clear();
                    id.extend_from_slice(&self.cache.scratch.value);
                    self.open_collection(V::Session);
                }
                LinkAction::SetUid(m) => {
                    self.expand_to_scratch(m);
                    let id = &mut self.state.user_id;
                    id.clear();
                    id.extend_from_slice(&self.cache.scratch.value);
                    self.open_collection(V::User);
                }
                LinkAction::SetRsc(m) => {
                    self.expand_to_scratch(m);
                    self.open_collection(V::Resource);
                }
                LinkAction::ExpireVar { name, seconds } => self.expire_var(name, seconds),
                // Run per matched value (`per_match_actions`).
                LinkAction::SetVar(_) => {}
                // Accepted without effect here (see `Action::supported`).
                LinkAction::DeprecateVar { .. } | LinkAction::Ignored { .. } => {}
            }
        }
    }

    fn full_match(&mut self, rule: &Rule, ri: RuleIdx) {
        // Read from the plan: the IR's `rule` only for its texts and a
        // disruptive action.
        let rm = self.rs.plan().rule_meta(ri);
        if let Some(sev) = rm.severity {
            self.state.note_severity(sev.number());
        }
        let disruptive = !rm.pass;
        if self.state.match_count == self.state.matches.len() {
            self.state.matches.push(MatchedRule::default());
        }
        // Reuse a pooled record: its strings keep their capacity (taken out
        // while the macros are expanded from the rest of the state).
        let (mut msg, mut logdata) = {
            let m = &mut self.state.matches[self.state.match_count];
            (std::mem::take(&mut m.msg), std::mem::take(&mut m.logdata))
        };
        let vars = Vars {
            i: &self.inputs,
            s: &self.state,
        };
        let buf = &mut self.cache.scratch.text;
        msg.clear();
        logdata.clear();
        if rm.text {
            for (src, field) in [
                (&rule.meta.msg, &mut msg),
                (&rule.meta.logdata, &mut logdata),
            ] {
                if let Some(src) = src {
                    buf.clear();
                    vars.expand_into(src, buf);
                    push_lossy(field, buf);
                }
            }
        }
        let st = &mut self.state;
        let m = &mut st.matches[st.match_count];
        m.msg = msg;
        m.logdata = logdata;
        m.id = rm.id;
        m.phase = rm.phase;
        m.severity = rm.severity;
        // The pooled record usually held this rule's match before (the
        // same rules match in the same order request after request): then
        // nothing is cloned, and no shared reference count is written (an
        // atomic write to a cache line every worker thread touches).
        share(&mut m.tags, &rm.tags);
        match (&mut m.ver, &rm.ver) {
            (Some(a), Some(b)) => share(a, b),
            (a, b) => a.clone_from(b),
        }
        share(&mut m.location, &rm.location);
        m.matched_var_name.clone_from(&st.matched_var_name);
        m.matched_var.clear();
        push_lossy(&mut m.matched_var, &st.matched_var);

        m.log = rm.log;
        m.auditlog = rm.auditlog;
        m.disruptive = disruptive;
        st.match_refs.push(MatchRef::Own(st.match_count as u32));
        st.match_count += 1;
        if rm.pass {
            return;
        }
        let enforce = self.state.mode == EngineMode::On;
        match &rule.disruptive {
            Disruptive::Pass | Disruptive::Pause(_) => {}
            Disruptive::Allow(scope) => {
                if enforce {
                    self.state.allow = match scope {
                        AllowScope::All => Allow::All,
                        AllowScope::Phase => Allow::Phase,
                        AllowScope::Request => Allow::Request,
                    };
                }
            }
            Disruptive::Deny | Disruptive::Drop => {
                if enforce {
                    self.state.intervention = Some(Intervention {
                        status: rule.status.unwrap_or(403),
                        action: if rule.disruptive == Disruptive::Drop {
                            "drop"
                        } else {
                            "deny"
                        },
                        rule_id: rule.id,
                        phase: rule.phase,
                        url: None,
                        cause: Cause::Rule,
                    });
                }
            }
            Disruptive::Redirect(url) | Disruptive::Proxy(url) => {
                if enforce {
                    let redirect = matches!(rule.disruptive, Disruptive::Redirect(_));
                    let mut buf = Vec::new();
                    self.expand_into(url, &mut buf);
                    // A redirect keeps the rule's status only when it is
                    // one of 301-307, else 302: what libmodsecurity
                    // 3.0.9 answers (`status:403` or `status:308` give
                    // 302 there).
                    let status = match (redirect, rule.status) {
                        (true, Some(s)) if (301..=307).contains(&s) => s,
                        (true, _) => 302,
                        (false, s) => s.unwrap_or(200),
                    };
                    self.state.intervention = Some(Intervention {
                        status,
                        action: if redirect { "redirect" } else { "proxy" },
                        rule_id: rule.id,
                        phase: rule.phase,
                        url: Some(String::from_utf8_lossy(&buf).into_owned()),
                        cause: Cause::Rule,
                    });
                }
            }
        }
    }

    fn setvar(&mut self, sv: &SetVar) {
        let scratch = &mut self.cache.scratch;
        let vars = Vars {
            i: &self.inputs,
            s: &self.state,
        };
        // Names are stored lowercased. Constant names and values (most of
        // CRS's: `tx.anomaly_score_pl1`, `=0`) are used in place: setvar
        // runs hundreds of times per request, and copying them cost more
        // than the store.
        let name: &[u8] = match sv.name.as_literal() {
            Some(n) if sv.lowercase_literal => n.as_bytes(),
            _ => {
                let name = &mut scratch.name;
                name.clear();
                vars.expand_into(&sv.name, name);
                name.make_ascii_lowercase();
                name
            }
        };
        let value: &[u8] = match &sv.op {
            SetVarOp::Set(v) | SetVarOp::Add(v) | SetVarOp::Sub(v) => match v.as_literal() {
                Some(v) => v.as_bytes(),
                None => {
                    let value = &mut scratch.value;
                    value.clear();
                    vars.expand_into(v, value);
                    value
                }
            },
            SetVarOp::Delete => b"",
        };
        if sv.collection != V::Tx {
            // A persistent variable: written to the store, whose result (a
            // counter other requests may have moved) becomes the value. A
            // write the store refuses (see `store`) stays local, below.
            let op = match &sv.op {
                SetVarOp::Set(_) => StoreOp::Set(value),
                SetVarOp::Add(_) => StoreOp::Add(operator::atoll(value)),
                SetVarOp::Sub(_) => StoreOp::Sub(operator::atoll(value)),
                SetVarOp::Delete => StoreOp::Delete,
            };
            let timeout = self.rs.program().settings.collection_timeout;
            let stored = &mut scratch.stored;
            if let Some(o) = self.state.opened_mut(sv.collection) {
                let store = self.rs.collection_store();
                if store.apply(&o.id, name, op, epoch_secs(), timeout, stored) {
                    match op {
                        StoreOp::Delete => o.coll.remove(name),
                        _ => o.coll.set(name, stored),
                    }
                    return;
                }
            }
        }
        // ModSecurity ignores setvar on a collection that initcol did not open.
        let Some(coll) = self.state.writable(sv.collection) else {
            return;
        };
        local_setvar(coll, sv, name, value);
    }

    /// Opens persistent collection `coll` under the key in
    /// `scratch.value` and reads its record from the store.
    fn open_collection(&mut self, coll: V) {
        let key = &self.cache.scratch.value;
        let timeout = self.rs.program().settings.collection_timeout;
        let store = self.rs.collection_store();
        if let Some(o) = self.state.init_collection(coll, key) {
            let into = &mut o.coll;
            store.load(&o.id, epoch_secs(), timeout, |n, v| into.push(n, v));
        }
    }

    /// `expirevar:ip.name=SECONDS`: the stored variable goes after that
    /// long (for this transaction, it stays).
    fn expire_var(&mut self, name: &MacroString, seconds: &MacroString) {
        self.expand_pair_to_scratch(name, seconds);
        let scratch = &mut self.cache.scratch;
        let (n, v) = (&mut scratch.name, &scratch.value);
        let Some(dot) = n.iter().position(|&b| b == b'.') else {
            return;
        };
        let Some(coll) = std::str::from_utf8(&n[..dot])
            .ok()
            .and_then(V::lookup)
            .filter(|c| c.is_persistent())
        else {
            return;
        };
        let secs = u64::try_from(operator::atoll(v)).unwrap_or(0);
        if let Some(o) = self.state.opened_mut(coll) {
            let var = &mut n[dot + 1..];
            var.make_ascii_lowercase();
            self.rs
                .collection_store()
                .expire(&o.id, var, secs, epoch_secs());
        }
    }

    fn ctl(&mut self, c: &'r Ctl) {
        match c {
            Ctl::RuleEngine(m) => self.state.mode = *m,
            Ctl::RuleRemoveById(r) => {
                self.state.removed_ids.extend_from_slice(r);
                self.note_removal(RuleSel::Ids(r));
            }
            Ctl::RuleRemoveByTag(t) => {
                self.state.removed_tags.push(t);
                self.note_removal(RuleSel::Tag(t));
            }
            Ctl::RuleRemoveByMsg(m) => {
                self.state.removed_msgs.push(m);
                self.note_removal(RuleSel::Msg(m));
            }
            Ctl::RuleRemoveTargetById { ids, target } => {
                self.state.removed_targets.push((RuleSel::Ids(ids), target));
                self.note_removal(RuleSel::Ids(ids));
            }
            Ctl::RuleRemoveTargetByTag { tag, target } => {
                self.state.removed_targets.push((RuleSel::Tag(tag), target));
                self.note_removal(RuleSel::Tag(tag));
            }
            Ctl::RuleRemoveTargetByMsg { msg, target } => {
                self.state.removed_targets.push((RuleSel::Msg(msg), target));
                self.note_removal(RuleSel::Msg(msg));
            }
            Ctl::RequestBodyProcessor(p) => {
                if let Some(p) = Processor::from_name(p) {
                    self.inputs.processor = Some(p);
                    // REQBODY_PROCESSOR (a memoized scalar) changed.
                    self.next_generation();
                }
            }
            Ctl::RequestBodyAccess(b) => {
                self.state.request_body_access = *b;
                self.next_generation();
            }
            Ctl::ResponseBodyAccess(b) => self.state.response_body_access = *b,
            Ctl::ForceRequestBodyVariable(b) => {
                self.state.force_request_body_variable = *b;
                self.next_generation();
            }
            Ctl::RequestBodyLimit(_) | Ctl::ResponseBodyLimit(_) => {}
            Ctl::AuditEngine(m) => self.state.audit_engine = *m,
            Ctl::AuditLogParts(c) => self.state.audit_parts = self.state.audit_parts.apply(*c),
            Ctl::Ignored { .. } => {}
        }
    }

    /// A read-only view of the variables.
    pub(super) fn vars(&self) -> Vars<'_, 'r> {
        Vars {
            i: &self.inputs,
            s: &self.state,
        }
    }

    /// Appends `m` with its `%{...}` macros expanded to `out`.
    pub(super) fn expand_into(&self, m: &MacroString, out: &mut Vec<u8>) {
        self.vars().expand_into(m, out)
    }
}

/// A link being evaluated: its hot fields, and how to reach the IR's rule
/// and link when a cold field is needed (exclusions, actions on a match).
#[derive(Clone, Copy)]
struct LinkRef<'r> {
    program: &'r Program,
    ri: RuleIdx,
    pl: PlanLink,
}

impl<'r> LinkRef<'r> {
    fn rule(&self) -> &'r Rule {
        self.program.rule(self.ri)
    }

    fn link(&self) -> &'r Link {
        &self.rule().links[self.pl.index as usize]
    }
}

/// An operator argument, expanded on first use within a link.
struct Arg_ {
    buf: Vec<u8>,
    ready: bool,
    /// `@within` runs with this argument so far, and whether `pairs` is
    /// known to hold the argument's byte pairs.
    within_runs: u32,
    pairs_ready: bool,
    pairs: Option<Box<operator::PairFilter>>,
    /// Set when an operator result was not a function of the value alone
    /// (a macro in the argument, a PCRE2 limit reached): a `multiMatch`
    /// link's values are then not known not to match.
    impure: bool,
}

impl Arg_ {
    /// Whether the argument (`@within`'s haystack) certainly does not hold
    /// `value`: it lacks one of the value's byte pairs. A link tests all
    /// its values against one argument (920450's chain: each header name
    /// against CRS's restricted-header list), and most values are ruled out
    /// by their first pairs instead of a search of the argument. The filter
    /// is kept for the next evaluation with the same argument (CRS's lists
    /// are the same on every request); a new argument's is built from its
    /// third value on (filling costs about two searches).
    fn within_ruled_out(&mut self, value: &[u8]) -> bool {
        self.within_runs += 1;
        if self.buf.len() < MIN_PAIRS_ARG {
            return false;
        }
        let pairs = self.pairs.get_or_insert_with(operator::PairFilter::new);
        if !self.pairs_ready {
            if !pairs.is_of(&self.buf) {
                if self.within_runs < PAIRS_FROM_RUN {
                    return false;
                }
                pairs.fill(&self.buf);
            }
            self.pairs_ready = true;
        }
        !pairs.may_hold(value)
    }
}

/// Shortest `@within` argument worth a pair filter: shorter ones are
/// searched in a few words.
const MIN_PAIRS_ARG: usize = 24;

/// The `@within` run of a link's evaluation that builds the pair filter
/// of an argument it does not hold already.
const PAIRS_FROM_RUN: u32 = 3;

/// Where an operator's input is.
#[derive(Clone, Copy)]
enum Source<'a> {
    Memo(u32),
    Bytes(&'a [u8]),
}

/// Whether a union of scan results (bits, byte set, number of values) rules
/// out an operator with `gate`; if so, its values count as skipped.
fn rules_out(
    scanner: &Scanner,
    gate: Gate,
    union: Option<(&[u64], &ByteMask, u32)>,
    stats: &mut EvalStats,
) -> bool {
    let Some((bits, mask, len)) = union else {
        return false;
    };
    if scanner.passes(gate, bits, mask) {
        return false;
    }
    stats.memo_hits += u64::from(len);
    stats.prefilter_skips += u64::from(len);
    true
}

/// `setvar` on a collection of the transaction.
fn local_setvar(coll: &mut Collection, sv: &SetVar, name: &[u8], value: &[u8]) {
    let op = &sv.op;
    match op {
        SetVarOp::Set(_) => {
            let v = coll.value_mut_with(name, sv.key_selectors);
            v.clear();
            v.extend_from_slice(value);
        }
        SetVarOp::Delete => coll.remove(name),
        SetVarOp::Add(_) | SetVarOp::Sub(_) => {
            let cur = coll.value_mut_with(name, sv.key_selectors);
            let add = matches!(op, SetVarOp::Add(_));
            let n = operator::setvar_arith(cur, operator::atoll(value), add);
            cur.clear();
            push_i64(cur, n);
        }
    }
}
