//! Running a static block (see `crate::blocks`): the first time by its
//! rules, recording what they did; after that by copying the record.

use super::Transaction;
use crate::blocks::{Block, BlockEffect};
use crate::fold::Decision;
use crate::outcome::{MatchRef, MatchedRule};
use waf_compiler::ir::{Program, RuleIdx};

impl<'r> Transaction<'r> {
    /// Runs block `b` (number `id`) if its effect may be copied here (see
    /// `crate::blocks`); false if its rules must run one by one.
    pub(super) fn run_block(&mut self, program: &'r Program, id: u32, b: &'r Block) -> bool {
        if b.writes_tx && !(self.state.tx_pristine && self.state.tx_block == b.prev) {
            return false;
        }
        match b.effect.get() {
            Some(e) => self.apply_block(e),
            None => {
                let e = self.record_block(program, b);
                // Another thread may have recorded it first: the same effect.
                let _ = b.effect.set(e);
            }
        }
        if b.writes_tx {
            self.state.tx_block = id;
        }
        true
    }

    /// Runs the block's rules as the rule loop would, and returns what
    /// they did.
    fn record_block(&mut self, program: &'r Program, b: &'r Block) -> BlockEffect {
        let (first, before) = (self.state.match_count, self.stats);
        let pristine = self.state.tx_pristine;
        for &ri in &b.rules {
            self.run_static(program, ri);
        }
        // The block's own writes are what a pristine `TX` holds.
        self.state.tx_pristine = pristine;
        let st = &self.state;
        let matches: Box<[MatchedRule]> = st.matches[first..st.match_count].into();
        BlockEffect {
            tx: b.writes_tx.then(|| Box::new(st.tx.pack())),
            severity: matches
                .iter()
                .filter_map(|m| m.severity.map(|s| s.number()))
                .min(),
            matches,
            matched_var: b
                .sets_matched_var
                .then(|| Box::new((st.matched_var_name.clone(), st.matched_var.clone()))),
            // A block has fewer rules than the program: the counts fit.
            evaluated: count(self.stats.rules_evaluated - before.rules_evaluated),
            replayed: count(self.stats.rules_replayed - before.rules_replayed),
            folded: count(self.stats.rules_folded - before.rules_folded),
        }
    }

    /// One rule of a block, as the rule loop runs a decided rule.
    fn run_static(&mut self, program: &'r Program, ri: RuleIdx) {
        let folding = self.rs.folding();
        match folding.decision(ri.index()) {
            Decision::Never => {
                self.state.matched_vars.clear();
                self.stats.rules_folded += 1;
            }
            Decision::Replay => {
                if let Some(r) = folding.replay(ri.index()) {
                    self.replay_rule(program, ri, r);
                }
            }
            // A `SecAction`.
            Decision::Evaluate => {
                self.eval_rule(program, ri);
            }
        }
    }

    /// Copies a recorded effect into the transaction.
    fn apply_block(&mut self, e: &'r BlockEffect) {
        let st = &mut self.state;
        if let Some(tx) = &e.tx {
            st.tx.copy_from_packed(tx);
        }
        // The block's records, read in place (see `MatchedRules`).
        st.match_refs.extend(e.matches.iter().map(MatchRef::Shared));
        if let Some(n) = e.severity {
            st.note_severity(n);
        }
        if let Some((name, value)) = e.matched_var.as_deref() {
            st.matched_var_name.clone_from(name);
            st.matched_var.clone_from(value);
        }
        // Every rule clears it as it starts, and none of a block fills it.
        st.matched_vars.clear();
        self.stats.rules_evaluated += u64::from(e.evaluated);
        self.stats.rules_replayed += u64::from(e.replayed);
        self.stats.rules_folded += u64::from(e.folded);
    }
}

/// A block's count of rules, as its effect keeps it.
fn count(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
