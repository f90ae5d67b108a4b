//! `collection_file`: the process's persistent collections (see
//! `rules::collection_store`) kept in a file across restarts and handoffs.
//!
//! A process reads the file as it starts and writes it when it stops,
//! after its last request, through a new file renamed over the old one
//! (a crash while writing leaves the last one whole). A process that takes
//! the port over from another with `--reuse-port` serves beside it until
//! the other has drained and written the file: it reads the file then, and
//! replays on that state what it wrote itself meanwhile
//! ([`waf_engine::CollectionStore::merge_snapshot`]), so that a client's
//! counter holds what both counted.

use crate::log::ErrorLog;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How often a process that took the port over looks for the file the
/// other one writes when it stops: a stat, so often enough that the
/// counters are whole again a moment after.
const POLL: Duration = Duration::from_millis(200);

/// Which version of the file a process read: another process's write
/// (a new file renamed over it) changes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    modified: Option<std::time::SystemTime>,
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            modified: meta.modified().ok(),
        }
    }
}

/// Reads the persistent collections a previous process wrote to `path`
/// into the process's store: the error log's line about it (from `who`,
/// the program), and the version read (`None`: no file). A missing file
/// is a first start; a damaged one keeps what was read before the damage.
pub(crate) fn read(path: &Path, who: &str) -> (String, Option<Stamp>) {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let line = format!(
                "{who}: persistent collections: no {} yet, starting empty",
                path.display()
            );
            return (line, None);
        }
        Err(e) => {
            let line = format!(
                "{who}: persistent collections: cannot read {}: {e}; starting empty",
                path.display()
            );
            return (line, None);
        }
    };
    let stamp = file.metadata().ok().map(|m| Stamp::of(&m));
    let now = waf_engine::epoch_secs();
    // Idle records are dropped by each ruleset's own SecCollectionTimeout
    // when next read; here only what has expired is left out.
    let store = crate::rules::collection_store();
    let line = match store.read_snapshot(&mut std::io::BufReader::new(file), now, u64::MAX) {
        Ok(n) => format!(
            "{who}: persistent collections: {n} records read from {}",
            path.display()
        ),
        Err(e) => format!(
            "{who}: persistent collections: {}: {e}; {} records kept",
            path.display(),
            store.records()
        ),
    };
    (line, stamp)
}

/// Writes the process's persistent collections to `path` (a new file
/// renamed over the old, so a crash while writing leaves the last one):
/// the error log's line about it (from `who`, the program).
pub(crate) fn write(path: &Path, who: &str) -> String {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let written = (|| -> std::io::Result<u64> {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        let n =
            crate::rules::collection_store().write_snapshot(&mut w, waf_engine::epoch_secs())?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        Ok(n)
    })();
    match written {
        Ok(n) => format!(
            "{who}: persistent collections: {n} records written to {}",
            path.display()
        ),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            format!(
                "{who}: persistent collections: cannot write {}: {e}",
                path.display()
            )
        }
    }
}

/// Whether another process listens on `addr` (with `SO_REUSEPORT`, since
/// this one is about to bind it too): the process this one takes over
/// from. A bind without `SO_REUSEPORT` (`SO_REUSEADDR` ignores connections
/// in TIME_WAIT) fails on a listening port.
pub(crate) fn another_listens(addr: SocketAddr) -> bool {
    addr.port() != 0
        && matches!(crate::bound_socket(addr, false),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse)
}

/// In a process that took `addr` over from another: notes the store's
/// writes from now on, waits for the other process to write `path` (a
/// version other than `read`, the one this process read as it started),
/// and merges it (see the module documentation). Ends early when `stop`
/// turns true (this process stops first: it writes what it has).
pub(crate) async fn merge_when_written(
    path: PathBuf,
    read: Option<Stamp>,
    addr: SocketAddr,
    log: ErrorLog,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let store = crate::rules::collection_store();
    store.track_changes();
    log.write(format!(
        "waf serve: persistent collections: another process listens on {addr}: what it writes to {} when it stops will be merged",
        path.display()
    ));
    loop {
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let now = std::fs::metadata(&path).ok().map(|m| Stamp::of(&m));
        if now.is_none() || now == read {
            continue;
        }
        let merge = {
            let path = path.clone();
            move || merge(&path)
        };
        match tokio::task::spawn_blocking(merge).await {
            Ok(line) => log.write(line),
            Err(e) => log.write(format!(
                "waf serve: persistent collections: merging {}: {e}",
                path.display()
            )),
        }
        return;
    }
}

/// Merges the snapshot at `path` into the process's store: the error
/// log's line about it.
fn merge(path: &Path) -> String {
    let store = crate::rules::collection_store();
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) => {
            store.stop_tracking();
            return format!(
                "waf serve: persistent collections: cannot read {}: {e}; the other process's are lost",
                path.display()
            );
        }
    };
    let now = waf_engine::epoch_secs();
    match store.merge_snapshot(&mut std::io::BufReader::new(file), now, u64::MAX) {
        Ok(n) => format!(
            "waf serve: persistent collections: {n} records merged from {}, written by the process this one took over from",
            path.display()
        ),
        Err(e) => format!(
            "waf serve: persistent collections: merging {}: {e}; {} records held",
            path.display(),
            store.records()
        ),
    }
}
