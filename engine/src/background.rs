//! What a ruleset finishes building after it is loaded.
//!
//! The dense DFAs of a ruleset's `@rx` patterns are worth having (the
//! fastest yes/no matching) but slow to build: most of CRS's compile time,
//! half of it spent learning that the big alternations do not fit the
//! budget. Each pattern's meta regex gives the same answers and builds fast,
//! so a ruleset is ready as soon as the meta regexes are, and one background
//! thread builds the dense DFAs, which the matchers pick up as each is done.
//! Decisions never depend on which answers.

use std::sync::Mutex;
use std::thread::JoinHandle;
use waf_compiler::ir::Program;
use waf_compiler::rx::DeferredDfa;

/// The deferred builds of one ruleset and the thread doing them.
#[derive(Debug, Default)]
pub(crate) struct Background {
    jobs: Vec<DeferredDfa>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Background {
    /// Starts building the dense DFAs `program` deferred, on a new thread.
    pub(crate) fn start(program: &Program) -> Background {
        let jobs: Vec<DeferredDfa> = program
            .regexes
            .iter()
            .filter_map(|rx| rx.deferred_dfa())
            .collect();
        if jobs.is_empty() {
            return Background::default();
        }
        let theirs = jobs.clone();
        // If no thread can be started, the stand-ins keep answering until
        // `finish` is called: slower, never wrong.
        let thread = std::thread::Builder::new()
            .name("waf-ruleset-build".into())
            .spawn(move || {
                for job in &theirs {
                    if !job.is_wanted() {
                        return;
                    }
                    job.build();
                }
            })
            .ok();
        Background {
            jobs,
            thread: Mutex::new(thread),
        }
    }

    /// Builds whatever is left on the calling thread, then waits for the
    /// background thread to end.
    pub(crate) fn finish(&self) {
        for job in &self.jobs {
            job.build();
        }
        let thread = match self.thread.lock() {
            Ok(mut t) => t.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(t) = thread {
            // The thread only runs builds, which do not panic on any
            // pattern the compiler accepted; if one did, its cell stays
            // unbuilt and the stand-in keeps answering.
            let _ = t.join();
        }
    }

    /// How many builds are not done yet.
    pub(crate) fn pending(&self) -> usize {
        self.jobs.iter().filter(|j| !j.is_built()).count()
    }
}
