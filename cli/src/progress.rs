//! Progress bars on standard error (indicatif), hidden when standard error
//! is not a terminal unless a command's `--progress` asks for one.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};

/// A bar counting `total` items; `force` shows it even when standard error
/// is not a terminal.
pub struct Progress {
    bar: ProgressBar,
    /// Items not yet added to the bar (it is updated every [`BATCH`] items so
    /// that timed loops do not pay for it).
    pending: AtomicU64,
}

const BATCH: u64 = 64;

impl Progress {
    /// A bar for `total` items labelled `what`.
    pub fn new(what: &str, total: u64, force: bool) -> Progress {
        let bar = if force || std::io::stderr().is_terminal() {
            ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr())
        } else {
            ProgressBar::hidden()
        };
        let style = ProgressStyle::with_template(
            "{prefix} [{bar:30}] {percent:>3}% {pos}/{len} {per_sec} eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("#>-");
        bar.set_style(style);
        bar.set_prefix(what.to_string());
        Progress {
            bar,
            pending: AtomicU64::new(0),
        }
    }

    /// One more item done.
    pub fn tick(&self) {
        if self.bar.is_hidden() {
            return;
        }
        let n = self.pending.fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_multiple_of(BATCH) {
            self.bar.inc(BATCH);
            self.pending.fetch_sub(BATCH, Ordering::Relaxed);
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
