//! Upstreams: where requests go once the WAF lets them through. An upstream
//! is one or more servers of the same application; requests take them in
//! turn, and a server that cannot be reached is left out for a while.
//!
//! A WAF in front of an application that runs on several machines must not
//! make one of them a single point of failure, nor need a load balancer of
//! its own behind it. The policy is nginx's default one (weighted round
//! robin, `backup` servers, a server that fails to connect is not tried
//! for 10 s): a request goes to the next server when one refuses the
//! connection, its body too, held or streaming as long as no connection
//! read any of it, so a server going down costs no request.
//!
//! With a health check (see health.rs), a server that fails it is left out
//! too, until it passes again: what catches an application that still
//! accepts connections but answers errors, or one being drained for a
//! deploy.
//!
//! An application that keeps its sessions in each server's memory needs a
//! client's requests on one server: [`Balance::IpHash`] (nginx's
//! `ip_hash`) starts each client's walk of the schedule at a place its
//! address decides, rather than at the next turn. One whose requests
//! differ much in cost wants [`Balance::LeastConn`] (nginx's `least_conn`):
//! the server with the fewest requests in progress for its weight. Caches
//! and shards want [`Balance::Hash`] (nginx's `hash KEY consistent`): a
//! request's key (its URI, a header, the client's address) decides its
//! server on a consistent-hash ring, so that a server added or removed
//! moves only the keys it takes or gave, not most of them.

use crate::filter::{Key, RequestView};
use crate::health::{HealthCheck, ServerHealth};
use crate::metrics::ServerStats;
use hyper::Uri;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// How long a server that could not be reached is left out.
pub(crate) const DOWN_FOR: Duration = Duration::from_secs(10);

/// The most servers an upstream may have (the servers a request has tried
/// are a bit set).
pub(crate) const MAX_SERVERS: usize = 64;

/// An upstream: its servers, the next in turn, and when each may be tried
/// again after a failure.
pub(crate) struct Upstream {
    /// Its name in the manifest (`default` for `--upstream`): logs, metrics.
    pub(crate) name: Arc<str>,
    servers: Vec<Endpoint>,
    /// The order requests take the servers in, each server as many times
    /// as its weight, spread out (nginx's smooth weighted round robin, run
    /// once here): primary servers, then backups, which only take requests
    /// no primary can.
    schedule: Vec<u8>,
    backup_schedule: Vec<u8>,
    next: AtomicUsize,
    balance: Balance,
    /// With [`Balance::Hash`]: the primary servers' points on the ring,
    /// sorted (see [`ring`]).
    ring: Vec<(u32, u8)>,
    /// Per server: its weight, and whether it is a backup.
    weights: Vec<u32>,
    backups: Vec<bool>,
    /// Per server: requests in progress (sent, their response not yet
    /// passed on whole); shared with each request's [`Active`].
    active: Arc<[AtomicUsize]>,
    /// Per server: milliseconds since [`epoch`] before which it is not
    /// tried (0: up).
    down_until: Vec<AtomicU64>,
    /// The health check, if any, and each server's result of it (shared
    /// with `/metrics`, which must not keep the upstream alive).
    pub(crate) check: Option<HealthCheck>,
    pub(crate) health: Arc<[ServerHealth]>,
    /// Per server: its counters on `/metrics`, given by
    /// `Metrics::register_upstreams` before the upstream is put in force.
    stats: Vec<OnceLock<Arc<ServerStats>>>,
}

/// One server of an upstream.
pub(crate) struct Endpoint {
    /// The URL as written, for the logs.
    pub(crate) url: std::sync::Arc<str>,
    /// `http://` or `https://` and the host: what the upstream client is
    /// asked for (`h2c://` is `http://` spoken as HTTP/2, `h2://` is
    /// `https://`).
    scheme_authority: String,
    prefix: String,
    /// Spoken to in HTTP/2 (`h2c://`, `h2://`): gRPC, and applications
    /// that want one multiplexed connection.
    pub(crate) http2: bool,
}

impl Endpoint {
    fn new(uri: &Uri) -> Result<Endpoint, String> {
        let (scheme, http2) = match uri.scheme_str() {
            Some("http") => ("http", false),
            Some("https") => ("https", false),
            Some("h2c") => ("http", true),
            Some("h2") => ("https", true),
            _ => {
                return Err(format!(
                    "`{uri}`: upstreams are http:// or https:// (HTTP/1.1), h2c:// or h2:// (HTTP/2, plain or TLS)"
                ))
            }
        };
        let authority = uri
            .authority()
            .ok_or_else(|| format!("`{uri}` has no host"))?;
        Ok(Endpoint {
            url: uri.to_string().into(),
            scheme_authority: format!("{scheme}://{authority}"),
            prefix: uri.path().trim_end_matches('/').to_string(),
            http2,
        })
    }

    /// The upstream URI for a request target (path and query); `None` for
    /// a target that is not a path (`OPTIONS *`), which would otherwise be
    /// read as part of the server's authority (`http://10.0.0.7:8080*`): a
    /// bad request, not a server that cannot be reached.
    pub(crate) fn uri(&self, path_and_query: &str) -> Option<Uri> {
        if !path_and_query.starts_with('/') {
            return None;
        }
        let uri = format!("{}{}{}", self.scheme_authority, self.prefix, path_and_query);
        uri.parse::<Uri>().ok()
    }
}

/// The instant the down times count from.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_ms() -> u64 {
    epoch().elapsed().as_millis() as u64
}

/// A request in progress on an upstream server (see [`Upstream::begin`]).
pub(crate) struct Active {
    active: Arc<[AtomicUsize]>,
    i: usize,
}

impl Drop for Active {
    fn drop(&mut self) {
        if let Some(a) = self.active.get(self.i) {
            a.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// How an upstream chooses a request's server among those up.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum Balance {
    /// Each in turn, as often as its weight (nginx's default).
    #[default]
    RoundRobin,
    /// The same server for a client's requests while the servers stay the
    /// same and it is up and healthy (then the next in turn, as a retry
    /// goes), as nginx's `ip_hash`: the key is an IPv4 address's first
    /// three bytes (the clients of one /24 share a server) or a whole IPv6
    /// address. Weights still count: a server of weight 3 takes three
    /// times the clients of one of weight 1. Not consistent hashing: a
    /// server added or removed moves most clients.
    IpHash,
    /// The server with the fewest requests in progress for its weight
    /// (ties in turn), as nginx's `least_conn`: a request is in progress
    /// from the moment it is sent until its response has been passed on
    /// whole (or the client left); a protocol switch (WebSocket) counts
    /// until the switch.
    LeastConn,
    /// The same server for every request with the same key (a filter
    /// field: `http.request.uri`, `http.request.headers["x-user-id"]`,
    /// `ip.src`), as nginx's `hash KEY consistent`: the server of the
    /// first point at or after the key's hash on a ring where each
    /// primary has points in proportion to its weight. A server added,
    /// removed, down or failing its health check moves only its own keys
    /// (to the next server on the ring); the others stay where they are,
    /// which is what an upstream of caches or shards needs.
    Hash(Key),
}

impl Balance {
    /// `round_robin`, `ip_hash`, `least_conn` or `hash KEY`, as the
    /// manifest names them.
    pub(crate) fn parse(name: &str) -> Result<Balance, String> {
        let name = name.trim();
        match name.split_once(char::is_whitespace) {
            Some(("hash", key)) => {
                return Key::parse(key.trim()).map(Balance::Hash).map_err(|e| {
                    format!("`{name}`: the key (`{}`): {}", key.trim(), e.message)
                })
            }
            _ if name == "hash" => {
                return Err(
                    "`hash` needs a key, a filter field: `hash http.request.uri`, `hash http.request.headers[\"x-user-id\"]`, `hash ip.src`".into(),
                )
            }
            _ => {}
        }
        match name {
            "round_robin" => Ok(Balance::RoundRobin),
            "ip_hash" => Ok(Balance::IpHash),
            "least_conn" => Ok(Balance::LeastConn),
            _ => Err(format!(
                "`{name}`: an upstream balances by `round_robin` (the default), `ip_hash`, `least_conn` or `hash KEY`"
            )),
        }
    }
}

/// A hash of `parts` (FNV-1a, then mixed) that is the same in every
/// process and build, so that a restart or a second instance behind the
/// same load balancer sends a client or a key to the same server.
fn stable_hash(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in parts.iter().flat_map(|p| p.iter()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    // MurmurHash3's finalizer: FNV alone leaves the last byte's effect in
    // the low bits, and a schedule of four took every /24 of 10.0.0.0/16
    // to one place.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

/// Where in the schedule a client's requests start (see
/// [`Balance::IpHash`]): the hash of an IPv4 address's first three bytes
/// or a whole IPv6 address.
fn client_turn(client: std::net::IpAddr) -> u64 {
    match crate::net::canonical(client) {
        std::net::IpAddr::V4(a) => stable_hash(&[&a.octets()[..3]]),
        std::net::IpAddr::V6(a) => stable_hash(&[&a.octets()]),
    }
}

/// Points on the ring per unit of weight (nginx's `hash ... consistent`
/// uses 160): enough that servers of equal weight take shares within a
/// few per cent of each other.
const RING_POINTS_PER_WEIGHT: u32 = 160;

/// The most points a ring has (64 servers of weight 100 would make a
/// million): above it, each server's points are scaled down together.
const RING_POINTS_MAX: u32 = 160 * 256;

/// The consistent-hash ring of [`Balance::Hash`] over the primary servers
/// (index, weight, URL): each gets points in proportion to its weight, at
/// hashes of its URL and the point's number, so that a server's points
/// depend on nothing but itself (the others coming or going leaves them
/// where they are). Sorted by point, ties by server.
fn ring(servers: &[(usize, u32, &str)]) -> Vec<(u32, u8)> {
    let total: u32 = servers.iter().map(|&(_, w, _)| w).sum();
    let per_weight = RING_POINTS_PER_WEIGHT.min(RING_POINTS_MAX / total.max(1));
    let mut points = Vec::new();
    for &(i, w, url) in servers {
        for k in 0..(w * per_weight).max(1) {
            let h = stable_hash(&[url.as_bytes(), b"#", &k.to_le_bytes()]);
            // At most MAX_SERVERS (64) servers: an index fits a byte.
            points.push(((h >> 32) as u32, i as u8));
        }
    }
    points.sort_unstable();
    points
}

/// The largest weight a server may have.
pub(crate) const MAX_WEIGHT: u32 = 100;

/// A server as an upstream lists it: its URL, and how it shares the load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ServerSpec {
    pub uri: Uri,
    /// Requests it takes per round, relative to the others.
    pub weight: u32,
    /// Only takes requests no primary server can (all down or failing
    /// their health checks).
    pub backup: bool,
}

impl ServerSpec {
    /// A server of weight 1.
    pub(crate) fn plain(uri: Uri) -> ServerSpec {
        ServerSpec {
            uri,
            weight: 1,
            backup: false,
        }
    }

    /// `URL [weight=N] [backup]`, as nginx's `server` lists them.
    pub(crate) fn parse(text: &str) -> Result<ServerSpec, String> {
        let mut words = text.split_whitespace();
        let url = words.next().ok_or("an empty server: give its URL")?;
        let uri = url.parse::<Uri>().map_err(|e| format!("`{url}`: {e}"))?;
        let mut spec = ServerSpec::plain(uri);
        for w in words {
            match w.split_once('=') {
                Some(("weight", n)) => {
                    spec.weight = n
                        .parse::<u32>()
                        .ok()
                        .filter(|n| (1..=MAX_WEIGHT).contains(n))
                        .ok_or_else(|| {
                            format!("`{w}`: a weight is a whole number from 1 to {MAX_WEIGHT}")
                        })?;
                }
                None if w == "backup" => spec.backup = true,
                _ => {
                    return Err(format!(
                        "`{w}` after `{url}`: a server takes `weight=N` and `backup`"
                    ))
                }
            }
        }
        Ok(spec)
    }
}

/// Smooth weighted round robin over `servers` (index, weight): each
/// server as often as its weight, and as evenly spread as can be (weights
/// 5, 1, 1 give a a b a c a a, not a a a a a b c).
fn schedule(servers: &[(usize, u32)]) -> Vec<u8> {
    let total: i64 = servers.iter().map(|&(_, w)| i64::from(w)).sum();
    let mut current = vec![0i64; servers.len()];
    let mut out = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    for _ in 0..total {
        for (c, &(_, w)) in current.iter_mut().zip(servers) {
            *c += i64::from(w);
        }
        let Some(best) = (0..servers.len()).max_by_key(|&k| (current[k], std::cmp::Reverse(k)))
        else {
            break;
        };
        current[best] -= total;
        // At most MAX_SERVERS (64) servers: an index fits a byte.
        out.push(servers[best].0 as u8);
    }
    out
}

impl Upstream {
    /// An upstream of one server, unchecked.
    pub(crate) fn new(name: &str, uri: &Uri) -> Result<Upstream, String> {
        Self::of(name, &[ServerSpec::plain(uri.clone())], None)
    }

    /// An upstream of these servers (at least one primary, at most
    /// [`MAX_SERVERS`] in all), health-checked if `check` is given.
    pub(crate) fn of(
        name: &str,
        specs: &[ServerSpec],
        check: Option<HealthCheck>,
    ) -> Result<Upstream, String> {
        if specs.is_empty() {
            return Err("give at least one server URL".into());
        }
        if specs.len() > MAX_SERVERS {
            return Err(format!(
                "{} servers: an upstream has at most {MAX_SERVERS}",
                specs.len()
            ));
        }
        if specs.iter().all(|s| s.backup) {
            return Err("every server is a backup: name at least one that is not".into());
        }
        let servers = specs
            .iter()
            .map(|s| Endpoint::new(&s.uri))
            .collect::<Result<Vec<_>, _>>()?;
        let of_kind = |backup: bool| {
            let listed: Vec<(usize, u32)> = specs
                .iter()
                .enumerate()
                .filter(|(_, s)| s.backup == backup)
                .map(|(i, s)| (i, s.weight))
                .collect();
            schedule(&listed)
        };
        Ok(Upstream {
            schedule: of_kind(false),
            backup_schedule: of_kind(true),
            name: name.into(),
            down_until: servers.iter().map(|_| AtomicU64::new(0)).collect(),
            health: servers.iter().map(|_| ServerHealth::new()).collect(),
            stats: servers.iter().map(|_| OnceLock::new()).collect(),
            weights: specs.iter().map(|s| s.weight).collect(),
            backups: specs.iter().map(|s| s.backup).collect(),
            active: servers.iter().map(|_| AtomicUsize::new(0)).collect(),
            servers,
            next: AtomicUsize::new(0),
            balance: Balance::RoundRobin,
            ring: Vec::new(),
            check,
        })
    }

    /// The servers' counts of requests in progress (for `/metrics`, which
    /// must not keep the upstream alive).
    pub(crate) fn in_progress(&self) -> Arc<[AtomicUsize]> {
        Arc::clone(&self.active)
    }

    /// Counts a request sent to server `i` as in progress until the guard
    /// is dropped.
    pub(crate) fn begin(&self, i: usize) -> Active {
        if let Some(a) = self.active.get(i) {
            a.fetch_add(1, Ordering::Relaxed);
        }
        Active {
            active: Arc::clone(&self.active),
            i,
        }
    }

    /// With [`Balance::LeastConn`]: among the servers not `tried`, up and
    /// healthy (primaries first, then backups), the one with the fewest
    /// requests in progress for its weight; ties go to the first from
    /// `turn` on, so that idle servers share requests in turn.
    fn least_loaded(&self, tried: u64, turn: usize, now: u64) -> Option<usize> {
        let n = self.servers.len();
        for backup in [false, true] {
            let mut best: Option<(usize, u64)> = None;
            for k in 0..n {
                let i = (turn % n + k) % n;
                if self.backups[i] != backup || !self.available(i, tried, now) {
                    continue;
                }
                let load = self.active[i].load(Ordering::Relaxed) as u64;
                // load / weight < best load / best weight, in integers.
                let lighter = best.is_none_or(|(b, bl)| {
                    load * u64::from(self.weights[b]) < bl * u64::from(self.weights[i])
                });
                if lighter {
                    best = Some((i, load));
                }
            }
            if let Some((i, _)) = best {
                return Some(i);
            }
        }
        None
    }

    /// Whether server `i` may take a request that has tried `tried`: not
    /// tried, not left out, passing its health check.
    fn available(&self, i: usize, tried: u64, now: u64) -> bool {
        tried & (1 << i) == 0
            && self.down_until[i].load(Ordering::Relaxed) <= now
            && self.health[i].healthy()
    }

    /// With [`Balance::Hash`]: the first server available on the ring
    /// from the key's point on, if a primary is.
    fn on_ring(&self, tried: u64, key: u64, now: u64) -> Option<usize> {
        let len = self.ring.len();
        let at = (key >> 32) as u32;
        let start = self.ring.partition_point(|&(p, _)| p < at);
        let primaries = self
            .backups
            .iter()
            .enumerate()
            .filter(|(_, &b)| !b)
            .fold(0u64, |m, (i, _)| m | 1 << i);
        let mut seen = 0u64;
        for k in 0..len {
            let i = usize::from(self.ring[(start + k) % len].1);
            if seen & (1 << i) != 0 {
                continue;
            }
            if self.available(i, tried, now) {
                return Some(i);
            }
            seen |= 1 << i;
            if seen == primaries {
                break;
            }
        }
        None
    }

    /// The upstream choosing servers by `balance`.
    pub(crate) fn with_balance(mut self, balance: Balance) -> Upstream {
        self.ring = match balance {
            Balance::Hash(_) => {
                let primaries: Vec<(usize, u32, &str)> = (0..self.servers.len())
                    .filter(|&i| !self.backups[i])
                    .map(|i| (i, self.weights[i], &*self.servers[i].url))
                    .collect();
                ring(&primaries)
            }
            _ => Vec::new(),
        };
        self.balance = balance;
        self
    }

    /// What [`Upstream::pick`] needs of a request to choose as the
    /// balance says: the hash of its client's address
    /// ([`Balance::IpHash`]) or of its key ([`Balance::Hash`]); 0 when the
    /// choice does not depend on the request.
    pub(crate) fn key(&self, r: &RequestView<'_>) -> u64 {
        match &self.balance {
            Balance::IpHash => client_turn(r.src),
            Balance::Hash(k) => k.with_value(r, |v| stable_hash(&[v])),
            Balance::RoundRobin | Balance::LeastConn => 0,
        }
    }

    /// Server `i`'s counters, once registered.
    pub(crate) fn stats(&self, i: usize) -> Option<&ServerStats> {
        self.stats.get(i).and_then(OnceLock::get).map(|s| &**s)
    }

    /// Gives server `i` its counters (the first call only counts).
    pub(crate) fn set_stats(&self, i: usize, stats: Arc<ServerStats>) {
        if let Some(slot) = self.stats.get(i) {
            let _ = slot.set(stats);
        }
    }

    /// The servers, in the order given.
    pub(crate) fn servers(&self) -> &[Endpoint] {
        &self.servers
    }

    /// Takes what `old` (the running upstream of the same name, on a
    /// reload) knows of the servers both have: their health and how long
    /// they are left out. A server known to be failing stays out, and
    /// one known healthy is not checked back in from scratch.
    pub(crate) fn adopt_state(&self, old: &Upstream) {
        if old.name != self.name {
            return;
        }
        for (i, s) in self.servers.iter().enumerate() {
            if let Some(j) = old.servers.iter().position(|o| o.url == s.url) {
                self.health[i].adopt(&old.health[j]);
                let until = old.down_until[j].load(Ordering::Relaxed);
                self.down_until[i].store(until, Ordering::Relaxed);
            }
        }
    }

    /// Whether a request may try another server than those in `tried`.
    pub(crate) fn untried(&self, tried: u64) -> bool {
        (tried.count_ones() as usize) < self.servers.len()
    }

    /// Whether there is more than one server to choose from.
    pub(crate) fn several(&self) -> bool {
        self.servers.len() > 1
    }

    /// The server a request tries next, not one of `tried` (a bit per
    /// server) if it can: the next one in turn (from the client's place
    /// with [`Balance::IpHash`], the key's point on the ring with
    /// [`Balance::Hash`]: `key` is the request's [`Upstream::key`]) that
    /// is up and passes its health check; else the next that is up (every
    /// server failing its check: the check may be what is wrong, and
    /// trying is better than refusing); else the one back soonest.
    pub(crate) fn pick(&self, tried: u64, key: u64) -> (usize, &Endpoint) {
        if self.servers.len() == 1 {
            return (0, &self.servers[0]);
        }
        let turn = match self.balance {
            Balance::RoundRobin | Balance::LeastConn => self.next.fetch_add(1, Ordering::Relaxed),
            Balance::IpHash | Balance::Hash(_) => key as usize,
        };
        let now = now_ms();
        let first = match self.balance {
            Balance::LeastConn => self.least_loaded(tried, turn, now),
            Balance::Hash(_) => self.on_ring(tried, key, now),
            Balance::RoundRobin | Balance::IpHash => None,
        };
        if let Some(i) = first {
            return (i, &self.servers[i]);
        }
        let mut up_unhealthy: Option<usize> = None;
        let mut soonest: Option<(usize, u64)> = None;
        // Primaries first; backups only when no primary is up and healthy.
        for schedule in [&self.schedule, &self.backup_schedule] {
            let len = schedule.len();
            for k in 0..len {
                let i = usize::from(schedule[(turn % len + k) % len]);
                if tried & (1 << i) != 0 {
                    continue;
                }
                let until = self.down_until[i].load(Ordering::Relaxed);
                if until <= now {
                    if self.health[i].healthy() {
                        return (i, &self.servers[i]);
                    }
                    up_unhealthy.get_or_insert(i);
                } else if soonest.is_none_or(|(_, u)| until < u) {
                    soonest = Some((i, until));
                }
            }
        }
        let i = up_unhealthy
            .or(soonest.map(|(i, _)| i))
            .unwrap_or_else(|| usize::from(self.schedule[turn % self.schedule.len()]));
        (i, &self.servers[i])
    }

    /// Leaves server `i` out for [`DOWN_FOR`].
    pub(crate) fn mark_down(&self, i: usize) {
        if let Some(d) = self.down_until.get(i) {
            d.store(now_ms() + DOWN_FOR.as_millis() as u64, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request's key, for round-robin picks (which ignore it).
    const ANY: u64 = 0;

    fn upstream(urls: &[&str]) -> Upstream {
        let specs: Vec<ServerSpec> = urls
            .iter()
            .map(|u| ServerSpec::parse(u).unwrap_or_else(|e| panic!("{e}")))
            .collect();
        Upstream::of("app", &specs, None).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn servers_take_requests_in_turn() {
        let u = upstream(&["http://a:1", "http://b:1", "http://c:1"]);
        let picked: Vec<usize> = (0..6).map(|_| u.pick(0, ANY).0).collect();
        assert_eq!(picked, [0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn a_server_down_is_skipped_until_its_time_is_up() {
        let u = upstream(&["http://a:1", "http://b:1", "http://c:1"]);
        u.mark_down(1);
        let picked: Vec<usize> = (0..6).map(|_| u.pick(0, ANY).0).collect();
        assert_eq!(picked, [0, 2, 2, 0, 2, 2]);
        // Its time is up: back in turn.
        u.down_until[1].store(0, Ordering::Relaxed);
        assert!((0..3).any(|_| u.pick(0, ANY).0 == 1));
    }

    #[test]
    fn a_server_failing_its_checks_is_skipped_unless_all_are() {
        let check = HealthCheck {
            fails: 1,
            ..HealthCheck::new("/healthz".into())
        };
        let u = upstream(&["http://a:1", "http://b:1", "http://c:1"]);
        assert_eq!(u.health[2].record(false, &check), Some(false));
        let picked: Vec<usize> = (0..6).map(|_| u.pick(0, ANY).0).collect();
        assert_eq!(picked, [0, 1, 0, 0, 1, 0]);
        // Every server up failing: the next one up in turn, not refused.
        u.health[0].record(false, &check);
        u.mark_down(1);
        assert_eq!(u.pick(0, ANY).0, 0);
        u.health[1].record(false, &check);
        assert!((0..3).all(|_| u.pick(0, ANY).0 != 1), "down beats failing");
        // A reload keeps what was known of the servers it keeps.
        let specs: Vec<ServerSpec> = ["http://c:1", "http://b:1", "http://d:1"]
            .iter()
            .filter_map(|u| ServerSpec::parse(u).ok())
            .collect();
        let again = Upstream::of("app", &specs, None).unwrap_or_else(|e| panic!("{e}"));
        again.adopt_state(&u);
        assert!(!again.health[0].healthy() && !again.health[1].healthy());
        assert!(again.health[2].healthy());
        assert_ne!(again.down_until[1].load(Ordering::Relaxed), 0);
        let other = Upstream::of("other", &specs, None).unwrap_or_else(|e| panic!("{e}"));
        other.adopt_state(&u);
        assert!(
            other.health[0].healthy(),
            "another upstream's servers are its own"
        );
    }

    #[test]
    fn a_retry_takes_a_server_not_tried_and_all_down_still_picks_one() {
        let u = upstream(&["http://a:1", "http://b:1"]);
        let (first, _) = u.pick(0, ANY);
        let (second, _) = u.pick(1 << first, ANY);
        assert_ne!(first, second);
        assert!(!u.untried((1 << first) | (1 << second)));
        u.mark_down(0);
        u.mark_down(1);
        // Both down: the one back soonest (server 0, marked first).
        u.down_until[1].store(u64::MAX, Ordering::Relaxed);
        assert_eq!(u.pick(0, ANY).0, 0);
    }

    #[test]
    fn weights_spread_requests_and_backups_wait_for_the_primaries() {
        let u = upstream(&["http://a:1 weight=5", "http://b:1", "http://c:1"]);
        let picked: Vec<usize> = (0..7).map(|_| u.pick(0, ANY).0).collect();
        assert_eq!(picked, [0, 0, 1, 0, 2, 0, 0]);
        let u = upstream(&["http://a:1", "http://b:1 weight=2", "http://z:1 backup"]);
        let picked: Vec<usize> = (0..6).map(|_| u.pick(0, ANY).0).collect();
        assert!(picked.iter().all(|&i| i != 2), "{picked:?}");
        assert_eq!(picked.iter().filter(|&&i| i == 1).count(), 4, "{picked:?}");
        // The primaries down: the backup; one back: it again.
        u.mark_down(0);
        u.mark_down(1);
        assert!((0..4).all(|_| u.pick(0, ANY).0 == 2));
        u.down_until[1].store(0, Ordering::Relaxed);
        assert!((0..4).all(|_| u.pick(0, ANY).0 == 1));
        // A retry after the primary failed goes to the backup.
        assert_eq!(u.pick(1 << 1, ANY).0, 2);
    }

    #[test]
    fn ip_hash_keeps_a_clients_server_and_shares_clients_by_weight() {
        let u = upstream(&["http://a:1 weight=3", "http://b:1", "http://c:1 backup"])
            .with_balance(Balance::IpHash);
        let ip = |a: u8, b: u8, c: u8, d: u8| client_turn(std::net::IpAddr::from([a, b, c, d]));
        // A client keeps its server, and so does the rest of its /24.
        let first = u.pick(0, ip(203, 0, 113, 7)).0;
        assert!((0..10).all(|_| u.pick(0, ip(203, 0, 113, 7)).0 == first));
        assert!((0..=255).all(|d| u.pick(0, ip(203, 0, 113, d)).0 == first));
        // 400 /24s: about 3 to 1, the backup idle.
        let mut counts = [0usize; 3];
        for n in 0..400u32 {
            counts[u.pick(0, ip(10, (n >> 8) as u8, n as u8, 1)).0] += 1;
        }
        assert_eq!(counts[2], 0, "{counts:?}");
        assert!(
            counts[0] > 2 * counts[1] && counts[1] > 50,
            "weight 3 against 1: {counts:?}"
        );
        // Its server down: the other primary, every time; back up: its own.
        u.mark_down(first);
        let other = u.pick(0, ip(203, 0, 113, 7)).0;
        assert!(other != first && other != 2);
        assert!((0..4).all(|_| u.pick(0, ip(203, 0, 113, 7)).0 == other));
        u.down_until[first].store(0, Ordering::Relaxed);
        assert_eq!(u.pick(0, ip(203, 0, 113, 7)).0, first);
        // A retry goes on from the client's place to the next server.
        assert_ne!(u.pick(1 << first, ip(203, 0, 113, 7)).0, first);
        // IPv6: the whole address, the same server every time.
        let v6 = client_turn("2001:db8::1".parse().expect("address"));
        let s = u.pick(0, v6).0;
        assert!((0..4).all(|_| u.pick(0, v6).0 == s));
        // A retry goes elsewhere, whatever the client.
        for d in 0..=255 {
            let client = ip(192, 0, d, 1);
            let first = u.pick(0, client).0;
            assert_ne!(u.pick(1 << first, client).0, first);
        }
        // Round robin, the default, ignores the client.
        let rr = upstream(&["http://a:1", "http://b:1"]);
        let picked: Vec<usize> = (0..4).map(|_| rr.pick(0, ip(203, 0, 113, 7)).0).collect();
        assert_eq!(picked, [0, 1, 0, 1]);
    }

    #[test]
    fn least_conn_picks_the_server_with_the_fewest_requests_for_its_weight() {
        let u = upstream(&["http://a:1 weight=2", "http://b:1", "http://c:1 backup"])
            .with_balance(Balance::LeastConn);
        // Idle: in turn, never the backup.
        let picked: Vec<usize> = (0..4).map(|_| u.pick(0, ANY).0).collect();
        assert!(picked.contains(&0) && picked.contains(&1), "{picked:?}");
        assert!(!picked.contains(&2), "{picked:?}");
        // Two in progress on a (weight 2), none on b: b.
        let held = [u.begin(0), u.begin(0)];
        assert!((0..4).all(|_| u.pick(0, ANY).0 == 1));
        // One on b too: 2/2 against 1/1, a tie, shared in turn; a second
        // on b: a (2/2 < 2/1).
        let b1 = u.begin(1);
        let picked: Vec<usize> = (0..4).map(|_| u.pick(0, ANY).0).collect();
        assert!(picked.contains(&0) && picked.contains(&1), "{picked:?}");
        let b2 = u.begin(1);
        assert!((0..4).all(|_| u.pick(0, ANY).0 == 0));
        // Finished requests count no more.
        drop((held, b1, b2));
        let total: usize = u.active.iter().map(|a| a.load(Ordering::Relaxed)).sum();
        assert_eq!(total, 0);
        // Servers not to be used are skipped: a retry, one down; all
        // primaries down: the backup.
        assert_eq!(u.pick(1 << 0, ANY).0, 1);
        u.mark_down(1);
        assert!((0..3).all(|_| u.pick(0, ANY).0 == 0));
        u.mark_down(0);
        assert_eq!(u.pick(0, ANY).0, 2);
    }

    #[test]
    fn balance_names() {
        assert_eq!(Balance::parse("ip_hash"), Ok(Balance::IpHash));
        assert_eq!(Balance::parse("round_robin"), Ok(Balance::RoundRobin));
        assert_eq!(Balance::parse("least_conn"), Ok(Balance::LeastConn));
        let e = Balance::parse("random").expect_err("not offered");
        assert!(
            e.contains("`round_robin` (the default), `ip_hash`, `least_conn` or `hash KEY`"),
            "{e}"
        );
        for key in [
            "http.request.uri",
            "http.request.uri.path",
            "http.request.headers[\"X-User-Id\"]",
            "ip.src",
        ] {
            match Balance::parse(&format!(" hash  {key} ")) {
                Ok(Balance::Hash(k)) => assert_eq!(k.source(), key),
                other => panic!("{key}: {other:?}"),
            }
        }
        for (bad, want) in [
            ("hash", "needs a key"),
            ("hash   ", "needs a key"),
            ("hash http.hots", "unknown field `http.hots`"),
            (
                "hash tcp.dstport",
                "is an integer: a key is a bytes field or `ip.src`",
            ),
            ("hash ssl", "is a boolean"),
            (
                "hash http.host eq \"a\"",
                "syntax error: expected one field",
            ),
            ("hash http.request.headers", "needs a header name"),
        ] {
            let e = Balance::parse(bad).expect_err(bad);
            assert!(e.contains(want), "{bad}: {e}");
        }
    }

    /// An upstream balancing by `hash http.request.uri`.
    fn hashed(urls: &[&str]) -> Upstream {
        let key = Balance::parse("hash http.request.uri").unwrap_or_else(|e| panic!("{e}"));
        upstream(urls).with_balance(key)
    }

    /// The URL of the server `u` picks for key `k` with nothing tried.
    fn url_for(u: &Upstream, k: u32) -> Arc<str> {
        let key = stable_hash(&[format!("/item/{k}").as_bytes()]);
        u.pick(0, key).1.url.clone()
    }

    #[test]
    fn hash_keeps_a_keys_server_and_shares_keys_by_weight() {
        let u = hashed(&["http://a:1 weight=3", "http://b:1", "http://c:1 backup"]);
        let mut counts = std::collections::HashMap::<Arc<str>, usize>::new();
        for k in 0..4000 {
            let url = url_for(&u, k);
            assert!((0..3).all(|_| url_for(&u, k) == url), "key {k} moved");
            *counts.entry(url).or_default() += 1;
        }
        let (a, b) = (counts["http://a:1/"], counts["http://b:1/"]);
        assert!(
            !counts.contains_key("http://c:1/"),
            "the backup idle: {counts:?}"
        );
        // 3 to 1, within a few per cent.
        assert!((2.6..3.4).contains(&(a as f64 / b as f64)), "{counts:?}");
        // Equal weights, equal shares.
        let u = hashed(&["http://a:1", "http://b:1", "http://c:1", "http://d:1"]);
        let mut counts = std::collections::HashMap::<Arc<str>, usize>::new();
        for k in 0..8000 {
            *counts.entry(url_for(&u, k)).or_default() += 1;
        }
        assert_eq!(counts.len(), 4);
        assert!(
            counts.values().all(|&n| (1600..2400).contains(&n)),
            "{counts:?}"
        );
    }

    #[test]
    fn hash_moves_only_the_keys_of_a_server_added_removed_or_down() {
        let four = ["http://a:1", "http://b:1", "http://c:1", "http://d:1"];
        let before = hashed(&four);
        let was: Vec<Arc<str>> = (0..4000).map(|k| url_for(&before, k)).collect();
        // c removed: its keys spread over the others, no other key moves.
        let three = hashed(&["http://a:1", "http://b:1", "http://d:1"]);
        let mut taken = std::collections::HashSet::new();
        for (k, old) in (0..4000).zip(&was) {
            let now = url_for(&three, k);
            if &**old == "http://c:1/" {
                taken.insert(now);
            } else {
                assert_eq!(&now, old, "key {k} moved though its server stayed");
            }
        }
        assert_eq!(taken.len(), 3, "c's keys go to every other server");
        // e added: the keys that move all go to e, about a fifth of them.
        let five = hashed(&[
            "http://a:1",
            "http://b:1",
            "http://c:1",
            "http://d:1",
            "http://e:1",
        ]);
        let mut moved = 0;
        for (k, old) in (0..4000).zip(&was) {
            let now = url_for(&five, k);
            if &now != old {
                assert_eq!(&*now, "http://e:1/", "key {k} moved elsewhere than to e");
                moved += 1;
            }
        }
        assert!((600..1000).contains(&moved), "{moved} of 4000 moved");
        // b down: as if removed; back: every key where it was.
        before.mark_down(1);
        for (k, old) in (0..4000).zip(&was) {
            let now = url_for(&before, k);
            assert_ne!(&*now, "http://b:1/");
            if &**old != "http://b:1/" {
                assert_eq!(&now, old, "key {k}");
            }
        }
        before.down_until[1].store(0, Ordering::Relaxed);
        assert!((0..4000)
            .zip(&was)
            .all(|(k, old)| &url_for(&before, k) == old));
    }

    #[test]
    fn hash_retries_go_on_along_the_ring_and_backups_wait() {
        let u = hashed(&["http://a:1", "http://b:1", "http://z:1 backup"]);
        for k in 0..200u32 {
            let key = stable_hash(&[format!("/item/{k}").as_bytes()]);
            let (first, _) = u.pick(0, key);
            let (second, _) = u.pick(1 << first, key);
            assert!(
                second != first && second != 2,
                "key {k}: {first} then {second}"
            );
            // Both primaries tried: the backup.
            assert_eq!(u.pick((1 << first) | (1 << second), key).0, 2);
        }
        // The primaries down: the backup takes every key.
        u.mark_down(0);
        u.mark_down(1);
        assert!((0..100).all(|k| &*url_for(&u, k) == "http://z:1/"));
        // A big upstream's ring is bounded, and every server is on it.
        let urls: Vec<String> = (0..64)
            .map(|i| format!("http://s{i}:1 weight=100"))
            .collect();
        let big = hashed(&urls.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(
            big.ring.len() <= RING_POINTS_MAX as usize,
            "{}",
            big.ring.len()
        );
        let on: std::collections::HashSet<u8> = big.ring.iter().map(|p| p.1).collect();
        assert_eq!(on.len(), 64);
    }

    #[test]
    fn the_key_is_the_fields_value() {
        fn view<'a>(src: &str, uri: &'a str, headers: &'a hyper::HeaderMap) -> RequestView<'a> {
            RequestView {
                host: b"shop.example",
                method: b"GET",
                uri: uri.as_bytes(),
                version: b"HTTP/1.1",
                headers,
                src: src.parse().expect("address"),
                dst_port: 8080,
                tls: false,
            }
        }
        let mut headers = hyper::HeaderMap::new();
        headers.insert("x-user-id", hyper::header::HeaderValue::from_static("u42"));
        let headers = &headers;
        let by = |key: &str| {
            let b = Balance::parse(&format!("hash {key}")).unwrap_or_else(|e| panic!("{e}"));
            upstream(&["http://a:1", "http://b:1"]).with_balance(b)
        };
        let uri = by("http.request.uri");
        let r = view("192.0.2.1", "/a?b=1", headers);
        assert_eq!(uri.key(&r), stable_hash(&[b"/a?b=1"]));
        let path = by("http.request.uri.path");
        assert_eq!(path.key(&r), stable_hash(&[b"/a"]));
        let user = by("http.request.headers[\"X-User-Id\"]");
        assert_eq!(user.key(&r), stable_hash(&[b"u42"]));
        let src = by("ip.src");
        assert_eq!(src.key(&r), stable_hash(&[&[192, 0, 2, 1]]));
        // An IPv4-mapped address is its IPv4 address, with ip_hash too.
        let mapped = view("::ffff:192.0.2.1", "/", headers);
        assert_eq!(src.key(&mapped), src.key(&r));
        let ip = upstream(&["http://a:1", "http://b:1"]).with_balance(Balance::IpHash);
        assert_eq!(ip.key(&mapped), ip.key(&r));
        // Round robin reads nothing of the request.
        assert_eq!(upstream(&["http://a:1", "http://b:1"]).key(&r), 0);
    }

    #[test]
    fn server_specs_are_checked() {
        let s =
            ServerSpec::parse("  http://a:1   weight=3 backup ").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (s.weight, s.backup, s.uri.to_string()),
            (3, true, "http://a:1/".to_string())
        );
        for (bad, want) in [
            ("", "an empty server"),
            (
                "http://a:1 weight=0",
                "a weight is a whole number from 1 to 100",
            ),
            ("http://a:1 weight=101", "from 1 to 100"),
            ("http://a:1 weight=x", "from 1 to 100"),
            (
                "http://a:1 down",
                "`down` after `http://a:1`: a server takes `weight=N` and `backup`",
            ),
            ("http://a b:1", "after"),
        ] {
            let e = ServerSpec::parse(bad).err().unwrap_or_default();
            assert!(e.contains(want), "{bad:?}: {e}");
        }
        let all_backups =
            [ServerSpec::parse("http://a:1 backup").unwrap_or_else(|e| panic!("{e}"))];
        let e = Upstream::of("app", &all_backups, None)
            .err()
            .unwrap_or_default();
        assert!(e.contains("every server is a backup"), "{e}");
    }

    #[test]
    fn urls_are_checked() {
        assert!(Upstream::of("app", &[], None).is_err());
        let ftp: Uri = "ftp://a:1".parse().unwrap_or_default();
        let e = Upstream::new("app", &ftp).err().unwrap_or_default();
        assert!(e.contains("h2c://"), "{e}");
        let h2c: Uri = "h2c://a:50051/api/".parse().unwrap_or_default();
        let u = Upstream::new("app", &h2c).unwrap_or_else(|e| panic!("{e}"));
        let (_, e) = u.pick(0, ANY);
        assert!(e.http2);
        let uri = e.uri("/x?y").map(|u| u.to_string()).unwrap_or_default();
        assert_eq!(uri, "http://a:50051/api/x?y");
        // Not a path: no URI (the server's authority stays its own).
        for target in ["*", "", "x", "@evil.example/"] {
            assert_eq!(e.uri(target), None, "{target}");
        }
    }
}
