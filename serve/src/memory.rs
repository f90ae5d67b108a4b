//! Gives the operating system back the memory a reload freed.
//!
//! A reload compiles the new rules beside the running ones (on the
//! compiler's threads, then a background thread builds their dense DFAs),
//! and the old ruleset is dropped when the last request holding it ends.
//! glibc's allocator keeps what is freed in its arenas (one per thread that
//! allocated) for later use, so after the first reloads the process stayed
//! near the peak of a reload: 122 MiB under load before, 312 MiB after 50
//! reloads, 179 MiB once `malloc_trim(0)` was called from a debugger. Here
//! the same call is made after each reload, and once after the start.
//!
//! The trim is made in two steps: once the new rules are built (the
//! compilation's garbage), and, if the old rules were still held then (a
//! long upload, a stream, a WebSocket whose request holds them), again once
//! they are dropped, waited for at most 10 minutes. Reloads in quick
//! succession share trims: a step whose trim another task started after
//! the step was ready is covered by it.

use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use waf_engine::Ruleset;

/// How often the retired state is looked at.
const POLL: Duration = Duration::from_millis(100);

/// The longest wait for the retired state before trimming anyway.
const MAX_WAIT: Duration = Duration::from_secs(600);

/// Before each trim: time for each worker thread to drop its
/// cross-transaction cache of the replaced rules, which it does at its next
/// phase.
const GRACE: Duration = Duration::from_secs(1);

/// Trims started in this process (`waf_memory_trims_total`): what a
/// measurement of memory waits for before its baseline, since a trim lowers
/// the RSS; and what tells a task that another one's trim covered it.
static TRIMS: AtomicU64 = AtomicU64::new(0);

/// Whether this build has a trim to call.
const CAN_TRIM: bool = cfg!(all(target_os = "linux", target_env = "gnu"));

/// Trims started in this process.
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

    /// Whether the old state is dropped.
    fn dropped(&self) -> bool {
        self.old.iter().all(|w| w.strong_count() == 0)
    }

    /// Whether the new rulesets are built.
    fn built(&self) -> bool {
        self.new
            .iter()
            .all(|w| w.upgrade().is_none_or(|rs| rs.pending_builds() == 0))
    }

    /// Trims the allocator's free memory once the new rules are built, and
    /// again once the old ones are dropped if they were still held then (see
    /// the module's documentation), on the runtime the caller runs on.
    /// `None` without a runtime (a test calling a reload directly) or
    /// without a trim to call; else the task ends with the number of trims
    /// it made.
    pub(crate) fn release(self) -> Option<tokio::task::JoinHandle<u32>> {
        self.release_counting(&TRIMS)
    }

    /// [`Retired::release`], covered by the trims counted in `trims`.
    fn release_counting(self, trims: &'static AtomicU64) -> Option<tokio::task::JoinHandle<u32>> {
        if !CAN_TRIM {
            return None;
        }
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        Some(runtime.spawn(async move {
            let start = tokio::time::Instant::now();
            let mut made = 0;
            let steps: [fn(&Retired) -> bool; 2] = [Retired::built, Retired::dropped];
            for ready in steps {
                while !ready(&self) && start.elapsed() < MAX_WAIT {
                    tokio::time::sleep(POLL).await;
                }
                let seen = trims.load(Ordering::Relaxed);
                let dropped = self.dropped();
                tokio::time::sleep(GRACE).await;
                // A trim started since this step was ready covers it.
                if trims.load(Ordering::Relaxed) == seen {
                    trims.fetch_add(1, Ordering::Relaxed);
                    // It walks every arena under its lock: not on a worker.
                    let _ = tokio::task::spawn_blocking(trim).await;
                    made += 1;
                }
                if dropped {
                    break;
                }
            }
            made
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

/// Returns the free pages of every arena to the operating system.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    extern "C" {
        fn malloc_trim(pad: usize) -> std::ffi::c_int;
    }
    // SAFETY: malloc_trim takes no pointer and only releases memory the
    // allocator holds as free; glibc documents it as thread-safe (MT-Safe).
    #[allow(unsafe_code)]
    unsafe {
        malloc_trim(0);
    }
}

/// Other allocators return memory on their own (and `release` does not
/// get here).
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_steps_wait_for_the_old_state_to_be_dropped() {
        let old = Arc::new(vec![0u8; 16]);
        let mut r = Retired::default();
        r.old(&old);
        assert!(r.built(), "no new rules to wait for");
        assert!(!r.dropped());
        drop(old);
        assert!(r.dropped());
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[tokio::test(start_paused = true)]
    async fn trims_come_in_two_steps_and_cover_each_other() {
        // This test's own count: trims elsewhere do not cover its tasks.
        static TEST_TRIMS: AtomicU64 = AtomicU64::new(0);
        let release = |r: Retired| r.release_counting(&TEST_TRIMS).expect("in a runtime");

        // Old rules held: one trim for the new rules' garbage, then the
        // task waits; once they are dropped, the second.
        let old = Arc::new(0u32);
        let mut held = Retired::default();
        held.old(&old);
        let held = release(held);
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(!held.is_finished(), "done while the old rules are held");
        assert_eq!(TEST_TRIMS.load(Ordering::Relaxed), 1);
        drop(old);
        assert_eq!(held.await.expect("the trim task"), 2);

        // Nothing held: one step, one trim; two reloads at once share it.
        let first = release(Retired::default());
        let second = release(Retired::default());
        let (first, second) = (
            first.await.expect("the trim task"),
            second.await.expect("the trim task"),
        );
        assert_eq!(first + second, 1, "{first} and {second} trims");
        assert_eq!(TEST_TRIMS.load(Ordering::Relaxed), 3);

        // Held past the bound: the second trim comes anyway.
        let forever = Arc::new(0u32);
        let mut stuck = Retired::default();
        stuck.old(&forever);
        let stuck = release(stuck);
        assert_eq!(stuck.await.expect("the trim task"), 2);
        assert_eq!(TEST_TRIMS.load(Ordering::Relaxed), 5);
    }
}
