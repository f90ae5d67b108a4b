//! Compiling many patterns at once, on every core.
//!
//! A configuration like CRS has about 300 distinct `@rx` patterns, and
//! compiling them (parsing, the meta regex, the literal analysis) is most of
//! a load. Each pattern compiles independently of the others, so a batch is
//! spread over worker threads while the lowering pass goes on; it takes each
//! result when it reaches the rule, in file order, so diagnostics and regex
//! ids are the same as with one thread.

use super::{CompiledRx, Precompiled, RxError, RxOptions};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// Below this many patterns, threads cost more than they save.
const MIN_PARALLEL: usize = 8;

/// Compiles one pattern: from `precompiled` when it holds it, else from
/// source.
pub fn compile_one(
    pattern: &str,
    opts: &RxOptions,
    precompiled: Option<&Precompiled>,
) -> Result<CompiledRx, RxError> {
    match precompiled.and_then(|all| Some((all, all.get(pattern)?))) {
        Some((all, pre)) => CompiledRx::from_precompiled(pattern, pre, all, opts),
        None => CompiledRx::compile(pattern, opts),
    }
}

/// Patterns compiling on worker threads while the caller goes on (the
/// lowering pass, which takes each result when it reaches its rule).
///
/// Workers take the patterns in the order given (file order: the order the
/// lowering needs them); a caller that asks for a pattern no worker has
/// started compiles it itself instead of waiting, and waits only for one
/// that is being compiled. So the lowering (one core) overlaps the
/// compilation (the others), and nothing waits on an idle queue.
pub struct Batch {
    shared: Arc<Shared>,
}

struct Shared {
    patterns: Vec<String>,
    index: HashMap<String, usize>,
    opts: RxOptions,
    precompiled: Option<Arc<Precompiled>>,
    next: AtomicUsize,
    slots: Vec<Slot>,
    /// Set when the batch is dropped: workers stop taking patterns.
    abandoned: AtomicBool,
}

#[derive(Default)]
struct Slot {
    /// Whether a worker or the caller has taken the pattern.
    claimed: AtomicBool,
    /// Whether its result was asked for ([`Batch::take`] gives it once).
    taken: AtomicBool,
    /// The result, from the worker that compiled it until it is taken.
    result: Mutex<Option<Result<CompiledRx, RxError>>>,
    done: Condvar,
}

impl Batch {
    /// Starts compiling `patterns` (duplicates once, first occurrence
    /// first) on up to `available_parallelism() - 1` threads (none for a
    /// handful of patterns, or on one core: then the caller compiles each
    /// as it asks).
    pub fn start(
        patterns: &[&str],
        opts: &RxOptions,
        precompiled: Option<Arc<Precompiled>>,
    ) -> Batch {
        let mut index = HashMap::with_capacity(patterns.len());
        let mut distinct = Vec::with_capacity(patterns.len());
        for &p in patterns {
            if !index.contains_key(p) {
                index.insert(p.to_string(), distinct.len());
                distinct.push(p.to_string());
            }
        }
        let slots = distinct.iter().map(|_| Slot::default()).collect();
        let shared = Arc::new(Shared {
            patterns: distinct,
            index,
            opts: opts.clone(),
            precompiled,
            next: AtomicUsize::new(0),
            slots,
            abandoned: AtomicBool::new(false),
        });
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let workers = cores
            .saturating_sub(1)
            .min(shared.patterns.len().div_ceil(MIN_PARALLEL));
        for _ in 0..workers {
            let shared = Arc::clone(&shared);
            // If no thread can be started, the caller compiles everything.
            let _ = std::thread::Builder::new()
                .name("waf-rx-compile".into())
                .spawn(move || shared.work());
        }
        Batch { shared }
    }

    /// The result for `pattern`, if it was in the batch and not taken yet:
    /// compiled here if no worker has started it; else, while a worker
    /// compiles it, this thread compiles patterns nobody has started, and
    /// waits only when there are none left.
    pub fn take(&self, pattern: &str) -> Option<Result<CompiledRx, RxError>> {
        let s = &self.shared;
        let i = *s.index.get(pattern)?;
        let slot = s.slots.get(i)?;
        if slot.taken.swap(true, Ordering::AcqRel) {
            return None;
        }
        if !slot.claimed.swap(true, Ordering::AcqRel) {
            return Some(s.compile(i));
        }
        loop {
            if let Some(r) = lock(&slot.result).take() {
                return Some(r);
            }
            if !s.work_once() {
                break;
            }
        }
        let mut result = lock(&slot.result);
        loop {
            if let Some(r) = result.take() {
                return Some(r);
            }
            result = match slot.done.wait(result) {
                Ok(g) => g,
                Err(poisoned) => poisoned.into_inner(),
            };
        }
    }
}

impl std::fmt::Debug for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Batch({} patterns)", self.shared.patterns.len())
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        self.shared.abandoned.store(true, Ordering::Relaxed);
    }
}

impl Shared {
    fn compile(&self, i: usize) -> Result<CompiledRx, RxError> {
        let pattern = self.patterns.get(i).map_or("", String::as_str);
        compile_one(pattern, &self.opts, self.precompiled.as_deref())
    }

    fn work(&self) {
        while !self.abandoned.load(Ordering::Relaxed) {
            if !self.work_once() {
                return;
            }
        }
    }

    /// Compiles the next pattern nobody has started, if there is one.
    fn work_once(&self) -> bool {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            let Some(slot) = self.slots.get(i) else {
                return false;
            };
            if slot.claimed.swap(true, Ordering::AcqRel) {
                continue;
            }
            let r = self.compile(i);
            *lock(&slot.result) = Some(r);
            slot.done.notify_all();
            return true;
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_gives_each_pattern_once_whoever_compiles_it() {
        let mut patterns = vec!["a+b", "(?i)select", "a+b", "[", "(?=x)"];
        for i in 0..40 {
            patterns.push(Box::leak(format!("x{i}y").into_boxed_str()));
        }
        let batch = Batch::start(&patterns, &RxOptions::default(), None);
        // Asked in reverse: some are compiled here, some waited for.
        for i in (0..40).rev() {
            let p = format!("x{i}y");
            let r = batch.take(&p).expect("in the batch");
            assert!(r.is_ok_and(|r| r.is_match(p.as_bytes())));
            assert!(batch.take(&p).is_none(), "taken once");
        }
        assert!(batch
            .take("a+b")
            .is_some_and(|r| r.is_ok_and(|r| r.is_match(b"aab"))));
        assert!(matches!(
            batch.take("["),
            Some(Err(RxError::Invalid { .. }))
        ));
        assert!(matches!(
            batch.take("(?=x)"),
            Some(Err(RxError::Unsupported { .. }))
        ));
        assert!(batch.take("not in it").is_none());
        // Dropping a batch with patterns left stops its workers.
        let left = Batch::start(&patterns, &RxOptions::default(), None);
        drop(left);
    }
}
