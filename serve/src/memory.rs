//! Gives the operating system back the memory a reload freed.
//!
//! A reload compiles the new rules beside the running ones (on the
//! compiler's threads, then a background thread builds their dense DFAs),
//! and the old ruleset is dropped when the last request holding it ends.
//! glibc's allocator keeps what is freed in its arenas (one per thread that
//! allocated) for later use, so after the first reloads the process stayed
//! near the peak of a reload: 122 MiB under load before, 312 MiB after 50
//! reloads, 179 MiB once `malloc_trim(0)` was called from a debugger. Here
//! the same call is made after each reload, once the old rules are gone and
//! the new ones built, and once after the start.
//!
//! Reloads in quick succession share one trim: a trim still waiting gives
//! way to the next reload's, which waits for its own old rules only (rules
//! a long request still held then are given back by the trim of a later
//! reload). The wait is bounded: a request that holds the old rules for
//! longer (a long upload or stream) does not keep the memory of every
//! reload after it.

use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use waf_engine::Ruleset;

/// How often the retired state is looked at.
const POLL: Duration = Duration::from_millis(100);

/// The longest wait for the retired state before trimming anyway.
const MAX_WAIT: Duration = Duration::from_secs(600);

/// After the old rules are gone: time for each worker thread to drop its
/// cross-transaction cache of them, which it does at its next phase.
const GRACE: Duration = Duration::from_secs(1);

/// The number of the latest reload's trim: an older one still waiting
/// gives way.
static LATEST: AtomicU64 = AtomicU64::new(0);

/// Trims done (`waf_memory_trims_total`): what a measurement of memory
/// waits for before its baseline, since a trim lowers the RSS.
static TRIMS: AtomicU64 = AtomicU64::new(0);

/// Trims done in this process.
pub(crate) fn trims() -> u64 {
    TRIMS.load(Ordering::Relaxed)
}

/// What a reload replaced and what it built.
#[derive(Default)]
pub(crate) struct Retired {
    /// Dropped once the last request holding them ends.
    old: Vec<Weak<dyn Any + Send + Sync>>,
    /// Built in the background after the swap.
    new: Vec<Weak<Ruleset>>,
}

impl Retired {
    /// `old` was replaced.
    pub(crate) fn old<T: Any + Send + Sync>(&mut self, old: &Arc<T>) {
        let weak: Weak<T> = Arc::downgrade(old);
        self.old.push(weak);
    }

    /// `new` took over.
    pub(crate) fn new_ruleset(&mut self, new: &Arc<Ruleset>) {
        self.new.push(Arc::downgrade(new));
    }

    /// Whether the old state is dropped and the new rulesets built.
    fn settled(&self) -> bool {
        self.old.iter().all(|w| w.strong_count() == 0)
            && self
                .new
                .iter()
                .all(|w| w.upgrade().is_none_or(|rs| rs.pending_builds() == 0))
    }

    /// Trims the allocator's free memory once this is settled (or after
    /// [`MAX_WAIT`]), on the runtime the caller runs on (without one, a
    /// test calling a reload directly, nothing is done). The task ends with
    /// whether it trimmed: false when a later reload's took over, or with an
    /// allocator that has no trim.
    pub(crate) fn release(self) -> Option<tokio::task::JoinHandle<bool>> {
        self.release_after(&LATEST)
    }

    /// [`Retired::release`], superseded by the later callers with the same
    /// `latest`.
    fn release_after(self, latest: &'static AtomicU64) -> Option<tokio::task::JoinHandle<bool>> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let ticket = latest.fetch_add(1, Ordering::Relaxed) + 1;
        let superseded = move || latest.load(Ordering::Relaxed) != ticket;
        Some(runtime.spawn(async move {
            let start = tokio::time::Instant::now();
            while !self.settled() && start.elapsed() < MAX_WAIT {
                if superseded() {
                    return false;
                }
                tokio::time::sleep(POLL).await;
            }
            tokio::time::sleep(GRACE).await;
            if superseded() {
                return false;
            }
            // It walks every arena under its lock: not on a worker.
            let trimmed = tokio::task::spawn_blocking(trim).await.unwrap_or(false);
            TRIMS.fetch_add(u64::from(trimmed), Ordering::Relaxed);
            trimmed
        }))
    }
}

/// Trims once `rulesets`, those a process started with, are built: what
/// their compilation freed goes back too.
pub(crate) fn after_start(rulesets: impl IntoIterator<Item = Arc<Ruleset>>) {
    let mut built = Retired::default();
    for rs in rulesets {
        built.new_ruleset(&rs);
    }
    built.release();
}

/// Returns the free pages of every arena to the operating system; true
/// when there was a trim to call.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() -> bool {
    extern "C" {
        fn malloc_trim(pad: usize) -> std::ffi::c_int;
    }
    // SAFETY: malloc_trim takes no pointer and only releases memory the
    // allocator holds as free; glibc documents it as thread-safe (MT-Safe).
    #[allow(unsafe_code)]
    unsafe {
        malloc_trim(0);
    }
    true
}

/// Other allocators return memory on their own.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a trim that was not superseded returns here.
    const CAN_TRIM: bool = cfg!(all(target_os = "linux", target_env = "gnu"));

    #[test]
    fn settled_once_the_old_state_is_dropped() {
        let old = Arc::new(vec![0u8; 16]);
        let mut r = Retired::default();
        r.old(&old);
        assert!(!r.settled());
        drop(old);
        assert!(r.settled());
    }

    #[tokio::test(start_paused = true)]
    async fn a_trim_waits_for_the_old_rules_and_gives_way_to_a_later_reload() {
        // This test's own counter: reloads elsewhere do not supersede it.
        static TEST_LATEST: AtomicU64 = AtomicU64::new(0);
        let old = Arc::new(0u32);
        let mut first = Retired::default();
        first.old(&old);
        let first = first.release_after(&TEST_LATEST).expect("in a runtime");
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(!first.is_finished(), "trimmed while the old rules are held");
        drop(old);
        assert_eq!(first.await.expect("the trim task"), CAN_TRIM);

        let old = Arc::new(0u32);
        let mut second = Retired::default();
        second.old(&old);
        let second = second.release_after(&TEST_LATEST).expect("in a runtime");
        let third = Retired::default()
            .release_after(&TEST_LATEST)
            .expect("in a runtime");
        assert!(!second.await.expect("the trim task"), "not superseded");
        assert_eq!(third.await.expect("the trim task"), CAN_TRIM);
        // Superseded during the grace period.
        let fourth = Retired::default()
            .release_after(&TEST_LATEST)
            .expect("in a runtime");
        tokio::time::sleep(GRACE / 2).await;
        let fifth = Retired::default()
            .release_after(&TEST_LATEST)
            .expect("in a runtime");
        assert!(!fourth.await.expect("the trim task"), "not superseded");
        assert_eq!(fifth.await.expect("the trim task"), CAN_TRIM);
        // Held past the bound, the old rules do not keep the memory.
        let mut held = Retired::default();
        held.old(&old);
        let held = held.release_after(&TEST_LATEST).expect("in a runtime");
        assert_eq!(held.await.expect("the trim task"), CAN_TRIM);
    }
}
