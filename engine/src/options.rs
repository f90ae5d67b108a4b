//! Switches of the evaluation's fast path.

/// Switches of the fast path. Every combination gives the same decisions;
/// turning both off is the "naive" interpreter (`waf bench --compare naive`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvalOptions {
    /// Memoize transformed values per (variable instance, transform node).
    pub memo: bool,
    /// Skip operators whose prefilter literals do not occur in a value.
    pub prefilter: bool,
    /// Measure time per rule (costs two clock reads per rule evaluated) and
    /// count work per transform chain ([`crate::Transaction::chain_profile`]).
    pub profile: bool,
    /// Reuse what earlier transactions learnt about identical values
    /// (transform outputs, scan results, operator results): see
    /// [`crate::Transaction::clear_cache`]. Only with `memo`.
    pub xcache: bool,
    /// Step over the rules that partial evaluation at load proved cannot
    /// match (`engine/src/fold.rs`), while its assumptions hold.
    pub fold: bool,
    /// Values the cross-transaction cache of a thread holds before it
    /// starts over (see `transaction/xcache.rs`); its bytes and operator
    /// results are bounded in proportion (1 KiB and 64 results per value).
    /// Read when a thread's cache for a ruleset is created, by the first
    /// transaction of that ruleset on the thread.
    pub xcache_records: usize,
}

impl Default for EvalOptions {
    fn default() -> Self {
        EvalOptions {
            memo: true,
            prefilter: true,
            profile: false,
            xcache: true,
            fold: true,
            xcache_records: Self::DEFAULT_XCACHE_RECORDS,
        }
    }
}

impl EvalOptions {
    /// The default of [`EvalOptions::xcache_records`].
    pub const DEFAULT_XCACHE_RECORDS: usize = 16384;

    /// No memoization, no prefilter, no partial evaluation: every rule
    /// transforms and tests every value.
    pub fn naive() -> Self {
        EvalOptions {
            memo: false,
            prefilter: false,
            profile: false,
            xcache: false,
            fold: false,
            xcache_records: Self::DEFAULT_XCACHE_RECORDS,
        }
    }
}
