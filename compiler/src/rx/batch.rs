//! Compiling many patterns at once, on every core.
//!
//! A configuration like CRS has about 300 distinct `@rx` patterns, and
//! compiling them (parsing, the meta regex, the literal analysis) is most of
//! a load. Each pattern compiles independently of the others, so a batch is
//! spread over worker threads; the lowering pass then takes each result
//! when it reaches the rule, in file order, so diagnostics and regex ids are
//! the same as with one thread.

use super::{CompiledRx, Precompiled, RxError, RxOptions};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

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

/// Compiles every pattern of `patterns` (duplicates compiled once), using up
/// to [`std::thread::available_parallelism`] threads; see [`compile_one`].
pub fn compile_all(
    patterns: &[&str],
    opts: &RxOptions,
    precompiled: Option<&Precompiled>,
) -> HashMap<String, Result<CompiledRx, RxError>> {
    let mut distinct: Vec<&str> = patterns.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    let workers = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(distinct.len().div_ceil(MIN_PARALLEL));
    if workers <= 1 {
        return distinct
            .into_iter()
            .map(|p| (p.to_string(), compile_one(p, opts, precompiled)))
            .collect();
    }
    // Big patterns take far longer than small ones: workers pull the next
    // pattern from a shared counter instead of taking fixed shares.
    let next = AtomicUsize::new(0);
    let out = Mutex::new(HashMap::with_capacity(distinct.len()));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                let mut mine = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&p) = distinct.get(i) else { break };
                    mine.push((p.to_string(), compile_one(p, opts, precompiled)));
                }
                match out.lock() {
                    Ok(mut m) => m.extend(mine),
                    Err(poisoned) => poisoned.into_inner().extend(mine),
                }
            });
        }
    });
    match out.into_inner() {
        Ok(m) => m,
        Err(poisoned) => poisoned.into_inner(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_once_with_its_own_result() {
        let mut patterns = vec!["a+b", "(?i)select", "a+b", "[", "(?=x)"];
        for i in 0..40 {
            patterns.push(Box::leak(format!("x{i}y").into_boxed_str()));
        }
        let out = compile_all(&patterns, &RxOptions::default(), None);
        assert_eq!(out.len(), 44);
        assert!(out["a+b"].as_ref().is_ok_and(|r| r.is_match(b"aab")));
        assert!(out["(?i)select"]
            .as_ref()
            .is_ok_and(|r| r.is_match(b"SeLeCt")));
        assert!(matches!(out["["], Err(RxError::Invalid { .. })));
        assert!(matches!(out["(?=x)"], Err(RxError::Unsupported { .. })));
        for i in 0..40 {
            let p = format!("x{i}y");
            assert!(out[&p].as_ref().is_ok_and(|r| r.is_match(p.as_bytes())));
        }
    }
}
