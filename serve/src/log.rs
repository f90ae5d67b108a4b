//! The error log: ModSecurity-style lines, written by a thread of its own so
//! that a slow disk never holds a request. The queue is bounded; when the
//! writer falls behind, lines are counted and dropped.
//!
//! A request that logged waits (asynchronously, [`LOG_WAIT`] at most) until
//! its lines are written before its response goes out, as a connector that
//! logs in the request's phases does (ModSecurity-nginx, Apache): whoever
//! reads the log after a response finds that response's lines there. go-ftw
//! relies on this: it reads the log right after each marker request, and a
//! line still being written (the kernel grows a file a page at a time, so a
//! reader can see the first part of a line that crosses a page boundary) was
//! taken as a truncated marker.
//!
//! A log written to a file can be reopened at its path ([`ErrorLog::reopen`];
//! SIGUSR1 for `waf serve` and `waf spoa`, as for nginx): logrotate renames
//! the file, then signals, and the lines from then on go to a new file.

use std::cell::Cell;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Duration;

/// Lines waiting for the writer before new ones are dropped.
const QUEUE: usize = 8192;

/// Bytes waiting for the writer (queued, or gathered and not yet written)
/// before new lines are dropped. Lines alone bound nothing: an audit
/// record carries a request's body, and 8,192 records of 13 MB bodies
/// (CRS's usual `SecRequestBodyLimit`) would be 100 GB held for a slow
/// disk. A line is taken while the bytes waiting are under the bound, so
/// one longer than it still goes when the writer has caught up.
const QUEUE_BYTES: usize = 64 << 20;

/// Bytes gathered before a write while more lines are queued.
const BATCH_BYTES: usize = 256 * 1024;

/// How long a response waits for its request's log lines to be written;
/// past it, the response goes out anyway (a stuck disk never holds
/// traffic) and the wait is counted ([`ErrorLog::late`]).
pub const LOG_WAIT: Duration = Duration::from_millis(200);

enum Item {
    Line(String),
    /// Answered once every item queued before it is written.
    Barrier(tokio::sync::oneshot::Sender<()>),
    /// Write what came before to the file open now, then open the path
    /// again; answered with the outcome.
    Reopen(tokio::sync::oneshot::Sender<std::io::Result<()>>),
}

/// Where the writer thread writes.
enum Sink {
    Writer(Box<dyn Write + Send>),
    /// A file, which can be opened again at its path.
    File(PathBuf, std::fs::File),
}

impl Sink {
    fn out(&mut self) -> &mut dyn Write {
        match self {
            Sink::Writer(w) => w,
            Sink::File(_, f) => f,
        }
    }

    /// Opens the file again at its path (the old one, if that fails, stays).
    fn reopen(&mut self) -> std::io::Result<()> {
        if let Sink::File(path, file) = self {
            *file = open_append(path)?;
        }
        Ok(())
    }
}

fn open_append(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
}

fn push_line(batch: &mut Vec<u8>, line: &str) {
    batch.extend_from_slice(line.as_bytes());
    batch.push(b'\n');
}

/// Queues `item`, waiting for room in a full queue until `deadline`;
/// whether it was queued.
async fn queue_by(tx: &SyncSender<Item>, mut item: Item, deadline: tokio::time::Instant) -> bool {
    loop {
        match tx.try_send(item) {
            Ok(()) => return true,
            Err(TrySendError::Full(back)) if tokio::time::Instant::now() < deadline => {
                item = back;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err(_) => return false,
        }
    }
}

tokio::task_local! {
    /// Set when the request running on this task queued a line.
    static LOGGED: Cell<bool>;
}

/// A handle to the error log; cheap to clone.
#[derive(Clone)]
pub struct ErrorLog {
    tx: Option<SyncSender<Item>>,
    /// Bytes of lines waiting for the writer (see [`QUEUE_BYTES`]).
    waiting: Arc<AtomicUsize>,
    dropped: Arc<AtomicU64>,
    late: Arc<AtomicU64>,
}

impl ErrorLog {
    /// A log that writes nothing.
    pub fn none() -> ErrorLog {
        ErrorLog {
            tx: None,
            waiting: Arc::new(AtomicUsize::new(0)),
            dropped: Arc::new(AtomicU64::new(0)),
            late: Arc::new(AtomicU64::new(0)),
        }
    }

    /// A log appending to `out`, one `write_all` per batch of lines.
    ///
    /// Each batch goes out as whole lines in one write: log readers that
    /// tail the file must not see a line without its newline, which two
    /// writes per line (text, then `\n`) on an unbuffered file allowed.
    pub fn to_writer(out: Box<dyn Write + Send>) -> ErrorLog {
        Self::spawn(Sink::Writer(out))
    }

    /// A log appending to the file at `path` (created if missing), which
    /// [`ErrorLog::reopen`] opens again.
    pub fn to_file(path: &Path) -> std::io::Result<ErrorLog> {
        let file = open_append(path)?;
        Ok(Self::spawn(Sink::File(path.to_path_buf(), file)))
    }

    fn spawn(mut sink: Sink) -> ErrorLog {
        let (tx, rx) = sync_channel::<Item>(QUEUE);
        let waiting = Arc::new(AtomicUsize::new(0));
        let written = waiting.clone();
        std::thread::Builder::new()
            .name("waf-error-log".into())
            .spawn(move || {
                let mut batch = Vec::with_capacity(64 * 1024);
                let mut barriers = Vec::new();
                // Writes the batch (each line's bytes and its newline, as
                // `write` counted them) and says they no longer wait.
                let write_out = |sink: &mut Sink, batch: &mut Vec<u8>| {
                    let out = sink.out();
                    let _ = out.write_all(batch);
                    let _ = out.flush();
                    written.fetch_sub(batch.len(), Ordering::Relaxed);
                    batch.clear();
                };
                while let Ok(item) = rx.recv() {
                    let mut next = Some(item);
                    // Take what else is queued into the same write.
                    while let Some(item) = next {
                        match item {
                            Item::Line(line) => push_line(&mut batch, &line),
                            Item::Barrier(done) => barriers.push(done),
                            Item::Reopen(done) => {
                                write_out(&mut sink, &mut batch);
                                let _ = done.send(sink.reopen());
                            }
                        }
                        if batch.len() >= BATCH_BYTES {
                            write_out(&mut sink, &mut batch);
                        }
                        next = rx.try_recv().ok();
                    }
                    write_out(&mut sink, &mut batch);
                    for done in barriers.drain(..) {
                        let _ = done.send(());
                    }
                    if batch.capacity() > 4 * BATCH_BYTES {
                        batch = Vec::with_capacity(64 * 1024);
                    }
                }
            })
            .map(|_| ErrorLog {
                tx: Some(tx),
                waiting,
                dropped: Arc::new(AtomicU64::new(0)),
                late: Arc::new(AtomicU64::new(0)),
            })
            .unwrap_or_else(|_| ErrorLog::none())
    }

    /// Queues one line; never blocks. Dropped and counted when the writer
    /// is [`QUEUE`] lines or [`QUEUE_BYTES`] behind.
    pub fn write(&self, line: String) {
        if let Some(tx) = &self.tx {
            let _ = LOGGED.try_with(|logged| logged.set(true));
            let bytes = line.len() + 1;
            if self.waiting.fetch_add(bytes, Ordering::Relaxed) >= QUEUE_BYTES {
                self.waiting.fetch_sub(bytes, Ordering::Relaxed);
                self.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
            if tx.try_send(Item::Line(line)).is_err() {
                // Full, or the writer is gone.
                self.waiting.fetch_sub(bytes, Ordering::Relaxed);
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Runs `request`; when it queued lines (on this log or any other),
    /// returns only once this log has written them, or after [`LOG_WAIT`].
    pub async fn written_before<F: std::future::Future>(&self, request: F) -> F::Output {
        let (out, logged) = LOGGED
            .scope(Cell::new(false), async {
                let out = request.await;
                (out, LOGGED.with(Cell::get))
            })
            .await;
        if logged {
            self.wait_written().await;
        }
        out
    }

    /// Runs `f` (synchronous) and says whether it queued lines.
    pub fn logged_during<R>(&self, f: impl FnOnce() -> R) -> (R, bool) {
        LOGGED.sync_scope(Cell::new(false), || {
            let out = f();
            (out, LOGGED.with(Cell::get))
        })
    }

    /// Waits until every line queued so far is written (at most
    /// [`LOG_WAIT`]).
    pub async fn wait_written(&self) {
        let Some(tx) = &self.tx else { return };
        let (done, written) = tokio::sync::oneshot::channel();
        if tx.try_send(Item::Barrier(done)).is_err() {
            // The writer is behind or gone: do not wait for it.
            self.late.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if tokio::time::timeout(LOG_WAIT, written).await.is_err() {
            self.late.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Waits until every line queued so far is written, for up to
    /// `limit` (a full queue is waited on too, unlike
    /// [`ErrorLog::wait_written`]: this is for shutdown, where nothing is
    /// held but the exit). Whether they were.
    pub async fn flush(&self, limit: Duration) -> bool {
        let Some(tx) = &self.tx else { return true };
        let deadline = tokio::time::Instant::now() + limit;
        let (done, written) = tokio::sync::oneshot::channel();
        if !queue_by(tx, Item::Barrier(done), deadline).await {
            return false;
        }
        matches!(tokio::time::timeout_at(deadline, written).await, Ok(Ok(())))
    }

    /// Opens a file log again at its path, once the lines queued before
    /// are written to the file open now (log rotation: the old file was
    /// renamed). Other logs: nothing to do. Waits up to a second for a
    /// full queue.
    pub async fn reopen(&self) -> std::io::Result<()> {
        let Some(tx) = &self.tx else { return Ok(()) };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
        let (done, reopened) = tokio::sync::oneshot::channel();
        if !queue_by(tx, Item::Reopen(done), deadline).await {
            return Err(std::io::Error::other("the log writer is behind or gone"));
        }
        match tokio::time::timeout_at(deadline + Duration::from_secs(4), reopened).await {
            Ok(Ok(outcome)) => outcome,
            _ => Err(std::io::Error::other("the log writer did not answer")),
        }
    }

    /// Lines dropped because the writer fell behind.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Responses that went out before their log lines were written (the
    /// writer was over [`LOG_WAIT`] behind, or its queue was full).
    pub fn late(&self) -> u64 {
        self.late.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_file_log_reopened_after_a_rename_writes_to_a_new_file() {
        let dir = std::env::temp_dir().join(format!("waf-log-reopen-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("error.log");
        let log = ErrorLog::to_file(&path).expect("open");
        log.write("before".into());
        std::fs::rename(&path, dir.join("error.log.1")).expect("rename");
        log.write("queued before the reopen".into());
        log.reopen().await.expect("reopen");
        log.write("after".into());
        assert!(log.flush(Duration::from_secs(5)).await);
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).expect("read");
        assert_eq!(read("error.log.1"), "before\nqueued before the reopen\n");
        assert_eq!(read("error.log"), "after\n");
        // A path that cannot be opened any more: the error is said, and the
        // lines go on to the file open now.
        std::fs::remove_dir_all(&dir).expect("remove");
        assert!(log.reopen().await.is_err());
        log.write("still written".into());
        assert!(log.flush(Duration::from_secs(5)).await);
        // Other logs have nothing to reopen.
        assert!(ErrorLog::to_writer(Box::new(std::io::sink()))
            .reopen()
            .await
            .is_ok());
        assert!(ErrorLog::none().reopen().await.is_ok());
    }
    use std::sync::Mutex;

    /// Records each `write` call separately.
    #[derive(Clone, Default)]
    struct Writes(Arc<Mutex<Vec<Vec<u8>>>>);

    impl Write for Writes {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if let Ok(mut w) = self.0.lock() {
                w.push(buf.to_vec());
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn every_write_ends_with_a_whole_line() {
        let writes = Writes::default();
        let log = ErrorLog::to_writer(Box::new(writes.clone()));
        for i in 0..2000 {
            log.write(format!("line {i} {}", "x".repeat(i % 300)));
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let seen: Vec<Vec<u8>> = writes.0.lock().map(|w| w.clone()).unwrap_or_default();
            let lines: usize = seen
                .iter()
                .map(|w| w.iter().filter(|&&b| b == b'\n').count())
                .sum();
            if lines == 2000 {
                assert!(seen.iter().all(|w| w.last() == Some(&b'\n')));
                let all: Vec<u8> = seen.concat();
                let text = String::from_utf8(all).unwrap_or_default();
                for (i, line) in text.lines().enumerate() {
                    assert!(line.starts_with(&format!("line {i} ")), "{line}");
                }
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{lines} lines written"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// Holds each write for a while, then records it.
    struct Slow(Writes, std::time::Duration);

    impl Write for Slow {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            std::thread::sleep(self.1);
            self.0.write(buf)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Writes nothing until `open` is set.
    struct Gated(Writes, Arc<std::sync::atomic::AtomicBool>);

    impl Write for Gated {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            while !self.1.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
            self.0.write(buf)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_writer_behind_holds_a_bounded_number_of_bytes() {
        let writes = Writes::default();
        let open = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let log = ErrorLog::to_writer(Box::new(Gated(writes.clone(), open.clone())));
        // Records of 1 MiB (an audit log's, with request bodies), 100 of
        // them while the disk is stuck: the lines that fit under
        // QUEUE_BYTES wait, the rest are dropped and counted.
        let line = "x".repeat(1 << 20);
        for _ in 0..100 {
            log.write(line.clone());
        }
        let fit = QUEUE_BYTES.div_ceil(line.len() + 1);
        assert_eq!(log.dropped(), (100 - fit) as u64);
        open.store(true, Ordering::SeqCst);
        assert!(log.flush(Duration::from_secs(10)).await);
        let written = writes.0.lock().map(|w| w.concat()).unwrap_or_default();
        assert_eq!(written.len(), fit * (line.len() + 1));
        // Caught up: lines are taken again.
        log.write("after".into());
        assert!(log.flush(Duration::from_secs(5)).await);
        let written = writes.0.lock().map(|w| w.concat()).unwrap_or_default();
        assert!(written.ends_with(b"x\nafter\n"));
        assert_eq!(log.dropped(), (100 - fit) as u64);
        assert_eq!(log.waiting.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_request_that_logged_returns_after_its_lines_are_written() {
        let writes = Writes::default();
        let log = ErrorLog::to_writer(Box::new(Slow(writes.clone(), Duration::from_millis(30))));
        let seen = || writes.0.lock().map(|w| w.concat()).unwrap_or_default();
        let out = log.written_before(async { 7 }).await;
        assert_eq!(out, 7);
        log.written_before(async { log.write("marker".into()) })
            .await;
        assert_eq!(seen(), b"marker\n");
        let ((), logged) = log.logged_during(|| log.write("second".into()));
        assert!(logged);
        log.wait_written().await;
        assert_eq!(seen(), b"marker\nsecond\n");
        assert_eq!(log.late(), 0);
    }

    #[tokio::test]
    async fn a_stuck_writer_holds_a_response_no_longer_than_the_log_wait() {
        let writes = Writes::default();
        let log = ErrorLog::to_writer(Box::new(Slow(writes.clone(), Duration::from_secs(2))));
        let start = std::time::Instant::now();
        log.written_before(async { log.write("line".into()) }).await;
        let waited = start.elapsed();
        assert!(
            waited >= LOG_WAIT && waited < Duration::from_secs(2),
            "{waited:?}"
        );
        assert_eq!(log.late(), 1);
    }
}
