//! `collection_redis`: the process's persistent collections (see
//! `rules::collection_store`) shared with other `waf serve` and `waf spoa`
//! instances through Redis, by the `waf_share` crate (its documentation
//! says how). What is the process's here: the exchange counters `/metrics`
//! shows, and the error log's lines.

use crate::log::ErrorLog;
use std::path::Path;
use std::sync::Arc;
pub use waf_share::{check_url, Link, Stats, INTERVAL};

/// What `/metrics` shows of the exchanges (`waf_collection_redis_*`),
/// for the process: `None` until a server shares its collections.
static STATS: std::sync::OnceLock<Arc<Stats>> = std::sync::OnceLock::new();

/// The exchanges' counters, when the collections are shared.
pub(crate) fn stats() -> Option<&'static Stats> {
    STATS.get().map(|s| &**s)
}

/// The process's store linked to the Redis at `url` (with `ca`, see
/// [`check_url`]); nothing is connected yet. Its lines go to `log`,
/// headed by `who`, the program.
pub(crate) fn link(
    url: &str,
    ca: Option<&Path>,
    log: ErrorLog,
    who: &'static str,
) -> Result<Link, String> {
    let stats = STATS.get_or_init(Default::default).clone();
    let store = crate::rules::collection_store().clone();
    Link::new(url, ca, store, stats, move |line| {
        log.write(format!("{who}: {line}"))
    })
    .map_err(|e| format!("collection_redis {e}"))
}
