//! The store of persistent collections: what `initcol`, `setsid`, `setuid`
//! and `setrsc` open (`IP`, `SESSION`, `USER`, `GLOBAL`, `RESOURCE`) kept
//! from one transaction to the next.
//!
//! As in ModSecurity v3's in-memory backend, the store lives in the process
//! and every thread shares it; a host that reloads its rules hands the old
//! ruleset's store to the new one ([`crate::Ruleset::with_collection_store`])
//! so that counters survive the reload. A *record* is one collection under
//! one key (`IP` under `10.0.0.1_<agent hash>`); its variables are read into
//! the transaction when the collection is opened, and each `setvar` on it
//! is applied to the record at once, under the record's lock: two requests
//! incrementing the same counter both count (a transaction's copy is
//! replaced by the record's result).
//!
//! Keys come from requests (addresses, cookies), so the store is bounded
//! and hashes them with a random key:
//! - a record not written for `SecCollectionTimeout` seconds (default 3600)
//!   is gone, and so is a variable past its `expirevar`;
//! - the store holds at most [`StoreLimits::max_bytes`] of keys, names and
//!   values: past that, the least recently written of a few records sampled
//!   in the same shard is evicted (as Redis approximates LRU); a single
//!   record may not grow past a shard's share of the budget (the writes
//!   that would make it do are refused, and counted).
//!
//! A host may also count its own events in it under the same bound
//! ([`CollectionStore::count_in_window`]: `waf serve`'s rate limits), and
//! keep it across restarts ([`CollectionStore::write_snapshot`],
//! [`CollectionStore::read_snapshot`]), and across a handoff to a new
//! process that serves while the old one drains
//! ([`CollectionStore::track_changes`], [`CollectionStore::merge_snapshot`]:
//! the new process's writes replayed on the old one's last state).

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use waf_compiler::names::Variable as V;

/// Number of independently locked parts of the store.
const SHARDS: usize = 16;

/// Records looked at to choose one to evict.
const EVICTION_SAMPLE: usize = 8;

/// Bytes counted for a variable besides its name and value, and for a
/// record besides its key, so that the limit is about what the heap holds:
/// a variable is a 48-byte slot and two allocations (name, value); a record
/// a key allocation, a map slot (up to twice its 72 bytes while the map is
/// half full after growing) and its variables' vector. Measured with
/// `corpus/serve-collections.sh`: a full store of 64 MiB counted grew the
/// proxy's RSS by 61 MiB (with 96 and 48 here: by 171 MiB).
const VAR_OVERHEAD: usize = 112;
const RECORD_OVERHEAD: usize = 224;
/// The same for a noted change (a 48-byte slot and its name's
/// allocation), and for a record's list of them (its box, and in a shared
/// store its id queued for the next exchange).
const CHANGE_OVERHEAD: usize = 80;
const NOTES_OVERHEAD: usize = 128;

/// How much the store may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreLimits {
    /// Keys, names and values of every record, plus a fixed overhead per
    /// record and per variable.
    pub max_bytes: usize,
}

impl Default for StoreLimits {
    /// 64 MiB.
    fn default() -> StoreLimits {
        StoreLimits {
            max_bytes: 64 << 20,
        }
    }
}

/// The persistent collections of a process (see the module documentation).
pub struct CollectionStore {
    shards: Box<[Mutex<Shard>]>,
    hasher: RandomState,
    /// [`StoreLimits::max_bytes`], changeable while the store is in use.
    max_bytes: AtomicUsize,
    evicted: AtomicU64,
    refused: AtomicU64,
    /// Set by [`CollectionStore::track_changes`] until
    /// [`CollectionStore::merge_snapshot`]: writes are noted in their
    /// record's `changes`.
    tracking: AtomicBool,
    /// Where the next [`CollectionStore::take_changes`] starts.
    next_shard: AtomicUsize,
    /// Set by [`CollectionStore::share`]: reads mark their record (or, for
    /// a record not held, its id in its shard's `wanted`) for the next
    /// [`CollectionStore::take_changes`].
    shared: AtomicBool,
}

impl std::fmt::Debug for CollectionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CollectionStore")
            .field("records", &self.records())
            .field("bytes", &self.bytes())
            .field("limits", &self.limits())
            .finish()
    }
}

impl Default for CollectionStore {
    fn default() -> CollectionStore {
        CollectionStore::new(StoreLimits::default())
    }
}

#[derive(Default)]
struct Shard {
    /// Record id (see [`record_id`]) → record.
    records: HashMap<Box<[u8]>, Record>,
    bytes: usize,
    /// Ids read while not held, in a shared store: fetched by the next
    /// [`CollectionStore::take_changes`]. At most [`WANTED_MAX`].
    wanted: HashSet<Box<[u8]>>,
    /// In a shared store, the ids of the records whose `changes` went from
    /// `None` to `Some` (written or read) since
    /// [`CollectionStore::take_changes`] last took them: what it takes
    /// first, without looking at every record.
    queued: VecDeque<Box<[u8]>>,
    /// In a shared store, records brought back by the last exchange and
    /// written lately (see [`SHARED_RECENT`]), to bring back again if there
    /// is room once `queued` is done, in the order they were brought back:
    /// `refresh_next` fills during an exchange, and
    /// [`CollectionStore::begin_exchange`] makes it `refresh` (what the
    /// exchange before did not reach is dropped).
    refresh: VecDeque<Box<[u8]>>,
    refresh_next: Vec<Box<[u8]>>,
}

/// Seconds after its last write during which a record of a shared store is
/// brought back at every exchange, read or not (see `merge_record`).
const SHARED_RECENT: u64 = 10;

/// Marks `r` (whose id is `id`) for the next exchange of a shared store:
/// queued in `queued` unless it is already.
fn queue(queued: &mut VecDeque<Box<[u8]>>, r: &mut Record, id: &[u8]) {
    if r.changes.is_none() {
        r.changes = Some(Box::default());
        queued.push_back(id.into());
    }
}

/// Ids a shard remembers as read but not held, in a shared store, between
/// two [`CollectionStore::take_changes`]: a flood of new keys costs no
/// more.
const WANTED_MAX: usize = 4096;

struct Record {
    vars: Vec<StoredVar>,
    /// Epoch seconds of the last write.
    updated: u64,
    /// Counted against the limit: the key, the variables and the changes.
    bytes: usize,
    /// What was written to the record while the store tracked changes
    /// ([`CollectionStore::track_changes`]), one entry per variable; empty
    /// otherwise. Boxed: a record's slot in its shard's map stays 8 bytes
    /// larger, not 24, for what is empty but during a handoff.
    #[allow(clippy::box_collection)]
    changes: Option<Box<Vec<Change>>>,
}

impl Record {
    fn changes(&self) -> &[Change] {
        self.changes.as_deref().map_or(&[], |c| &c[..])
    }

    /// The bytes counted for the record's notes.
    fn notes_bytes(&self) -> usize {
        notes_bytes(self.changes.as_deref().map(|c| &c[..]))
    }

    /// Drops the record's notes: the bytes they were counted for.
    fn drop_changes(&mut self) -> usize {
        let noted = self.notes_bytes();
        self.changes = None;
        self.bytes -= noted;
        noted
    }
}

/// The writes to one variable since [`CollectionStore::track_changes`],
/// summed up so that they can be replayed on another state of the record
/// ([`CollectionStore::merge_snapshot`]).
struct Change {
    /// Lowercased.
    name: Box<[u8]>,
    kind: ChangeKind,
    /// The last `expirevar`'s expiry (epoch seconds), if any.
    expires: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChangeKind {
    /// Only increments and decrements, summed (0: only an `expirevar`).
    Added(i64),
    /// Set to a value (increments after it included): the value is this
    /// store's, the expiry the other state's unless an `expirevar` set it.
    Set,
    /// Deleted, then written again: value and expiry are this store's.
    Replaced,
    /// Deleted last.
    Deleted,
}

impl ChangeKind {
    /// The sum of `self` followed by `op`.
    fn then(self, op: StoreOp<'_>) -> ChangeKind {
        use ChangeKind::*;
        match (self, op) {
            (_, StoreOp::Delete) => Deleted,
            (Added(x), StoreOp::Add(d)) => Added(x.saturating_add(d)),
            (Added(x), StoreOp::Sub(d)) => Added(x.saturating_sub(d)),
            (Added(_) | Set, StoreOp::Set(_)) => Set,
            (Set, _) => Set,
            (Replaced | Deleted, _) => Replaced,
        }
    }

    /// The sum of `self` followed by `later`.
    fn compose(self, later: ChangeKind) -> ChangeKind {
        use ChangeKind::*;
        match (self, later) {
            (_, Deleted) => Deleted,
            (_, Replaced) => Replaced,
            (Added(x), Added(y)) => Added(x.saturating_add(y)),
            (Added(_) | Set, Set) | (Set, Added(_)) => Set,
            (Replaced | Deleted, Set | Added(_)) => Replaced,
        }
    }
}

/// The writes to one record of a shared store, to apply to its shared
/// state (see [`CollectionStore::take_changes`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordDelta {
    /// The record's id: the collection's name, a NUL, the key.
    pub id: Vec<u8>,
    /// In order; none for a record only read.
    pub ops: Vec<DeltaOp>,
}

/// One write of a [`RecordDelta`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeltaOp {
    /// The variable's name, lowercased.
    pub name: Vec<u8>,
    /// What is done to it.
    pub kind: DeltaKind,
}

/// What a [`DeltaOp`] does to its variable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeltaKind {
    /// Adds to the integer the value starts with (0 when none, or when
    /// the variable is not there).
    Add(i64),
    /// Sets the value.
    Set(Vec<u8>),
    /// Deletes the variable (and its expiry).
    Delete,
    /// The variable expires at this time (epoch seconds), if it is there.
    Expire(u64),
    /// The same, unless it has an expiry already: a window started by
    /// another copy stays.
    ExpireIfUnset(u64),
}

struct StoredVar {
    /// Lowercased, as `setvar` writes it.
    name: Box<[u8]>,
    value: Vec<u8>,
    /// Epoch seconds after which it is gone (`expirevar`); 0: never.
    expires: u64,
}

impl StoredVar {
    fn live(&self, now: u64) -> bool {
        self.expires == 0 || now < self.expires
    }
}

/// A write to a persistent variable.
#[derive(Clone, Copy, Debug)]
pub(crate) enum StoreOp<'a> {
    /// `setvar:c.name=value`.
    Set(&'a [u8]),
    /// `setvar:c.name=+n`.
    Add(i64),
    /// `setvar:c.name=-n`.
    Sub(i64),
    /// `setvar:!c.name`.
    Delete,
}

/// Seconds since the Unix epoch: the store's clock (what its methods take
/// as `now`), which `TIME_EPOCH` and the other `TIME*` variables read too.
pub fn epoch_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// Writes the id of record `key` of collection `coll` into `out` (cleared
/// first): the collection's name, a NUL, then the key.
pub(crate) fn record_id(coll: V, key: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(coll.name().as_bytes());
    out.push(0);
    out.extend_from_slice(key);
}

impl CollectionStore {
    /// An empty store.
    pub fn new(limits: StoreLimits) -> CollectionStore {
        CollectionStore {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hasher: RandomState::new(),
            max_bytes: AtomicUsize::new(limits.max_bytes),
            evicted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            tracking: AtomicBool::new(false),
            next_shard: AtomicUsize::new(0),
            shared: AtomicBool::new(false),
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> StoreLimits {
        StoreLimits {
            max_bytes: self.max_bytes.load(Ordering::Relaxed),
        }
    }

    /// Changes the limits of a store in use (a host's configuration
    /// reloaded): a smaller limit is reached as records are written, each
    /// write evicting until its shard is within its share.
    pub fn set_limits(&self, limits: StoreLimits) {
        self.max_bytes.store(limits.max_bytes, Ordering::Relaxed);
    }

    /// Records held (expired ones included until they are next touched or
    /// evicted).
    pub fn records(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().map_or(0, |s| s.records.len()))
            .sum()
    }

    /// Bytes counted against [`StoreLimits::max_bytes`].
    pub fn bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().map_or(0, |s| s.bytes))
            .sum()
    }

    /// Records evicted to stay within the limit, since the start.
    pub fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    /// Writes refused because their record would have outgrown its share
    /// of the limit, since the start.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    fn shard(&self, id: &[u8]) -> &Mutex<Shard> {
        let h = self.hasher.hash_one(id);
        &self.shards[(h as usize) % SHARDS]
    }

    fn shard_budget(&self) -> usize {
        self.max_bytes.load(Ordering::Relaxed) / SHARDS
    }

    /// Calls `f` with each live variable of record `id` (name, value), at
    /// `now` (epoch seconds); a record idle for `timeout` seconds is
    /// dropped instead.
    pub(crate) fn load(&self, id: &[u8], now: u64, timeout: u64, mut f: impl FnMut(&[u8], &[u8])) {
        let Ok(mut guard) = self.shard(id).lock() else {
            return;
        };
        let shard = &mut *guard;
        let shared = self.shared.load(Ordering::Relaxed);
        let idle = match shard.records.get_mut(id) {
            Some(r) if !stale(r, now, timeout) => {
                if shared && r.changes.is_none() {
                    // Read: refreshed by the next exchange with the shared
                    // store.
                    queue(&mut shard.queued, r, id);
                    r.bytes += NOTES_OVERHEAD;
                    shard.bytes += NOTES_OVERHEAD;
                }
                for v in r.vars.iter().filter(|v| v.live(now)) {
                    f(&v.name, &v.value);
                }
                return;
            }
            held => held.is_some(),
        };
        if idle {
            shard.remove(id);
        }
        if shared && shard.wanted.len() < WANTED_MAX && !shard.wanted.contains(id) {
            shard.wanted.insert(id.into());
        }
    }

    /// Applies `op` to variable `name` of record `id` (created if need
    /// be) at `now`, and writes the variable's new value into `out`
    /// (cleared first; left empty by `Delete`). False when the write was
    /// refused (the record would outgrow its share of the limit).
    pub(crate) fn apply(
        &self,
        id: &[u8],
        name: &[u8],
        op: StoreOp<'_>,
        now: u64,
        timeout: u64,
        out: &mut Vec<u8>,
    ) -> bool {
        out.clear();
        let budget = self.shard_budget();
        let Ok(mut guard) = self.shard(id).lock() else {
            return false;
        };
        let shard = &mut *guard;
        if shard
            .records
            .get(id)
            .is_some_and(|r| stale(r, now, timeout))
        {
            shard.remove(id);
        }
        let tracking = self.tracking.load(Ordering::Relaxed);
        if !shard.records.contains_key(id) {
            // A deletion is noted while tracking: the other state may hold
            // the variable.
            if matches!(op, StoreOp::Delete) && !tracking {
                return true;
            }
            let bytes = RECORD_OVERHEAD + id.len();
            shard.records.insert(
                id.into(),
                Record {
                    // Most records hold one or two variables (a counter, a
                    // flag): not the 4 a first push reserves.
                    vars: Vec::with_capacity(1),
                    updated: now,
                    bytes,
                    changes: None,
                },
            );
            shard.bytes += bytes;
        }
        let Some(r) = shard.records.get_mut(id) else {
            return false;
        };
        let mut expired = 0;
        r.vars.retain(|v| {
            let live = v.live(now);
            if !live {
                expired += var_bytes(&v.name, &v.value);
            }
            live
        });
        r.bytes -= expired;
        shard.bytes -= expired;
        let at = r
            .vars
            .iter()
            .position(|v| v.name.eq_ignore_ascii_case(name));
        let current: &[u8] = at.map_or(b"", |i| &r.vars[i].value);
        match op {
            StoreOp::Set(v) => out.extend_from_slice(v),
            StoreOp::Add(d) | StoreOp::Sub(d) => {
                let add = matches!(op, StoreOp::Add(_));
                let n = crate::operator::setvar_arith(current, d, add);
                out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
            }
            StoreOp::Delete => {}
        }
        let old = at.map_or(0, |i| var_bytes(&r.vars[i].name, &r.vars[i].value));
        let new = match op {
            StoreOp::Delete => 0,
            _ => var_bytes(name, out),
        };
        if new > old && r.bytes + new - old > budget {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        match (op, at) {
            (StoreOp::Delete, Some(i)) => {
                r.vars.remove(i);
            }
            (StoreOp::Delete, None) => {}
            (_, Some(i)) => {
                let v = &mut r.vars[i].value;
                v.clear();
                v.extend_from_slice(out);
            }
            (_, None) => r.vars.push(StoredVar {
                name: name.to_ascii_lowercase().into(),
                value: out.clone(),
                expires: 0,
            }),
        }
        let noted = if tracking {
            let before = r.notes_bytes();
            if self.shared.load(Ordering::Relaxed) {
                queue(&mut shard.queued, r, id);
            }
            note_change(r, name, |k| k.then(op), None);
            r.notes_bytes() - before
        } else {
            0
        };
        r.updated = now;
        r.bytes = r.bytes + new + noted - old;
        shard.bytes = shard.bytes + new + noted - old;
        self.evict(shard, id, now, timeout, budget);
        true
    }

    /// Counts an event under `key` in fixed windows of `window` seconds,
    /// each starting at its first event: the events of the current window,
    /// this one included, and the seconds the window has left. For limits
    /// kept outside SecLang (`waf serve`'s `rate_limit` rules): the counters
    /// share the store's memory bound and eviction with the persistent
    /// collections. A collection's record id is its name, a NUL and its key:
    /// give `key` a prefix no collection has. `None` when the store refused
    /// the count (a limit of 0; a key larger than a shard's share): the
    /// caller should not limit on it.
    pub fn count_in_window(&self, key: &[u8], window: u64, now: u64) -> Option<(u64, u64)> {
        const COUNT: &[u8] = b"n";
        let window = window.max(1);
        let mut out = Vec::with_capacity(20);
        // The record goes once idle for a window: its count would be gone.
        if !self.apply(key, COUNT, StoreOp::Add(1), now, window, &mut out) {
            return None;
        }
        let n = std::str::from_utf8(&out).ok()?.parse::<u64>().ok()?;
        let mut shard = self.shard(key).lock().ok()?;
        let v = shard
            .records
            .get_mut(key)?
            .vars
            .iter_mut()
            .find(|v| v.live(now) && &*v.name == COUNT)?;
        // The window's first event starts it (an expired count was dropped
        // by the write above, so this one counts 1 in a new window).
        if v.expires == 0 {
            v.expires = now.saturating_add(window);
        }
        Some((n, v.expires.saturating_sub(now)))
    }

    /// Writes every record with a live variable to `w`, for
    /// [`CollectionStore::read_snapshot`] to read back after a restart:
    /// ids, the time of each record's last write, and each live variable
    /// with its expiry (epoch seconds, so they mean the same later). The
    /// number of records written. A shard is copied under its lock and
    /// written after, so requests wait for no I/O.
    pub fn write_snapshot(&self, w: &mut impl std::io::Write, now: u64) -> std::io::Result<u64> {
        w.write_all(SNAPSHOT_MAGIC)?;
        let mut records = 0;
        let mut buf = Vec::new();
        for shard in self.shards.iter() {
            buf.clear();
            if let Ok(shard) = shard.lock() {
                for (id, r) in &shard.records {
                    let live = r.vars.iter().filter(|v| v.live(now));
                    let n = live.clone().count();
                    if n == 0 {
                        continue;
                    }
                    put_field(&mut buf, id);
                    buf.extend_from_slice(&r.updated.to_le_bytes());
                    buf.extend_from_slice(&(n as u32).to_le_bytes());
                    for v in live {
                        put_field(&mut buf, &v.name);
                        put_field(&mut buf, &v.value);
                        buf.extend_from_slice(&v.expires.to_le_bytes());
                    }
                    records += 1;
                }
            }
            w.write_all(&buf)?;
        }
        Ok(records)
    }

    /// Reads what [`CollectionStore::write_snapshot`] wrote into this
    /// store, at `now`: records idle for `timeout` seconds and variables
    /// past their expiry are left out, and the store's limit holds (the
    /// records are written as `setvar`s would write them). The number of
    /// records read; on a file that is not a snapshot, or is damaged or
    /// cut short, an error saying so (the records before the damage are
    /// kept). The input is not trusted: lengths are checked before
    /// anything is allocated for them.
    pub fn read_snapshot(
        &self,
        r: &mut impl std::io::Read,
        now: u64,
        timeout: u64,
    ) -> Result<u64, String> {
        let mut out = Vec::new();
        read_records(r, |id, updated, vars| {
            if now >= updated.saturating_add(timeout) {
                return false;
            }
            for (name, value, expires) in vars {
                if expires != 0 && now >= expires {
                    continue;
                }
                // As the write it was, at the time it was: the record's
                // idle time counts from its last write, not from now.
                let at = updated.min(now);
                if self.apply(&id, &name, StoreOp::Set(&value), at, timeout, &mut out)
                    && expires != 0
                {
                    self.expire(&id, &name, expires.saturating_sub(at), at);
                }
            }
            true
        })
    }

    /// `expirevar`: variable `name` of record `id` is gone `seconds` after
    /// `now` (if it exists).
    pub(crate) fn expire(&self, id: &[u8], name: &[u8], seconds: u64, now: u64) {
        let Ok(mut guard) = self.shard(id).lock() else {
            return;
        };
        let shard = &mut *guard;
        let Some(r) = shard.records.get_mut(id) else {
            return;
        };
        let Some(v) = r
            .vars
            .iter_mut()
            .find(|v| v.live(now) && v.name.eq_ignore_ascii_case(name))
        else {
            return;
        };
        v.expires = now.saturating_add(seconds);
        if self.tracking.load(Ordering::Relaxed) {
            let expires = v.expires;
            let before = r.notes_bytes();
            if self.shared.load(Ordering::Relaxed) {
                queue(&mut shard.queued, r, id);
            }
            note_change(r, name, |k| k, Some(expires));
            let noted = r.notes_bytes() - before;
            r.bytes += noted;
            shard.bytes += noted;
        }
    }

    /// Notes every write from now on, for
    /// [`CollectionStore::merge_snapshot`] to replay them on the snapshot a
    /// previous process writes when it stops: what a process that took the
    /// port over from another (`waf serve --reuse-port`) calls as it
    /// starts serving, the other one still serving until it drains. The
    /// notes count against the limit (a few dozen bytes per variable
    /// written).
    pub fn track_changes(&self) {
        self.tracking.store(true, Ordering::Relaxed);
    }

    /// Whether writes are being noted ([`CollectionStore::track_changes`]).
    pub fn tracks_changes(&self) -> bool {
        self.tracking.load(Ordering::Relaxed)
    }

    /// Takes the state in a snapshot another process wrote as it stopped
    /// (see [`CollectionStore::track_changes`]), with this store's writes
    /// since `track_changes` replayed on it: a counter both processes
    /// incremented holds the sum, a variable this process set or deleted
    /// holds what it holds here, a record or variable this process did not
    /// write holds what the snapshot says (gone if the snapshot lacks it:
    /// the other process deleted it, or it expired or was evicted there).
    /// Then stops noting writes. At `now`; records idle for `timeout`
    /// seconds and expired variables in the snapshot are left out. The
    /// number of records read; an error as [`CollectionStore::read_snapshot`]
    /// gives, in which case the records read before the damage are merged
    /// and this store's others kept.
    pub fn merge_snapshot(
        &self,
        r: &mut impl std::io::Read,
        now: u64,
        timeout: u64,
    ) -> Result<u64, String> {
        let mut seen = HashSet::new();
        let read = read_records(r, |id, updated, vars| {
            if now >= updated.saturating_add(timeout) {
                return false;
            }
            self.merge_record(&id, Some(updated), vars, now, timeout, false);
            seen.insert(id);
            true
        });
        // Records not in the snapshot and not written here since
        // `track_changes` held only what this process read when it started
        // (older than the snapshot): gone. Changes are dropped under the
        // same lock; writes between a shard's pass and the end of tracking
        // note changes again, dropped by the second pass.
        for shard in self.shards.iter() {
            let Ok(mut guard) = shard.lock() else {
                continue;
            };
            let shard = &mut *guard;
            let mut freed = 0;
            shard.records.retain(|id, r| {
                let keep = read.is_err() || !r.changes().is_empty() || seen.contains(&**id);
                if keep {
                    freed += r.drop_changes();
                } else {
                    freed += r.bytes;
                }
                keep
            });
            shard.bytes -= freed;
        }
        self.stop_tracking();
        read
    }

    /// Stops noting writes ([`CollectionStore::track_changes`]) and drops
    /// the notes, without a merge: what a process that waited for another
    /// one's snapshot calls when it cannot have it.
    pub fn stop_tracking(&self) {
        if self.shared.load(Ordering::Relaxed) {
            // A shared store notes its writes for as long as it runs.
            return;
        }
        self.tracking.store(false, Ordering::Relaxed);
        for shard in self.shards.iter() {
            let Ok(mut guard) = shard.lock() else {
                continue;
            };
            let shard = &mut *guard;
            for r in shard.records.values_mut() {
                shard.bytes -= r.drop_changes();
            }
        }
    }

    /// Makes this store one of several copies of a shared one (`waf serve`
    /// instances sharing Redis): from now on every write is noted and
    /// every read marks its record, so that a host can send the writes
    /// ([`CollectionStore::take_changes`]) and bring back the shared state
    /// of what was read or written ([`CollectionStore::merge_remote`]) at
    /// its own pace, off the request path. Requests read and write this
    /// copy only, never wait for the shared one.
    pub fn share(&self) {
        self.shared.store(true, Ordering::Relaxed);
        self.tracking.store(true, Ordering::Relaxed);
    }

    /// In a shared store ([`CollectionStore::share`]): up to `max` of the
    /// records written or read since they were last taken, with the writes
    /// to replay on their shared state (none for a record only read, or
    /// read but not held here, which is to be fetched), at `now`; then,
    /// with the room left, records written lately that the last exchange
    /// brought back (see [`CollectionStore::begin_exchange`]). The rest
    /// wait for the next calls (empty: nothing left). The notes are
    /// dropped; give the deltas back with
    /// [`CollectionStore::restore_changes`] if they could not be sent.
    pub fn take_changes(&self, now: u64, max: usize) -> Vec<RecordDelta> {
        let mut out = Vec::new();
        // Each call starts at another shard, so that a few busy ones do not
        // keep the others waiting.
        let first = self.next_shard.fetch_add(1, Ordering::Relaxed);
        for i in 0..SHARDS {
            if out.len() >= max {
                break;
            }
            let Ok(mut guard) = self.shards[(first + i) % SHARDS].lock() else {
                continue;
            };
            guard.take_queued(now, max, &mut out);
        }
        // Then, with what room is left, records not written or read since
        // the last exchange but lately: best effort.
        for i in 0..SHARDS {
            if out.len() >= max {
                break;
            }
            let Ok(mut guard) = self.shards[(first + i) % SHARDS].lock() else {
                continue;
            };
            let shard = &mut *guard;
            while out.len() < max {
                let Some(id) = shard.refresh.pop_front() else {
                    break;
                };
                // A record with notes is in `queued`.
                if shard.records.get(&id).is_some_and(|r| r.changes.is_none()) {
                    out.push(RecordDelta {
                        id: id.into(),
                        ops: Vec::new(),
                    });
                }
            }
        }
        out
    }

    /// Starts an exchange of a shared store: the records the last one
    /// brought back and were written lately are what
    /// [`CollectionStore::take_changes`] takes once the written and read
    /// ones are taken.
    pub fn begin_exchange(&self) {
        for shard in self.shards.iter() {
            if let Ok(mut shard) = shard.lock() {
                let next = std::mem::take(&mut shard.refresh_next);
                shard.refresh = next.into();
            }
        }
    }

    /// Gives back the writes of a [`CollectionStore::take_changes`] that
    /// could not be sent, to be sent with the next ones (as if noted before
    /// them). A record evicted meanwhile loses them.
    pub fn restore_changes(&self, delta: RecordDelta) {
        let mut restored: Vec<Change> = Vec::new();
        for DeltaOp { name, kind } in &delta.ops {
            match kind {
                DeltaKind::Add(by) => {
                    note(&mut restored, name, |k| k.then(StoreOp::Add(*by)), None);
                }
                DeltaKind::Set(value) => {
                    note(&mut restored, name, |k| k.then(StoreOp::Set(value)), None);
                }
                DeltaKind::Delete => {
                    note(&mut restored, name, |k| k.then(StoreOp::Delete), None);
                }
                DeltaKind::Expire(at) => {
                    note(&mut restored, name, |k| k, Some(*at));
                }
                // Sent again from the variable's own expiry.
                DeltaKind::ExpireIfUnset(_) => {}
            }
        }
        let Ok(mut guard) = self.shard(&delta.id).lock() else {
            return;
        };
        let shard = &mut *guard;
        let Some(r) = shard.records.get_mut(&delta.id[..]) else {
            return;
        };
        let before = r.notes_bytes();
        for later in r.changes.take().map(|b| *b).unwrap_or_default() {
            match restored.iter_mut().find(|c| c.name == later.name) {
                Some(c) => {
                    c.kind = c.kind.compose(later.kind);
                    c.expires = match later.kind {
                        ChangeKind::Deleted | ChangeKind::Replaced => later.expires,
                        _ => later.expires.or(c.expires),
                    };
                }
                None => restored.push(later),
            }
        }
        let after = notes_bytes(Some(&restored));
        if r.changes.is_none() {
            shard.queued.push_back(delta.id[..].into());
        }
        r.changes = Some(Box::new(restored));
        r.bytes = r.bytes + after - before;
        shard.bytes = shard.bytes + after - before;
    }

    /// In a shared store: takes `vars`, the shared state of record `id`
    /// brought back after the writes of a [`CollectionStore::take_changes`]
    /// were applied to it, with this copy's writes since that call replayed
    /// on it (and still to be sent), at `now`.
    pub fn merge_remote(&self, id: &[u8], vars: Vec<(Vec<u8>, Vec<u8>, u64)>, now: u64) {
        self.merge_record(id, None, vars, now, u64::MAX, true);
    }

    /// Replaces record `id` by the snapshot's state of it (`updated`,
    /// `vars`), with this store's noted changes to it replayed on that;
    /// the notes stay with the record if `keep_notes` (they are still to be
    /// sent to a shared store), else they are dropped. The record's last
    /// write is the later of `updated` (`None`: now, when the record is not
    /// held here) and the one held here.
    #[allow(clippy::too_many_arguments)]
    fn merge_record(
        &self,
        id: &[u8],
        updated: Option<u64>,
        vars: Vec<SnapshotVar>,
        now: u64,
        timeout: u64,
        keep_notes: bool,
    ) {
        let budget = self.shard_budget();
        let Ok(mut guard) = self.shard(id).lock() else {
            return;
        };
        let shard = &mut *guard;
        let mine = shard
            .records
            .get(id)
            .filter(|r| !stale(r, now, timeout))
            .map(|r| r.changes().is_empty());
        let mut merged: Vec<StoredVar> = vars
            .into_iter()
            .filter(|(_, _, expires)| *expires == 0 || now < *expires)
            .map(|(name, value, expires)| StoredVar {
                name: name.to_ascii_lowercase().into(),
                value,
                expires,
            })
            .collect();
        let held = shard.records.get(id).map(|r| r.updated);
        let last_write = match (updated, held) {
            (Some(u), Some(h)) => u.min(now).max(h),
            (Some(u), None) => u.min(now),
            (None, Some(h)) => h,
            (None, None) => now,
        };
        if mine == Some(false) {
            if let Some(r) = shard.records.get(id) {
                for c in r.changes() {
                    let theirs = merged.iter().position(|v| *v.name == *c.name);
                    let here = r.vars.iter().find(|v| v.live(now) && *v.name == *c.name);
                    let expires = |theirs: Option<&StoredVar>, here: &StoredVar| {
                        c.expires
                            .or(theirs.map(|v| v.expires))
                            .unwrap_or(here.expires)
                    };
                    match (c.kind, theirs, here) {
                        (ChangeKind::Deleted, Some(i), _) => {
                            merged.remove(i);
                        }
                        (ChangeKind::Added(d), Some(i), _) => {
                            let v = &mut merged[i];
                            if d != 0 {
                                let n = crate::operator::setvar_arith(&v.value, d, true);
                                v.value.clear();
                                v.value
                                    .extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
                            }
                            if let Some(e) = c.expires {
                                v.expires = e;
                            }
                        }
                        (ChangeKind::Set, Some(i), Some(h)) => {
                            let expires = expires(Some(&merged[i]), h);
                            merged[i] = StoredVar {
                                name: h.name.clone(),
                                value: h.value.clone(),
                                expires,
                            };
                        }
                        (ChangeKind::Set | ChangeKind::Replaced, Some(i), None) => {
                            merged.remove(i);
                        }
                        (ChangeKind::Replaced, Some(i), Some(h)) => {
                            merged[i] = StoredVar {
                                name: h.name.clone(),
                                value: h.value.clone(),
                                expires: h.expires,
                            };
                        }
                        // Not in the snapshot: as written here.
                        (_, None, Some(h)) if c.kind != ChangeKind::Deleted => {
                            merged.push(StoredVar {
                                name: h.name.clone(),
                                value: h.value.clone(),
                                expires: expires(None, h),
                            })
                        }
                        _ => {}
                    }
                }
            }
        }
        let notes = match shard.records.get_mut(id) {
            Some(r) if keep_notes => r.changes.take(),
            _ => None,
        };
        // A record written lately is likely to be written again soon:
        // brought back at the next exchange if there is room, so that this
        // copy's count is not left behind the others' (one with notes is
        // queued already).
        if keep_notes && notes.is_none() && now < last_write.saturating_add(SHARED_RECENT) {
            shard.refresh_next.push(id.into());
        }
        let mut bytes = RECORD_OVERHEAD + id.len();
        merged.retain(|v| {
            let b = var_bytes(&v.name, &v.value);
            if bytes + b > budget {
                self.refused.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            bytes += b;
            true
        });
        bytes += notes_bytes(notes.as_deref().map(|n| &n[..]));
        // Nothing here or there: a notes-only mark has nothing to fetch
        // that a later read would not ask for again.
        let empty = merged.is_empty() && notes.as_ref().is_none_or(|n| n.is_empty());
        if empty || mine.is_none() {
            shard.remove(id);
        }
        if empty {
            return;
        }
        match shard.records.get_mut(id) {
            // Updated in place: the key stays, and so do the variables when
            // they are what is held already (most exchanges), so that the
            // exchanges' thread does not reallocate what requests free.
            Some(r) => {
                if !same_vars(&r.vars, &merged) {
                    r.vars = merged;
                }
                r.updated = last_write;
                r.changes = notes;
                shard.bytes = shard.bytes - r.bytes + bytes;
                r.bytes = bytes;
            }
            None => {
                shard.records.insert(
                    id.into(),
                    Record {
                        vars: merged,
                        updated: last_write,
                        bytes,
                        changes: notes,
                    },
                );
                shard.bytes += bytes;
            }
        }
        self.evict(shard, id, now, timeout, budget);
    }

    /// Evicts records of `shard` other than `keep` until it is within its
    /// budget: idle ones first, else the least recently written of a few.
    fn evict(&self, shard: &mut Shard, keep: &[u8], now: u64, timeout: u64, budget: usize) {
        while shard.bytes > budget {
            let victim = shard
                .records
                .iter()
                .filter(|(k, _)| &***k != keep)
                .take(EVICTION_SAMPLE)
                .min_by_key(|(_, r)| {
                    if stale(r, now, timeout) {
                        0
                    } else {
                        r.updated.max(1)
                    }
                })
                .map(|(k, _)| k.clone());
            let Some(k) = victim else {
                return;
            };
            shard.remove(&k);
            self.evicted.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Shard {
    /// [`CollectionStore::take_changes`]'s part for one shard: what was
    /// read while not held, then what was written or read.
    fn take_queued(&mut self, now: u64, max: usize, out: &mut Vec<RecordDelta>) {
        let wanted: Vec<Box<[u8]>> = self.wanted.iter().take(max - out.len()).cloned().collect();
        for id in wanted {
            self.wanted.remove(&id);
            if !self.records.contains_key(&id) {
                out.push(RecordDelta {
                    id: id.into(),
                    ops: Vec::new(),
                });
            }
        }
        while out.len() < max {
            let Some(id) = self.queued.pop_front() else {
                break;
            };
            let Some(r) = self.records.get_mut(&id) else {
                continue;
            };
            let Some(notes) = r.changes.take() else {
                continue;
            };
            let noted = notes_bytes(Some(&notes));
            r.bytes -= noted;
            self.bytes -= noted;
            let mut ops = Vec::new();
            for c in notes.iter() {
                let here = r.vars.iter().find(|v| v.live(now) && *v.name == *c.name);
                let op = |kind| DeltaOp {
                    name: c.name.to_vec(),
                    kind,
                };
                // The expiry to send: an `expirevar`'s, else the one
                // this copy holds unless the shared one has its own (a
                // rate window's start).
                let expiry = |ops: &mut Vec<DeltaOp>, here: &StoredVar| match c.expires {
                    Some(at) => ops.push(op(DeltaKind::Expire(at))),
                    None if here.expires != 0 => {
                        ops.push(op(DeltaKind::ExpireIfUnset(here.expires)))
                    }
                    None => {}
                };
                match (c.kind, here) {
                    (ChangeKind::Added(by), Some(h)) => {
                        if by != 0 {
                            ops.push(op(DeltaKind::Add(by)));
                        }
                        expiry(&mut ops, h);
                    }
                    (ChangeKind::Set, Some(h)) => {
                        ops.push(op(DeltaKind::Set(h.value.clone())));
                        expiry(&mut ops, h);
                    }
                    (ChangeKind::Replaced, _) | (ChangeKind::Deleted, _) => {
                        ops.push(op(DeltaKind::Delete));
                        if let (ChangeKind::Replaced, Some(h)) = (c.kind, here) {
                            ops.push(op(DeltaKind::Set(h.value.clone())));
                            if h.expires != 0 {
                                ops.push(op(DeltaKind::Expire(h.expires)));
                            }
                        }
                    }
                    // Expired here since: so it is there.
                    (ChangeKind::Added(_) | ChangeKind::Set, None) => {}
                }
            }
            out.push(RecordDelta { id: id.into(), ops });
        }
    }

    fn remove(&mut self, id: &[u8]) {
        if let Some(r) = self.records.remove(id) {
            self.bytes -= r.bytes;
        }
    }
}

/// The first bytes of a snapshot (`write_snapshot`): a format name and
/// version.
const SNAPSHOT_MAGIC: &[u8; 16] = b"waf-collections1";

/// The longest id, name or value a snapshot may hold: the store keeps none
/// longer than a shard's share of its limit, and a damaged length must not
/// make the reader allocate gigabytes.
const SNAPSHOT_FIELD_MAX: u32 = 64 << 20;

/// A variable as a snapshot holds it: name, value, expiry.
type SnapshotVar = (Vec<u8>, Vec<u8>, u64);

/// Reads the records of a snapshot, calling `f` with each one's id, last
/// write time and variables; `f` says whether it took the record. The
/// number of records taken, or what is wrong with the input.
fn read_records(
    r: &mut impl std::io::Read,
    mut f: impl FnMut(Vec<u8>, u64, Vec<SnapshotVar>) -> bool,
) -> Result<u64, String> {
    let mut magic = [0u8; SNAPSHOT_MAGIC.len()];
    r.read_exact(&mut magic)
        .map_err(|_| "not a collections snapshot (too short)".to_string())?;
    if &magic != SNAPSHOT_MAGIC {
        return Err("not a collections snapshot (no `waf-collections1` header)".into());
    }
    let mut records = 0;
    let damaged =
        |records: u64, what: &str| format!("damaged or cut short after {records} records: {what}");
    loop {
        let id = match get_field(r) {
            Ok(Some(id)) => id,
            Ok(None) => return Ok(records),
            Err(e) => return Err(damaged(records, &e)),
        };
        let updated = get_array(r, "a time").map_err(|e| damaged(records, &e))?;
        let updated = u64::from_le_bytes(updated);
        let n = get_array(r, "a count").map_err(|e| damaged(records, &e))?;
        let n = u32::from_le_bytes(n);
        let mut vars = Vec::new();
        for _ in 0..n {
            let name = get_field(r)
                .and_then(|f| f.ok_or_else(|| "a variable cut short".to_string()))
                .map_err(|e| damaged(records, &e))?;
            let value = get_field(r)
                .and_then(|f| f.ok_or_else(|| "a value cut short".to_string()))
                .map_err(|e| damaged(records, &e))?;
            let expires = get_array(r, "a time").map_err(|e| damaged(records, &e))?;
            vars.push((name, value, u64::from_le_bytes(expires)));
        }
        if f(id, updated, vars) {
            records += 1;
        }
    }
}

/// Notes a write to variable `name` of `r` (see `Change`): its kind made
/// by `kind` from the one noted before (`Added(0)` if none), and the
/// `expirevar` expiry if one.
fn note_change(
    r: &mut Record,
    name: &[u8],
    kind: impl FnOnce(ChangeKind) -> ChangeKind,
    expires: Option<u64>,
) {
    note(
        r.changes.get_or_insert_with(Default::default),
        name,
        kind,
        expires,
    )
}

/// [`note_change`] on a list of notes.
fn note(
    changes: &mut Vec<Change>,
    name: &[u8],
    kind: impl FnOnce(ChangeKind) -> ChangeKind,
    expires: Option<u64>,
) {
    if let Some(c) = changes
        .iter_mut()
        .find(|c| c.name.eq_ignore_ascii_case(name))
    {
        c.kind = kind(c.kind);
        if c.kind == ChangeKind::Deleted {
            c.expires = None;
        }
        if expires.is_some() {
            c.expires = expires;
        }
        return;
    }
    // Most records have one variable written: not the 4 a first push
    // reserves.
    changes.reserve_exact(1);
    changes.push(Change {
        name: name.to_ascii_lowercase().into(),
        kind: kind(ChangeKind::Added(0)),
        expires,
    });
}

/// Whether `a` and `b` hold the same variables (in any order).
fn same_vars(a: &[StoredVar], b: &[StoredVar]) -> bool {
    a.len() == b.len()
        && b.iter().all(|m| {
            a.iter()
                .any(|v| v.name == m.name && v.value == m.value && v.expires == m.expires)
        })
}

/// The bytes counted for a record's notes (`None`: it has none).
fn notes_bytes(changes: Option<&[Change]>) -> usize {
    changes.map_or(0, |c| {
        NOTES_OVERHEAD
            + c.iter()
                .map(|c| CHANGE_OVERHEAD + c.name.len())
                .sum::<usize>()
    })
}

fn put_field(buf: &mut Vec<u8>, b: &[u8]) {
    buf.extend_from_slice(&(b.len() as u32).to_le_bytes());
    buf.extend_from_slice(b);
}

/// A length-prefixed field; `None` at a clean end of input (before its
/// length).
fn get_field(r: &mut impl std::io::Read) -> Result<Option<Vec<u8>>, String> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < len.len() {
        match r.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err("a length cut short".into()),
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    let len = u32::from_le_bytes(len);
    if len > SNAPSHOT_FIELD_MAX {
        return Err(format!("a field of {len} bytes"));
    }
    let mut b = vec![0u8; len as usize];
    r.read_exact(&mut b)
        .map_err(|_| "a field cut short".to_string())?;
    Ok(Some(b))
}

/// `N` bytes of a fixed-size field (`what`, for the error).
fn get_array<const N: usize>(r: &mut impl std::io::Read, what: &str) -> Result<[u8; N], String> {
    let mut b = [0u8; N];
    r.read_exact(&mut b)
        .map_err(|_| format!("{what} cut short"))?;
    Ok(b)
}

/// Not written for `timeout` seconds.
fn stale(r: &Record, now: u64, timeout: u64) -> bool {
    now >= r.updated.saturating_add(timeout)
}

fn var_bytes(name: &[u8], value: &[u8]) -> usize {
    VAR_OVERHEAD + name.len() + value.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(key: &str) -> Vec<u8> {
        let mut out = Vec::new();
        record_id(V::Ip, key.as_bytes(), &mut out);
        out
    }

    fn read(s: &CollectionStore, key: &str, now: u64) -> Vec<(String, String)> {
        let mut vars = Vec::new();
        s.load(&id(key), now, 3600, |n, v| {
            vars.push((
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ))
        });
        vars
    }

    fn apply(s: &CollectionStore, key: &str, name: &str, op: StoreOp<'_>, now: u64) -> String {
        let mut out = Vec::new();
        assert!(s.apply(&id(key), name.as_bytes(), op, now, 3600, &mut out));
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn a_snapshot_is_read_back_with_its_expiries_and_damage_is_an_error() {
        let s = CollectionStore::default();
        apply(&s, "a", "hits", StoreOp::Add(7), 1000);
        apply(&s, "a", "blocked", StoreOp::Set(b"1"), 1000);
        s.expire(&id("a"), b"blocked", 600, 1000);
        apply(&s, "b", "gone", StoreOp::Set(b"x"), 1000);
        s.expire(&id("b"), b"gone", 10, 1000);
        apply(&s, "old", "hits", StoreOp::Add(1), 10);
        let mut file = Vec::new();
        // "b" has no live variable at 1100.
        assert_eq!(s.write_snapshot(&mut file, 1100).expect("write"), 2);
        let t = CollectionStore::default();
        // Idle for 1,000 s, "old" is dropped by a reader with that timeout.
        assert_eq!(t.read_snapshot(&mut &file[..], 1200, 1000), Ok(1));
        assert_eq!(
            read(&t, "a", 1200),
            [("hits".into(), "7".into()), ("blocked".into(), "1".into())]
        );
        // The expiry is the one written: gone at 1600.
        assert_eq!(read(&t, "a", 1600), [("hits".to_string(), "7".to_string())]);
        assert!(read(&t, "old", 1200).is_empty());
        // Counting goes on from the value read.
        assert_eq!(apply(&t, "a", "hits", StoreOp::Add(1), 1201), "8");
        // Damaged input: an error, what came before kept, nothing panics.
        let u = CollectionStore::default();
        let cut = &file[..file.len() - 3];
        let e = u.read_snapshot(&mut &cut[..], 1200, 3600).expect_err("cut");
        assert!(e.contains("cut short"), "{e}");
        assert!(u.read_snapshot(&mut &b"hello"[..], 0, 3600).is_err());
        assert!(u
            .read_snapshot(&mut &b"waf-collections2xxxx"[..], 0, 3600)
            .is_err());
        let mut huge = SNAPSHOT_MAGIC.to_vec();
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        let e = u.read_snapshot(&mut &huge[..], 0, 3600).expect_err("huge");
        assert!(e.contains("a field of 4294967295 bytes"), "{e}");
        // An empty snapshot reads as no records.
        assert_eq!(u.read_snapshot(&mut &SNAPSHOT_MAGIC[..], 0, 3600), Ok(0));
    }

    fn sorted(mut vars: Vec<(String, String)>) -> Vec<(String, String)> {
        vars.sort();
        vars
    }

    fn pairs(vars: &[(&str, &str)]) -> Vec<(String, String)> {
        sorted(
            vars.iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn a_merge_replays_this_store_s_writes_on_the_snapshot_of_a_process_taken_over() {
        // What both processes read at their start.
        let first = CollectionStore::default();
        apply(&first, "a", "hits", StoreOp::Add(4), 900);
        apply(&first, "a", "old", StoreOp::Set(b"y"), 900);
        apply(&first, "evicted-there", "z", StoreOp::Set(b"1"), 900);
        let mut start = Vec::new();
        first.write_snapshot(&mut start, 900).expect("write");

        // The old process went on from it, and stopped at 1030.
        let old = CollectionStore::default();
        assert_eq!(old.read_snapshot(&mut &start[..], 1000, 3600), Ok(2));
        apply(&old, "a", "hits", StoreOp::Add(6), 1000);
        apply(&old, "a", "blocked", StoreOp::Set(b"1"), 1000);
        old.expire(&id("a"), b"blocked", 600, 1000);
        apply(&old, "a", "flag", StoreOp::Set(b"x"), 1000);
        apply(&old, "a", "old", StoreOp::Delete, 1000);
        apply(&old, "b", "n", StoreOp::Set(b"3"), 1000);
        apply(&old, "c", "keep", StoreOp::Set(b"k"), 1000);
        apply(&old, "c", "drop", StoreOp::Set(b"d"), 1000);
        apply(&old, "d", "n", StoreOp::Add(1), 1000);
        assert_eq!(old.count_in_window(b"rl", 60, 1000), Some((1, 60)));
        assert_eq!(old.count_in_window(b"rl", 60, 1001), Some((2, 59)));
        // Evicted there.
        apply(&old, "evicted-there", "z", StoreOp::Delete, 1000);

        // The new process read the same start, then took the port over at
        // 1010 and served beside the old one.
        let new = CollectionStore::default();
        assert_eq!(new.read_snapshot(&mut &start[..], 1010, 3600), Ok(2));
        new.track_changes();
        assert!(new.tracks_changes());
        apply(&new, "a", "hits", StoreOp::Add(3), 1010);
        apply(&new, "a", "hits", StoreOp::Sub(1), 1011);
        new.expire(&id("a"), b"hits", 100, 1011);
        apply(&new, "a", "flag", StoreOp::Delete, 1011);
        apply(&new, "b", "n", StoreOp::Add(5), 1012);
        apply(&new, "b", "n", StoreOp::Set(b"7"), 1012);
        apply(&new, "c", "drop", StoreOp::Delete, 1012);
        apply(&new, "d", "n", StoreOp::Delete, 1012);
        apply(&new, "d", "n", StoreOp::Add(1), 1012);
        apply(&new, "e", "k", StoreOp::Add(1), 1012);
        assert_eq!(new.count_in_window(b"rl", 60, 1012), Some((1, 60)));
        let mut last = Vec::new();
        old.write_snapshot(&mut last, 1030).expect("write");

        assert_eq!(new.merge_snapshot(&mut &last[..], 1030, 3600), Ok(5));
        assert!(!new.tracks_changes());
        // Increments add up (4 + 6 from the old one, 3 - 1 here) and keep
        // this one's expirevar; a variable the old one set and this one
        // did not write is the old one's; one deleted here is gone, and
        // so is one that the start held and the old one deleted.
        assert_eq!(
            sorted(read(&new, "a", 1030)),
            pairs(&[("blocked", "1"), ("hits", "12")])
        );
        assert_eq!(read(&new, "a", 1111), pairs(&[("blocked", "1")]));
        assert!(read(&new, "a", 1600).is_empty());
        // Set here: this one's value.
        assert_eq!(read(&new, "b", 1030), pairs(&[("n", "7")]));
        // Deleted here, in a record this one did not hold.
        assert_eq!(read(&new, "c", 1030), pairs(&[("keep", "k")]));
        // Deleted then counted again here: this one's.
        assert_eq!(read(&new, "d", 1030), pairs(&[("n", "1")]));
        // Only here.
        assert_eq!(read(&new, "e", 1030), pairs(&[("k", "1")]));
        // Only in the start, gone in the old one.
        assert!(read(&new, "evicted-there", 1030).is_empty());
        // The rate counts add up in the old one's window (started at 1000).
        assert_eq!(new.count_in_window(b"rl", 60, 1031), Some((4, 29)));
        // The notes are gone and the bytes agree with a fresh copy's.
        apply(&new, "a", "hits", StoreOp::Add(1), 1032);
        let mut again = Vec::new();
        new.write_snapshot(&mut again, 1032).expect("write");
        let copy = CollectionStore::default();
        copy.read_snapshot(&mut &again[..], 1032, 3600)
            .expect("read");
        assert_eq!(copy.bytes(), new.bytes());
        assert_eq!(copy.records(), new.records());

        // A damaged snapshot: what came before the damage is merged, this
        // store's other records kept, and tracking ends.
        let kept = CollectionStore::default();
        apply(&kept, "z", "v", StoreOp::Set(b"1"), 1000);
        kept.track_changes();
        let cut = &last[..last.len() - 3];
        assert!(kept.merge_snapshot(&mut &cut[..], 1030, 3600).is_err());
        assert_eq!(read(&kept, "z", 1030), pairs(&[("v", "1")]));
        assert!(!kept.tracks_changes());
    }

    #[test]
    fn increments_during_a_merge_all_count() {
        let old = CollectionStore::default();
        apply(&old, "a", "hits", StoreOp::Add(100), 1000);
        let mut last = Vec::new();
        old.write_snapshot(&mut last, 1000).expect("write");
        let new = std::sync::Arc::new(CollectionStore::default());
        new.track_changes();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let new = new.clone();
                std::thread::spawn(move || {
                    for _ in 0..2000 {
                        apply(&new, "a", "hits", StoreOp::Add(1), 1000);
                    }
                })
            })
            .collect();
        assert_eq!(new.merge_snapshot(&mut &last[..], 1000, 3600), Ok(1));
        for t in threads {
            t.join().expect("thread");
        }
        assert_eq!(read(&new, "a", 1000), pairs(&[("hits", "8100")]));
        assert!(!new.tracks_changes());
    }

    /// The shared state as `waf serve`'s Redis script keeps it: variable →
    /// (value, expiry), each delta applied in order after expired
    /// variables are dropped.
    #[derive(Default)]
    struct Shared(HashMap<Vec<u8>, SharedRecord>);

    /// Variable → (value, expiry).
    type SharedRecord = HashMap<Vec<u8>, (Vec<u8>, u64)>;

    impl Shared {
        fn exchange(&mut self, s: &CollectionStore, now: u64) {
            s.begin_exchange();
            for d in s.take_changes(now, usize::MAX) {
                let rec = self.0.entry(d.id.clone()).or_default();
                rec.retain(|_, (_, x)| *x == 0 || now < *x);
                for DeltaOp { name, kind } in d.ops {
                    match kind {
                        DeltaKind::Add(by) => {
                            let cur = rec.get(&name).map_or(&b""[..], |(v, _)| &v[..]);
                            let n = crate::operator::setvar_arith(cur, by, true).to_string();
                            let x = rec.get(&name).map_or(0, |v| v.1);
                            rec.insert(name, (n.into_bytes(), x));
                        }
                        DeltaKind::Set(v) => {
                            let x = rec.get(&name).map_or(0, |v| v.1);
                            rec.insert(name, (v, x));
                        }
                        DeltaKind::Delete => {
                            rec.remove(&name);
                        }
                        DeltaKind::Expire(at) => {
                            if let Some(v) = rec.get_mut(&name) {
                                v.1 = at;
                            }
                        }
                        DeltaKind::ExpireIfUnset(at) => {
                            if let Some(v) = rec.get_mut(&name).filter(|v| v.1 == 0) {
                                v.1 = at;
                            }
                        }
                    }
                }
                let vars = rec
                    .iter()
                    .map(|(n, (v, x))| (n.clone(), v.clone(), *x))
                    .collect();
                s.merge_remote(&d.id, vars, now);
            }
        }
    }

    #[test]
    fn copies_of_a_shared_store_add_up_their_counts_and_see_each_other_s_writes() {
        let mut shared = Shared::default();
        let (one, two) = (CollectionStore::default(), CollectionStore::default());
        one.share();
        two.share();
        for _ in 0..3 {
            apply(&one, "a", "hits", StoreOp::Add(1), 1000);
        }
        for _ in 0..2 {
            apply(&two, "a", "hits", StoreOp::Add(1), 1000);
        }
        // Neither waits for the other: each counts its own until exchanged.
        assert_eq!(read(&one, "a", 1000), pairs(&[("hits", "3")]));
        shared.exchange(&one, 1001);
        shared.exchange(&two, 1001);
        assert_eq!(read(&two, "a", 1001), pairs(&[("hits", "5")]));
        // A request to `one` reads "a": fetched again at its next exchange.
        assert_eq!(read(&one, "a", 1001), pairs(&[("hits", "3")]));
        apply(&two, "a", "blocked", StoreOp::Set(b"1"), 1002);
        two.expire(&id("a"), b"blocked", 60, 1002);
        shared.exchange(&two, 1002);
        shared.exchange(&one, 1002);
        assert_eq!(
            sorted(read(&one, "a", 1002)),
            pairs(&[("blocked", "1"), ("hits", "5")])
        );
        assert_eq!(read(&one, "a", 1062), pairs(&[("hits", "5")]));
        // A record `one` never held, read there: fetched.
        apply(&two, "b", "x", StoreOp::Set(b"y"), 1003);
        shared.exchange(&two, 1003);
        assert!(read(&one, "b", 1003).is_empty());
        shared.exchange(&one, 1003);
        assert_eq!(read(&one, "b", 1004), pairs(&[("x", "y")]));
        // A deletion goes over; writes made between taking the changes and
        // merging the shared state stay and go with the next exchange.
        apply(&one, "b", "x", StoreOp::Delete, 1005);
        let taken = one.take_changes(1005, usize::MAX);
        apply(&one, "a", "hits", StoreOp::Add(10), 1005);
        for d in taken {
            one.restore_changes(d);
        }
        shared.exchange(&one, 1006);
        // Requests to `two` read both (what it held until now): refreshed
        // by its next exchange.
        assert_eq!(read(&two, "b", 1006), pairs(&[("x", "y")]));
        assert_eq!(read(&two, "a", 1006).len(), 2);
        shared.exchange(&two, 1007);
        assert!(read(&two, "b", 1007).is_empty());
        assert!(read(&two, "a", 1007).contains(&("hits".into(), "15".into())));
        // Rate windows: the first copy's start holds for both.
        assert_eq!(one.count_in_window(b"rl", 60, 2000), Some((1, 60)));
        shared.exchange(&one, 2000);
        assert_eq!(two.count_in_window(b"rl", 60, 2030), Some((1, 60)));
        shared.exchange(&two, 2030);
        assert_eq!(two.count_in_window(b"rl", 60, 2031), Some((3, 29)));
        // The notes are gone after an exchange: the bytes agree with a
        // fresh copy's.
        shared.exchange(&two, 2032);
        let mut file = Vec::new();
        two.write_snapshot(&mut file, 2032).expect("write");
        let copy = CollectionStore::default();
        copy.read_snapshot(&mut &file[..], 2032, 3600)
            .expect("read");
        assert_eq!(copy.bytes(), two.bytes());
        // A shared store keeps noting.
        two.stop_tracking();
        assert!(two.tracks_changes());
        // Written lately here: brought back at the next exchanges without
        // being read or written, so another copy's increments are seen; not
        // once 10 s have passed since its last write.
        let (p, q) = (CollectionStore::default(), CollectionStore::default());
        p.share();
        q.share();
        apply(&p, "z", "n", StoreOp::Add(1), 5000);
        shared.exchange(&p, 5000);
        apply(&q, "z", "n", StoreOp::Add(1), 5001);
        shared.exchange(&q, 5001);
        shared.exchange(&p, 5002);
        shared.exchange(&p, 5020);
        apply(&q, "z", "n", StoreOp::Add(1), 5021);
        shared.exchange(&q, 5021);
        shared.exchange(&p, 5022);
        assert_eq!(read(&p, "z", 5022), pairs(&[("n", "2")]));
        shared.exchange(&p, 5023);
        assert_eq!(read(&p, "z", 5023), pairs(&[("n", "3")]));
        // Taken a few at a time, each record once.
        let many = CollectionStore::default();
        many.share();
        for k in 0..10 {
            apply(&many, &format!("k{k}"), "n", StoreOp::Add(1), 3000);
            apply(&many, &format!("k{k}"), "n", StoreOp::Add(1), 3000);
        }
        let mut ids = Vec::new();
        loop {
            let part = many.take_changes(3000, 3);
            assert!(part.len() <= 3);
            if part.is_empty() {
                break;
            }
            ids.extend(part.into_iter().map(|d| d.id));
        }
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 10);
    }

    #[test]
    fn counts_in_fixed_windows_from_each_window_s_first_event() {
        let s = CollectionStore::default();
        assert_eq!(s.count_in_window(b"rate\0a", 60, 1000), Some((1, 60)));
        assert_eq!(s.count_in_window(b"rate\0a", 60, 1010), Some((2, 50)));
        assert_eq!(s.count_in_window(b"rate\0b", 60, 1010), Some((1, 60)));
        assert_eq!(s.count_in_window(b"rate\0a", 60, 1059), Some((3, 1)));
        // The window is over: a new one starts at this event.
        assert_eq!(s.count_in_window(b"rate\0a", 60, 1060), Some((1, 60)));
        assert_eq!(s.count_in_window(b"rate\0a", 60, 1061), Some((2, 59)));
        // Idle for longer than a window: the record is gone, counts anew.
        assert_eq!(s.count_in_window(b"rate\0a", 60, 5000), Some((1, 60)));
        // A store that keeps nothing does not count.
        s.set_limits(StoreLimits { max_bytes: 0 });
        assert_eq!(s.count_in_window(b"rate\0c", 60, 5000), None);
    }

    #[test]
    fn writes_persist_per_record_and_count_from_zero() {
        let s = CollectionStore::default();
        assert_eq!(apply(&s, "a", "hits", StoreOp::Add(1), 100), "1");
        assert_eq!(apply(&s, "a", "HITS", StoreOp::Add(2), 101), "3");
        assert_eq!(apply(&s, "a", "hits", StoreOp::Sub(5), 102), "-2");
        assert_eq!(apply(&s, "a", "flag", StoreOp::Set(b"on"), 102), "on");
        assert_eq!(apply(&s, "b", "hits", StoreOp::Add(1), 102), "1");
        assert_eq!(
            read(&s, "a", 103),
            [("hits".into(), "-2".into()), ("flag".into(), "on".into())]
        );
        assert_eq!(apply(&s, "a", "flag", StoreOp::Delete, 104), "");
        assert_eq!(read(&s, "a", 105), [("hits".to_string(), "-2".to_string())]);
        // A collection is part of the id: GLOBAL under "a" is another record.
        let mut g = Vec::new();
        record_id(V::Global, b"a", &mut g);
        let mut seen = 0;
        s.load(&g, 105, 3600, |_, _| seen += 1);
        assert_eq!(seen, 0);
        assert_eq!(s.records(), 2);
    }

    #[test]
    fn idle_records_and_expired_variables_are_gone() {
        let s = CollectionStore::default();
        apply(&s, "a", "hits", StoreOp::Add(1), 1000);
        apply(&s, "a", "blocked", StoreOp::Set(b"1"), 1000);
        s.expire(&id("a"), b"blocked", 60, 1000);
        assert_eq!(read(&s, "a", 1059).len(), 2);
        assert_eq!(read(&s, "a", 1060), [("hits".to_string(), "1".to_string())]);
        // An expired variable counts from nothing again, and its bytes
        // were given back.
        let bytes = s.bytes();
        assert_eq!(apply(&s, "a", "blocked", StoreOp::Add(1), 1061), "1");
        assert_eq!(s.bytes(), bytes);
        // Idle for the timeout (3600 s since the last write): gone.
        assert_eq!(read(&s, "a", 1061 + 3599).len(), 2);
        assert!(read(&s, "a", 1061 + 3600).is_empty());
        assert_eq!((s.records(), s.bytes()), (0, 0));
        // So is its counter, whatever the write.
        apply(&s, "a", "hits", StoreOp::Add(1), 5000);
        assert_eq!(apply(&s, "a", "hits", StoreOp::Add(1), 9000), "1");
    }

    #[test]
    fn the_limit_holds_against_many_keys_and_one_growing_record() {
        let s = CollectionStore::new(StoreLimits {
            max_bytes: 64 << 10,
        });
        for i in 0..10_000u64 {
            apply(
                &s,
                &format!("10.0.{}.{}", i / 256, i % 256),
                "hits",
                StoreOp::Add(1),
                i,
            );
        }
        assert!(s.bytes() <= 64 << 10, "{} bytes", s.bytes());
        assert!(s.evicted() > 9_000, "{} evicted", s.evicted());
        // The most recent records are the ones kept, mostly.
        assert_eq!(read(&s, "10.0.39.15", 10_000).len(), 1);
        // One record cannot take more than its shard's share.
        let big = vec![b'x'; 1000];
        let mut refused = 0;
        for i in 0..100 {
            let mut out = Vec::new();
            let name = format!("v{i}");
            if !s.apply(
                &id("big"),
                name.as_bytes(),
                StoreOp::Set(&big),
                20_000,
                3600,
                &mut out,
            ) {
                refused += 1;
            }
        }
        assert!(refused > 90, "{refused} refused");
        assert_eq!(s.refused(), refused);
        assert!(s.bytes() <= 64 << 10);
    }

    #[test]
    fn a_smaller_limit_is_reached_as_records_are_written() {
        let s = CollectionStore::default();
        for i in 0..2_000 {
            apply(&s, &format!("k{i}"), "hits", StoreOp::Add(1), 1);
        }
        let full = s.bytes();
        assert!(full > 64 << 10, "{full}");
        s.set_limits(StoreLimits {
            max_bytes: 64 << 10,
        });
        assert_eq!(s.limits().max_bytes, 64 << 10);
        assert_eq!(s.bytes(), full, "nothing is evicted until a write");
        for i in 0..200 {
            apply(&s, &format!("new{i}"), "hits", StoreOp::Add(1), 2);
        }
        assert!(s.bytes() <= 64 << 10, "{}", s.bytes());
    }

    #[test]
    fn concurrent_increments_all_count() {
        let s = std::sync::Arc::new(CollectionStore::default());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        let mut out = Vec::new();
                        s.apply(&id("a"), b"n", StoreOp::Add(1), 1, 3600, &mut out);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        assert_eq!(read(&s, "a", 2), [("n".to_string(), "4000".to_string())]);
    }
}
