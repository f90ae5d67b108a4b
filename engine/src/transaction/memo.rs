//! The per-transaction memo table of transformed values.
//!
//! A *variable instance* is one value of the request: the third argument, the
//! `User-Agent` header, the name of a cookie, `REQUEST_URI`. Rules read it
//! through transform chains, which the compiler interned as nodes of a prefix
//! tree (`urlDecodeUni → lowercase` is a child of `urlDecodeUni`). The table
//! maps (instance, node) to an *entry*: the transformed bytes in an arena,
//! plus — computed only when an operator's prefilter asks — the value's
//! prefilter scan bits and byte set.
//!
//! - A node's value is computed from its parent's, so a shared prefix is
//!   transformed once.
//! - A transformation that leaves its input unchanged (the common case)
//!   maps the node to the parent's entry: no copy, no second scan.
//! - A case-only transformation (`lowercase`, `uppercase`) inherits the
//!   parent's scan result: the scan is ASCII-case-insensitive.
//!
//! Only values that cannot change while rules run are memoized (request
//! collections only grow, and an entry's index is stable); `TX`, `ENV`,
//! `MATCHED_VAR(S)` and a few clocks are read directly every time (see
//! `vars::is_volatile`). Scalars are re-read at every phase, since body
//! processing and the response set new ones.
//!
//! Each target's list of instances is built once per phase and shared by all
//! its slots (target × transform node); a slot caches, lazily, the union of
//! its values' scan results: a rule whose operator cannot match any of them
//! is skipped after one bit test. Before a slot group's union is computed,
//! a coarse one is tried: the union of its sources' values' *verdicts*, a
//! value's bit per grouped link that may match it (cached across
//! transactions, and cleared there once a link is known not to match; see
//! `Plan::class_links`), folded per generation into one bit per link, which
//! rules most links out without a target list.
//!
//! All storage is kept by [`Memo::clear`], so a reused transaction stops
//! allocating once the buffers have grown.

use super::xcache::{NodeState, XCache, XCacheLimits, NONE};
use crate::plan::Plan;
use crate::prefilter::{byte_mask, ByteMask, Scanner};
use crate::ruleset::Ruleset;
use crate::sources::Coll;
use crate::stats::{ChainProfile, EvalStats};
use crate::transform::{self, Transform};
use waf_compiler::ir::{NodeId, SlotId, TargetId, TransformTree};
use waf_compiler::names::Variable as V;

/// Where an instance's value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Origin {
    /// Entry `idx` of a collection (`names`: its key rather than its value).
    Coll { coll: Coll, names: bool, idx: u32 },
    /// A scalar variable (or `XML:/*`).
    Scalar(V),
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Inst {
    pub var: V,
    pub origin: Origin,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    start: usize,
    len: usize,
    /// Its scan result and byte set: `gate_masks[gate]` and
    /// `gate_bits[gate * words..]`; NONE until computed (or read from the
    /// cross-transaction cache). Most values never need theirs (their
    /// verdicts are cached): they take no room for one.
    gate: u32,
    /// The instance and node that produced this value (for the
    /// cross-transaction cache).
    inst: u32,
    node: u32,
}

/// Number of distinct `(collection, names)` origins.
const ORIGIN_KINDS: usize = Coll::ALL.len() * 2;

#[derive(Default)]
pub(super) struct Memo {
    /// `SecUnicodeMapFile`'s table, for `urlDecodeUni`.
    unicode_map: Option<std::sync::Arc<crate::transform::UnicodeMap>>,
    nodes: usize,
    words: usize,
    /// Words of a verdict (see `Plan::class_links`).
    vwords: usize,
    /// `inst * nodes + node` → entry, or `NONE`.
    table: Vec<u32>,
    entries: Vec<Entry>,
    arena: Vec<u8>,
    /// Scan results (`words` words each) and byte sets of the entries
    /// that have one (see `Entry::gate`).
    gate_bits: Vec<u64>,
    gate_masks: Vec<ByteMask>,
    insts: Vec<Inst>,
    /// Per `(coll, names)`: collection index → instance.
    coll_insts: Vec<Vec<u32>>,
    /// Per variable: (generation, instance) of the scalar's instance.
    scalar_insts: Vec<(u32, u32)>,
    // Instance lists of targets, indexed by `TargetId`: built once per
    // generation, shared by every slot (transform chain) of the target.
    target_gen: Vec<u32>,
    target_range: Vec<(u32, u32)>,
    /// Length of the source collection when the list was built (`None`:
    /// not a collection; the list is valid in its generation only).
    target_src: Vec<Option<u32>>,
    /// A number unique to each build (0: never built in this transaction).
    target_build: Vec<u32>,
    builds: u32,
    target_list: Vec<u32>,
    // Slot states, indexed by `SlotId`: the union of the scan results of
    // the target's values at the slot's node, computed on first use.
    /// The target build the slot's union was computed for.
    slot_gen: Vec<u32>,
    slot_ready: Vec<bool>,
    slot_bits: Vec<u64>,
    slot_mask: Vec<ByteMask>,
    /// Per slot group (see `Plan::group_slots`): the union of its slot
    /// unions, valid in the generation it was begun in.
    groups: Unions,
    // Coarse unions (see `Plan::group_list`). Per instance, `UNION_WAYS`
    // ways: its verdict for a class of values (see `Plan::class_links`),
    // once computed (or read from the cross-transaction cache).
    /// The class of each way's verdict (NONE: none yet).
    inst_union_class: Vec<u32>,
    inst_union_bits: Vec<u64>,
    /// Per source (indexed as `Plan::sources`): the union of its values'
    /// verdicts, with the number of collection entries it covers
    /// (collections only grow) or the generation it was computed in.
    source_covered: Vec<u32>,
    sources: Verdicts,
    /// The links that may match a value of their group's sources, as
    /// far as the sources folded in are concerned (see
    /// [`Memo::fold_source`]), valid in generation `passes_gen`; the
    /// generation each source was folded in, and each list of sources
    /// (see `Plan::group_list`) once all its sources were (with their
    /// number of values).
    passes: Vec<u64>,
    passes_gen: u32,
    source_folded: Vec<u32>,
    list_folded: Vec<(u32, u32)>,
    path: Vec<NodeId>,
    out: Vec<u8>,
    /// The prefilter's lowercased copy of the value it scans.
    lowered: Vec<u8>,
    /// Per instance: its cross-transaction cache record and that record's
    /// epoch (NONE when not cached).
    inst_rec: Vec<(u32, u32)>,
    /// The cross-transaction cache: the thread's, borrowed for the length
    /// of a phase (see `xcache::home_take`); an empty placeholder
    /// between phases.
    pub x: XCache,
    pub x_on: bool,
    /// While borrowed: its hit and miss counts when it was taken.
    pub x_taken: Option<(u64, u64, u64)>,
    /// Per-node counters (kept by `clear`; filled only when `prof_on`, after
    /// the transaction sized them).
    pub prof: ChainProfile,
    pub prof_on: bool,
}

impl Memo {
    pub fn new(rs: &Ruleset) -> Memo {
        let p = rs.program();
        let words = rs.scanner().words();
        let slots = p.slots.len();
        let groups = rs.plan().groups();
        let sources = rs.plan().sources().len();
        let vwords = rs.plan().verdict_words();
        Memo {
            unicode_map: rs.unicode_map().cloned(),
            nodes: p.transforms.nodes.len(),
            words,
            vwords,
            table: Vec::new(),
            entries: Vec::new(),
            arena: Vec::new(),
            gate_bits: Vec::new(),
            gate_masks: Vec::new(),
            insts: Vec::new(),
            coll_insts: vec![Vec::new(); ORIGIN_KINDS],
            scalar_insts: vec![(0, NONE); V::ALL.len()],
            target_gen: vec![0; p.targets.len()],
            target_range: vec![(0, 0); p.targets.len()],
            target_src: vec![None; p.targets.len()],
            target_build: vec![0; p.targets.len()],
            builds: 0,
            target_list: Vec::new(),
            slot_gen: vec![0; slots],
            slot_ready: vec![false; slots],
            slot_bits: vec![0; slots * words],
            slot_mask: vec![[0; 4]; slots],
            groups: Unions::new(groups, words),
            inst_union_class: Vec::new(),
            inst_union_bits: Vec::new(),
            source_covered: vec![0; sources],
            sources: Verdicts::new(sources, vwords),
            passes: vec![0; vwords],
            passes_gen: 0,
            source_folded: vec![0; sources],
            list_folded: vec![(0, 0); rs.plan().source_lists()],
            path: Vec::new(),
            out: Vec::new(),
            lowered: Vec::new(),
            inst_rec: Vec::new(),
            x: XCache::default(),
            x_on: true,
            x_taken: None,
            prof: ChainProfile::default(),
            prof_on: false,
        }
    }

    /// A new, empty cross-transaction cache for this program, of up to
    /// `records` values.
    pub fn new_xcache(&self, records: usize) -> XCache {
        XCache::new(
            self.words,
            self.vwords,
            self.nodes,
            XCacheLimits::for_records(records),
        )
    }

    pub fn clear(&mut self) {
        self.table.clear();
        self.entries.clear();
        self.arena.clear();
        self.gate_bits.clear();
        self.gate_masks.clear();
        self.insts.clear();
        self.inst_rec.clear();
        for v in &mut self.coll_insts {
            v.clear();
        }
        self.target_list.clear();
        // Instances are gone: no scalar, target list or slot union may point at one.
        self.scalar_insts.fill((0, NONE));
        self.target_gen.fill(0);
        self.target_build.fill(0);
        self.slot_gen.fill(0);
        self.groups.forget();
        self.builds = 0;
        self.inst_union_class.clear();
        self.inst_union_bits.clear();
        self.forget_sources();
    }

    /// Forgets every source's and group's coarse union (instances are gone,
    /// or generations wrapped).
    fn forget_sources(&mut self) {
        self.source_covered.fill(0);
        // Collection sources add to their unions without a `begin`.
        self.sources.empty();
        self.passes_gen = 0;
        self.source_folded.fill(0);
        self.list_folded.fill((0, 0));
    }

    /// Forgets slot states and scalar instances of every generation (when
    /// the generation counter wraps).
    pub fn forget_generations(&mut self) {
        self.target_gen.fill(0);
        self.target_src.fill(None);
        self.scalar_insts.fill((0, NONE));
        self.groups.forget();
        self.forget_sources();
    }

    /// The instance of `origin`, created (with `raw` as its untransformed
    /// value) if this is its first use. Scalars get a new instance in each
    /// generation (phase), collection entries keep theirs.
    pub fn instance(&mut self, var: V, origin: Origin, raw: &[u8], generation: u32) -> u32 {
        match origin {
            Origin::Coll { coll, names, idx } => {
                let k = coll.index() * 2 + usize::from(names);
                let list = &mut self.coll_insts[k];
                let i = idx as usize;
                if list.len() <= i {
                    list.resize(i + 1, NONE);
                }
                if list[i] != NONE {
                    return list[i];
                }
                let inst = self.new_instance(var, origin, raw);
                self.coll_insts[k][i] = inst;
                inst
            }
            Origin::Scalar(v) => {
                let (g, inst) = self.scalar_insts[v as usize];
                // A scalar read again in a later generation keeps its
                // instance (and transformed values) if its value is the same.
                if inst != NONE && (g == generation || self.raw(inst) == raw) {
                    self.scalar_insts[v as usize] = (generation, inst);
                    return inst;
                }
                let inst = self.new_instance(var, origin, raw);
                self.scalar_insts[v as usize] = (generation, inst);
                inst
            }
        }
    }

    fn new_instance(&mut self, var: V, origin: Origin, raw: &[u8]) -> u32 {
        let inst = self.insts.len() as u32;
        self.insts.push(Inst { var, origin });
        let rec = if self.x_on {
            self.x
                .record(raw)
                .map_or((NONE, 0), |r| (r, self.x.epoch()))
        } else {
            (NONE, 0)
        };
        self.inst_rec.push(rec);
        self.inst_union_class.extend([NONE; UNION_WAYS]);
        self.inst_union_bits
            .resize(self.inst_union_bits.len() + UNION_WAYS * self.vwords, 0);
        self.table.resize(self.table.len() + self.nodes, NONE);
        let e = self.push_entry(raw, inst, 0);
        self.table[inst as usize * self.nodes] = e;
        inst
    }

    fn push_entry(&mut self, value: &[u8], inst: u32, node: usize) -> u32 {
        let start = self.arena.len();
        self.arena.extend_from_slice(value);
        self.entry_at(start, inst, node)
    }

    /// A new entry for the bytes from `start` to the end of the arena.
    fn entry_at(&mut self, start: usize, inst: u32, node: usize) -> u32 {
        self.entries.push(Entry {
            start,
            len: self.arena.len() - start,
            gate: NONE,
            inst,
            node: node as u32,
        });
        (self.entries.len() - 1) as u32
    }

    /// The instance's cache record, if it has one in the borrowed cache.
    ///
    /// A record from another cache (the transaction's earlier phase ran on
    /// another thread: a proxy's task moves between workers while it waits
    /// on the network), or from before this cache emptied itself, is
    /// looked up again once, by the value's bytes; without that, the value
    /// would miss the cache for the rest of the request. Values that never
    /// had a record (seen once, or too big) are not looked up again: that
    /// would count as a second sighting.
    #[inline]
    fn rec(&mut self, inst: u32) -> Option<u32> {
        let (rec, epoch) = self.inst_rec[inst as usize];
        if rec == NONE || !self.x_on {
            return None;
        }
        if epoch == self.x.epoch() {
            return Some(rec);
        }
        self.rec_again(inst)
    }

    /// [`Memo::rec`] for a record of an older cache epoch: looked up again.
    #[inline(never)]
    fn rec_again(&mut self, inst: u32) -> Option<u32> {
        let raw = self.raw_range(inst);
        let found = self.x.record(&self.arena[raw]);
        self.inst_rec[inst as usize] = found.map_or((NONE, 0), |r| (r, self.x.epoch()));
        found
    }

    /// Copies a cached scan result into entry `e`, if there is one.
    fn load_gate(&mut self, e: u32, rec: u32, node: usize) -> bool {
        match self.x.gate(rec, node) {
            Some((bits, mask)) => {
                self.entries[e as usize].gate = self.gate_masks.len() as u32;
                self.gate_bits.extend_from_slice(bits);
                self.gate_masks.push(mask);
                true
            }
            None => false,
        }
    }

    /// The cache key of a value for operator results: (record, node).
    pub fn op_key(&mut self, e: u32) -> Option<(u32, usize)> {
        let en = self.entries[e as usize];
        self.rec(en.inst).map(|r| (r, en.node as usize))
    }

    /// The untransformed value of an instance.
    fn raw(&self, inst: u32) -> &[u8] {
        &self.arena[self.raw_range(inst)]
    }

    /// Where the untransformed value of an instance is in the arena.
    fn raw_range(&self, inst: u32) -> std::ops::Range<usize> {
        let f = &self.entries[self.table[inst as usize * self.nodes] as usize];
        f.start..f.start + f.len
    }

    pub fn inst(&self, inst: u32) -> Inst {
        self.insts[inst as usize]
    }

    /// The entry of `inst` transformed by the chain of `node`, computing the
    /// missing nodes from the nearest computed ancestor.
    #[inline]
    pub fn value(
        &mut self,
        inst: u32,
        node: NodeId,
        tree: &TransformTree,
        stats: &mut EvalStats,
    ) -> u32 {
        let e = self.table[inst as usize * self.nodes + node.index()];
        if e != NONE {
            return e;
        }
        self.compute_value(inst, node, tree, stats)
    }

    /// [`Memo::value`] when the node has no entry yet.
    #[inline(never)]
    fn compute_value(
        &mut self,
        inst: u32,
        node: NodeId,
        tree: &TransformTree,
        stats: &mut EvalStats,
    ) -> u32 {
        let base = inst as usize * self.nodes;
        stats.memo_misses += 1;
        if self.prof_on {
            self.prof.misses[node.index()] += 1;
        }
        self.path.clear();
        let mut n = node;
        while self.table[base + n.index()] == NONE {
            self.path.push(n);
            // The root always has an entry, and every other node a parent.
            match tree.nodes[n.index()].parent {
                Some(p) => n = p,
                None => break,
            }
        }
        let mut cur = self.table[base + n.index()];
        let rec = self.rec(inst);
        while let Some(n) = self.path.pop() {
            if let Some(t) = tree.nodes[n.index()].transform {
                cur = self.transform(inst, rec, cur, n.index(), t);
            }
            self.table[base + n.index()] = cur;
        }
        cur
    }

    /// Entry `from` transformed by node `node` (transformation `t`): from the
    /// cross-transaction cache when it knows the outcome, else computed (and
    /// recorded there).
    fn transform(
        &mut self,
        inst: u32,
        rec: Option<u32>,
        from: u32,
        node: usize,
        t: Transform,
    ) -> u32 {
        if let Some(rec) = rec {
            match self.x.node(rec, node) {
                NodeState::Same => {
                    if self.prof_on {
                        self.prof.xcache[node] += 1;
                    }
                    return from;
                }
                NodeState::Bytes { start, len } => {
                    if self.prof_on {
                        self.prof.xcache[node] += 1;
                    }
                    // Copied once, from the cache's arena into the memo's.
                    let at = self.arena.len();
                    self.arena.extend_from_slice(self.x.bytes(start, len));
                    return self.entry_at(at, inst, node);
                }
                NodeState::Unknown => {}
            }
        }
        let f = self.entries[from as usize];
        let mut out = std::mem::take(&mut self.out);
        let input = &self.arena[f.start..f.start + f.len];
        let changed = if self.prof_on {
            let t0 = std::time::Instant::now();
            let changed =
                transform::apply_with_map(t, input, &mut out, self.unicode_map.as_deref());
            let p = &mut self.prof;
            p.nanos[node] += t0.elapsed().as_nanos() as u64;
            p.computed[node] += 1;
            p.bytes_in[node] += f.len as u64;
            changed
        } else {
            transform::apply_with_map(t, input, &mut out, self.unicode_map.as_deref())
        };
        let e = if changed {
            let e = self.push_entry(&out, inst, node);
            if case_only(t) {
                // The same scan result: the same slot.
                self.entries[e as usize].gate = f.gate;
            }
            e
        } else {
            from
        };
        if let Some(rec) = rec {
            self.x
                .set_node(rec, node, changed.then_some(out.as_slice()));
        }
        self.out = out;
        e
    }

    pub fn bytes(&self, e: u32) -> &[u8] {
        let f = &self.entries[e as usize];
        &self.arena[f.start..f.start + f.len]
    }

    /// Computes the entry's scan result and byte set unless already done
    /// (or known from the cross-transaction cache, read only now: with
    /// verdicts, most values never need theirs).
    #[inline]
    pub fn ensure_gate_data(&mut self, e: u32, scanner: &Scanner, stats: &mut EvalStats) {
        if self.entries[e as usize].gate == NONE {
            self.scan_entry(e, scanner, stats);
        }
    }

    /// [`Memo::ensure_gate_data`]'s work, for an entry not scanned yet.
    #[inline(never)]
    fn scan_entry(&mut self, e: u32, scanner: &Scanner, stats: &mut EvalStats) {
        let i = e as usize;
        let f = self.entries[i];
        let rec = self.rec(f.inst);
        if let Some(rec) = rec {
            if self.load_gate(e, rec, f.node as usize) {
                return;
            }
        }
        let w = self.words;
        let value = &self.arena[f.start..f.start + f.len];
        stats.scans += 1;
        let g = self.gate_masks.len();
        self.gate_bits.resize((g + 1) * w, 0);
        let bits = &mut self.gate_bits[g * w..(g + 1) * w];
        scanner.scan(value, bits, &mut self.lowered);
        let m = byte_mask(value);
        self.gate_masks.push(m);
        self.entries[i].gate = g as u32;
        if let Some(rec) = rec {
            self.x
                .set_gate(rec, f.node as usize, &self.gate_bits[g * w..(g + 1) * w], m);
        }
    }

    /// The entry's scan result and byte set (see [`Memo::ensure_gate_data`]).
    pub fn gate_data(&self, e: u32) -> (&[u64], &ByteMask) {
        let g = self.entries[e as usize].gate as usize;
        let w = self.words;
        (&self.gate_bits[g * w..(g + 1) * w], &self.gate_masks[g])
    }

    // ------------------------------------------------------------ targets and slots

    /// The instance list of a target, if still valid: built in this
    /// `generation`, or reading a collection whose length is still `src_len`.
    pub fn target(
        &self,
        target: TargetId,
        generation: u32,
        src_len: Option<u32>,
    ) -> Option<(u32, u32)> {
        let t = target.index();
        let built = self.target_build[t] != 0;
        let valid = built
            && (self.target_gen[t] == generation
                || (src_len.is_some() && self.target_src[t] == src_len));
        valid.then(|| self.target_range[t])
    }

    /// Starts a target's instance list: push with [`Memo::list_push`], then
    /// [`Memo::list_end`].
    pub fn list_begin(&self) -> u32 {
        self.target_list.len() as u32
    }

    pub fn list_push(&mut self, inst: u32) {
        self.target_list.push(inst);
    }

    pub fn list_end(
        &mut self,
        target: TargetId,
        start: u32,
        generation: u32,
        src_len: Option<u32>,
    ) -> (u32, u32) {
        let t = target.index();
        let range = (start, self.target_list.len() as u32 - start);
        self.builds += 1;
        self.target_gen[t] = generation;
        self.target_range[t] = range;
        self.target_src[t] = src_len;
        self.target_build[t] = self.builds;
        range
    }

    pub fn list_inst(&self, i: u32) -> u32 {
        self.target_list[i as usize]
    }

    /// Marks the slot's union stale unless it was computed for the
    /// target's current instance list.
    pub fn slot_touch(&mut self, slot: SlotId, target: TargetId) {
        let s = slot.index();
        let build = self.target_build[target.index()];
        if self.slot_gen[s] != build {
            self.slot_gen[s] = build;
            self.slot_ready[s] = false;
        }
    }

    /// Whether an operator with this gate may match some value of the slot:
    /// the union of the scan results and byte sets of the target's
    /// instances (`list`) at the slot's `node`.
    #[allow(clippy::too_many_arguments)]
    pub fn slot_passes(
        &mut self,
        slot: SlotId,
        node: NodeId,
        list: (u32, u32),
        gate: crate::prefilter::Gate,
        scanner: &Scanner,
        tree: &TransformTree,
        stats: &mut EvalStats,
    ) -> bool {
        self.slot_union(slot, node, list, scanner, tree, stats);
        let (s, w) = (slot.index(), self.words);
        scanner.passes(
            gate,
            &self.slot_bits[s * w..(s + 1) * w],
            &self.slot_mask[s],
        )
    }

    /// Computes the slot's union of scan results unless it is ready.
    fn slot_union(
        &mut self,
        slot: SlotId,
        node: NodeId,
        list: (u32, u32),
        scanner: &Scanner,
        tree: &TransformTree,
        stats: &mut EvalStats,
    ) {
        let s = slot.index();
        if self.slot_ready[s] {
            return;
        }
        let w = self.words;
        let (start, len) = list;
        self.slot_bits[s * w..(s + 1) * w].fill(0);
        self.slot_mask[s] = [0; 4];
        for k in start..start + len {
            let inst = self.target_list[k as usize];
            let e = self.value(inst, node, tree, stats);
            self.ensure_gate_data(e, scanner, stats);
            let g = self.entries[e as usize].gate as usize;
            add_gate(
                (
                    &mut self.slot_bits[s * w..(s + 1) * w],
                    &mut self.slot_mask[s],
                ),
                (&self.gate_bits[g * w..(g + 1) * w], &self.gate_masks[g]),
            );
        }
        self.slot_ready[s] = true;
    }

    /// The group's union, if computed in `generation`: (scan bits, byte
    /// set, number of values).
    pub fn group(&self, g: u32, generation: u32) -> Option<(&[u64], &ByteMask, u32)> {
        self.groups.get(g, generation)
    }

    /// Starts computing group `g`'s union for `generation`: add its slots
    /// with [`Memo::group_add`].
    pub fn group_begin(&mut self, g: u32, generation: u32) {
        self.groups.begin(g, generation);
    }

    /// Adds a slot (its target's instance list `list`) to group `g`'s union.
    #[allow(clippy::too_many_arguments)]
    pub fn group_add(
        &mut self,
        g: u32,
        slot: SlotId,
        node: NodeId,
        list: (u32, u32),
        scanner: &Scanner,
        tree: &TransformTree,
        stats: &mut EvalStats,
    ) {
        self.slot_union(slot, node, list, scanner, tree, stats);
        let (s, w) = (slot.index(), self.words);
        self.groups.add(
            g,
            (&self.slot_bits[s * w..(s + 1) * w], &self.slot_mask[s]),
            list.1,
        );
    }
}

impl Memo {
    // ------------------------------------------------------------ coarse unions

    /// Computes the instance's verdict for `class` unless known (see
    /// `Plan::class_links`): the bit of each of the class's links whose
    /// gate passes on the value at the link's node. Read from the
    /// cross-transaction cache when it has it (where links found not to
    /// match the value since have had their bits cleared), and stored
    /// there once computed: a value seen before costs one read for all
    /// the links that read it. Returns the way that holds it.
    fn inst_verdict(
        &mut self,
        inst: u32,
        class: u32,
        plan: &Plan,
        scanner: &Scanner,
        tree: &TransformTree,
        stats: &mut EvalStats,
    ) -> usize {
        let w = self.vwords;
        // An instance is read in one or two classes: its source's, and
        // that of its source for `multiMatch` links (or a scalar read
        // through two targets, `XML:/*` and `XML://@*`).
        let ways = inst as usize * UNION_WAYS..(inst as usize + 1) * UNION_WAYS;
        let classes = &self.inst_union_class[ways.clone()];
        if let Some(k) = classes.iter().position(|&c| c == class) {
            return ways.start + k;
        }
        let k = classes
            .iter()
            .position(|&c| c == NONE)
            .unwrap_or(UNION_WAYS - 1);
        let i = ways.start + k;
        self.inst_union_class[i] = class;
        if let Some(rec) = self.rec(inst) {
            if let Some(bits) = self.x.verdict(rec, class) {
                self.inst_union_bits[i * w..(i + 1) * w].copy_from_slice(bits);
                return i;
            }
        }
        self.inst_union_bits[i * w..(i + 1) * w].fill(0);
        for cl in plan.class_links(class) {
            let passes = if cl.chain.0 == cl.chain.1 {
                self.gate_passes(inst, cl.node, cl.gate, scanner, tree, stats)
            } else {
                let mut any = false;
                for &node in plan.chain_nodes(cl.chain) {
                    if self.gate_passes(inst, node, cl.gate, scanner, tree, stats) {
                        any = true;
                        break;
                    }
                }
                any
            };
            if passes {
                self.inst_union_bits[i * w + (cl.bit / 64) as usize] |= 1 << (cl.bit % 64);
            }
        }
        if let Some(rec) = self.rec(inst) {
            self.x
                .set_verdict(rec, class, &self.inst_union_bits[i * w..(i + 1) * w]);
        }
        i
    }

    /// Whether an operator with `gate` may match the instance's value at
    /// `node`.
    fn gate_passes(
        &mut self,
        inst: u32,
        node: NodeId,
        gate: crate::prefilter::Gate,
        scanner: &Scanner,
        tree: &TransformTree,
        stats: &mut EvalStats,
    ) -> bool {
        if gate == crate::prefilter::Gate::Always {
            return true;
        }
        let e = self.value(inst, node, tree, stats);
        self.ensure_gate_data(e, scanner, stats);
        let (bits, mask) = self.gate_data(e);
        scanner.passes(gate, bits, mask)
    }

    /// Whether the instance's verdict for `class`, if computed in this
    /// transaction, rules out the link of verdict bit `bit`.
    #[inline]
    pub fn verdict_rules_out(&self, inst: u32, class: u32, bit: u32) -> bool {
        let w = self.vwords;
        let ways = inst as usize * UNION_WAYS..(inst as usize + 1) * UNION_WAYS;
        match self.inst_union_class[ways.clone()]
            .iter()
            .position(|&c| c == class)
        {
            Some(k) => {
                let i = ways.start + k;
                self.inst_union_bits[i * w + (bit / 64) as usize] & (1 << (bit % 64)) == 0
            }
            None => false,
        }
    }

    /// The link of verdict bit `bit` does not match entry `e`'s value: its
    /// bit is cleared in the value's cached verdicts (not in this
    /// transaction's, whose unions are already built from them).
    pub fn clear_verdict(&mut self, e: u32, bit: u32) {
        self.clear_verdict_inst(self.entries[e as usize].inst, bit);
    }

    /// [`Memo::clear_verdict`] for the value of instance `inst`.
    pub fn clear_verdict_inst(&mut self, inst: u32, bit: u32) {
        if let Some(rec) = self.rec(inst) {
            self.x.clear_verdict(rec, bit);
        }
    }

    /// Number of collection entries source `s`'s union covers.
    pub fn source_covered(&self, s: u32) -> u32 {
        self.source_covered[s as usize]
    }

    pub fn set_source_covered(&mut self, s: u32, n: u32) {
        self.source_covered[s as usize] = n;
    }

    /// The generation source `s`'s union was computed in (target sources).
    pub fn source_gen(&self, s: u32) -> u32 {
        self.sources.generation(s)
    }

    /// Empties source `s`'s union, to be computed for `generation`.
    pub fn source_begin(&mut self, s: u32, generation: u32) {
        self.sources.begin(s, generation);
    }

    /// Adds instance `inst`'s verdict for `class` to source `s`'s union.
    #[allow(clippy::too_many_arguments)]
    pub fn source_add(
        &mut self,
        s: u32,
        inst: u32,
        class: u32,
        plan: &Plan,
        scanner: &Scanner,
        tree: &TransformTree,
        stats: &mut EvalStats,
    ) {
        let i = self.inst_verdict(inst, class, plan, scanner, tree, stats);
        let w = self.vwords;
        self.sources
            .add(s, &self.inst_union_bits[i * w..(i + 1) * w], 1);
    }

    /// Whether source `s`'s union of verdicts, as [`Memo::source_add`]
    /// left it, has verdict bit `bit`; and its number of values.
    #[inline]
    pub fn source_has(&self, s: u32, bit: u32) -> (bool, u32) {
        (self.sources.has(s, bit), self.sources.len[s as usize])
    }

    /// List `l`'s number of values (see `Plan::group_list`), if all its
    /// sources were folded in `generation` (see [`Memo::fold_source`]).
    #[inline]
    pub fn list_folded(&self, l: u32, generation: u32) -> Option<u32> {
        let (at, len) = self.list_folded[l as usize];
        (at == generation).then_some(len)
    }

    /// Whether source `s` was folded in `generation`.
    #[inline]
    pub fn source_folded(&self, s: u32, generation: u32) -> bool {
        self.source_folded[s as usize] == generation
    }

    /// Folds source `s`'s union of verdicts (up to date) into the links
    /// that may match, for `generation`: the bits of the links whose group
    /// reads it (`mask`, see `Plan::source_mask`) that its values have.
    pub fn fold_source(&mut self, s: u32, mask: &[u64], generation: u32) {
        if self.passes_gen != generation {
            self.passes.fill(0);
            self.passes_gen = generation;
        }
        let (bits, _) = self.sources.union(s);
        for ((p, b), m) in self.passes.iter_mut().zip(bits).zip(mask) {
            *p |= b & m;
        }
        self.source_folded[s as usize] = generation;
    }

    /// Records that list `l`'s sources (`len` values) were all folded in
    /// `generation`.
    pub fn set_list_folded(&mut self, l: u32, generation: u32, len: u32) {
        self.list_folded[l as usize] = (generation, len);
    }

    /// Whether the link of verdict bit `bit` may match a value of its
    /// group's sources (its group folded in this generation).
    #[inline]
    pub fn passes(&self, bit: u32) -> bool {
        self.passes
            .get((bit / 64) as usize)
            .is_some_and(|w| w & (1 << (bit % 64)) != 0)
    }
}

/// Unions of verdicts (see `Plan::class_links`), one per index (a source,
/// a group), each with the number of values it covers and the generation
/// it was begun in.
#[derive(Default)]
struct Verdicts {
    words: usize,
    generation: Vec<u32>,
    bits: Vec<u64>,
    len: Vec<u32>,
}

impl Verdicts {
    fn new(n: usize, words: usize) -> Verdicts {
        Verdicts {
            words,
            generation: vec![0; n],
            bits: vec![0; n * words],
            len: vec![0; n],
        }
    }

    /// Union `i`, whatever its generation (no bits while it covers no
    /// value: its bits are emptied by its first value, not when it is
    /// emptied).
    fn union(&self, i: u32) -> (&[u64], u32) {
        let (i, w) = (i as usize, self.words);
        match self.len[i] {
            0 => (&[], 0),
            len => (&self.bits[i * w..(i + 1) * w], len),
        }
    }

    /// Whether union `i` has bit `bit` (one load: links test this hundreds
    /// of times per request).
    #[inline]
    fn has(&self, i: u32, bit: u32) -> bool {
        let at = i as usize * self.words + (bit / 64) as usize;
        self.len[i as usize] != 0
            && self
                .bits
                .get(at)
                .is_some_and(|w| w & (1 << (bit % 64)) != 0)
    }

    fn generation(&self, i: u32) -> u32 {
        self.generation[i as usize]
    }

    /// Empties union `i`, to be computed for `generation`.
    fn begin(&mut self, i: u32, generation: u32) {
        let i = i as usize;
        self.generation[i] = generation;
        self.len[i] = 0;
    }

    /// Adds a verdict (or a union of them) standing for `n` values to
    /// union `i`.
    fn add(&mut self, i: u32, from: &[u64], n: u32) {
        let (i, w) = (i as usize, self.words);
        if let (Some(into), Some(from)) = (self.bits.get_mut(i * w..(i + 1) * w), from.get(..w)) {
            if self.len[i] == 0 {
                into.copy_from_slice(from);
            } else {
                for (d, b) in into.iter_mut().zip(from) {
                    *d |= b;
                }
            }
        }
        self.len[i] += n;
    }

    /// Makes every union invalid in every generation.
    fn forget(&mut self) {
        self.generation.fill(0);
    }

    /// Empties every union and forgets its generation (a union's bits
    /// are emptied by its first value: see [`Verdicts::union`]).
    fn empty(&mut self) {
        self.forget();
        self.len.fill(0);
    }
}

/// Unions of scan results and byte sets, one per index (a slot group),
/// each with the number of values it covers and the generation it was
/// begun in.
#[derive(Default)]
struct Unions {
    words: usize,
    generation: Vec<u32>,
    bits: Vec<u64>,
    mask: Vec<ByteMask>,
    len: Vec<u32>,
}

impl Unions {
    fn new(n: usize, words: usize) -> Unions {
        Unions {
            words,
            generation: vec![0; n],
            bits: vec![0; n * words],
            mask: vec![[0; 4]; n],
            len: vec![0; n],
        }
    }

    /// Union `i`, if begun in `generation`: (scan bits, byte set, number
    /// of values).
    #[inline]
    fn get(&self, i: u32, generation: u32) -> Option<(&[u64], &ByteMask, u32)> {
        (self.generation(i) == generation).then(|| self.union(i))
    }

    /// Union `i`, whatever its generation.
    fn union(&self, i: u32) -> (&[u64], &ByteMask, u32) {
        let (i, w) = (i as usize, self.words);
        (&self.bits[i * w..(i + 1) * w], &self.mask[i], self.len[i])
    }

    fn generation(&self, i: u32) -> u32 {
        self.generation[i as usize]
    }

    /// Empties union `i`, to be computed for `generation`.
    fn begin(&mut self, i: u32, generation: u32) {
        let (i, w) = (i as usize, self.words);
        self.generation[i] = generation;
        self.bits[i * w..(i + 1) * w].fill(0);
        self.mask[i] = [0; 4];
        self.len[i] = 0;
    }

    /// Adds a scan result and byte set standing for `n` values to union `i`.
    fn add(&mut self, i: u32, from: (&[u64], &ByteMask), n: u32) {
        let (i, w) = (i as usize, self.words);
        add_gate(
            (&mut self.bits[i * w..(i + 1) * w], &mut self.mask[i]),
            from,
        );
        self.len[i] += n;
    }

    /// Makes every union invalid in every generation.
    fn forget(&mut self) {
        self.generation.fill(0);
    }
}

/// Verdicts an instance keeps (see `Memo::inst_verdict`).
const UNION_WAYS: usize = 2;

/// Adds a scan result and byte set (`from`) to a union of them (`into`).
fn add_gate(into: (&mut [u64], &mut ByteMask), from: (&[u64], &ByteMask)) {
    for (d, b) in into.0.iter_mut().zip(from.0) {
        *d |= b;
    }
    for (d, m) in into.1.iter_mut().zip(from.1) {
        *d |= m;
    }
}

/// Transformations that only change ASCII letter case: the (case-insensitive)
/// scan result of their output equals their input's.
fn case_only(t: Transform) -> bool {
    matches!(t, Transform::Lowercase | Transform::Uppercase)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_prefixes_and_identities() {
        let rs = Ruleset::from_str(
            "t.conf",
            r#"
            SecRule ARGS "@rx union" "id:1,phase:1,pass,t:none,t:urlDecodeUni,t:lowercase"
            SecRule ARGS "@rx select" "id:2,phase:1,pass,t:none,t:urlDecodeUni"
            "#,
        )
        .expect("compiles");
        let tree = &rs.program().transforms;
        let deep = NodeId((tree.nodes.len() - 1) as u32);
        let mid = tree.nodes[deep.index()].parent.expect("parent");
        let mut m = Memo::new(&rs);
        let mut stats = EvalStats::default();
        let origin = Origin::Coll {
            coll: Coll::Args,
            names: false,
            idx: 0,
        };
        let a = m.instance(V::Args, origin, b"A%20B", 1);
        assert_eq!(m.instance(V::Args, origin, b"ignored", 1), a);
        let e = m.value(a, deep, tree, &mut stats);
        assert_eq!(m.bytes(e), b"a b");
        assert_eq!(stats.memo_misses, 1);
        let e2 = m.value(a, mid, tree, &mut stats);
        assert_eq!(m.bytes(e2), b"A B");
        assert_eq!(stats.memo_misses, 1, "computed on the way to the deep node");
        // An unchanged value shares the parent's entry.
        let b = m.instance(
            V::Args,
            Origin::Coll {
                coll: Coll::Args,
                names: false,
                idx: 1,
            },
            b"plain",
            1,
        );
        let root = m.value(b, NodeId::ROOT, tree, &mut stats);
        assert_eq!(m.value(b, deep, tree, &mut stats), root);
        m.clear();
        let c = m.instance(V::Args, origin, b"x", 2);
        assert_eq!(c, 0);
        let e = m.value(c, deep, tree, &mut stats);
        assert_eq!(m.bytes(e), b"x");
    }
}
