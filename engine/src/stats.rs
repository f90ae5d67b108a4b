//! Counters and measurements of evaluation: what `waf bench` and
//! `waf profile` report. Kept apart from the transaction so the reporting
//! types depend on nothing else of the engine.

/// Counters of the evaluation, accumulated until [`crate::Transaction::reset_stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EvalStats {
    /// Transformed values served from the memo table.
    pub memo_hits: u64,
    /// Transformed values computed (and stored) by the memo table.
    pub memo_misses: u64,
    /// Values on which an operator ran.
    pub op_runs: u64,
    /// Values skipped because the operator's prefilter did not pass (counting
    /// the values of a whole target skipped at once).
    pub prefilter_skips: u64,
    /// `@rx` (and `@verify*`) evaluations.
    pub regex_evals: u64,
    /// Prefilter scans of a value (one per distinct transformed value).
    pub scans: u64,
    /// Rules evaluated (links of a chain count once per rule).
    pub rules_evaluated: u64,
    /// Rules stepped over because partial evaluation proved they cannot match.
    pub rules_folded: u64,
    /// Links ruled out by their slot group's coarse union (one union per
    /// value over the chains its source is read through), before any
    /// target list or exact union is built.
    pub coarse_skips: u64,
    /// Rules evaluated by replaying the match partial evaluation computed
    /// at load (counted in `rules_evaluated` too).
    pub rules_replayed: u64,
    /// Values found in the cross-transaction cache.
    pub xcache_hits: u64,
    /// Values looked up in the cross-transaction cache and not found.
    pub xcache_misses: u64,
    /// Operator results taken from the cross-transaction cache.
    pub xcache_op_hits: u64,
    /// Times the cross-transaction cache was full and started over (often:
    /// it is too small for the values that repeat in the traffic, see
    /// [`crate::EvalOptions::xcache_records`]).
    pub xcache_resets: u64,
    /// PCRE2 searches that reached the match limit and so did not match
    /// (only patterns run on PCRE2 under `WafPcreFallback On`).
    pub pcre_limit_hits: u64,
}

impl EvalStats {
    /// Adds another transaction's counters (per-thread totals).
    pub fn add(&mut self, o: &EvalStats) {
        self.memo_hits += o.memo_hits;
        self.memo_misses += o.memo_misses;
        self.op_runs += o.op_runs;
        self.prefilter_skips += o.prefilter_skips;
        self.regex_evals += o.regex_evals;
        self.scans += o.scans;
        self.rules_evaluated += o.rules_evaluated;
        self.rules_folded += o.rules_folded;
        self.coarse_skips += o.coarse_skips;
        self.rules_replayed += o.rules_replayed;
        self.xcache_hits += o.xcache_hits;
        self.xcache_misses += o.xcache_misses;
        self.xcache_op_hits += o.xcache_op_hits;
        self.xcache_resets += o.xcache_resets;
        self.pcre_limit_hits += o.pcre_limit_hits;
    }

    /// Cross-transaction cache hits / lookups; 0 when nothing was asked.
    pub fn xcache_hit_ratio(&self) -> f64 {
        ratio(self.xcache_hits, self.xcache_hits + self.xcache_misses)
    }

    /// Memo hits / (hits + misses); 0 when nothing was asked.
    pub fn memo_hit_ratio(&self) -> f64 {
        ratio(self.memo_hits, self.memo_hits + self.memo_misses)
    }

    /// Skipped / (skipped + run): the share of value tests the prefilter saved.
    pub fn prefilter_skip_rate(&self) -> f64 {
        ratio(self.prefilter_skips, self.prefilter_skips + self.op_runs)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Per-rule measurements (with [`crate::EvalOptions::profile`]), indexed like
/// `Program::rules`.
#[derive(Clone, Debug, Default)]
pub struct RuleProfile {
    /// Time spent evaluating the rule, ns.
    pub nanos: Vec<u64>,
    /// Times the rule was evaluated.
    pub evals: Vec<u64>,
    /// Times it matched.
    pub matches: Vec<u64>,
    /// Values its operators ran on / were skipped on by the prefilter.
    pub op_runs: Vec<u64>,
    /// Values the prefilter skipped for it.
    pub skips: Vec<u64>,
}

impl RuleProfile {
    pub(crate) fn ensure(&mut self, n: usize) {
        if self.nanos.len() != n {
            *self = RuleProfile {
                nanos: vec![0; n],
                evals: vec![0; n],
                matches: vec![0; n],
                op_runs: vec![0; n],
                skips: vec![0; n],
            };
        }
    }

    /// Zeroes every counter, keeping the vectors.
    pub fn clear(&mut self) {
        for v in [
            &mut self.nanos,
            &mut self.evals,
            &mut self.matches,
            &mut self.op_runs,
            &mut self.skips,
        ] {
            v.fill(0);
        }
    }

    /// Adds another profile (of the same ruleset).
    pub fn add(&mut self, o: &RuleProfile) {
        self.ensure(o.nanos.len());
        for (a, b) in [
            (&mut self.nanos, &o.nanos),
            (&mut self.evals, &o.evals),
            (&mut self.matches, &o.matches),
            (&mut self.op_runs, &o.op_runs),
            (&mut self.skips, &o.skips),
        ] {
            for (x, y) in a.iter_mut().zip(b) {
                *x += y;
            }
        }
    }
}

/// Per transform-chain measurements (with [`crate::EvalOptions::profile`]).
///
/// The node vectors are indexed by `NodeId::index()` (the nodes of
/// `Program::transforms`: node 0 is the empty chain), `slot_lookups` by
/// `SlotId::index()`. Both the memoized and the direct path count, so with
/// memoization off every lookup is a miss and computes its whole chain.
#[derive(Clone, Debug, Default)]
pub struct ChainProfile {
    /// Values served to rules at this node (memo hits included).
    pub lookups: Vec<u64>,
    /// Lookups that found no value at this node and had it computed (the
    /// memo misses of this node).
    pub misses: Vec<u64>,
    /// Applications of this node's transformation (also on the way to a
    /// deeper node; 0 for the root).
    pub computed: Vec<u64>,
    /// Outputs of this node taken from the cross-transaction cache instead
    /// of computed.
    pub xcache: Vec<u64>,
    /// Input bytes of this node's transformation (summed over `computed`).
    pub bytes_in: Vec<u64>,
    /// Time spent in this node's transformation, ns.
    pub nanos: Vec<u64>,
    /// Values served to rules through each value slot (target, node).
    pub slot_lookups: Vec<u64>,
}

impl ChainProfile {
    pub(crate) fn ensure(&mut self, nodes: usize, slots: usize) {
        if self.lookups.len() != nodes || self.slot_lookups.len() != slots {
            *self = ChainProfile {
                lookups: vec![0; nodes],
                misses: vec![0; nodes],
                computed: vec![0; nodes],
                xcache: vec![0; nodes],
                bytes_in: vec![0; nodes],
                nanos: vec![0; nodes],
                slot_lookups: vec![0; slots],
            };
        }
    }

    /// Whether nothing was collected (profiling never on).
    pub fn is_empty(&self) -> bool {
        self.lookups.is_empty()
    }

    /// Zeroes every counter, keeping the vectors.
    pub fn clear(&mut self) {
        for v in [
            &mut self.lookups,
            &mut self.misses,
            &mut self.computed,
            &mut self.xcache,
            &mut self.bytes_in,
            &mut self.nanos,
            &mut self.slot_lookups,
        ] {
            v.fill(0);
        }
    }

    /// Adds another profile (of the same ruleset).
    pub fn add(&mut self, o: &ChainProfile) {
        self.ensure(o.lookups.len(), o.slot_lookups.len());
        for (a, b) in [
            (&mut self.lookups, &o.lookups),
            (&mut self.misses, &o.misses),
            (&mut self.computed, &o.computed),
            (&mut self.xcache, &o.xcache),
            (&mut self.bytes_in, &o.bytes_in),
            (&mut self.nanos, &o.nanos),
            (&mut self.slot_lookups, &o.slot_lookups),
        ] {
            for (x, y) in a.iter_mut().zip(b) {
                *x += y;
            }
        }
    }

    /// Share of the lookups at `node` served without computing:
    /// `1 - misses / lookups`; 0 when the node was never looked up.
    pub fn hit_ratio(&self, node: usize) -> f64 {
        let (l, m) = (self.lookups[node], self.misses[node]);
        ratio(l.saturating_sub(m), l)
    }

    /// [`ChainProfile::hit_ratio`] over every node.
    pub fn total_hit_ratio(&self) -> f64 {
        let l: u64 = self.lookups.iter().sum();
        let m: u64 = self.misses.iter().sum();
        ratio(l.saturating_sub(m), l)
    }
}
