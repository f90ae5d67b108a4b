//! Counters of the proxy, served in Prometheus' text format on the admin
//! address (`/metrics`), with `/healthz`.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Upper bounds of the WAF-time histogram buckets, in microseconds.
const BUCKETS_US: Buckets = [
    10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000,
];

/// Upper bounds of the upstream-time histogram buckets, in microseconds
/// (1 ms to 30 s: an application's answer, not the engine's work).
const UPSTREAM_BUCKETS_US: Buckets = [
    1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000,
    5_000_000, 10_000_000, 30_000_000,
];

type Buckets = [u64; 14];

/// A Prometheus histogram with fixed buckets (given to `observe` and
/// `render`, the same each time), updated with atomics.
#[derive(Default, Debug)]
pub(crate) struct Histogram {
    /// Observations at or under each bound (not cumulative; summed when
    /// rendered), then the ones over every bound.
    counts: [AtomicU64; BUCKETS_US.len() + 1],
    sum_ns: AtomicU64,
}

impl Histogram {
    fn observe(&self, d: Duration, bounds: &Buckets) {
        let us = d.as_micros();
        let i = bounds
            .iter()
            .position(|&b| us <= u128::from(b))
            .unwrap_or(bounds.len());
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(
            u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    fn render(&self, s: &mut String, name: &str, labels: &str, bounds: &Buckets) {
        let mut cumulative = 0;
        for (i, bound) in bounds.iter().enumerate() {
            cumulative += self.counts[i].load(Ordering::Relaxed);
            let le = *bound as f64 / 1e6;
            let _ = writeln!(s, "{name}_bucket{{{labels},le=\"{le}\"}} {cumulative}");
        }
        cumulative += self.counts[bounds.len()].load(Ordering::Relaxed);
        let _ = writeln!(s, "{name}_bucket{{{labels},le=\"+Inf\"}} {cumulative}");
        let sum = self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
        let _ = writeln!(s, "{name}_sum{{{labels}}} {sum}");
        let _ = writeln!(s, "{name}_count{{{labels}}} {cumulative}");
    }
}

/// Responses by status class, 1xx to 5xx (anything else counts as 5xx).
#[derive(Debug, Default)]
struct StatusClasses([AtomicU64; 5]);

impl StatusClasses {
    fn record(&self, status: u16) {
        let class = usize::from(status / 100).clamp(1, 5) - 1;
        self.0[class].fetch_add(1, Ordering::Relaxed);
    }

    /// `{name}{labels,code="2xx"} n`, a line per class.
    fn render(&self, s: &mut String, name: &str, labels: &str) {
        for (i, c) in self.0.iter().enumerate() {
            let n = c.load(Ordering::Relaxed);
            let _ = writeln!(s, "{name}{{{labels},code=\"{}xx\"}} {n}", i + 1);
        }
    }
}

/// One upstream server's counters: requests sent to it, its answers by
/// status class, the requests it did not answer (connection refused or
/// reset, timeout), and the time to its response headers. Shared by the
/// upstreams that name the server through reloads (see
/// [`Metrics::register_upstreams`]), so the counters only grow.
#[derive(Debug, Default)]
pub(crate) struct ServerStats {
    requests: AtomicU64,
    by_class: StatusClasses,
    failures: AtomicU64,
    time: Histogram,
}

impl ServerStats {
    /// The server answered with `status` after `took`.
    pub(crate) fn answered(&self, status: u16, took: Duration) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.by_class.record(status);
        self.time.observe(took, &UPSTREAM_BUCKETS_US);
    }

    /// The server did not answer.
    pub(crate) fn failed(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.failures.fetch_add(1, Ordering::Relaxed);
    }
}

/// Which counter of a server a `/metrics` line shows.
type ServerCounter = fn(&ServerStats) -> &AtomicU64;

/// Which value of a health-checked server a `/metrics` line shows.
type HealthValue = fn(&crate::health::ServerHealth) -> u64;

/// A server of a running upstream on `/metrics`.
struct ServerEntry {
    upstream: Arc<str>,
    url: Arc<str>,
    /// `upstream="...",server="..."`, made once.
    labels: String,
    stats: Arc<ServerStats>,
    /// Its upstream's health checks' standing, and its index there, when
    /// the upstream is checked.
    health: Option<(Arc<[crate::health::ServerHealth]>, usize)>,
    /// Its upstream's counts of requests in progress, and its index there.
    in_progress: (Arc<[std::sync::atomic::AtomicUsize]>, usize),
}

/// The log writers' counters, for [`Metrics::render`].
#[derive(Clone, Copy, Debug, Default)]
pub struct LogCounts {
    /// Error-log lines dropped because the writer fell behind.
    pub error_dropped: u64,
    /// Responses that did not wait for their error-log lines.
    pub error_late: u64,
    /// Audit-log records dropped.
    pub audit_dropped: u64,
    /// Access-log lines dropped.
    pub access_dropped: u64,
}

/// Shards of [`EngineCounts`]: more than the worker threads of most
/// machines; two threads that share one only contend on it.
const SHARDS: usize = 16;

/// The engine's counters ([`waf_engine::EvalStats`]) summed over the
/// finished transactions, in shards a cache line pair each: a thread adds
/// to the shard it was given on first use, so the workers' per-request
/// additions (a dozen counters) do not bounce one line between the cores
/// as a single set of atomics would. `/metrics` sums the shards.
#[derive(Default)]
struct EngineCounts {
    shards: [Shard; SHARDS],
}

#[derive(Default)]
#[repr(align(128))]
struct Shard([AtomicU64; crate::profile::STAT_FIELDS]);

impl EngineCounts {
    fn add(&self, stats: &waf_engine::EvalStats) {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        thread_local! {
            static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
        }
        let shard = &self.shards[SHARD.with(|s| *s)];
        let mut stats = *stats;
        for (c, (_, v)) in shard.0.iter().zip(crate::profile::stat_fields(&mut stats)) {
            if *v != 0 {
                c.fetch_add(*v, Ordering::Relaxed);
            }
        }
    }

    fn total(&self) -> waf_engine::EvalStats {
        let mut total = waf_engine::EvalStats::default();
        for shard in &self.shards {
            for (c, (_, v)) in shard.0.iter().zip(crate::profile::stat_fields(&mut total)) {
                *v += c.load(Ordering::Relaxed);
            }
        }
        total
    }
}

/// What the proxy counts. Cheap to update from every request: atomics, and
/// one short lock per intervention.
#[derive(Default)]
pub struct Metrics {
    requests: AtomicU64,
    /// The engine's counters over the finished transactions.
    engine: EngineCounts,
    /// (rule id, status) → interventions.
    interventions: Mutex<BTreeMap<(u64, u16), u64>>,
    upstream_errors: AtomicU64,
    upstream_servers_down: AtomicU64,
    upstream_servers_unhealthy: AtomicU64,
    request_body_bytes: AtomicU64,
    reloads: AtomicU64,
    /// Whether the last reload was refused (the running rules are older
    /// than the files), and when rules were last loaded (at start or by a
    /// reload), in milliseconds since the epoch: what an alert on stale
    /// rules needs, now that file changes reload by themselves.
    last_reload_failed: AtomicBool,
    loaded_at_ms: AtomicU64,
    reload_failures: AtomicU64,
    /// WAF time per phase (1 to 5).
    phase_time: [Histogram; 5],
    over_budget: AtomicU64,
    engine_failures: AtomicU64,
    failed_open: AtomicU64,
    no_site: AtomicU64,
    malformed: AtomicU64,
    header_timeouts: AtomicU64,
    tls_handshake_failures: AtomicU64,
    proxy_protocol_failures: AtomicU64,
    /// Client connections open now.
    connections_open: AtomicU64,
    /// Response bodies phase 4 could not read (see encoding.rs).
    responses_not_decoded: AtomicU64,
    /// Protocol switches (WebSocket...) joined into tunnels, and how many
    /// are open now (see upgrade.rs).
    tunnels: AtomicU64,
    tunnels_open: AtomicU64,
    /// Tunnels closed because nothing passed for the idle timeout.
    tunnels_idle: AtomicU64,
    /// Bytes tunnels carried, client to application and back, counted as
    /// each tunnel closes.
    tunnel_bytes: [AtomicU64; 2],
    /// Body bytes held in memory by all requests (see budget.rs), and the
    /// requests refused because theirs did not fit.
    held_body_bytes: AtomicU64,
    body_budget_exceeded: AtomicU64,
    /// Set once a shutdown has begun: `/healthz` answers 503 from then on,
    /// so that a load balancer stops sending new clients.
    draining: AtomicBool,
    /// (custom rule, action) → requests.
    custom: Mutex<BTreeMap<(String, &'static str), u64>>,
    /// Per-rule counters, with profiling on.
    profile: Mutex<Option<crate::profile::Aggregate>>,
    /// The running sites' counters (replaced on reload; a site that keeps
    /// its name keeps its counters, see [`SiteCounts::adopt`]).
    sites: Mutex<Vec<Arc<SiteCounts>>>,
    /// Every server of the running upstreams, in order.
    servers: Mutex<Vec<ServerEntry>>,
}

/// A label value as the Prometheus text format writes it (`\\`, `"` and
/// newlines escaped): names come from the manifest.
fn label_value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Which counter of a site a `/metrics` line shows.
type SiteCounter = fn(&SiteCounts) -> &AtomicU64;

/// One site's counters: requests, those the WAF answered itself (a rule's
/// intervention or a custom rule's block), and responses by status class.
/// Updated with atomics only, from the request's access note.
#[derive(Debug, Default)]
pub(crate) struct SiteCounts {
    pub(crate) name: Arc<str>,
    requests: AtomicU64,
    blocked: AtomicU64,
    by_class: StatusClasses,
}

impl SiteCounts {
    pub(crate) fn new(name: &str) -> Arc<SiteCounts> {
        Arc::new(SiteCounts {
            name: name.into(),
            ..SiteCounts::default()
        })
    }

    /// One request answered with `status` (0: no response, not counted by
    /// class), by the WAF itself when `blocked`.
    pub(crate) fn record(&self, status: u16, blocked: bool) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        if blocked {
            self.blocked.fetch_add(1, Ordering::Relaxed);
        }
        if status >= 100 {
            self.by_class.record(status);
        }
    }

    /// The counters of the site of the same name in `old`, if any, else
    /// these: a reload does not reset a site's counters.
    pub(crate) fn adopt(self: &Arc<Self>, old: &[Arc<SiteCounts>]) -> Arc<SiteCounts> {
        old.iter()
            .find(|o| o.name == self.name)
            .cloned()
            .unwrap_or_else(|| self.clone())
    }
}

impl Metrics {
    pub(crate) fn request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters of the sites now running.
    pub(crate) fn set_sites(&self, sites: Vec<Arc<SiteCounts>>) {
        if let Ok(mut s) = self.sites.lock() {
            *s = sites;
        }
    }

    /// The counters of the sites now running (for a reload to adopt).
    pub(crate) fn sites(&self) -> Vec<Arc<SiteCounts>> {
        self.sites.lock().map(|s| s.clone()).unwrap_or_default()
    }

    pub(crate) fn intervention(&self, rule_id: u64, status: u16) {
        if let Ok(mut m) = self.interventions.lock() {
            *m.entry((rule_id, status)).or_default() += 1;
        }
    }

    pub(crate) fn upstream_error(&self) {
        self.upstream_errors.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn upstream_server_down(&self) {
        self.upstream_servers_down.fetch_add(1, Ordering::Relaxed);
    }

    /// A server failed its health checks and was left out.
    pub(crate) fn upstream_server_unhealthy(&self) {
        self.upstream_servers_unhealthy
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Gives each server of `upstreams` (about to be put in force) its
    /// counters: those a server of the same upstream name and URL had, else
    /// new ones; the servers no longer named are dropped from `/metrics`.
    pub(crate) fn register_upstreams(&self, upstreams: &[Arc<crate::upstream::Upstream>]) {
        let Ok(mut known) = self.servers.lock() else {
            return;
        };
        let mut next: Vec<ServerEntry> = Vec::new();
        for u in upstreams {
            for (i, server) in u.servers().iter().enumerate() {
                let same = |e: &&ServerEntry| e.upstream == u.name && e.url == server.url;
                if next.iter().any(|e| same(&e)) {
                    continue;
                }
                let stats = match known.iter().find(same) {
                    Some(e) => e.stats.clone(),
                    None => Arc::new(ServerStats::default()),
                };
                u.set_stats(i, stats.clone());
                next.push(ServerEntry {
                    upstream: u.name.clone(),
                    url: server.url.clone(),
                    labels: format!(
                        "upstream=\"{}\",server=\"{}\"",
                        label_value(&u.name),
                        label_value(&server.url)
                    ),
                    stats,
                    health: u.check.is_some().then(|| (u.health.clone(), i)),
                    in_progress: (u.in_progress(), i),
                });
            }
        }
        *known = next;
    }

    pub(crate) fn body_bytes(&self, n: usize) {
        self.request_body_bytes
            .fetch_add(n as u64, Ordering::Relaxed);
    }

    pub(crate) fn phase_time(&self, phase: u8, d: Duration) {
        if let Some(h) = self.phase_time.get(usize::from(phase).wrapping_sub(1)) {
            h.observe(d, &BUCKETS_US);
        }
    }

    pub(crate) fn over_budget(&self) {
        self.over_budget.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn engine_failure(&self) {
        self.engine_failures.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn failed_open(&self) {
        self.failed_open.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn malformed(&self) {
        self.malformed.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn header_timeout(&self) {
        self.header_timeouts.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn tls_handshake_failure(&self) {
        self.tls_handshake_failures.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn proxy_protocol_failure(&self) {
        self.proxy_protocol_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a client connection as open until the returned guard drops
    /// (however its task ends: closed, failed or cancelled).
    pub(crate) fn connection_open(self: &Arc<Self>) -> OpenConnection {
        self.connections_open.fetch_add(1, Ordering::Relaxed);
        OpenConnection(self.clone())
    }

    /// Counts a tunnel (a protocol switch) as open, and as a client
    /// connection, until the returned guard drops.
    pub(crate) fn tunnel_open(self: &Arc<Self>) -> OpenTunnel {
        self.tunnels.fetch_add(1, Ordering::Relaxed);
        self.tunnels_open.fetch_add(1, Ordering::Relaxed);
        OpenTunnel(self.connection_open())
    }

    /// A tunnel closed: how, and the bytes it carried each way.
    pub(crate) fn tunnel_closed(&self, idle: bool, to_upstream: u64, to_client: u64) {
        if idle {
            self.tunnels_idle.fetch_add(1, Ordering::Relaxed);
        }
        self.tunnel_bytes[0].fetch_add(to_upstream, Ordering::Relaxed);
        self.tunnel_bytes[1].fetch_add(to_client, Ordering::Relaxed);
    }

    /// Tunnels open now.
    pub fn tunnels_open(&self) -> u64 {
        self.tunnels_open.load(Ordering::Relaxed)
    }

    /// Adds `n` to the body bytes held unless that passes `limit`; counts
    /// a refusal.
    pub(crate) fn hold_body_bytes(&self, n: u64, limit: u64) -> bool {
        let fits = self
            .held_body_bytes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                held.checked_add(n).filter(|&h| h <= limit)
            })
            .is_ok();
        if !fits {
            self.body_budget_exceeded.fetch_add(1, Ordering::Relaxed);
        }
        fits
    }

    pub(crate) fn release_body_bytes(&self, n: u64) {
        self.held_body_bytes.fetch_sub(n, Ordering::Relaxed);
    }

    /// Body bytes held in memory now, by all requests.
    pub fn held_body_bytes(&self) -> u64 {
        self.held_body_bytes.load(Ordering::Relaxed)
    }

    /// Requests refused (503) because the bodies held had reached the budget.
    pub fn body_budget_exceeded(&self) -> u64 {
        self.body_budget_exceeded.load(Ordering::Relaxed)
    }

    pub(crate) fn response_not_decoded(&self) {
        self.responses_not_decoded.fetch_add(1, Ordering::Relaxed);
    }

    /// Client connections open now.
    pub fn connections_open(&self) -> u64 {
        self.connections_open.load(Ordering::Relaxed)
    }

    pub(crate) fn set_draining(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    /// Whether a shutdown has begun.
    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    pub(crate) fn no_site(&self) {
        self.no_site.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn custom(&self, rule: &str, action: &'static str) {
        if let Ok(mut m) = self.custom.lock() {
            match m.get_mut(&(rule.to_string(), action)) {
                Some(n) => *n += 1,
                None => {
                    m.insert((rule.to_string(), action), 1);
                }
            }
        }
    }

    /// Adds a finished transaction's engine counters.
    pub(crate) fn engine(&self, tx: &waf_engine::Transaction<'_>) {
        self.engine.add(&tx.stats());
    }

    /// The engine's counters summed over the finished transactions.
    pub fn engine_stats(&self) -> waf_engine::EvalStats {
        self.engine.total()
    }

    /// Adds a finished transaction's rule profile (profiling on).
    pub(crate) fn profile(&self, tx: &waf_engine::Transaction<'_>) {
        if let Ok(mut p) = self.profile.lock() {
            p.get_or_insert_with(Default::default).add(tx);
        }
    }

    /// Requests whose WAF time went over the budget.
    pub fn over_budget_count(&self) -> u64 {
        self.over_budget.load(Ordering::Relaxed)
    }

    /// Requests let through unchecked (`on_error: open`).
    pub fn failed_open_count(&self) -> u64 {
        self.failed_open.load(Ordering::Relaxed)
    }

    /// Counts a reload and its outcome.
    pub fn reload(&self, ok: bool) {
        self.reloads.fetch_add(1, Ordering::Relaxed);
        self.last_reload_failed.store(!ok, Ordering::Relaxed);
        if ok {
            self.rules_loaded();
        } else {
            self.reload_failures.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Notes that rules were loaded now (at start; reloads call it too).
    pub(crate) fn rules_loaded(&self) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        self.loaded_at_ms.store(now, Ordering::Relaxed);
    }

    /// Requests handled so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// The Prometheus text exposition of every counter.
    pub fn render(&self, logs: LogCounts) -> String {
        let mut s = String::new();
        let mut counter = |name: &str, help: &str, value: u64| {
            let _ = writeln!(
                s,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
            );
        };
        counter("waf_requests_total", "Requests received.", self.requests());
        counter(
            "waf_memory_trims_total",
            "Times the memory freed by a reload (or by the start's compilation) was given back to the system.",
            crate::memory::trims(),
        );
        let store = crate::rules::collection_store();
        counter(
            "waf_collection_evictions_total",
            "Persistent-collection records evicted to keep the store within its memory limit.",
            store.evicted(),
        );
        counter(
            "waf_collection_refused_writes_total",
            "Writes to a persistent collection refused: their record would have outgrown its share of the limit.",
            store.refused(),
        );
        if let Some(redis) = crate::shared_collections::stats() {
            counter(
                "waf_collection_redis_exchanges_total",
                "Exchanges of the persistent collections with Redis that succeeded (collection_redis).",
                redis.ok.load(Ordering::Relaxed),
            );
            counter(
                "waf_collection_redis_failures_total",
                "Exchanges with Redis that failed; their writes were kept for the next one.",
                redis.failed.load(Ordering::Relaxed),
            );
            counter(
                "waf_collection_redis_records_total",
                "Records sent to Redis or brought back from it by the exchanges that succeeded.",
                redis.records.load(Ordering::Relaxed),
            );
        }
        counter(
            "waf_upstream_errors_total",
            "Requests the upstream did not answer (502/504).",
            self.upstream_errors.load(Ordering::Relaxed),
        );
        counter(
            "waf_upstream_servers_down_total",
            "Times a server of an upstream could not be reached and was left out for a while.",
            self.upstream_servers_down.load(Ordering::Relaxed),
        );
        counter(
            "waf_upstream_servers_unhealthy_total",
            "Times a server of an upstream failed its health checks and was left out.",
            self.upstream_servers_unhealthy.load(Ordering::Relaxed),
        );
        counter(
            "waf_request_body_bytes_total",
            "Request body bytes received.",
            self.request_body_bytes.load(Ordering::Relaxed),
        );
        counter(
            "waf_reloads_total",
            "Rule reloads attempted.",
            self.reloads.load(Ordering::Relaxed),
        );
        counter(
            "waf_reload_failures_total",
            "Rule reloads refused (the rules did not compile).",
            self.reload_failures.load(Ordering::Relaxed),
        );
        counter(
            "waf_error_log_dropped_total",
            "Error-log lines dropped because the writer fell behind.",
            logs.error_dropped,
        );
        counter(
            "waf_error_log_late_total",
            "Responses sent before their error-log lines were written (the writer was behind).",
            logs.error_late,
        );
        counter(
            "waf_audit_log_dropped_total",
            "Audit-log records dropped because the writer fell behind.",
            logs.audit_dropped,
        );
        counter(
            "waf_access_log_dropped_total",
            "Access-log lines dropped because the writer fell behind.",
            logs.access_dropped,
        );
        counter(
            "waf_over_budget_total",
            "Requests whose WAF time went over the time budget.",
            self.over_budget.load(Ordering::Relaxed),
        );
        counter(
            "waf_engine_failures_total",
            "Requests on which the engine failed (a bug: reported, never silent).",
            self.engine_failures.load(Ordering::Relaxed),
        );
        counter(
            "waf_failed_open_total",
            "Requests let through without (complete) inspection under on_error: open.",
            self.failed_open.load(Ordering::Relaxed),
        );
        counter(
            "waf_malformed_requests_total",
            "Requests refused as malformed (400): by hyper before the WAF saw them (414 and 431 for a target or a head too large), for their host (none, several, or not a host), or for a request body whose framing is broken; and 501s for a transfer coding other than chunked.",
            self.malformed.load(Ordering::Relaxed),
        );
        counter(
            "waf_header_timeouts_total",
            "Connections closed because request headers did not arrive in time.",
            self.header_timeouts.load(Ordering::Relaxed),
        );
        counter(
            "waf_tls_handshake_failures_total",
            "TLS handshakes that failed or timed out.",
            self.tls_handshake_failures.load(Ordering::Relaxed),
        );
        counter(
            "waf_proxy_protocol_failures_total",
            "Connections to a proxy_protocol listener closed because their PROXY header was malformed, too long, truncated or too slow (a connection closed before its first byte is not counted).",
            self.proxy_protocol_failures.load(Ordering::Relaxed),
        );
        counter(
            "waf_response_bodies_not_decoded_total",
            "Response bodies of an inspected type sent uninspected: a coding other than gzip/deflate, or one that did not decode.",
            self.responses_not_decoded.load(Ordering::Relaxed),
        );
        counter(
            "waf_tunnels_total",
            "Protocol switches (101, e.g. WebSocket) whose connections were joined, uninspected after the handshake.",
            self.tunnels.load(Ordering::Relaxed),
        );
        counter(
            "waf_tunnels_idle_closed_total",
            "Tunnels closed because nothing passed either way for the idle timeout.",
            self.tunnels_idle.load(Ordering::Relaxed),
        );
        counter(
            "waf_body_budget_exceeded_total",
            "Requests answered 503 because the bodies held in memory by all requests had reached max_held_bodies.",
            self.body_budget_exceeded(),
        );
        counter(
            "waf_no_site_total",
            "Requests no site of the manifest takes (404).",
            self.no_site.load(Ordering::Relaxed),
        );
        let _ = writeln!(
            s,
            "# HELP waf_connections_open Client connections open.\n# TYPE waf_connections_open gauge\nwaf_connections_open {}",
            self.connections_open()
        );
        let _ = writeln!(
            s,
            "# HELP waf_tunnel_bytes_total Bytes carried by closed tunnels, by direction.\n# TYPE waf_tunnel_bytes_total counter"
        );
        for (direction, n) in ["to_upstream", "to_client"].iter().zip(&self.tunnel_bytes) {
            let _ = writeln!(
                s,
                "waf_tunnel_bytes_total{{direction=\"{direction}\"}} {}",
                n.load(Ordering::Relaxed)
            );
        }
        let _ = writeln!(
            s,
            "# HELP waf_tunnels_open Tunnels (protocol switches) open; counted in waf_connections_open too.\n# TYPE waf_tunnels_open gauge\nwaf_tunnels_open {}",
            self.tunnels_open()
        );
        let _ = writeln!(
            s,
            "# HELP waf_collection_records Records of persistent collections (IP, SESSION, ...) held.\n# TYPE waf_collection_records gauge\nwaf_collection_records {}\n# HELP waf_collection_bytes Bytes the persistent collections hold, as counted against their limit.\n# TYPE waf_collection_bytes gauge\nwaf_collection_bytes {}",
            store.records(),
            store.bytes()
        );
        if let Some(redis) = crate::shared_collections::stats() {
            let _ = writeln!(
                s,
                "# HELP waf_collection_redis_up Whether the last exchange with Redis succeeded.\n# TYPE waf_collection_redis_up gauge\nwaf_collection_redis_up {}",
                u8::from(redis.up.load(Ordering::Relaxed))
            );
        }
        let _ = writeln!(
            s,
            "# HELP waf_held_body_bytes Request and response body bytes held in memory until their phase allows them.\n# TYPE waf_held_body_bytes gauge\nwaf_held_body_bytes {}",
            self.held_body_bytes()
        );
        let _ = writeln!(
            s,
            "# HELP waf_last_reload_successful 0 when the last reload was refused: the rules running are not the files'.\n# TYPE waf_last_reload_successful gauge\nwaf_last_reload_successful {}",
            u8::from(!self.last_reload_failed.load(Ordering::Relaxed))
        );
        let _ = writeln!(
            s,
            "# HELP waf_rules_loaded_timestamp_seconds When the running rules were loaded (at start or by the last successful reload).\n# TYPE waf_rules_loaded_timestamp_seconds gauge\nwaf_rules_loaded_timestamp_seconds {}",
            self.loaded_at_ms.load(Ordering::Relaxed) as f64 / 1e3
        );
        let _ = writeln!(
            s,
            "# HELP waf_draining 1 once a shutdown has begun (no new connections; open ones finish).\n# TYPE waf_draining gauge\nwaf_draining {}",
            u8::from(self.draining())
        );
        let _ = writeln!(
            s,
            "# HELP waf_interventions_total Interventions by rule and status.\n# TYPE waf_interventions_total counter"
        );
        if let Ok(m) = self.interventions.lock() {
            for ((rule, status), n) in m.iter() {
                let _ = writeln!(
                    s,
                    "waf_interventions_total{{rule_id=\"{rule}\",status=\"{status}\"}} {n}"
                );
            }
        }
        let _ = writeln!(
            s,
            "# HELP waf_custom_rule_actions_total Requests a manifest custom rule acted on.\n# TYPE waf_custom_rule_actions_total counter"
        );
        if let Ok(m) = self.custom.lock() {
            for ((rule, action), n) in m.iter() {
                let _ = writeln!(
                    s,
                    "waf_custom_rule_actions_total{{rule=\"{}\",action=\"{action}\"}} {n}",
                    label_value(rule)
                );
            }
        }
        if let Ok(sites) = self.sites.lock() {
            let per_site: [(&str, &str, SiteCounter); 2] = [
                ("waf_site_requests_total", "Requests by site.", |c| &c.requests),
                (
                    "waf_site_blocked_total",
                    "Requests of a site the WAF answered itself (a rule's intervention, a custom rule's block).",
                    |c| &c.blocked,
                ),
            ];
            for (name, help, counter) in per_site {
                let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} counter");
                for site in sites.iter() {
                    let n = counter(site).load(Ordering::Relaxed);
                    let _ = writeln!(s, "{name}{{site=\"{}\"}} {n}", label_value(&site.name));
                }
            }
            let _ = writeln!(
                s,
                "# HELP waf_site_responses_total Responses of a site by status class.\n# TYPE waf_site_responses_total counter"
            );
            for site in sites.iter() {
                let labels = format!("site=\"{}\"", label_value(&site.name));
                site.by_class
                    .render(&mut s, "waf_site_responses_total", &labels);
            }
        }
        if let Ok(servers) = self.servers.lock() {
            let per_server: [(&str, &str, ServerCounter); 2] = [
                (
                    "waf_upstream_requests_total",
                    "Requests sent to a server of an upstream (each attempt).",
                    |c| &c.requests,
                ),
                (
                    "waf_upstream_failures_total",
                    "Requests a server did not answer (connection failed or reset, timeout).",
                    |c| &c.failures,
                ),
            ];
            for (name, help, counter) in per_server {
                let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} counter");
                for e in servers.iter() {
                    let n = counter(&e.stats).load(Ordering::Relaxed);
                    let _ = writeln!(s, "{name}{{{}}} {n}", e.labels);
                }
            }
            let _ = writeln!(
                s,
                "# HELP waf_upstream_responses_total Answers of a server of an upstream by status class.\n# TYPE waf_upstream_responses_total counter"
            );
            for e in servers.iter() {
                e.stats
                    .by_class
                    .render(&mut s, "waf_upstream_responses_total", &e.labels);
            }
            let _ = writeln!(
                s,
                "# HELP waf_upstream_response_seconds Time from sending a request to a server to its response headers.\n# TYPE waf_upstream_response_seconds histogram"
            );
            for e in servers.iter() {
                e.stats.time.render(
                    &mut s,
                    "waf_upstream_response_seconds",
                    &e.labels,
                    &UPSTREAM_BUCKETS_US,
                );
            }
            let _ = writeln!(
                s,
                "# HELP waf_upstream_requests_in_progress Requests sent to a server whose response is not yet passed on whole (what least_conn compares).\n# TYPE waf_upstream_requests_in_progress gauge"
            );
            for e in servers.iter() {
                let (counts, i) = &e.in_progress;
                let n = counts.get(*i).map_or(0, |c| c.load(Ordering::Relaxed));
                let _ = writeln!(s, "waf_upstream_requests_in_progress{{{}}} {n}", e.labels);
            }
            let per_checked: [(&str, &str, &str, HealthValue); 2] = [
                (
                    "waf_upstream_server_healthy",
                    "Whether a server of a health-checked upstream passes its checks (1) or is left out (0).",
                    "gauge",
                    |h| u64::from(h.healthy()),
                ),
                (
                    "waf_upstream_health_check_failures_total",
                    "Health checks a server failed.",
                    "counter",
                    |h| h.failed(),
                ),
            ];
            if servers.iter().any(|e| e.health.is_some()) {
                for (name, help, kind, value) in per_checked {
                    let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}");
                    for e in servers.iter() {
                        if let Some(h) = e.health.as_ref().and_then(|(h, i)| h.get(*i)) {
                            let _ = writeln!(s, "{name}{{{}}} {}", e.labels, value(h));
                        }
                    }
                }
            }
        }
        crate::profile::render_stats(&self.engine.total(), &mut s);
        if let Ok(p) = self.profile.lock() {
            if let Some(p) = p.as_ref() {
                p.render(&mut s);
            }
        }
        let _ = writeln!(
            s,
            "# HELP waf_phase_seconds WAF time per request and phase.\n# TYPE waf_phase_seconds histogram"
        );
        for (i, h) in self.phase_time.iter().enumerate() {
            h.render(
                &mut s,
                "waf_phase_seconds",
                &format!("phase=\"{}\"", i + 1),
                &BUCKETS_US,
            );
        }
        crate::process::render(&mut s);
        s
    }
}

/// An open client connection, counted in [`Metrics::connections_open`]
/// while this lives.
pub(crate) struct OpenConnection(Arc<Metrics>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.connections_open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// An open tunnel, counted in [`Metrics::tunnels_open`] and as a client
/// connection while this lives.
pub(crate) struct OpenTunnel(OpenConnection);

impl Drop for OpenTunnel {
    fn drop(&mut self) {
        (self.0).0.tunnels_open.fetch_sub(1, Ordering::Relaxed);
    }
}
