//! The evaluation cache of a transaction: the memo table of transformed
//! values (with the cross-transaction cache inside it), the generation that
//! invalidates per-phase entries, and scratch buffers. None of it changes a
//! decision; all of it is kept across [`crate::Transaction::reset`].

use super::memo::Memo;
use super::values::ValList;

/// Memo table, generation and scratch buffers.
#[derive(Default)]
pub(super) struct EvalCache {
    pub memo: Memo,
    /// Incremented at every phase run: slot states and scalar instances of
    /// an older generation are stale.
    pub generation: u32,
    pub scratch: Scratch,
}

/// Reusable buffers of the evaluation (taken out with `mem::take` while in
/// use). Each user has its own: a buffer taken by a caller would be found
/// empty (and grown anew) by a callee, which then drops it.
#[derive(Default)]
pub(super) struct Scratch {
    /// The direct path's current, temporary and candidate values.
    pub a: Vec<u8>,
    pub b: Vec<u8>,
    pub c: Vec<u8>,
    /// The direct path's transform-chain nodes, first to last (profiling).
    pub nodes: Vec<u32>,
    /// setvar's and setenv's name and value.
    pub name: Vec<u8>,
    pub value: Vec<u8>,
    /// A persistent variable's value as the store left it.
    pub stored: Vec<u8>,
    /// Macro-expanded msg/logdata.
    pub text: Vec<u8>,
    pub arg: Vec<u8>,
    /// `@within`'s argument's byte pairs (`operator::PairFilter`), boxed
    /// so that a link's evaluation takes it without a copy.
    pub pairs: Option<Box<crate::operator::PairFilter>>,
    pub vals: ValList,
    pub multi: Vec<(usize, usize)>,
    pub bits: Vec<u64>,
    /// The prefilter's lowercased copy of the value it scans.
    pub lowered: Vec<u8>,
}
