//! A compiled ruleset, shared by all threads.

use crate::background::Background;
use crate::injection::{Injection, Libinjection};
use crate::options::EvalOptions;
use crate::plan::Plan;
use crate::prefilter::Scanner;
use crate::store::CollectionStore;
use crate::transform::Transform;
use std::path::PathBuf;
use waf_compiler::ir::Program;
use waf_compiler::rx::RxOptions;
use waf_compiler::{compile_files, compile_str, CompileError, Compiled, Options};

/// An immutable compiled configuration (`Send + Sync`): create one, share it
/// (e.g. in an `Arc`), and create a [`crate::Transaction`] per request.
#[derive(Debug)]
pub struct Ruleset {
    program: Program,
    injection: Box<dyn Injection>,
    /// The prefilter automaton and gates of every operator.
    scanner: Scanner,
    /// The program in the dense form the rule loop reads.
    plan: Plan,
    /// The rules partial evaluation proved cannot match.
    folding: crate::fold::Folding,
    /// Runs of decided rules applied at once.
    blocks: crate::blocks::Blocks,
    /// What the rule loop reads first at each position of each phase.
    steps: crate::steps::Steps,
    /// The DFAs being built after load (see [`Ruleset::finish_building`]).
    background: Background,
    /// What [`Ruleset::transaction`] uses.
    options: EvalOptions,
    /// `SecUnicodeMapFile`'s table for `urlDecodeUni`, built once.
    unicode_map: Option<std::sync::Arc<crate::transform::UnicodeMap>>,
    /// Evaluation buffers of dropped transactions, for the next ones: a
    /// server that makes a transaction per request gets warm buffers
    /// instead of building them each time.
    pub(crate) pool: CachePool,
    /// The persistent collections its transactions open (see
    /// [`Ruleset::with_collection_store`]).
    store: std::sync::Arc<CollectionStore>,
    /// Unique in the process: what keys this ruleset's per-thread
    /// cross-transaction caches (two rulesets never share one, even at
    /// the same address after a reload).
    id: u64,
}

impl Drop for Ruleset {
    /// The worker threads' cross-transaction caches of this ruleset go at
    /// their next phase (a reload must not leave them behind).
    fn drop(&mut self) {
        if let Ok(mut live) = LIVE.lock() {
            live.retain(|&r| r != self.id);
        }
        DROPPED.fetch_add(1, std::sync::atomic::Ordering::Release);
    }
}

/// Evaluation caches kept for reuse (at most [`CachePool::CAPACITY`]).
///
/// Opaque here (`Any`): the transaction module owns the cache type, and the
/// ruleset must not depend on it (dependencies point one way).
///
/// Each cache is kept with the thread that gave it back, and a thread takes
/// its own most recent one first: its lines are then still in that core's
/// caches, not in another core's (with one pool for all workers, a
/// transaction on one core read, half the time, buffers last written on the
/// other, each line fetched from there).
#[derive(Default)]
pub(crate) struct CachePool(std::sync::Mutex<Vec<(usize, Box<dyn std::any::Any + Send>)>>);

impl std::fmt::Debug for CachePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.lock().map_or(0, |p| p.len());
        write!(f, "CachePool({n} cached)")
    }
}

impl CachePool {
    /// More than the concurrent transactions of a busy server needs; each
    /// cache is a few megabytes with CRS.
    const CAPACITY: usize = 64;

    /// This thread's most recently given cache, else the most recent one.
    pub(crate) fn take(&self) -> Option<Box<dyn std::any::Any + Send>> {
        let mut pool = self.0.lock().ok()?;
        let me = thread_token();
        let i = pool
            .iter()
            .rposition(|(t, _)| *t == me)
            .or_else(|| pool.len().checked_sub(1))?;
        Some(pool.remove(i).1)
    }

    pub(crate) fn give(&self, cache: Box<dyn std::any::Any + Send>) {
        if let Ok(mut pool) = self.0.lock() {
            if pool.len() < Self::CAPACITY {
                pool.push((thread_token(), cache));
            }
        }
    }
}

/// A number that tells the calling thread from the other live threads: the
/// address of its thread-local token (an id that may be reused after the
/// thread ends, which only makes a later thread prefer its caches).
fn thread_token() -> usize {
    thread_local! {
        static TOKEN: u8 = const { 0 };
    }
    TOKEN.try_with(|t| t as *const u8 as usize).unwrap_or(0)
}

fn next_id() -> u64 {
    static IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

// The rulesets alive in the process, by id, so that each worker thread
// drops its cross-transaction caches of those that are gone. A reload
// replaces the ruleset; without this, every thread kept its caches of the
// last replaced ones (megabytes each) until newer rulesets pushed them out.
static LIVE: std::sync::Mutex<Vec<u64>> = std::sync::Mutex::new(Vec::new());
/// How many rulesets were dropped: a thread looks at [`LIVE`] only when
/// this moved since it last did (one load per phase otherwise).
static DROPPED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many rulesets were dropped in the process so far.
pub(crate) fn rulesets_dropped() -> u64 {
    DROPPED.load(std::sync::atomic::Ordering::Acquire)
}

/// Keeps the entries of `v` whose ruleset id is alive; `false` when the
/// list of live rulesets could not be read (nothing was dropped).
pub(crate) fn retain_live<T>(v: &mut Vec<(u64, T)>) -> bool {
    match LIVE.lock() {
        Ok(live) => {
            v.retain(|(id, _)| live.contains(id));
            true
        }
        Err(_) => false,
    }
}

/// How much of a ruleset the prefilter covers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PrefilterStats {
    /// Operators gated by the multi-literal automaton.
    pub literal_ops: usize,
    /// Operators gated by a byte set only.
    pub byte_ops: usize,
    /// Distinct literals in the automaton.
    pub literals: usize,
}

/// The project's default ruleset (`rulesets/default.conf`), embedded in the
/// library: what `waf eval` and `waf serve` use when given no rules.
pub const DEFAULT_RULES: &str = include_str!("../../rulesets/default.conf");

/// The name [`DEFAULT_RULES`] is compiled under (what its diagnostics and
/// match locations show).
pub const DEFAULT_RULES_NAME: &str = "rulesets/default.conf";

impl Ruleset {
    /// Builds the evaluation plan of a compiled program. Crate-private: a
    /// [`Program`] only comes from a compilation without errors, so the
    /// public ways in go through [`Ruleset::from_compiled`].
    pub(crate) fn new(program: Program) -> Ruleset {
        let scanner = Scanner::new(&program);
        let plan = Plan::new(&program, &scanner);
        let background = Background::start(&program);
        let folding = crate::fold::analyse(&program);
        let blocks = crate::blocks::Blocks::new(&program, &folding, &plan);
        let steps = crate::steps::Steps::new(&program, &folding, &plan, &blocks);
        let unicode_map = program.settings.unicode_map.as_ref().and_then(|m| {
            crate::transform::UnicodeMap::parse(&m.contents, m.code_page).map(std::sync::Arc::new)
        });
        let id = next_id();
        if let Ok(mut live) = LIVE.lock() {
            live.push(id);
        }
        Ruleset {
            unicode_map,
            folding,
            blocks,
            steps,
            program,
            plan,
            background,
            injection: Box::new(Libinjection),
            scanner,
            options: EvalOptions::default(),
            pool: CachePool::default(),
            store: Default::default(),
            id,
        }
    }

    /// The ruleset's process-unique id.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Replaces the `@detectSQLi`/`@detectXSS` implementation.
    pub fn with_injection(mut self, injection: Box<dyn Injection>) -> Ruleset {
        self.injection = injection;
        // Cached operator results were the other implementation's.
        self.id = next_id();
        self
    }

    /// Compiles configuration files, in order, as one configuration. On
    /// errors, the [`CompileError`] renders every diagnostic (`Display`).
    pub fn from_files(paths: &[PathBuf]) -> Result<Ruleset, CompileError> {
        Self::from_compiled(compile_files(paths, &Self::compile_options()))
    }

    /// The compiler options the `from_*` constructors use: the defaults,
    /// with dense DFAs deferred to the background thread (see
    /// [`Ruleset::finish_building`]). Use these when compiling with the
    /// compiler's API for [`Ruleset::from_compiled`].
    pub fn compile_options() -> Options {
        Options {
            rx: RxOptions {
                defer_dense: true,
                ..RxOptions::default()
            },
            ..Options::default()
        }
    }

    /// Builds, on the calling thread, what the background thread has not
    /// built yet, and waits for that thread to end.
    ///
    /// A ruleset is ready when it is returned: its regexes answer through
    /// their lazy DFAs and the prefilter scans with an NFA until a thread
    /// started at load has built the dense DFAs (about half a second of CPU
    /// for CRS), with the same results. Call this where steady-state speed
    /// matters from the first request (benchmarks), or where no other
    /// thread may allocate (allocation tests).
    pub fn finish_building(&self) {
        self.background.finish();
    }

    /// How many deferred DFAs are not built yet (0 once
    /// [`Ruleset::finish_building`] has returned).
    pub fn pending_builds(&self) -> usize {
        self.background.pending()
    }

    /// Compiles configuration text (`name` is the base of relative `Include`
    /// and data-file paths, and what diagnostics call the text).
    pub fn from_str(name: &str, text: &str) -> Result<Ruleset, CompileError> {
        Self::from_compiled(compile_str(name, text, &Self::compile_options()))
    }

    /// The embedded default ruleset ([`DEFAULT_RULES`]).
    pub fn default_rules() -> Result<Ruleset, CompileError> {
        Self::from_str(DEFAULT_RULES_NAME, DEFAULT_RULES)
    }

    /// The ruleset of a compilation made with the compiler's own API (e.g.
    /// with non-default [`Options`] or loader overrides), or its error.
    pub fn from_compiled(c: Compiled) -> Result<Ruleset, CompileError> {
        c.into_program().map(Ruleset::new)
    }

    /// The compiled program (the compiler's IR: rules, targets, settings).
    pub fn program(&self) -> &Program {
        &self.program
    }

    pub(crate) fn injection(&self) -> &dyn Injection {
        self.injection.as_ref()
    }

    /// The persistent collections (`initcol`, `setsid`, `setuid`, `setrsc`)
    /// its transactions read and write. Each ruleset starts with its own,
    /// empty, [`CollectionStore`] of the default limits.
    pub fn collection_store(&self) -> &std::sync::Arc<CollectionStore> {
        &self.store
    }

    /// Uses `store` for the persistent collections: a host that reloads its
    /// rules passes the old ruleset's store ([`Ruleset::collection_store`])
    /// to the new one, so that counters and flags survive the reload (and
    /// may share one store between the rulesets of several sites).
    pub fn with_collection_store(mut self, store: std::sync::Arc<CollectionStore>) -> Ruleset {
        self.set_collection_store(store);
        self
    }

    /// [`Ruleset::with_collection_store`] on a ruleset already built (one
    /// behind an `Arc` no transaction holds yet, as the C ABI keeps them).
    pub fn set_collection_store(&mut self, store: std::sync::Arc<CollectionStore>) {
        self.store = store;
    }

    /// Sets the evaluation options of the transactions [`Ruleset::transaction`]
    /// creates (the default is memoization and prefilter on).
    pub fn with_eval_options(mut self, options: EvalOptions) -> Ruleset {
        self.options = options;
        self
    }

    /// The evaluation options of [`Ruleset::transaction`].
    pub fn eval_options(&self) -> EvalOptions {
        self.options
    }

    /// The rule loop's view of each phase (see [`crate::steps`]).
    pub(crate) fn steps(&self) -> &crate::steps::Steps {
        &self.steps
    }

    /// What partial evaluation decided about each rule.
    pub(crate) fn folding(&self) -> &crate::fold::Folding {
        &self.folding
    }

    /// The runs of decided rules applied at once (see [`crate::blocks`]).
    pub(crate) fn blocks(&self) -> &crate::blocks::Blocks {
        &self.blocks
    }

    /// How many rules partial evaluation at load proved cannot match on any
    /// request (skipped while no rule removal is in effect).
    pub fn folded_rules(&self) -> usize {
        self.folding.count()
    }

    /// How many rules partial evaluation at load proved match on every
    /// request reaching them, with values it knows: they are replayed from
    /// those values, without running their operator.
    pub fn replayed_rules(&self) -> usize {
        self.folding.replayable()
    }

    /// The evaluation plan (dense per-rule, per-link and per-slot facts).
    pub(crate) fn plan(&self) -> &Plan {
        &self.plan
    }

    /// `SecUnicodeMapFile`'s table, if the configuration has one that is
    /// used (a positive code page).
    pub(crate) fn unicode_map(&self) -> Option<&std::sync::Arc<crate::transform::UnicodeMap>> {
        self.unicode_map.as_ref()
    }

    /// The prefilter of this ruleset's operators.
    pub(crate) fn scanner(&self) -> &Scanner {
        &self.scanner
    }

    /// Whether operator `op` has a prefilter: literals (or a byte set) that
    /// a value must contain for the operator to be run on it at all. What
    /// `waf profile` reports as "no prefilter".
    pub fn has_prefilter(&self, op: waf_compiler::ir::OpId) -> bool {
        self.scanner.gate(op) != crate::prefilter::Gate::Always
    }

    /// What the prefilter covers (what `waf profile` reports).
    pub fn prefilter_stats(&self) -> PrefilterStats {
        let (literal_ops, byte_ops) = self.scanner.gated_ops();
        PrefilterStats {
            literal_ops,
            byte_ops,
            literals: self.scanner.literal_count(),
        }
    }

    /// The transformations of transform-tree node `node`, first to last.
    pub(crate) fn chain(&self, node: waf_compiler::ir::NodeId) -> &[Transform] {
        self.plan.chain(node)
    }
}

#[cfg(test)]
mod pool_tests {
    use super::CachePool;

    fn take_u32(pool: &CachePool) -> Option<u32> {
        pool.take()
            .and_then(|b| b.downcast::<u32>().ok())
            .map(|b| *b)
    }

    #[test]
    fn a_thread_takes_back_its_own_buffers_first() {
        let pool = CachePool::default();
        pool.give(Box::new(1u32));
        // Another thread gives back later: its box is on top.
        std::thread::scope(|s| {
            s.spawn(|| pool.give(Box::new(2u32)));
        });
        assert_eq!(take_u32(&pool), Some(1), "this thread's own box first");
        // None of this thread's left: the most recent of any thread.
        assert_eq!(take_u32(&pool), Some(2));
        assert_eq!(take_u32(&pool), None);
    }

    #[test]
    fn the_pool_keeps_at_most_its_capacity() {
        let pool = CachePool::default();
        for i in 0..CachePool::CAPACITY as u32 + 5 {
            pool.give(Box::new(i));
        }
        let mut n = 0;
        while take_u32(&pool).is_some() {
            n += 1;
        }
        assert_eq!(n, CachePool::CAPACITY);
    }
}
