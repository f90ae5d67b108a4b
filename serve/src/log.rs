//! The error log: ModSecurity-style lines, written by a thread of its own so
//! that a slow disk never holds a request. The queue is bounded; when the
//! writer falls behind, lines are counted and dropped.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;

/// Lines waiting for the writer before new ones are dropped.
const QUEUE: usize = 8192;

/// A handle to the error log; cheap to clone.
#[derive(Clone)]
pub struct ErrorLog {
    tx: Option<SyncSender<String>>,
    dropped: Arc<AtomicU64>,
}

impl ErrorLog {
    /// A log that writes nothing.
    pub fn none() -> ErrorLog {
        ErrorLog {
            tx: None,
            dropped: Arc::new(AtomicU64::new(0)),
        }
    }

    /// A log appending to `out`, flushed after each batch of lines.
    pub fn to_writer(mut out: Box<dyn Write + Send>) -> ErrorLog {
        let (tx, rx) = sync_channel::<String>(QUEUE);
        std::thread::Builder::new()
            .name("waf-error-log".into())
            .spawn(move || {
                while let Ok(line) = rx.recv() {
                    let _ = writeln!(out, "{line}");
                    // Write what else is queued before flushing.
                    while let Ok(line) = rx.try_recv() {
                        let _ = writeln!(out, "{line}");
                    }
                    let _ = out.flush();
                }
            })
            .map(|_| ErrorLog {
                tx: Some(tx),
                dropped: Arc::new(AtomicU64::new(0)),
            })
            .unwrap_or_else(|_| ErrorLog::none())
    }

    /// Queues one line; never blocks.
    pub fn write(&self, line: String) {
        if let Some(tx) = &self.tx {
            if let Err(TrySendError::Full(_)) = tx.try_send(line) {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Lines dropped because the writer fell behind.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}
