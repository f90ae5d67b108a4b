//! The cross-transaction cache: what was learnt about a value in earlier
//! requests.
//!
//! Most bytes a WAF sees repeat (the same `User-Agent`, `Accept`, cookies and
//! paths on request after request), and everything the engine computes from
//! a value is a pure function of its bytes: the output of each transform
//! chain node, the prefilter scan of that output, and the result of an
//! operator whose argument is a constant. The cache keeps those per raw value:
//!
//! - a *record* per raw value, keyed by its bytes (hashed, then compared in
//!   full: a hash collision can only cost a miss, never a wrong answer);
//! - per (record, transform node): whether the node leaves its parent's
//!   value unchanged, or its output bytes; and the output's scan result and
//!   byte set once computed;
//! - per (record, node, operator): whether the operator matched (only results
//!   that need no captures are stored: a match with `capture` runs again),
//!   in blocks of one cache line per (record, node): the operators that test
//!   a value at a node are read together, so a request's lookups cost a
//!   cache miss per value and node, not one per operator (a table keyed by
//!   (record, node, operator) spread them over megabytes: its load was
//!   three quarters of the operator path's time under `waf serve`).
//!
//! It is bounded (records, bytes, node and operator entries) and allocates
//! only while growing to those bounds; when any is reached, it is emptied at
//! once (an epoch bump plus clearing its tables). A value is admitted the
//! second time it is seen (a bit in a filter the first time), so unique
//! values cost a hash and a bit test. An adversary cycling values can only
//! make it miss: never a wrong answer (keys are compared in full), and no
//! more than that hash, bit test and one record's bookkeeping on top of the
//! uncached path.

use crate::prefilter::ByteMask;

/// "No index": an absent entry, instance or result, in this table and in
/// the memo table built on it.
pub(super) const NONE: u32 = u32::MAX;

/// What is known about one transform node of a record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum NodeState {
    #[default]
    Unknown,
    /// The node's transformation leaves its input unchanged.
    Same,
    /// The node's output is `arena[start..start + len]`.
    Bytes { start: u32, len: u32 },
}

#[derive(Clone, Copy, Debug, Default)]
struct NodeInfo {
    state: NodeState,
    /// Index in `gate` of the output's scan result and byte set, or NONE.
    gate: u32,
    /// The first block in `op_blocks` of the output's operator results,
    /// or NONE.
    ops: u32,
}

/// Operator results of one (record, node): `OP_SLOTS` slots of
/// `(op + 1) << 1 | matched` (0 = free), then the next block's index + 1
/// (0 = none). One cache line.
#[derive(Clone, Copy, Debug, Default)]
#[repr(align(64))]
struct OpBlock([u32; OP_SLOTS + 1]);

const OP_SLOTS: usize = 15;

impl NodeInfo {
    const UNKNOWN: NodeInfo = NodeInfo {
        state: NodeState::Unknown,
        gate: NONE,
        ops: NONE,
    };
}

/// At most this many transform nodes are remembered per value (CRS has 45
/// nodes in all, and a value goes through a few dozen of them; with more
/// nodes than this, the ones that find no free slot are recomputed).
const MAX_RECORD_NODES: usize = 64;

#[derive(Clone, Copy, Debug)]
struct Record {
    hash: u64,
    start: u32,
    len: u32,
    /// (class + 1, index in `verdicts`) of the value's verdicts for a
    /// class of values (see `Plan::class_links`); 0 = free. An argument is
    /// in `ARGS` and `ARGS_GET`, and `ARGS` is read by `multiMatch` links;
    /// short values (empty, `1`, `true`) are in many more classes, and
    /// with three slots their verdicts were computed again on every
    /// request (CRS has 31 classes).
    unions: [(u32, u32); UNION_CLASSES],
    /// Bit n: node n (n < 64) leaves the value unchanged. Most nodes do
    /// for most values, and reading that here, with the record's other
    /// fields, takes no look-up in its node slots (a cache line apart
    /// each): those look-ups were the memo's most frequent cache misses.
    same: u64,
}

/// Classes of verdicts a record keeps.
const UNION_CLASSES: usize = 8;

/// Limits of one cache (one per thread and ruleset).
#[derive(Clone, Copy, Debug)]
pub(super) struct XCacheLimits {
    pub records: usize,
    pub bytes: usize,
    pub op_results: usize,
}

impl XCacheLimits {
    /// The bounds of a cache of `records` values (from 16 to 2^24): 1 KiB
    /// of value bytes and 64 operator results per value (16 MiB and
    /// 1,048,576 for the default 16,384).
    pub fn for_records(records: usize) -> XCacheLimits {
        let records = records.clamp(16, 1 << 24);
        XCacheLimits {
            records,
            bytes: records << 10,
            op_results: records << 6,
        }
    }
}

impl Default for XCacheLimits {
    fn default() -> Self {
        XCacheLimits::for_records(crate::EvalOptions::DEFAULT_XCACHE_RECORDS)
    }
}

#[derive(Default)]
pub(super) struct XCache {
    limits: Option<XCacheLimits>,
    words: usize,
    /// Open addressing over `records`: record index + 1, 0 = empty.
    index: Vec<u32>,
    records: Vec<Record>,
    arena: Vec<u8>,
    /// `record_nodes` slots per record, (node + 1, info), 0 = free: the
    /// nodes a value went through, next to each other in memory (a lookup
    /// reads a few cache lines of one record, not a random table slot).
    /// Open addressing within the record: a node's probe starts at slot
    /// `node % record_nodes` (see [`XCache::probe`]). With at most
    /// [`MAX_RECORD_NODES`] nodes in the program (CRS), there is a slot per
    /// node: every node's outcome is kept, and found at the first probe.
    node_info: Vec<(u32, NodeInfo)>,
    record_nodes: usize,
    /// Scan results (`words` words) followed by the byte set (4 words).
    gate: Vec<u64>,
    /// Words of a verdict, and the records' verdicts.
    vwords: usize,
    verdicts: Vec<u64>,
    /// Operator results, in blocks per (record, node) (see `OpBlock`).
    op_blocks: Vec<OpBlock>,
    op_count: usize,
    /// Admission filter: a bit per hash bucket of the values seen once. A
    /// value gets a record the second time it is seen, so a stream of
    /// unique values (a big body's arguments) costs one bit test each.
    seen: Vec<u64>,
    epoch: u32,
    pub hits: u64,
    pub misses: u64,
    /// Times the cache was full and started over.
    pub resets: u64,
}

impl XCache {
    /// A cache for scan results of `words` words and verdicts of `vwords`,
    /// over a transform tree of `nodes` nodes.
    pub fn new(words: usize, vwords: usize, nodes: usize, limits: XCacheLimits) -> XCache {
        XCache {
            limits: Some(limits),
            words,
            vwords,
            record_nodes: nodes.clamp(1, MAX_RECORD_NODES),
            ..XCache::default()
        }
    }

    fn limits(&self) -> XCacheLimits {
        self.limits.unwrap_or_default()
    }

    /// Empties the cache (keeps the buffers).
    pub fn clear(&mut self) {
        self.epoch = next_epoch();
        self.index.fill(0);
        self.records.clear();
        self.arena.clear();
        self.node_info.clear();
        self.gate.clear();
        self.verdicts.clear();
        self.op_blocks.clear();
        self.op_count = 0;
        self.seen.fill(0);
    }

    /// The record of `raw`, created if absent. `None` when the value is too
    /// big to cache.
    pub fn record(&mut self, raw: &[u8]) -> Option<u32> {
        let lim = self.limits();
        if raw.len() > lim.bytes / 8 {
            return None;
        }
        if self.epoch == 0 {
            self.epoch = next_epoch();
        }
        if self.index.is_empty() {
            self.index = vec![0; (lim.records * 2).next_power_of_two()];
            self.node_info = Vec::with_capacity(lim.records * self.record_nodes);
            self.seen = vec![0; (lim.records * 64).next_power_of_two() / 64];
        }
        let hash = crate::hash::bytes(raw);
        let mask = self.index.len() - 1;
        let mut i = hash as usize & mask;
        loop {
            let slot = self.index[i];
            if slot == 0 {
                break;
            }
            let r = self.records[(slot - 1) as usize];
            if r.hash == hash && &self.arena[r.start as usize..(r.start + r.len) as usize] == raw {
                self.hits += 1;
                return Some(slot - 1);
            }
            i = (i + 1) & mask;
        }
        self.misses += 1;
        let bit = (hash >> 7) as usize & (self.seen.len() * 64 - 1);
        if self.seen[bit / 64] & (1 << (bit % 64)) == 0 {
            self.seen[bit / 64] |= 1 << (bit % 64);
            return None;
        }
        // Full (records, bytes, or scan results): start over rather than
        // keep paying for a cache that can learn nothing new.
        if self.records.len() >= lim.records
            || self.arena.len() + raw.len() > lim.bytes
            || self.gate_full()
        {
            self.clear();
            self.resets += 1;
            return self.record_fresh(raw, hash);
        }
        let id = self.records.len() as u32;
        self.index[i] = id + 1;
        self.push_record(raw, hash);
        Some(id)
    }

    fn record_fresh(&mut self, raw: &[u8], hash: u64) -> Option<u32> {
        let mask = self.index.len() - 1;
        let i = hash as usize & mask;
        self.index[i] = 1;
        self.push_record(raw, hash);
        Some(0)
    }

    fn push_record(&mut self, raw: &[u8], hash: u64) {
        let start = self.arena.len() as u32;
        self.arena.extend_from_slice(raw);
        self.records.push(Record {
            hash,
            start,
            len: raw.len() as u32,
            unions: [(0, 0); UNION_CLASSES],
            same: 0,
        });
        self.node_info.resize(
            self.records.len() * self.record_nodes,
            (0, NodeInfo::UNKNOWN),
        );
    }

    fn slots(&self, rec: u32) -> &[(u32, NodeInfo)] {
        let at = rec as usize * self.record_nodes;
        self.node_info
            .get(at..at + self.record_nodes)
            .unwrap_or(&[])
    }

    fn probe(&self, node: usize) -> impl Iterator<Item = usize> {
        probe(self.record_nodes, node)
    }

    fn info(&self, rec: u32, node: usize) -> NodeInfo {
        let key = node as u32 + 1;
        let slots = self.slots(rec);
        if slots.len() == self.record_nodes {
            for i in self.probe(node) {
                let (k, info) = slots[i];
                if k == key {
                    return info;
                }
                if k == 0 {
                    break;
                }
            }
        }
        NodeInfo::UNKNOWN
    }

    /// The entry of (rec, node), created if absent; None when the record's
    /// slots are all taken (that node is then not cached for this value).
    fn info_mut(&mut self, rec: u32, node: usize) -> Option<&mut NodeInfo> {
        let key = node as u32 + 1;
        let rn = self.record_nodes;
        let at = rec as usize * rn;
        let slots = self.node_info.get_mut(at..at + rn)?;
        let i = probe(rn, node).find(|&i| slots[i].0 == key || slots[i].0 == 0)?;
        if slots[i].0 == 0 {
            slots[i] = (key, NodeInfo::UNKNOWN);
        }
        Some(&mut slots[i].1)
    }

    /// Changed every time the cache is emptied, and unique among all caches
    /// of the process (0 until the first record): a record id is only
    /// meaningful with the epoch it was obtained in, so an instance that
    /// got its record from another thread's cache (its transaction moved
    /// threads between phases) is simply not served from this one.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    pub fn node(&self, rec: u32, node: usize) -> NodeState {
        let same = self.records.get(rec as usize).map_or(0, |r| r.same);
        if node < 64 && same & (1 << node) != 0 {
            return NodeState::Same;
        }
        self.info(rec, node).state
    }

    pub fn bytes(&self, start: u32, len: u32) -> &[u8] {
        &self.arena[start as usize..(start + len) as usize]
    }

    /// Stores a node's outcome; `out` is its output when it changed the value.
    /// Returns false (nothing stored) when the arena is full.
    pub fn set_node(&mut self, rec: u32, node: usize, out: Option<&[u8]>) -> bool {
        if out.is_none() && node < 64 {
            return match self.records.get_mut(rec as usize) {
                Some(r) => {
                    r.same |= 1 << node;
                    true
                }
                None => false,
            };
        }
        let state = match out {
            None => NodeState::Same,
            Some(b) => {
                if self.arena.len() + b.len() > self.limits().bytes {
                    return false;
                }
                let start = self.arena.len() as u32;
                self.arena.extend_from_slice(b);
                NodeState::Bytes {
                    start,
                    len: b.len() as u32,
                }
            }
        };
        match self.info_mut(rec, node) {
            Some(i) => {
                i.state = state;
                true
            }
            None => false,
        }
    }

    /// The scan result and byte set stored for a node's output, if any.
    pub fn gate(&self, rec: u32, node: usize) -> Option<(&[u64], ByteMask)> {
        let g = self.info(rec, node).gate;
        (g != NONE).then(|| self.gate_at(g))
    }

    pub fn set_gate(&mut self, rec: u32, node: usize, bits: &[u64], mask: ByteMask) {
        if self.info(rec, node).gate != NONE || self.gate_full() {
            return;
        }
        let at = self.gate.len() as u32;
        if let Some(i) = self.info_mut(rec, node) {
            i.gate = at;
            self.push_gate(bits, mask);
        }
    }

    /// The scan result and byte set stored at `at` in `gate`.
    fn gate_at(&self, at: u32) -> (&[u64], ByteMask) {
        let (at, w) = (at as usize, self.words);
        let m = &self.gate[at + w..at + w + 4];
        (&self.gate[at..at + w], [m[0], m[1], m[2], m[3]])
    }

    /// Whether one more scan result or verdict would take them past the
    /// byte limit.
    fn gate_full(&self) -> bool {
        (self.gate.len() + self.verdicts.len() + self.words.max(self.vwords) + 4) * 8
            > self.limits().bytes
    }

    fn push_gate(&mut self, bits: &[u64], mask: ByteMask) {
        self.gate.extend_from_slice(bits);
        self.gate.extend_from_slice(&mask);
    }

    /// The value's verdict for `class` (see `Plan::class_links`), if stored.
    pub fn verdict(&self, rec: u32, class: u32) -> Option<&[u64]> {
        let r = self.records.get(rec as usize)?;
        let &(_, at) = r.unions.iter().find(|u| u.0 == class + 1)?;
        self.verdicts.get(at as usize..at as usize + self.vwords)
    }

    /// Stores the value's verdict for `class`, unless the record's slots
    /// are taken or the byte limit is reached.
    pub fn set_verdict(&mut self, rec: u32, class: u32, bits: &[u64]) {
        let full = self.gate_full();
        let at = self.verdicts.len() as u32;
        let Some(r) = self.records.get_mut(rec as usize) else {
            return;
        };
        if full || r.unions.iter().any(|u| u.0 == class + 1) {
            return;
        }
        let Some(slot) = r.unions.iter_mut().find(|u| u.0 == 0) else {
            return;
        };
        *slot = (class + 1, at);
        self.verdicts.extend_from_slice(&bits[..self.vwords]);
    }

    /// A link (verdict bit `bit`) is known not to match the value: its bit
    /// is cleared in each of the value's stored verdicts (a verdict bit is
    /// about the value's bytes, whatever the class it was stored for).
    pub fn clear_verdict(&mut self, rec: u32, bit: u32) {
        let Some(r) = self.records.get(rec as usize) else {
            return;
        };
        let (word, mask) = ((bit / 64) as usize, !(1u64 << (bit % 64)));
        for &(c, at) in &r.unions {
            if c != 0 {
                if let Some(w) = self.verdicts.get_mut(at as usize + word) {
                    *w &= mask;
                }
            }
        }
    }

    /// A stored operator result.
    pub fn op(&self, rec: u32, node: usize, op: u32) -> Option<OpResult> {
        let key = op_key(op)?;
        let mut b = self.info(rec, node).ops;
        while let Some(block) = self.op_blocks.get(b as usize) {
            for &slot in &block.0[..OP_SLOTS] {
                if slot & !OP_RESULT_BITS == key {
                    return Some(OpResult::from_bits(slot & OP_RESULT_BITS));
                }
            }
            b = block.0[OP_SLOTS].wrapping_sub(1);
        }
        None
    }

    /// Stores an operator result (not when the value's node has no slot in
    /// its record); at the limit of results, all of them are dropped and
    /// the blocks start over.
    pub fn set_op(&mut self, rec: u32, node: usize, op: u32, result: OpResult) {
        let Some(key) = op_key(op) else { return };
        // At most as many bytes of blocks as the results themselves would
        // take in a table at half load (8 MiB for the default limit).
        let limit = self.limits().op_results;
        if self.op_count >= limit || self.op_blocks.len() >= limit / 2 {
            self.op_blocks.clear();
            self.op_count = 0;
            for (_, info) in &mut self.node_info {
                info.ops = NONE;
            }
        }
        let slot = key | result as u32;
        let fresh = self.op_blocks.len() as u32;
        let Some(info) = self.info_mut(rec, node) else {
            return;
        };
        if info.ops == NONE {
            info.ops = fresh;
        }
        let mut b = info.ops as usize;
        if b == self.op_blocks.len() {
            self.op_blocks.push(OpBlock::default());
        }
        loop {
            let len = self.op_blocks.len();
            let Some(block) = self.op_blocks.get_mut(b) else {
                return;
            };
            for s in &mut block.0[..OP_SLOTS] {
                if *s == 0 {
                    self.op_count += 1;
                }
                if *s == 0 || *s & !OP_RESULT_BITS == key {
                    *s = slot;
                    return;
                }
            }
            match block.0[OP_SLOTS] {
                0 => {
                    block.0[OP_SLOTS] = len as u32 + 1;
                    self.op_blocks.push(OpBlock::default());
                    b = len;
                }
                next => b = next as usize - 1,
            }
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.records.len()
    }

    #[cfg(test)]
    pub fn op_blocks(&self) -> usize {
        self.op_blocks.len()
    }
}

/// A process-wide unique, non-zero epoch.
fn next_epoch() -> u32 {
    static EPOCHS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
    loop {
        let e = EPOCHS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if e != 0 {
            return e;
        }
    }
}

// Where each thread keeps its caches between phases (`home_take`,
// `home_give`, `home_clear`): one per ruleset (by
// [`crate::Ruleset`]'s unique id), the most recently used first.
//
// A cache belongs to the worker thread, not to the transaction: a proxy
// keeps a transaction per request in flight (dozens per thread, each
// waiting on a client or upstream between phases), and a cache per
// transaction would split what the thread learns into as many cold
// copies, each megabytes. A transaction borrows its thread's cache for
// the length of a phase (see `Transaction::run_phase`).

/// Rulesets whose caches a thread keeps (a server running several sites).
const HOME_RULESETS: usize = 4;

struct Home {
    /// Per ruleset id, most recently used first.
    caches: Vec<(u64, XCache)>,
    /// `ruleset::rulesets_dropped()` when this thread last dropped its
    /// caches of rulesets that are gone.
    gone_seen: u64,
}

thread_local! {
    static HOME: std::cell::RefCell<Home> = const {
        std::cell::RefCell::new(Home {
            caches: Vec::new(),
            gone_seen: 0,
        })
    };
}

/// This thread's cache for ruleset `id`, if it has one (taken out).
pub(super) fn home_take(id: u64) -> Option<XCache> {
    HOME.try_with(|h| {
        let mut h = h.try_borrow_mut().ok()?;
        let i = h.caches.iter().position(|(r, _)| *r == id)?;
        Some(h.caches.remove(i).1)
    })
    .ok()
    .flatten()
}

/// Puts a cache back as this thread's for ruleset `id` (a live ruleset:
/// the transaction giving it back holds it), and drops the thread's caches
/// of rulesets dropped since it last looked.
pub(super) fn home_give(id: u64, x: XCache) {
    let _ = HOME.try_with(|h| {
        if let Ok(mut h) = h.try_borrow_mut() {
            let gone = crate::ruleset::rulesets_dropped();
            if gone != h.gone_seen && crate::ruleset::retain_live(&mut h.caches) {
                h.gone_seen = gone;
            }
            h.caches.retain(|(r, _)| *r != id);
            if h.caches.len() >= HOME_RULESETS {
                h.caches.pop();
            }
            h.caches.insert(0, (id, x));
        }
    });
}

/// Empties this thread's cache for ruleset `id` (keeps its buffers).
pub(super) fn home_clear(id: u64) {
    let _ = HOME.try_with(|h| {
        if let Ok(mut h) = h.try_borrow_mut() {
            for (r, x) in h.caches.iter_mut() {
                if *r == id {
                    x.clear();
                }
            }
        }
    });
}

/// The rulesets this thread keeps caches for, most recently used first.
#[cfg(test)]
pub(super) fn home_ids() -> Vec<u64> {
    HOME.with(|h| h.borrow().caches.iter().map(|(r, _)| *r).collect())
}

/// The slots of a record of `rn` slots that node `node`'s entry may be in,
/// in probe order (records are only ever emptied whole, so a free slot ends
/// a probe).
fn probe(rn: usize, node: usize) -> impl Iterator<Item = usize> {
    (0..rn).map(move |k| (node + k) % rn)
}

/// An operator's key in its (record, node)'s blocks: `(op + 1) << 1`, never
/// 0 (a free slot); None for an operator index too big to store.
fn op_key(op: u32) -> Option<u32> {
    op.checked_add(1).filter(|k| *k < 1 << 30).map(|k| k << 2)
}

/// The low bits of an operator result's slot: the [`OpResult`]; the rest
/// is the operator's key.
const OP_RESULT_BITS: u32 = 0b11;

/// What an operator answered for a value, as the cache keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpResult {
    NoMatch = 0,
    /// A match whose captures, if any were wanted, are not kept: a link
    /// with `capture` runs the operator again.
    Match = 1,
    /// A match whose only group is the whole value (`@rx ^.*$` with
    /// `capture`, as CRS 920450 reads every header name): the groups
    /// follow from the value, so a link with `capture` is served too.
    MatchWhole = 2,
}

impl OpResult {
    fn from_bits(b: u32) -> OpResult {
        match b {
            0 => OpResult::NoMatch,
            2 => OpResult::MatchWhole,
            _ => OpResult::Match,
        }
    }

    /// Whether the operator matched.
    pub fn matched(self) -> bool {
        self != OpResult::NoMatch
    }
}

impl From<bool> for OpResult {
    fn from(matched: bool) -> OpResult {
        if matched {
            OpResult::Match
        } else {
            OpResult::NoMatch
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_verified_and_bounded() {
        let mut c = XCache::new(
            1,
            1,
            8,
            XCacheLimits {
                records: 4,
                bytes: 1024,
                op_results: 8,
            },
        );
        // Admitted the second time a value is seen.
        assert_eq!(c.record(b"alpha"), None);
        let a = c.record(b"alpha").expect("cached");
        assert_eq!(c.record(b"alpha"), Some(a));
        assert_eq!(c.record(b"beta"), None);
        let b = c.record(b"beta").expect("cached");
        assert_ne!(a, b);
        assert_eq!((c.hits, c.misses), (1, 4));
        c.set_node(a, 1, Some(b"ALPHA"));
        c.set_node(a, 2, None);
        assert_eq!(c.node(a, 1), NodeState::Bytes { start: 9, len: 5 });
        assert_eq!(c.node(a, 2), NodeState::Same);
        assert_eq!(c.node(b, 1), NodeState::Unknown);
        // An unchanged node takes no slot: `b`'s are all taken (by scan
        // results), and node 1 is still known to leave it unchanged.
        for node in [0, 2, 3, 4, 5, 6, 7, 8] {
            c.set_gate(b, node, &[1], [0; 4]);
        }
        assert!(!c.set_node(b, 1, Some(b"B")), "no slot left");
        assert!(c.set_node(b, 1, None));
        assert_eq!(c.node(b, 1), NodeState::Same);
        assert_eq!(c.gate(b, 1), None);
        c.set_gate(a, 1, &[5], [1, 2, 3, 4]);
        assert_eq!(c.gate(a, 1), Some((&[5u64][..], [1, 2, 3, 4])));
        c.set_op(a, 1, 7, OpResult::Match);
        assert_eq!(c.op(a, 1, 7), Some(OpResult::Match));
        assert_eq!(c.op(b, 1, 7), None);
        // Filling the record budget empties the cache, and counts it.
        assert_eq!(c.resets, 0);
        for v in [&b"c"[..], b"d", b"e"] {
            c.record(v);
            c.record(v);
        }
        assert_eq!(c.len(), 1);
        assert_eq!(c.resets, 1);
        assert_eq!(c.op(a, 1, 7), None);
        // Too big to cache.
        assert_eq!(c.record(&[0u8; 200]), None);
    }

    #[test]
    fn verdicts_are_kept_per_class_and_lose_the_bits_of_links_that_do_not_match() {
        let mut c = XCache::new(
            1,
            2,
            8,
            XCacheLimits {
                records: 8,
                bytes: 1 << 12,
                op_results: 8,
            },
        );
        c.record(b"v");
        let v = c.record(b"v").expect("cached");
        c.record(b"w");
        let w = c.record(b"w").expect("cached");
        assert_eq!(c.verdict(v, 0), None);
        c.set_verdict(v, 0, &[0b1011, 1 << 3]);
        c.set_verdict(v, 2, &[0b0011, 0]);
        c.set_verdict(w, 0, &[0b1111, 1 << 3]);
        // Stored once per class: a second store is ignored.
        c.set_verdict(v, 0, &[0, 0]);
        assert_eq!(c.verdict(v, 0), Some(&[0b1011, 1 << 3][..]));
        // A link known not to match the value loses its bit in every class
        // of that value, and only of that value.
        c.clear_verdict(v, 1);
        c.clear_verdict(v, 67);
        assert_eq!(c.verdict(v, 0), Some(&[0b1001, 0][..]));
        assert_eq!(c.verdict(v, 2), Some(&[0b0001, 0][..]));
        assert_eq!(c.verdict(w, 0), Some(&[0b1111, 1 << 3][..]));
        // `UNION_CLASSES` classes per value at most.
        for class in 3..UNION_CLASSES as u32 + 2 {
            c.set_verdict(v, class, &[1, 0]);
        }
        assert_eq!(c.verdict(v, UNION_CLASSES as u32), Some(&[1, 0][..]));
        assert_eq!(c.verdict(v, UNION_CLASSES as u32 + 1), None);
        // Emptying the cache forgets them.
        c.clear();
        c.record(b"v");
        let v = c.record(b"v").expect("cached");
        assert_eq!(c.verdict(v, 0), None);
    }

    #[test]
    fn limits_grow_with_the_records() {
        let d = XCacheLimits::default();
        assert_eq!(d.records, crate::EvalOptions::DEFAULT_XCACHE_RECORDS);
        let l = XCacheLimits::for_records(4096);
        assert_eq!((l.records, l.bytes, l.op_results), (4096, 4 << 20, 1 << 18));
        assert_eq!(XCacheLimits::for_records(0).records, 16);
        assert_eq!(XCacheLimits::for_records(usize::MAX).records, 1 << 24);
    }

    #[test]
    fn operator_results_are_kept_per_value_and_node_up_to_their_limit() {
        let mut c = XCache::new(
            1,
            1,
            8,
            XCacheLimits {
                records: 64,
                bytes: 1 << 16,
                op_results: 100,
            },
        );
        c.record(b"v");
        let r = c.record(b"v").expect("cached");
        c.record(b"w");
        let w = c.record(b"w").expect("cached");
        // 40 results at one node take three chained blocks; another node
        // and another value have their own.
        for op in 0..40u32 {
            c.set_op(r, 1, op, OpResult::from(op % 3 == 0));
        }
        c.set_op(r, 2, 5, OpResult::Match);
        c.set_op(w, 1, 5, OpResult::NoMatch);
        c.set_op(r, 1, 6, OpResult::Match);
        assert_eq!(c.op_blocks(), 5);
        for op in 0..40u32 {
            assert_eq!(
                c.op(r, 1, op),
                Some(OpResult::from(op % 3 == 0 || op == 6)),
                "op {op} kept"
            );
        }
        assert_eq!(
            (c.op(r, 2, 5), c.op(w, 1, 5)),
            (Some(OpResult::Match), Some(OpResult::NoMatch))
        );
        assert_eq!(
            (c.op(r, 2, 6), c.op(w, 1, 6), c.op(r, 3, 5)),
            (None, None, None)
        );
        assert_eq!(c.op(r, 1, u32::MAX), None);
        c.set_op(r, 1, u32::MAX, OpResult::Match);
        assert_eq!(c.op(r, 1, u32::MAX), None, "too big to store");
        // At the limit, the results start over.
        for op in 100..160u32 {
            c.set_op(w, 2, op, OpResult::Match);
        }
        assert_eq!(c.op(r, 1, 0), None);
        assert_eq!(c.op(w, 2, 159), Some(OpResult::Match));
        assert!(c.op_count <= 100);
        // So do they at the limit of blocks, half the results' (one result
        // per (value, node) takes a block each): 80 such results.
        let mut recs = Vec::new();
        for v in 0..10u8 {
            c.record(&[b'v', v]);
            recs.push(c.record(&[b'v', v]).expect("cached"));
        }
        for &rec in &recs {
            for node in 0..8 {
                c.set_op(rec, node, 1, OpResult::Match);
            }
        }
        assert!(c.op_blocks() <= 50, "{} blocks", c.op_blocks());
        assert_eq!(c.op(recs[9], 7, 1), Some(OpResult::Match));
        // A whole-value match is kept as such, and replaces a plain one.
        c.set_op(recs[9], 7, 1, OpResult::MatchWhole);
        c.set_op(recs[9], 7, 2, OpResult::NoMatch);
        assert_eq!(c.op(recs[9], 7, 1), Some(OpResult::MatchWhole));
        assert_eq!(c.op(recs[9], 7, 2), Some(OpResult::NoMatch));
        assert!(OpResult::MatchWhole.matched() && !OpResult::NoMatch.matched());
    }
}
