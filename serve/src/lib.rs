//! `waf serve`: the engine in front of an HTTP application, as a reverse
//! proxy.
//!
//! Every request goes through the five phases with the engine's streaming
//! API ([`waf_engine::Transaction`]):
//!
//! 1. request headers (phase 1);
//! 2. the request body, fed as it arrives within `SecRequestBodyLimit` /
//!    `SecRequestBodyNoFilesLimit` (Reject → 413 before anything is sent
//!    upstream), then phase 2; the body goes upstream only once phase 2
//!    allowed it;
//! 3. the upstream's status and headers (phase 3);
//! 4. the response body, buffered only when the engine inspects it
//!    (`SecResponseBodyAccess` and `SecResponseBodyMimeType`), up to
//!    `SecResponseBodyLimit`, so that a phase-4 intervention replaces the
//!    response before any byte of it reaches the client; other responses
//!    stream through untouched;
//! 5. logging, whatever happened.
//!
//! Interventions: `deny` answers with the rule's status, `redirect` with a
//! `Location`, `drop` closes the connection; `DetectionOnly` only logs.
//! Matched rules are written to the error log as ModSecurity does (one
//! `ModSecurity: Warning. ...` line per matched rule that logs, then the
//! `Access denied ...` line), by a writer thread that never blocks traffic.
//!
//! The ruleset is swapped atomically on reload ([`Server::reload`]; for
//! `waf serve`, SIGHUP or a change to the rules' files, see `watch.rs`):
//! requests in flight finish on the ruleset they started with; rules that
//! do not compile leave the running ones in place.

#![warn(missing_docs)]

mod access;
mod audit;
mod block_page;
mod budget;
mod collection_file;
mod connect;
mod encoding;
pub mod filter;
mod first_byte;
mod forwarded;
mod health;
mod host;
mod log;
mod manifest;
mod memory;
mod metrics;
mod net;
mod normal_path;
mod process;
pub mod profile;
mod proxy;
pub mod proxy_protocol;
mod read_timeout;
mod reconfigure;
pub mod redirect;
mod request_id;
mod rules;
mod send_timeout;
pub mod shared_collections;
mod site;
pub mod spoa;
pub mod tls;
mod upgrade;
mod upstream;
mod watch;
mod workers;

pub use forwarded::TrustedProxies;
pub use hyper::Uri;
pub use log::ErrorLog;
pub use manifest::{ListenerSpec, Manifest, ManifestError};
pub use metrics::{LogCounts, Metrics};
pub use reconfigure::FixedSettings;
pub use request_id::header_name as request_id_header;
pub use rules::{RuleSource, Rules};
pub use site::{CustomAction, CustomRule, Exception, Site, Sites};

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// The smallest `max_request_head`: hyper's HTTP/1 read buffer cannot be
/// smaller, and nginx's one header buffer is as large.
pub const MIN_REQUEST_HEAD: usize = 8192;

/// How the proxy is set up.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where to accept connections.
    pub listen: SocketAddr,
    /// The application: `http://host:port` (a path prefix is kept in front
    /// of each request's path).
    pub upstream: hyper::Uri,
    /// Longest wait for a client's request headers.
    pub header_timeout: Duration,
    /// Longest wait for the whole request body.
    pub body_timeout: Duration,
    /// Longest wait for the upstream's response headers, then for each
    /// piece of its response body (see read_timeout.rs).
    pub upstream_timeout: Duration,
    /// Longest wait for a connection to an upstream server (TCP and TLS):
    /// a server that does not answer is left out and the request goes to
    /// the next one of its upstream, within `upstream_timeout` (see
    /// upstream.rs).
    pub connect_timeout: Duration,
    /// On shutdown (SIGTERM, Ctrl-C), how long requests in flight may take
    /// to finish before their connections are cut.
    pub shutdown_timeout: Duration,
    /// How long a tunnel (a protocol switch such as WebSocket) stays open
    /// with nothing passing either way.
    pub tunnel_idle_timeout: Duration,
    /// How long a write to a client may wait for it to read (see
    /// send_timeout.rs): a client that stops reading is cut after this.
    pub send_timeout: Duration,
    /// How long a client connection may go without starting a request
    /// before it is closed gracefully (requests in flight finish; HTTP/2:
    /// GOAWAY). HTTP/1.1 connections are closed sooner by the header
    /// timeout, which also bounds the wait for the next request's headers.
    pub idle_timeout: Duration,
    /// How often `run`/`run_sites` look at the files the rules (and the
    /// manifest) were read from, to reload when they change; `None`: only
    /// on SIGHUP (see watch.rs).
    pub watch_interval: Option<Duration>,
    /// CA certificates (PEM) that `https://` upstreams' certificates are
    /// verified with; `None`: the system's bundle (see connect.rs).
    pub upstream_ca: Option<std::path::PathBuf>,
    /// Proxies in front of this one whose `X-Forwarded-For` names the
    /// client (see `forwarded.rs`); none by default.
    pub trusted_proxies: TrustedProxies,
    /// Where to serve `/healthz` and `/metrics` (Prometheus), if anywhere.
    pub admin: Option<SocketAddr>,
    /// The most request body bytes held (inspected or not) before the request
    /// is refused with 413, whatever the rules' limits say: the proxy holds
    /// the body until phase 2 allows it.
    pub max_request_body: usize,
    /// The most bytes of a request's head (request line and headers, as
    /// sent for HTTP/1; the header list as HTTP/2 counts it) before the
    /// request is refused with 431, before any rule: the rules would read
    /// all of it. A long target is 431 too (hyper's 414 is for a target
    /// over 65,534 bytes, which only a larger limit lets it read). At
    /// least [`MIN_REQUEST_HEAD`].
    pub max_request_head: usize,
    /// The most body bytes held in memory by all requests together
    /// (request bodies until phase 2, inspected response bodies until phase
    /// 4); a request that would pass it is answered 503 (see budget.rs).
    pub max_held_bodies: u64,
    /// What happens to a request when the engine fails on it or its WAF
    /// time goes over [`Config::time_budget`].
    pub on_error: OnError,
    /// The most WAF time (all phases) a request may take; `None`: no limit.
    pub time_budget: Option<Duration>,
    /// Time every rule and export per-rule counters on `/metrics` (for `waf
    /// profile --from-metrics`); costs some engine time.
    pub profile: bool,
    /// Worker threads serving the connections, each on a single-threaded
    /// runtime of its own, a connection and its requests staying on one
    /// thread (`waf serve` starts one per CPU); `None`: served on the
    /// runtime that starts the server (embedding, tests).
    pub workers: Option<usize>,
    /// Values each worker thread's cross-transaction cache holds per
    /// ruleset (`EvalOptions::xcache_records`): what repeats in the traffic
    /// (user agents, cookies, paths) is transformed, scanned and tested
    /// once while it fits; about 2 KiB a value with CRS when full.
    pub value_cache: usize,
    /// Bytes the persistent collections (`initcol`...) may hold, for the
    /// whole process (`StoreLimits::max_bytes`; 64 MiB by default). Applied
    /// when a server starts and on every reload: a smaller value is reached
    /// as records are written.
    pub collection_memory: usize,
    /// Where the persistent collections (and the `rate_limit` counts) are
    /// kept across restarts: read when a server starts, written when it
    /// shuts down (`None`: in memory only).
    pub collection_file: Option<PathBuf>,
    /// A Redis server (`redis://[user:password@]host[:port][/db]`) through
    /// which several instances share their persistent collections (and
    /// `rate_limit` counts), each exchanging its writes every 100 ms off
    /// the request path (see shared_collections.rs). Set when a server
    /// starts; excludes `collection_file`.
    pub collection_redis: Option<String>,
    /// The roots (PEM) a `rediss://` `collection_redis` server's
    /// certificate must chain to, instead of the system's.
    pub collection_redis_ca: Option<PathBuf>,
    /// Bind the listeners (and the admin address) with `SO_REUSEPORT`, so
    /// that a second process can listen on the same addresses while this
    /// one runs: a new binary or configuration takes over without a moment
    /// where the port is closed (see docs/serve.md, *Handoff*). Off, a
    /// second process on the same address fails to start, which is what a
    /// mistake wants.
    pub reuse_port: bool,
    /// A request-id header (`X-Request-ID`): from a trusted proxy, its
    /// value becomes the request's `UNIQUE_ID` (the load balancer's id in
    /// the WAF's logs); and the request goes to the application with it set
    /// to that id (a client's own is replaced). `None`: only
    /// `X-WAF-Unique-ID` is sent.
    pub request_id_header: Option<hyper::header::HeaderName>,
}

/// What the proxy does with a request the engine could not finish checking
/// (it failed, or the request went over the time budget).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnError {
    /// Answer 503: nothing unchecked reaches the application (the default).
    Closed,
    /// Stop inspecting and let the request through, counted
    /// (`waf_failed_open_total`).
    Open,
}

impl Config {
    /// A configuration with the default timeouts and limits.
    pub fn new(listen: SocketAddr, upstream: hyper::Uri) -> Config {
        Config {
            listen,
            upstream,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            upstream_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            shutdown_timeout: Duration::from_secs(10),
            tunnel_idle_timeout: Duration::from_secs(60),
            send_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(75),
            watch_interval: Some(Duration::from_secs(2)),
            upstream_ca: None,
            trusted_proxies: TrustedProxies::default(),
            max_request_body: 64 << 20,
            max_request_head: 64 << 10,
            max_held_bodies: 1 << 30,
            admin: None,
            on_error: OnError::Closed,
            time_budget: None,
            profile: false,
            workers: None,
            value_cache: waf_engine::EvalOptions::DEFAULT_XCACHE_RECORDS,
            collection_memory: waf_engine::StoreLimits::default().max_bytes,
            collection_file: None,
            collection_redis: None,
            collection_redis_ca: None,
            reuse_port: false,
            request_id_header: None,
        }
    }

    /// The number of worker threads to start, if any (`workers: Some(0)`
    /// means none, as `None` does).
    pub fn worker_threads(&self) -> Option<usize> {
        self.workers.filter(|&n| n > 0)
    }
}

/// An address to accept connections on, with TLS when given: a manifest's
/// `listeners` (port 80 and port 443, say), or the quick start's one.
#[derive(Clone)]
pub struct Listener {
    /// Where to accept connections.
    pub addr: SocketAddr,
    /// The certificate to serve (HTTP/2 and HTTP/1.1 by ALPN); `None`:
    /// plain HTTP (HTTP/1.1, and HTTP/2 with prior knowledge).
    pub tls: Option<tls::Tls>,
    /// Every connection starts with a PROXY protocol header (version 1 or
    /// 2, before TLS), and the client address it gives is the
    /// connection's: for a listener behind a TCP load balancer (see
    /// [`proxy_protocol`]).
    pub proxy_protocol: bool,
}

impl Listener {
    /// Plain HTTP on `addr`.
    pub fn plain(addr: SocketAddr) -> Listener {
        Listener {
            addr,
            tls: None,
            proxy_protocol: false,
        }
    }
}

/// Where the persistent collections (`initcol`, `rate_limit`) are kept, as
/// the command line gives it (`waf spoa`; `waf serve` holds the same in
/// its [`Config`]): in memory up to `memory` bytes, read from and written
/// to `file` across restarts, or shared with other instances through the
/// Redis at `redis`.
#[derive(Clone, Debug, Default)]
pub struct Collections {
    /// Bytes the store may hold (its default when `None`).
    pub memory: Option<usize>,
    /// Read at start, written at stop.
    pub file: Option<std::path::PathBuf>,
    /// `redis://[user:password@]host[:port][/db]` or `rediss://...`;
    /// excludes `file`.
    pub redis: Option<String>,
    /// For a `rediss://` `redis`: the roots (PEM) its certificate must
    /// chain to, instead of the system's.
    pub redis_ca: Option<PathBuf>,
}

/// Why the server could not start.
#[derive(Debug)]
pub enum ServeError {
    /// The upstream URL is not `http(s)://host[:port][/prefix]`, or the
    /// CA certificates for `https://` upstreams cannot be read.
    Upstream(String),
    /// The listening socket could not be opened.
    Listen(std::io::Error),
    /// The async runtime could not start.
    Runtime(std::io::Error),
    /// The persistent collections' settings are wrong (`collection_redis`
    /// is not a Redis URL).
    Collections(String),
}

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServeError::Upstream(m) => write!(f, "bad upstream: {m}"),
            ServeError::Listen(e) => write!(f, "cannot listen: {e}"),
            ServeError::Runtime(e) => write!(f, "cannot start the runtime: {e}"),
            ServeError::Collections(m) => write!(f, "persistent collections: {m}"),
        }
    }
}

impl std::error::Error for ServeError {}

/// Where the proxy writes: the ModSecurity-style error log, and the JSON
/// audit log if any (both through the same bounded, non-blocking writer).
pub struct Logs {
    /// Matched rules and interventions, one line each.
    pub error: ErrorLog,
    /// One JSON record per transaction `SecAuditEngine` selects.
    pub audit: Option<ErrorLog>,
    /// One JSON line per request (see `access.rs`), if wanted.
    pub access: Option<ErrorLog>,
}

/// Pending connections the kernel may queue for the accept loop (capped by
/// `net.core.somaxconn`): a burst of new clients larger than the queue gets
/// dropped SYNs and one-second retransmits (tokio's default is 1,024).
const LISTEN_BACKLOG: u32 = 4096;

/// The listening socket: [`bound_socket`], with a backlog of
/// [`LISTEN_BACKLOG`].
fn listen(addr: SocketAddr, reuse_port: bool) -> std::io::Result<TcpListener> {
    bound_socket(addr, reuse_port)?.listen(LISTEN_BACKLOG)
}

/// A socket bound to `addr` with `SO_REUSEADDR` (a restart rebinds at
/// once) and `SO_REUSEPORT` if asked ([`Config::reuse_port`]).
pub(crate) fn bound_socket(
    addr: SocketAddr,
    reuse_port: bool,
) -> std::io::Result<tokio::net::TcpSocket> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    if reuse_port {
        socket.set_reuseport(true)?;
    }
    socket.bind(addr)?;
    Ok(socket)
}

/// Checks what a start reads besides the rules and sites (the CA file of
/// `upstream_ca`), as [`Server::start_sites`] would, without listening:
/// what `waf serve --check` runs.
pub fn check_settings(config: &Config) -> Result<(), ServeError> {
    connect::tls_connectors(config.upstream_ca.as_deref())
        .map(|_| ())
        .map_err(ServeError::Upstream)
}

/// Where a reload reads the sites from.
#[derive(Clone)]
pub enum SitesSource {
    /// One site: reload recompiles these rules.
    Single(Arc<Rules>),
    /// A manifest: reload reads it again and takes its sites, upstreams and
    /// per-request settings; `started` holds the settings that take a
    /// restart, as the proxy started with them (see reconfigure.rs). The
    /// certificate in the TLS files is reloaded by `run_sites`.
    Manifest {
        /// The manifest file.
        path: std::path::PathBuf,
        /// Its settings that a reload does not change.
        started: Box<FixedSettings>,
    },
}

impl SitesSource {
    /// The manifest at `path`, `m` as read from it at start.
    pub fn manifest(path: &std::path::Path, m: &Manifest) -> SitesSource {
        SitesSource::Manifest {
            path: path.to_path_buf(),
            started: Box::new(FixedSettings::of(m)),
        }
    }
}

/// Why a reload was refused (the running sites stay).
#[derive(Debug)]
pub enum ReloadError {
    /// The rules did not compile.
    Rules(waf_compiler::CompileError),
    /// The manifest is invalid or a site's rules did not compile.
    Manifest(ManifestError),
}

impl std::fmt::Display for ReloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReloadError::Rules(e) => write!(f, "{e}"),
            ReloadError::Manifest(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ReloadError {}

/// A running proxy: its addresses, and the handle to reload its rules.
pub struct Server {
    addrs: Vec<SocketAddr>,
    admin_addr: Option<SocketAddr>,
    source: SitesSource,
    state: Arc<proxy::State>,
    metrics: Arc<Metrics>,
    /// One accept loop per listener.
    tasks: Vec<tokio::task::JoinHandle<()>>,
    admin_task: Option<tokio::task::JoinHandle<()>>,
}

impl Server {
    /// Binds `config.listen` and serves `rules` in front of
    /// `config.upstream` on the current tokio runtime until the returned
    /// server is dropped or [`Server::stop`]ped.
    pub async fn start(
        config: Config,
        rules: Arc<Rules>,
        logs: Logs,
    ) -> Result<Server, ServeError> {
        let sites = Sites::single(rules.clone(), &config.upstream).map_err(ServeError::Upstream)?;
        let listeners = vec![Listener::plain(config.listen)];
        Self::start_sites(config, sites, SitesSource::Single(rules), listeners, logs).await
    }

    /// Binds every listener and serves `sites` on them (`config.listen` and
    /// `config.upstream` are not used: the listeners are given, and each
    /// site has its upstream); [`Server::reload`] reads the sites again from
    /// `source`.
    pub async fn start_sites(
        config: Config,
        sites: Sites,
        source: SitesSource,
        listeners: Vec<Listener>,
        logs: Logs,
    ) -> Result<Server, ServeError> {
        let Logs {
            error: log,
            audit,
            access,
        } = logs;
        // Looked at before this process binds the address too.
        let predecessor = listeners.first().map(|l| l.addr).filter(|&a| {
            config.reuse_port
                && config.collection_file.is_some()
                && config.collection_redis.is_none()
                && collection_file::another_listens(a)
        });
        let mut bound = Vec::with_capacity(listeners.len());
        let mut addrs = Vec::with_capacity(listeners.len());
        for l in listeners {
            let at = |e: std::io::Error| {
                ServeError::Listen(std::io::Error::new(e.kind(), format!("{}: {e}", l.addr)))
            };
            let socket = listen(l.addr, config.reuse_port).map_err(at)?;
            addrs.push(socket.local_addr().map_err(at)?);
            bound.push((
                socket,
                proxy::Accept {
                    tls: l.tls.map(|t| t.acceptor()),
                    proxy_protocol: l.proxy_protocol,
                },
            ));
        }
        if bound.is_empty() {
            return Err(ServeError::Listen(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "no listener",
            )));
        }
        let metrics = Arc::new(Metrics::default());
        metrics.rules_loaded();
        let mut sites = sites;
        metrics.set_sites(sites.adopt_counts(&[]));
        metrics.register_upstreams(&sites.upstreams());
        let (admin_addr, admin_task) = match config.admin {
            Some(a) => {
                let l = listen(a, config.reuse_port).map_err(ServeError::Listen)?;
                let at = l.local_addr().map_err(ServeError::Listen)?;
                let (log, audit, access) = (log.clone(), audit.clone(), access.clone());
                let dropped = |l: &Option<ErrorLog>| l.as_ref().map_or(0, ErrorLog::dropped);
                let counts = Arc::new(move || LogCounts {
                    error_dropped: log.dropped(),
                    error_late: log.late(),
                    audit_dropped: dropped(&audit),
                    access_dropped: dropped(&access),
                });
                let task = tokio::spawn(proxy::admin_loop(l, metrics.clone(), counts));
                (Some(at), Some(task))
            }
            None => (None, None),
        };
        let shared = match &config.collection_redis {
            Some(url) => Some(Arc::new(
                shared_collections::link(
                    url,
                    config.collection_redis_ca.as_deref(),
                    log.clone(),
                    "waf serve",
                )
                .map_err(ServeError::Collections)?,
            )),
            None => None,
        };
        let workers = config.worker_threads();
        let upstream_tls =
            connect::tls_connectors(config.upstream_ca.as_deref()).map_err(ServeError::Upstream)?;
        let state = Arc::new(proxy::State::new(
            config,
            upstream_tls,
            sites,
            log,
            audit,
            access,
            metrics.clone(),
        ));
        state.read_collections(predecessor);
        if let Some(shared) = shared {
            state.share_collections(shared);
        }
        state.start_health_checks();
        let tasks = match workers {
            Some(n) => {
                let workers =
                    Arc::new(proxy::workers(n, state.clone()).map_err(ServeError::Runtime)?);
                bound
                    .into_iter()
                    .map(|(socket, accept)| tokio::spawn(workers.clone().dispatch(socket, accept)))
                    .collect()
            }
            None => {
                let client = proxy::upstream_client(&state);
                bound
                    .into_iter()
                    .map(|(socket, accept)| {
                        tokio::spawn(proxy::accept_loop(
                            socket,
                            state.clone(),
                            client.clone(),
                            accept,
                        ))
                    })
                    .collect()
            }
        };
        Ok(Server {
            addrs,
            admin_addr,
            source,
            state,
            metrics,
            tasks,
            admin_task,
        })
    }

    /// The admin address (`/healthz`, `/metrics`), when configured.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// The proxy's counters.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The address the proxy listens on (its first listener's).
    pub fn addr(&self) -> SocketAddr {
        // `start_sites` refuses an empty list.
        self.addrs[0]
    }

    /// The addresses of every listener, in the order given.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Recompiles the rules (or reads the manifest again) and swaps the
    /// result in; on error, the running rules stay and the diagnostics are
    /// returned. With a manifest, its per-request settings apply too, and
    /// the lines returned say which settings changed (see
    /// reconfigure.rs). Blocking: compiling CRS takes about a second.
    pub fn reload(&self) -> Result<Vec<String>, ReloadError> {
        let outcome = reload(&self.source, &self.state);
        self.metrics.reload(outcome.is_ok());
        outcome
    }

    /// What [`Server::reload`] needs, to run it off the runtime.
    fn reloader(&self) -> (SitesSource, Arc<proxy::State>) {
        (self.source.clone(), self.state.clone())
    }

    /// Stops accepting connections.
    pub fn stop(self) {
        for t in &self.tasks {
            t.abort();
        }
        if let Some(t) = self.admin_task {
            t.abort();
        }
    }

    /// Shuts down without losing a request: stops accepting (new clients
    /// are refused, `/healthz` answers 503), serves the open connections a
    /// moment longer with `Connection: close` on every HTTP/1.x response
    /// (`proxy::DRAIN_LINGER`), then asks each to close once its request in
    /// flight is answered (idle ones close at once, HTTP/2 ones get
    /// GOAWAY), waits up to
    /// `grace` for them, then for the logs to be written. Connections still
    /// open after `grace` are left to the process's exit (`waf serve` exits
    /// right after) to cut.
    pub async fn shutdown(self, grace: Duration) -> Shutdown {
        let start = tokio::time::Instant::now();
        for t in &self.tasks {
            t.abort();
        }
        // A listener goes with its accept task; wait for them to be dropped
        // so that nobody connects to a proxy that no longer accepts.
        for t in self.tasks {
            let _ = t.await;
        }
        // Counted before the idle ones are told to close.
        let open_at_start = self.metrics.connections_open();
        self.state.begin_shutdown();
        let deadline = start + grace;
        while self.metrics.connections_open() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let cut = self.metrics.connections_open();
        if let Some(t) = self.admin_task {
            t.abort();
        }
        // After the last request: nothing writes the store any more.
        self.state.save_collections();
        let mut logs_written = true;
        for log in self.state.logs() {
            logs_written &= log.flush(LOG_FLUSH).await;
        }
        Shutdown {
            open_at_start,
            cut,
            logs_written,
            took: start.elapsed(),
        }
    }

    /// Waits until the accept loops end (they run until stopped).
    pub async fn wait(self) {
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// How long a shutdown waits for the logs' last lines to be written.
pub(crate) const LOG_FLUSH: Duration = Duration::from_secs(5);

/// What a [`Server::shutdown`] did.
#[derive(Clone, Copy, Debug)]
pub struct Shutdown {
    /// Client connections open when it began.
    pub open_at_start: u64,
    /// Connections still open when the grace period ended (cut).
    pub cut: u64,
    /// Whether the error, audit and access logs' queued lines were all
    /// written.
    pub logs_written: bool,
    /// From the call to the end.
    pub took: Duration,
}

impl std::fmt::Display for Shutdown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} connection(s) open at the signal, {} closed after their requests, {} cut at the grace period; logs {}; {:.1} s",
            self.open_at_start,
            self.open_at_start.saturating_sub(self.cut),
            self.cut,
            if self.logs_written { "written" } else { "NOT all written" },
            self.took.as_secs_f64()
        )
    }
}

/// What the running sites were compiled from (and the manifest).
fn inputs(source: &SitesSource, state: &proxy::State) -> watch::Inputs {
    match source {
        SitesSource::Single(rules) => rules.inputs(),
        SitesSource::Manifest { path, .. } => {
            // The manifest itself is read outside the compiler.
            let mut inputs = watch::Inputs {
                files: vec![(path.clone(), None)],
                globs: vec![],
            };
            for site in &state.sites.load().list {
                inputs.extend(site.rules.inputs());
                if let Some(page) = &site.block_page {
                    if !inputs.files.iter().any(|(p, _)| *p == page.path) {
                        inputs.files.push((page.path.clone(), None));
                    }
                }
            }
            inputs
        }
    }
}

/// Reloads the sites from `source`; with a manifest, also its settings
/// (see reconfigure.rs), with one line per setting that changed.
fn reload(source: &SitesSource, state: &proxy::State) -> Result<Vec<String>, ReloadError> {
    match source {
        SitesSource::Single(rules) => rules
            .reload()
            .map(|()| rules.warnings())
            .map_err(ReloadError::Rules),
        SitesSource::Manifest { path, started } => {
            let mut m = Manifest::load(path).map_err(ReloadError::Manifest)?;
            let (config, mut notes) = reconfigure::apply(&state.config(), started, &m);
            notes.append(&mut m.warnings);
            state.set_config(config);
            let counts = m.sites.adopt_counts(&state.metrics().sites());
            m.sites.adopt_upstream_state(&state.sites.load());
            state.metrics().register_upstreams(&m.sites.upstreams());
            let new = Arc::new(m.sites);
            let mut retired = memory::Retired::default();
            new.rulesets().for_each(|rs| retired.new_ruleset(&rs));
            let old = state.sites.swap(new);
            old.rulesets().for_each(|rs| retired.old(&rs));
            retired.old(&old);
            drop(old);
            retired.release();
            state.metrics().set_sites(counts);
            state.check_upstreams(&state.sites.load());
            Ok(notes)
        }
    }
}

/// `watch_interval` from seconds (a flag, the manifest): 0 turns watching
/// off.
pub fn watch_interval(seconds: f64) -> Result<Option<Duration>, &'static str> {
    match Duration::try_from_secs_f64(seconds) {
        Ok(d) if d.is_zero() => Ok(None),
        Ok(d) if d >= Duration::from_millis(100) => Ok(Some(d)),
        _ => Err("seconds between looks at the rule files: 0 (off) or at least 0.1"),
    }
}

/// Reloading when the rules' files change: how often to look, and what
/// the running rules were read from.
pub(crate) struct Watch<F: Fn() -> watch::Inputs> {
    interval: Duration,
    inputs: F,
}

/// Waits for Ctrl-C or SIGTERM. On SIGHUP, or when `watch` sees the rules'
/// files change, runs `reload` off the runtime (compiling CRS takes about a
/// second), tells `on_reload` whether it worked and `report` what happened;
/// on SIGUSR1, reopens the file `logs` (log rotation): what `waf serve` and
/// `waf spoa` do.
pub(crate) async fn until_stopped<E: std::fmt::Display + Send + 'static>(
    reload: impl Fn() -> Result<Vec<String>, E> + Clone + Send + 'static,
    on_reload: impl Fn(bool),
    watch: Option<Watch<impl Fn() -> watch::Inputs>>,
    logs: &[ErrorLog],
    report: &impl Fn(&str),
) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut hup), Ok(mut term), Ok(mut usr1)) = (
            signal(SignalKind::hangup()),
            signal(SignalKind::terminate()),
            signal(SignalKind::user_defined1()),
        ) else {
            let _ = tokio::signal::ctrl_c().await;
            return;
        };
        let (period, inputs) = match &watch {
            Some(w) => (w.interval, Some(&w.inputs)),
            None => (Duration::from_secs(3600), None),
        };
        let mut watcher = inputs.map(|f| watch::Watcher::new(f()));
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = hup.recv() => {}
                _ = usr1.recv() => {
                    let mut failed = 0;
                    for log in logs {
                        if let Err(e) = log.reopen().await {
                            failed += 1;
                            report(&format!("cannot reopen a log, it goes on in the file open now: {e}"));
                        }
                    }
                    if failed == 0 {
                        report("logs reopened");
                    }
                    continue;
                }
                _ = tick.tick(), if watcher.is_some() => {
                    match watcher.as_mut().and_then(watch::Watcher::poll) {
                        Some(what) => report(&format!("{what} changed: reloading")),
                        None => continue,
                    }
                }
                _ = term.recv() => break,
                _ = tokio::signal::ctrl_c() => break,
            }
            let outcome = tokio::task::spawn_blocking(reload.clone()).await;
            on_reload(matches!(outcome, Ok(Ok(_))));
            match outcome {
                Ok(Ok(notes)) => {
                    report("rules reloaded");
                    for note in notes {
                        report(&note);
                    }
                }
                Ok(Err(e)) => report(&format!("reload refused: {e}")),
                Err(e) => report(&format!("reload failed: {e}")),
            }
            // Watched anew from what this compilation read, refused or not
            // (off the runtime: the files are read once, to compare them
            // with what was compiled).
            if let Some(f) = inputs {
                let read = f();
                watcher = tokio::task::spawn_blocking(move || watch::Watcher::new(read))
                    .await
                    .ok();
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (reload, on_reload, watch, logs, report);
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Runs the proxy until interrupted (Ctrl-C or SIGTERM), on a runtime of its
/// own: what `waf serve` does. SIGHUP reloads the rules (and the TLS
/// certificate); the outcome of each reload (or the diagnostics that kept
/// the old rules) goes to `report`.
pub fn run(
    config: Config,
    rules: Arc<Rules>,
    logs: Logs,
    report: impl Fn(&str) + Send + Sync + 'static,
) -> Result<(), ServeError> {
    let sites = Sites::single(rules.clone(), &config.upstream).map_err(ServeError::Upstream)?;
    let listeners = vec![Listener::plain(config.listen)];
    run_sites(
        config,
        sites,
        SitesSource::Single(rules),
        listeners,
        logs,
        report,
    )
}

/// [`run`] for sites (a manifest) on the given listeners.
pub fn run_sites(
    config: Config,
    sites: Sites,
    source: SitesSource,
    listeners: Vec<Listener>,
    logs: Logs,
    report: impl Fn(&str) + Send + Sync + 'static,
) -> Result<(), ServeError> {
    // With worker threads, this runtime only accepts connections, serves
    // the admin address and waits for signals: one thread is enough.
    let runtime = if config.worker_threads().is_some() {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
    }
    .map_err(ServeError::Runtime)?;
    let watch_interval = config.watch_interval;
    let certs: Vec<tls::Tls> = listeners.iter().filter_map(|l| l.tls.clone()).collect();
    let secure: Vec<bool> = listeners.iter().map(|l| l.tls.is_some()).collect();
    runtime.block_on(async move {
        let server = Server::start_sites(config, sites, source, listeners, logs).await?;
        let on: Vec<String> = server
            .addrs()
            .iter()
            .zip(&secure)
            .map(|(a, &tls)| {
                if tls {
                    format!("{a} (TLS)")
                } else {
                    a.to_string()
                }
            })
            .collect();
        report(&format!("listening on {}", on.join(", ")));
        let (source, state) = server.reloader();
        memory::after_start(state.sites.load().rulesets());
        let watch = watch_interval.map(|interval| Watch {
            interval,
            inputs: {
                let (source, state, certs) = (source.clone(), state.clone(), certs.clone());
                move || {
                    let mut i = inputs(&source, &state);
                    for t in &certs {
                        i.extend(t.inputs());
                    }
                    i
                }
            },
        });
        let logs: Vec<ErrorLog> = server.state.logs().cloned().collect();
        until_stopped(
            move || {
                // The certificates first: each stays whatever the rules do.
                let mut refused = Vec::new();
                for t in &certs {
                    if let Err(e) = t.reload() {
                        refused.push(format!("the TLS certificate (the running one stays): {e}"));
                    }
                }
                let rules =
                    reload(&source, &state).map_err(|e| format!("the running rules stay:\n{e}"));
                match rules {
                    Ok(notes) if refused.is_empty() => Ok(notes),
                    Ok(_) => Err(refused.join("\n")),
                    Err(r) => {
                        refused.push(r);
                        Err(refused.join("\n"))
                    }
                }
            },
            |ok| server.metrics().reload(ok),
            watch,
            &logs,
            &report,
        )
        .await;
        // A reload may have changed it.
        let grace = server.state.config().shutdown_timeout;
        report(&format!(
            "stopping: no new connections; {} open, waiting up to {} s for their requests",
            server.metrics().connections_open(),
            grace.as_secs_f64()
        ));
        let outcome = server.shutdown(grace).await;
        report(&format!("stopped: {outcome}"));
        Ok(())
    })
}
