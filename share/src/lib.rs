//! Persistent collections (`initcol`, `rate_limit`) shared by several
//! processes through Redis: what `waf serve` and `waf spoa`
//! (`collection_redis`) and the nginx module (through the C ABI's
//! `waf_collections_share_redis`) run, each process with its own
//! [`CollectionStore`].
//!
//! Requests never wait for Redis: each process keeps reading and writing
//! its own store, which notes every write and marks every record read
//! (`CollectionStore::share`). Every [`INTERVAL`] a background thread sends
//! the writes to Redis (one Lua script per record, pipelined: increments
//! add up there whatever process made them) and brings back the shared
//! state of each record it wrote or read, on which the writes made since
//! are replayed (`CollectionStore::merge_remote`). So a counter holds what
//! every instance counted, give or take one interval, and a client blocked
//! by one instance (`setvar:ip.blocked=1`) is blocked by the others from
//! the request after their next exchange. When Redis cannot be reached the
//! writes are kept and sent once it can; meanwhile each instance goes on
//! with its own counts.
//!
//! In Redis, record `IP` under key `k` is the hash `waf:IP\0k`; variable
//! `n` is its field `v:n`, and its expiry (`expirevar`, a rate window) the
//! field `x:n` (epoch seconds; expired fields are dropped by the script).
//! The hash expires after the longest `SecCollectionTimeout` of the running
//! rules without a write.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use waf_engine::{CollectionStore, DeltaKind, RecordDelta};

/// How often writes are sent and shared state brought back.
pub const INTERVAL: Duration = Duration::from_millis(100);

/// Connecting, and each exchange's reads and writes, give up after this:
/// a Redis that hangs delays the next exchange, never a request.
const TIMEOUT: Duration = Duration::from_secs(2);

/// Records per pipelined round trip.
const BATCH: usize = 512;

/// Round trips per exchange: under a flood of new keys an exchange ends
/// (and the next starts an interval later) instead of running on.
const MAX_BATCHES: usize = 64;

/// The prefix of every key this writes.
const PREFIX: &[u8] = b"waf:";

/// A record's variables as Redis holds them: name, value, expiry (epoch
/// seconds, 0 for none).
type Vars = Vec<(Vec<u8>, Vec<u8>, u64)>;

/// The exchanges' counters (what `waf serve`'s `/metrics` shows as
/// `waf_collection_redis_*`).
#[derive(Debug)]
pub struct Stats {
    /// Exchanges that sent and brought back everything.
    pub ok: AtomicU64,
    /// Exchanges that failed (their writes kept for the next one).
    pub failed: AtomicU64,
    /// Records sent or brought back by the exchanges that succeeded.
    pub records: AtomicU64,
    /// Whether the last exchange succeeded (true until one fails).
    pub up: AtomicBool,
}

impl Default for Stats {
    fn default() -> Stats {
        Stats {
            ok: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            records: AtomicU64::new(0),
            up: AtomicBool::new(true),
        }
    }
}

/// KEYS[1]: the record's hash; ARGV: now, the hash's time to live, then
/// triples (op, variable, argument): `a` add, `s` set, `d` delete, `x`
/// expire at, `u` expire at unless an expiry is set. Returns the hash.
const SCRIPT: &str = r#"
local key = KEYS[1]
local now = tonumber(ARGV[1])
local h = redis.call('HGETALL', key)
for i = 1, #h, 2 do
  if string.sub(h[i], 1, 2) == 'x:' and tonumber(h[i + 1]) <= now then
    redis.call('HDEL', key, h[i], 'v:' .. string.sub(h[i], 3))
  end
end
for i = 3, #ARGV, 3 do
  local op, v, x, a = ARGV[i], 'v:' .. ARGV[i + 1], 'x:' .. ARGV[i + 1], ARGV[i + 2]
  if op == 'a' then
    local cur = redis.call('HGET', key, v)
    local n = cur and tonumber(string.match(cur, '^%s*([+-]?%d+)')) or 0
    redis.call('HSET', key, v, string.format('%.0f', n + tonumber(a)))
  elseif op == 's' then
    redis.call('HSET', key, v, a)
  elseif op == 'd' then
    redis.call('HDEL', key, v, x)
  elseif redis.call('HEXISTS', key, v) == 1 then
    if op == 'x' then
      redis.call('HSET', key, x, a)
    elseif op == 'u' then
      redis.call('HSETNX', key, x, a)
    end
  end
end
if #ARGV > 2 then
  redis.call('EXPIRE', key, tonumber(ARGV[2]))
end
return redis.call('HGETALL', key)
"#;

/// Whether `url` is a Redis URL this can connect to, with `ca` (a PEM
/// file of the roots a `rediss://` server's certificate must chain to;
/// the system's roots without it) readable (nothing is connected): what
/// is wrong if not.
pub fn check_url(url: &str, ca: Option<&Path>) -> Result<(), String> {
    client(url, ca).map(|_| ())
}

/// The client of `url` (with `ca`, see [`check_url`]), or what is wrong.
fn client(url: &str, ca: Option<&Path>) -> Result<redis::Client, String> {
    let wrong = |e: redis::RedisError| {
        format!(
            "{}: {e}; give redis://[user:password@]host[:port][/db], or rediss:// for TLS",
            redact(url)
        )
    };
    if url.starts_with("rediss://") {
        // redis-rs builds its rustls configuration with the process's
        // default provider: ring's (an error only says that one is
        // installed already).
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    let Some(ca) = ca else {
        return redis::Client::open(url).map_err(wrong);
    };
    if !url.starts_with("rediss://") {
        return Err(format!(
            "{}: a CA file is for TLS: give rediss://host[:port][/db]",
            redact(url)
        ));
    }
    use rustls::pki_types::pem::PemObject;
    let pem = std::fs::read(ca).map_err(|e| format!("CA file `{}`: {e}", ca.display()))?;
    let certificates = rustls::pki_types::CertificateDer::pem_slice_iter(&pem);
    if !certificates.into_iter().any(|c| c.is_ok()) {
        return Err(format!(
            "CA file `{}`: no CA certificate in it",
            ca.display()
        ));
    }
    let certificates = redis::TlsCertificates {
        client_tls: None,
        root_cert: Some(pem),
    };
    redis::Client::build_with_tls(url, certificates).map_err(wrong)
}

/// A store's link to Redis: one connection, made again after an error.
pub struct Link {
    client: redis::Client,
    url: String,
    conn: Mutex<Option<(redis::Connection, String)>>,
    store: Arc<CollectionStore>,
    stats: Arc<Stats>,
    /// Receives a line when Redis stops answering and when it answers
    /// again (`up` changing), and when the exchanges cannot start.
    log: Box<dyn Fn(String) + Send + Sync>,
}

impl Link {
    /// Checks `url` (`redis://[user:password@]host[:port][/db]`, or
    /// `rediss://` with `ca` or the system's roots) and makes `store`
    /// shared; nothing is connected yet. The exchanges count in `stats`
    /// and write their lines (`persistent collections: ...`) to `log`.
    pub fn new(
        url: &str,
        ca: Option<&Path>,
        store: Arc<CollectionStore>,
        stats: Arc<Stats>,
        log: impl Fn(String) + Send + Sync + 'static,
    ) -> Result<Link, String> {
        let client = client(url, ca)?;
        store.share();
        Ok(Link {
            client,
            url: redact(url),
            conn: Mutex::new(None),
            store,
            stats,
            log: Box::new(log),
        })
    }

    /// The store this shares.
    pub fn store(&self) -> &Arc<CollectionStore> {
        &self.store
    }

    /// The exchanges' counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Runs the exchanges every [`INTERVAL`] on a thread of its own until
    /// `stop` is set; `ttl` gives the hashes' time to live (the longest
    /// `SecCollectionTimeout` of the running rules).
    pub fn spawn(self: &Arc<Self>, stop: Arc<AtomicBool>, ttl: impl Fn() -> u64 + Send + 'static) {
        let link = self.clone();
        let spawned = std::thread::Builder::new()
            .name("waf-collections-redis".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(INTERVAL);
                    link.exchange(ttl());
                }
            });
        if let Err(e) = spawned {
            (self.log)(format!(
                "persistent collections: cannot start the Redis exchange: {e}"
            ));
        }
    }

    /// Sends the writes noted since the last exchange and brings back the
    /// shared state of what was written or read, [`BATCH`] records at a
    /// time and at most [`MAX_BATCHES`] batches (what is left goes with the
    /// next exchange); on failure keeps the writes for the next one. `ttl`:
    /// the hashes' time to live.
    pub fn exchange(&self, ttl: u64) {
        let store = &self.store;
        let now = waf_engine::epoch_secs();
        let mut sent = false;
        store.begin_exchange();
        for _ in 0..MAX_BATCHES {
            let batch: Vec<RecordDelta> = store.take_changes(now, BATCH);
            if batch.is_empty() {
                break;
            }
            sent = true;
            match self.send(&batch, now, ttl) {
                Ok(states) => {
                    for (d, vars) in batch.iter().zip(states) {
                        store.merge_remote(&d.id, vars, now);
                    }
                    let n = batch.len() as u64;
                    self.stats.records.fetch_add(n, Ordering::Relaxed);
                }
                Err(e) => {
                    self.stats.failed.fetch_add(1, Ordering::Relaxed);
                    for d in batch {
                        store.restore_changes(d);
                    }
                    if self.stats.up.swap(false, Ordering::Relaxed) {
                        (self.log)(format!(
                            "persistent collections: Redis at {}: {e}; each instance counts on its own until it answers (writes kept)",
                            self.url
                        ));
                    }
                    return;
                }
            }
        }
        if !sent {
            return;
        }
        self.stats.ok.fetch_add(1, Ordering::Relaxed);
        if !self.stats.up.swap(true, Ordering::Relaxed) {
            (self.log)(format!(
                "persistent collections: Redis at {} answers again; the writes kept were sent",
                self.url
            ));
        }
    }

    /// One pipelined round trip (two if Redis lost the script): each
    /// record's state after its writes.
    fn send(&self, batch: &[RecordDelta], now: u64, ttl: u64) -> Result<Vec<Vars>, String> {
        let mut guard = self.conn.lock().map_err(|_| "poisoned".to_string())?;
        let result = (|| -> redis::RedisResult<Vec<redis::Value>> {
            if guard.is_none() {
                let mut c = self.client.get_connection_with_timeout(TIMEOUT)?;
                c.set_read_timeout(Some(TIMEOUT))?;
                c.set_write_timeout(Some(TIMEOUT))?;
                let sha: String = redis::cmd("SCRIPT").arg("LOAD").arg(SCRIPT).query(&mut c)?;
                *guard = Some((c, sha));
            }
            let Some((c, sha)) = guard.as_mut() else {
                unreachable!("connected above")
            };
            match pipeline(batch, sha, now, ttl).query(c) {
                Err(e) if e.code() == Some("NOSCRIPT") => {
                    *sha = redis::cmd("SCRIPT").arg("LOAD").arg(SCRIPT).query(c)?;
                    pipeline(batch, sha, now, ttl).query(c)
                }
                other => other,
            }
        })();
        match result {
            Ok(values) if values.len() == batch.len() => {
                Ok(values.iter().map(|v| record_state(v, now)).collect())
            }
            Ok(values) => {
                *guard = None;
                Err(format!(
                    "{} answers to {} records",
                    values.len(),
                    batch.len()
                ))
            }
            Err(e) => {
                *guard = None;
                Err(e.to_string())
            }
        }
    }
}

/// The script's call for each record of `batch`.
fn pipeline(batch: &[RecordDelta], sha: &str, now: u64, ttl: u64) -> redis::Pipeline {
    let mut p = redis::pipe();
    for d in batch {
        let mut key = PREFIX.to_vec();
        key.extend_from_slice(&d.id);
        let cmd = p
            .cmd("EVALSHA")
            .arg(sha)
            .arg(1)
            .arg(key)
            .arg(now)
            .arg(ttl.max(1));
        for op in &d.ops {
            let name = &op.name[..];
            match &op.kind {
                DeltaKind::Add(by) => cmd.arg("a").arg(name).arg(*by),
                DeltaKind::Set(v) => cmd.arg("s").arg(name).arg(&v[..]),
                DeltaKind::Delete => cmd.arg("d").arg(name).arg(""),
                DeltaKind::Expire(at) => cmd.arg("x").arg(name).arg(*at),
                DeltaKind::ExpireIfUnset(at) => cmd.arg("u").arg(name).arg(*at),
            };
        }
    }
    p
}

/// A hash the script returned (field, value, ...) as the store's
/// variables: `v:` fields with their `x:` expiry; what is not so is left.
fn record_state(v: &redis::Value, now: u64) -> Vars {
    let redis::Value::Array(items) = v else {
        return Vec::new();
    };
    let bytes = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => Some(b.clone()),
        redis::Value::SimpleString(s) => Some(s.clone().into_bytes()),
        redis::Value::Int(i) => Some(i.to_string().into_bytes()),
        _ => None,
    };
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = items
        .chunks_exact(2)
        .filter_map(|kv| Some((bytes(&kv[0])?, bytes(&kv[1])?)))
        .collect();
    pairs
        .iter()
        .filter_map(|(f, value)| {
            let name = f.strip_prefix(b"v:")?;
            let expires = pairs
                .iter()
                .find(|(g, _)| g.strip_prefix(b"x:") == Some(name))
                .and_then(|(_, x)| std::str::from_utf8(x).ok()?.parse::<u64>().ok())
                .unwrap_or(0);
            (expires == 0 || now < expires).then(|| (name.to_vec(), value.clone(), expires))
        })
        .collect()
}

/// `url` without its password, for the log.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            let user = creds.split(':').next().unwrap_or("");
            format!("{}{user}:***{}", &url[..s + 3], &url[at..])
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_reads_as_variables_with_their_expiries() {
        let b = |s: &str| redis::Value::BulkString(s.as_bytes().to_vec());
        let v = redis::Value::Array(vec![
            b("v:hits"),
            b("12"),
            b("v:blocked"),
            b("1"),
            b("x:blocked"),
            b("1600"),
            b("v:gone"),
            b("x"),
            b("x:gone"),
            b("900"),
            b("junk"),
            b("1"),
        ]);
        let mut vars = record_state(&v, 1000);
        vars.sort();
        assert_eq!(
            vars,
            [
                (b"blocked".to_vec(), b"1".to_vec(), 1600),
                (b"hits".to_vec(), b"12".to_vec(), 0)
            ]
        );
        assert!(record_state(&redis::Value::Nil, 0).is_empty());
    }

    #[test]
    fn a_ca_file_goes_with_a_tls_url() {
        let dir = std::env::temp_dir().join(format!("waf-redis-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let junk = dir.join("junk.pem");
        std::fs::write(&junk, "not a certificate").expect("write");
        assert!(check_url("rediss://127.0.0.1:6380", None).is_ok());
        let plain = check_url("redis://u:secret@127.0.0.1:6379", Some(&junk));
        assert_eq!(
            plain,
            Err("redis://u:***@127.0.0.1:6379: a CA file is for TLS: give rediss://host[:port][/db]".into())
        );
        let missing = check_url("rediss://127.0.0.1:6380", Some(&dir.join("nowhere.pem")));
        assert!(missing.is_err_and(|e| e.starts_with("CA file ")));
        let bad = check_url("rediss://127.0.0.1:6380", Some(&junk));
        assert!(bad.is_err_and(|e| e.ends_with("no CA certificate in it")));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn passwords_stay_out_of_the_log() {
        assert_eq!(
            redact("redis://u:secret@10.0.0.1:6379/2"),
            "redis://u:***@10.0.0.1:6379/2"
        );
        assert_eq!(redact("redis://:secret@h"), "redis://:***@h");
        assert_eq!(redact("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
    }
}
