//! One request through the five phases, and the accept loop.

use crate::access;
use crate::audit::{self, Exchange};
use crate::block_page::BlockPage;
use crate::budget::{Holding, Lease};
use crate::encoding::FeedError;
use crate::filter::RequestView;
use crate::first_byte::FirstByte;
use crate::log::ErrorLog;
use crate::metrics::{LogCounts, Metrics};
use crate::read_timeout::ReadTimeout;
use crate::site::{CustomAction, Sites};
use crate::{Config, OnError};
use arc_swap::ArcSwap;
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Empty, Full};
use hyper::body::{Body, Incoming};
use hyper::header::{HeaderName, HeaderValue, HOST, LOCATION};
use hyper::{Request, Response, StatusCode, Version};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use waf_engine::coding::RequestBodyFeed;
use waf_engine::{Intervention, Transaction};

/// The body the proxy answers with: buffered, or the upstream's streamed.
pub(crate) type ProxyBody = BoxBody<Bytes, ProxyError>;

/// Why a connection ends without a response: a `drop` intervention, or the
/// client or upstream connection failing mid-body. (A concrete type: hyper's
/// connection builders need one, not a boxed trait object.)
#[derive(Debug)]
pub(crate) enum ProxyError {
    /// The WAF decided to close the connection.
    Dropped,
    /// Reading a body failed.
    Http(hyper::Error),
    /// A request body streamed on (not held) went past `max_request_body`.
    BodyTooLarge,
    /// The upstream's response body stopped coming (see read_timeout.rs).
    UpstreamTimeout,
}

impl std::fmt::Display for ProxyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProxyError::Dropped => f.write_str("connection dropped by the WAF"),
            ProxyError::Http(e) => write!(f, "{e}"),
            ProxyError::BodyTooLarge => f.write_str("request body too large"),
            ProxyError::UpstreamTimeout => {
                f.write_str("the upstream sent nothing more within the upstream timeout")
            }
        }
    }
}

impl std::error::Error for ProxyError {}

type BoxError = ProxyError;

use crate::upstream::Endpoint;

/// The upstream clients: hyper's, pooling keep-alive connections, one for
/// HTTP/1.1 upstreams and one for HTTP/2 ones. Shared by reference (an
/// `Arc`): a hyper client is several hundred bytes by value, which every
/// idle connection would otherwise hold a copy of.
pub(crate) struct UpstreamClient {
    http1: Client<crate::connect::Connector, ProxyBody>,
    http2: Client<crate::connect::Connector, ProxyBody>,
}

impl UpstreamClient {
    /// The client for `upstream`; a protocol switch (WebSocket...) goes
    /// over HTTP/1.1 whatever the upstream speaks, as HTTP/2 has no
    /// `Upgrade` (an application reached with `h2c://` or `h2://` then has
    /// to speak HTTP/1.1 too, which Go's, Node's and most servers do).
    pub(crate) fn to(
        &self,
        server: &Endpoint,
        switch: bool,
    ) -> &Client<crate::connect::Connector, ProxyBody> {
        if server.http2 && !switch {
            &self.http2
        } else {
            &self.http1
        }
    }
}

/// What every connection shares.
pub(crate) struct State {
    /// The settings; a manifest reload replaces the ones that take effect
    /// without a restart (see `reconfigure.rs`).
    config: Arc<ArcSwap<Config>>,
    /// TLS for `https://` upstreams (see connect.rs).
    upstream_tls: Option<crate::connect::TlsConnectors>,
    pub(crate) sites: ArcSwap<Sites>,
    log: ErrorLog,
    audit: Option<ErrorLog>,
    access: Option<ErrorLog>,
    metrics: Arc<Metrics>,
    /// Set to `true` when a shutdown begins: every connection then finishes
    /// the request it is serving and closes (HTTP/2: GOAWAY).
    shutdown: tokio::sync::watch::Sender<bool>,
    /// Runs the upstreams' health checks (set when the server starts).
    checker: std::sync::OnceLock<crate::health::Checker>,
    /// The link to the Redis that shares the persistent collections, if
    /// any (set when the server starts), and what stops its exchanges.
    shared: std::sync::OnceLock<(
        Arc<crate::shared_collections::Link>,
        Arc<std::sync::atomic::AtomicBool>,
    )>,
}

impl State {
    pub(crate) fn new(
        config: Config,
        upstream_tls: Option<crate::connect::TlsConnectors>,
        sites: Sites,
        log: ErrorLog,
        audit: Option<ErrorLog>,
        access: Option<ErrorLog>,
        metrics: Arc<Metrics>,
    ) -> State {
        apply_process_settings(&config);
        State {
            config: Arc::new(ArcSwap::from_pointee(config)),
            upstream_tls,
            sites: ArcSwap::from_pointee(sites),
            log,
            audit,
            access,
            metrics,
            shutdown: tokio::sync::watch::Sender::new(false),
            checker: std::sync::OnceLock::new(),
            shared: std::sync::OnceLock::new(),
        }
    }

    /// Starts the health checks of the running sites' upstreams, on the
    /// current runtime, which also runs those of the upstreams reloads
    /// bring.
    pub(crate) fn start_health_checks(&self) {
        let checker = crate::health::Checker {
            client: upstream_client(self),
            log: self.log.clone(),
            metrics: self.metrics.clone(),
            stop: self.shutdown.subscribe(),
            runtime: tokio::runtime::Handle::current(),
        };
        // Set once: a second call only checks the upstreams again.
        let _ = self.checker.set(checker);
        self.check_upstreams(&self.sites.load());
    }

    /// Health-checks `sites`' upstreams (just put in force; `/metrics`
    /// shows them once registered, see `Metrics::register_upstreams`).
    pub(crate) fn check_upstreams(&self, sites: &Sites) {
        if let Some(checker) = self.checker.get() {
            for u in &sites.upstreams() {
                checker.spawn(u);
            }
        }
    }

    /// The counters.
    pub(crate) fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The settings in force now.
    pub(crate) fn config(&self) -> arc_swap::Guard<Arc<Config>> {
        self.config.load()
    }

    /// Puts `config` in force for what starts from now on (connections,
    /// requests, upstream connections, tunnels).
    pub(crate) fn set_config(&self, config: Config) {
        apply_process_settings(&config);
        self.config.store(Arc::new(config));
    }

    /// Reads the persistent collections from `collection_file`, if any (as
    /// the server starts, before it serves); when `predecessor` says that
    /// another process listens on this one's address, also merges what
    /// that one writes there when it stops (see collection_file.rs).
    pub(crate) fn read_collections(&self, predecessor: Option<std::net::SocketAddr>) {
        let Some(path) = self.config().collection_file.clone() else {
            return;
        };
        let (line, read) = crate::collection_file::read(&path, "waf serve");
        self.log.write(line);
        if let Some(addr) = predecessor {
            tokio::spawn(crate::collection_file::merge_when_written(
                path,
                read,
                addr,
                self.log.clone(),
                self.shutdown.subscribe(),
            ));
        }
    }

    /// Shares the persistent collections through `shared` from now on: its
    /// exchanges run every 100 ms until the shutdown, which makes a last
    /// one (`save_collections`).
    pub(crate) fn share_collections(
        self: &Arc<Self>,
        shared: Arc<crate::shared_collections::Link>,
    ) {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let state = Arc::downgrade(self);
        shared.spawn(stop.clone(), move || {
            state
                .upgrade()
                .map_or(DEFAULT_COLLECTION_TIMEOUT, |s| s.collection_timeout())
        });
        let _ = self.shared.set((shared, stop));
    }

    /// The longest `SecCollectionTimeout` of the running rules: how long a
    /// record shared through Redis lives there without a write.
    fn collection_timeout(&self) -> u64 {
        self.sites
            .load()
            .rulesets()
            .map(|rs| rs.program().settings.collection_timeout)
            .max()
            .unwrap_or(DEFAULT_COLLECTION_TIMEOUT)
    }

    /// Writes the persistent collections to the running configuration's
    /// `collection_file`, if any (at shutdown, once no request runs), and
    /// says so in the error log.
    pub(crate) fn save_collections(&self) {
        if let Some((shared, stop)) = self.shared.get() {
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            shared.exchange(self.collection_timeout());
        }
        if let Some(path) = &self.config().collection_file {
            self.log
                .write(crate::collection_file::write(path, "waf serve"));
        }
    }

    /// Asks every open connection to close once its request in flight, if
    /// any, is answered; connections accepted after this close the same way.
    pub(crate) fn begin_shutdown(&self) {
        self.metrics.set_draining();
        self.shutdown.send_replace(true);
    }

    /// The logs, to flush on shutdown.
    pub(crate) fn logs(&self) -> impl Iterator<Item = &ErrorLog> {
        std::iter::once(&self.log)
            .chain(self.audit.as_ref())
            .chain(self.access.as_ref())
    }
}

/// A client for the upstreams, with its own connection pool. Its
/// connections are served on the runtime that opens them, so each runtime
/// serving connections has one ([`accept_loop`], [`workers`]).
pub(crate) fn upstream_client(state: &State) -> Arc<UpstreamClient> {
    let mut tcp = HttpConnector::new();
    tcp.set_nodelay(true);
    // Read at each connection: a reload may change it.
    let config = state.config.clone();
    let connect_timeout: crate::connect::ConnectTimeout =
        Arc::new(move || config.load().connect_timeout);
    let tls = state.upstream_tls.as_ref();
    let connector = |tls| crate::connect::Connector::new(tcp.clone(), tls, connect_timeout.clone());
    let http1 = connector(tls.map(|t| t.http1.clone()));
    let http2 = connector(tls.map(|t| t.http2.clone()));
    let idle = std::time::Duration::from_secs(60);
    Arc::new(UpstreamClient {
        http1: Client::builder(TokioExecutor::new())
            .pool_idle_timeout(idle)
            .build(http1),
        http2: Client::builder(TokioExecutor::new())
            .pool_idle_timeout(idle)
            .http2_only(true)
            .build(http2),
    })
}

/// Serves `/healthz` and `/metrics` until the task is aborted.
pub(crate) async fn admin_loop(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    log_counts: Arc<dyn Fn() -> LogCounts + Send + Sync>,
) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let (metrics, log_counts) = (metrics.clone(), log_counts.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let metrics = metrics.clone();
                let counts = log_counts();
                async move {
                    let r = match req.uri().path() {
                        // Draining: a load balancer's health check takes
                        // this instance out while its connections finish.
                        "/healthz" if metrics.draining() => {
                            local_response(StatusCode::SERVICE_UNAVAILABLE, "draining\n")
                        }
                        "/healthz" => local_response(StatusCode::OK, "ok\n"),
                        "/metrics" => {
                            let mut r = Response::new(
                                Full::new(Bytes::from(metrics.render(counts)))
                                    .map_err(|never| match never {})
                                    .boxed(),
                            );
                            r.headers_mut().insert(
                                hyper::header::CONTENT_TYPE,
                                HeaderValue::from_static("text/plain; version=0.0.4"),
                            );
                            r
                        }
                        _ => local_response(StatusCode::NOT_FOUND, "not found\n"),
                    };
                    Ok::<_, ProxyError>(r)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Accepts connections until the task is aborted; each is served (HTTP/1.1
/// or HTTP/2, detected, or chosen by ALPN over TLS) on a task of its own, on
/// the runtime this loop runs on.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    state: Arc<State>,
    client: Arc<UpstreamClient>,
    accept: Accept,
) {
    loop {
        let Ok((stream, remote)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(serve_connection(
            stream,
            remote,
            state.clone(),
            client.clone(),
            accept.clone(),
        ));
    }
}

/// How a listener's connections start: a PROXY protocol header or not,
/// then TLS or not.
#[derive(Clone)]
pub(crate) struct Accept {
    pub(crate) tls: Option<crate::tls::TlsAcceptor>,
    pub(crate) proxy_protocol: bool,
}

/// Starts `n` worker threads serving connections (see [`crate::workers`]),
/// each with an upstream client of its own: a pooled upstream connection is
/// served by the runtime that opened it. A connection comes with its
/// listener's PROXY protocol and TLS settings.
pub(crate) fn workers(
    n: usize,
    state: Arc<State>,
) -> std::io::Result<crate::workers::Workers<Accept>> {
    crate::workers::Workers::start(n, "waf-worker", move || {
        let state = state.clone();
        let client = upstream_client(&state);
        move |stream, remote, accept| {
            serve_connection(stream, remote, state.clone(), client.clone(), accept)
        }
    })
}

/// Serves one client connection (HTTP/1.1 or HTTP/2, detected, or chosen
/// by ALPN over TLS) until it closes, sending requests upstream with
/// `client`.
async fn serve_connection(
    mut stream: tokio::net::TcpStream,
    mut remote: SocketAddr,
    state: Arc<State>,
    client: Arc<UpstreamClient>,
    accept: Accept,
) {
    let _open = state.metrics.connection_open();
    let mut stopping = state.shutdown.subscribe();
    let _ = stream.set_nodelay(true);
    let mut local = stream.local_addr().unwrap_or(remote);
    let (header_timeout, send_timeout, idle_timeout, max_head) = {
        let c = state.config();
        let max_head = c.max_request_head.max(crate::MIN_REQUEST_HEAD);
        (c.header_timeout, c.send_timeout, c.idle_timeout, max_head)
    };
    if accept.proxy_protocol {
        // The balancer's header, before TLS and HTTP; its time counts
        // against the header timeout, as a TLS handshake does.
        match crate::proxy_protocol::read(&mut stream, header_timeout).await {
            Ok(Some(a)) => (remote, local) = (a.source, a.destination),
            // The balancer's own connection (a health check).
            Ok(None) => {}
            Err(e) => {
                proxy_protocol_error(&state, remote, &e);
                return;
            }
        }
    }
    let tls = accept.tls;
    let idle = Arc::new(Idle::new(idle_timeout));
    let requests = idle.clone();
    let stream = crate::send_timeout::SendTimeout::new(stream, send_timeout);
    let errors = state.clone();
    let secure = tls.is_some();
    let service = hyper::service::service_fn(move |req| {
        requests.request_started();
        let (state, client) = (state.clone(), client.clone());
        async move {
            // A response goes out after its log lines are written.
            let log = state.log.clone();
            let conn = Conn {
                remote,
                local,
                tls: secure,
            };
            let outcome = access::Outcome::of(state.access.clone(), &req, remote.ip());
            let version = req.version();
            let metrics = state.metrics.clone();
            // The request's future is big (its transaction, ~5 KB, and
            // every await's state): on the heap, the wrappers and hyper's
            // dispatcher move a pointer, not kilobytes, at each step.
            let request = Box::pin(log.written_before(handle(state, &client, req, conn)));
            let (mut out, note, outcome) = access::noted(request, outcome).await;
            // Draining: an HTTP/1.x client's next request is answered and
            // its connection closed after it (hyper honours the header),
            // so that the client reconnects (to the process that took the
            // port over, in a handoff) instead of racing a close of its
            // idle connection.
            if metrics.draining() && version < Version::HTTP_2 {
                if let Some(r) = out
                    .as_mut()
                    .ok()
                    .filter(|r| r.status() != StatusCode::SWITCHING_PROTOCOLS)
                {
                    r.headers_mut()
                        .insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
                }
            }
            outcome.record(&note, out.as_ref().map_or(0, |r| r.status().as_u16()));
            out
        }
    });
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    // A head past `max_request_head` is refused by hyper (431, a long
    // target included) before the rules read it.
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .max_buf_size(max_head);
    // HTTP/2 clients may open WebSockets (RFC 8441's extended CONNECT).
    builder
        .http2()
        .enable_connect_protocol()
        .max_header_list_size(u32::try_from(max_head).unwrap_or(u32::MAX));
    let outcome = match tls {
        None => {
            let stream = FirstByte::new(stream, header_timeout);
            let conn = std::pin::pin!(
                builder.serve_connection_with_upgrades(TokioIo::new(stream), service)
            );
            until_closed(conn, &mut stopping, &idle).await
        }
        Some(acceptor) => {
            // The handshake counts against the header timeout.
            let Ok(Ok(stream)) =
                tokio::time::timeout(header_timeout, acceptor.accept(stream)).await
            else {
                errors.metrics.tls_handshake_failure();
                return;
            };
            let stream = FirstByte::new(stream, header_timeout);
            let conn = std::pin::pin!(
                builder.serve_connection_with_upgrades(TokioIo::new(stream), service)
            );
            until_closed(conn, &mut stopping, &idle).await
        }
    };
    if let Err(e) = outcome {
        connection_error(&errors, remote, e.as_ref());
    }
}

/// When a connection last started a request, to close it once it has
/// started none for the idle timeout: an HTTP/2 client that keeps its
/// connection open without using it (a browser tab left open, or ten
/// thousand of them from one attacker) would otherwise hold it forever
/// (HTTP/1.1 ones are closed by the header timeout).
struct Idle {
    opened: tokio::time::Instant,
    /// Milliseconds after `opened` when the last request started.
    last: std::sync::atomic::AtomicU64,
    timeout: Duration,
}

impl Idle {
    fn new(timeout: Duration) -> Idle {
        Idle {
            opened: tokio::time::Instant::now(),
            last: std::sync::atomic::AtomicU64::new(0),
            timeout,
        }
    }

    fn request_started(&self) {
        let ms = self.opened.elapsed().as_millis() as u64;
        self.last.store(ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// When the connection will have been idle for the timeout, unless a
    /// request starts before.
    fn deadline(&self) -> tokio::time::Instant {
        let last = self.last.load(std::sync::atomic::Ordering::Relaxed);
        self.opened + Duration::from_millis(last) + self.timeout
    }
}

/// How long a connection is still served once a shutdown begins, before
/// it is asked to close: long enough for a busy HTTP/1.1 client to send its
/// next request, get its answer with `Connection: close` and reconnect
/// elsewhere, short enough not to hold a restart up.
pub(crate) const DRAIN_LINGER: Duration = Duration::from_secs(1);

/// Serves a connection until it closes; once it has started no request for
/// the idle timeout, or [`DRAIN_LINGER`] after a shutdown begins, it is
/// asked to close gracefully (hyper finishes the requests in flight, then
/// closes; an idle connection closes at once; HTTP/2 gets GOAWAY), and
/// served until it has.
///
/// The connection is pinned by the caller and borrowed here: moved into
/// this function, its future (a few KiB) would take room twice in the
/// connection task's state, once as the argument and once pinned (10,000
/// idle connections: 126 MiB instead of 94).
async fn until_closed<C, E>(
    mut conn: std::pin::Pin<&mut C>,
    stopping: &mut tokio::sync::watch::Receiver<bool>,
    idle: &Idle,
) -> Result<(), E>
where
    C: std::future::Future<Output = Result<(), E>> + GracefulConnection,
{
    let mut draining = false;
    loop {
        let deadline = idle.deadline();
        tokio::select! {
            // The connection is polled first: bytes of a request that
            // already arrived are read (and that request answered) before
            // the shutdown is seen, so only a connection that has sent
            // nothing is closed without an answer.
            biased;
            outcome = conn.as_mut() => return outcome,
            // An error means the state is gone: the server was dropped.
            _ = stopping.wait_for(|stop| *stop) => {
                draining = true;
                break;
            }
            // Idle for the timeout, unless a request started meanwhile
            // (then wait again, from it).
            () = tokio::time::sleep_until(deadline) => {
                if idle.deadline() <= tokio::time::Instant::now() {
                    break;
                }
            }
        }
    }
    if draining {
        // A client sending its next request now gets it answered with
        // `Connection: close` (see `serve_connection`); closed while idle,
        // the connection could cross that request on the way, and the
        // client would see an error.
        tokio::select! {
            biased;
            outcome = conn.as_mut() => return outcome,
            () = tokio::time::sleep(DRAIN_LINGER) => {}
        }
    }
    conn.as_mut().shut_down();
    conn.await
}

/// A connection that can be asked to close gracefully.
trait GracefulConnection {
    fn shut_down(self: std::pin::Pin<&mut Self>);
}

impl<I, S, E, B> GracefulConnection
    for hyper_util::server::conn::auto::UpgradeableConnection<'_, I, S, E>
where
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>>,
    S::Future: 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: hyper::body::Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    E: hyper::rt::bounds::Http2ServerConnExec<S::Future, B>,
{
    fn shut_down(self: std::pin::Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

/// The upstream failed before the client got a byte of its answer (it did
/// not answer, or the response body held for phase 4 broke off, was
/// malformed or stopped coming): 502 (504 when it stopped coming: nginx's
/// "upstream timed out"), counted, and logged with `what` and the error's
/// causes; the logging phase runs and the transaction is logged with that
/// status.
fn upstream_failed(
    state: &State,
    guard: &mut Guard<'_>,
    tx: &mut Pending<'_, '_>,
    exchange: &Exchange<'_>,
    what: &str,
    e: &(dyn std::error::Error + 'static),
) -> Response<ProxyBody> {
    state.metrics.upstream_error();
    state.log.write(format!(
        "waf serve: {what}: {} [uri \"{}\"] [unique_id \"{}\"]",
        error_chain(e).escape_debug(),
        exchange.uri.escape_debug(),
        tx.unique_id()
    ));
    let timed_out = sources(e).any(|s| {
        s.downcast_ref::<ProxyError>()
            .is_some_and(|p| matches!(p, ProxyError::UpstreamTimeout))
    });
    let r = if timed_out {
        local_response(StatusCode::GATEWAY_TIMEOUT, "upstream timeout\n")
    } else {
        local_response(StatusCode::BAD_GATEWAY, "upstream unavailable\n")
    };
    tx.answer(guard, exchange, r)
}

/// Whether reading a request body failed because the client framed it
/// wrongly (a chunk size or extension hyper cannot parse, trailers over
/// its limits: hyper's `InvalidInput` and `InvalidData`), not because the
/// connection ended or failed. nginx answers those 400 ("client sent
/// invalid chunked body"), and so does the proxy.
fn malformed_body(e: &hyper::Error) -> bool {
    std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .is_some_and(|io| {
            matches!(
                io.kind(),
                std::io::ErrorKind::InvalidInput | std::io::ErrorKind::InvalidData
            )
        })
}

/// A malformed request body's answer (see [`malformed_body`]): 400,
/// counted with the malformed requests and written to the error log.
fn malformed_body_response(
    state: &State,
    e: &hyper::Error,
    remote: SocketAddr,
    uri: &str,
    tx: &Transaction<'_>,
) -> Response<ProxyBody> {
    state.metrics.malformed();
    state.log.write(format!(
        "waf serve: malformed request body refused (400): {} [client \"{remote}\"] [uri \"{}\"] [unique_id \"{}\"]",
        error_chain(e).escape_debug(),
        uri.escape_debug(),
        tx.unique_id()
    ));
    local_response(StatusCode::BAD_REQUEST, "malformed request body\n")
}

/// The client's side of a request body that failed while it was streamed
/// upstream ([`Capped`]'s error, among the upstream client's error's
/// sources), if that is what failed.
fn client_body_error<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a ProxyError> {
    sources(e).find_map(|s| {
        s.downcast_ref::<ProxyError>()
            .filter(|p| matches!(p, ProxyError::Http(_) | ProxyError::BodyTooLarge))
    })
}

/// A request hyper refused before the WAF saw it (malformed: a request
/// target with characters RFC 3986 forbids, an unknown HTTP version, bad
/// framing; hyper answered 400), or a client too slow with its headers:
/// counted, and written to the error log so that nothing is refused
/// silently.
fn connection_error(state: &State, remote: SocketAddr, e: &(dyn std::error::Error + 'static)) {
    if let Some(io) = e.downcast_ref::<std::io::Error>() {
        if io.kind() == std::io::ErrorKind::TimedOut {
            // Never sent a request: counted, not logged (idle scanners and
            // pre-connecting browsers are common).
            state.metrics.header_timeout();
        }
        return;
    }
    let Some(h) = e.downcast_ref::<hyper::Error>() else {
        return;
    };
    let what = if h.is_parse_too_large() {
        // hyper's 414 for a target too long, 431 for a head too large.
        state.metrics.malformed();
        "request too large refused before the WAF (414 or 431)"
    } else if h.is_parse() || h.is_parse_status() {
        state.metrics.malformed();
        "malformed request refused before the WAF (400)"
    } else if h.is_timeout() {
        state.metrics.header_timeout();
        "request headers too slow: connection closed"
    } else {
        return;
    };
    state
        .log
        .write(format!("waf serve: {what}: {h} [client \"{}\"]", remote));
}

/// Counts (and logs, unless it says nothing of the peer but that it was
/// slow or hung up first) a connection refused for its PROXY protocol
/// header.
fn proxy_protocol_error(state: &State, peer: SocketAddr, e: &crate::proxy_protocol::HeaderError) {
    use crate::proxy_protocol::HeaderError;
    match e {
        // A balancer's TCP health check connects and closes.
        HeaderError::ClosedBeforeHeader => return,
        HeaderError::TimedOut => state.metrics.header_timeout(),
        _ => {}
    }
    state.metrics.proxy_protocol_failure();
    if !matches!(e, HeaderError::TimedOut | HeaderError::Io(_)) {
        state.log.write(format!(
            "waf serve: PROXY protocol header refused: {e}: connection closed [peer \"{peer}\"]"
        ));
    }
}

/// The connection a request came on.
#[derive(Clone, Copy)]
struct Conn {
    remote: SocketAddr,
    local: SocketAddr,
    tls: bool,
}

/// A response the proxy makes itself.
fn local_response(status: StatusCode, body: &'static str) -> Response<ProxyBody> {
    let mut r = Response::new(
        Full::new(Bytes::from_static(body.as_bytes()))
            .map_err(|never| match never {})
            .boxed(),
    );
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// The header that names a request's id (`UNIQUE_ID`, the one its error,
/// audit and access-log lines carry): on the request to the application,
/// and on the WAF's own block responses.
const UNIQUE_ID_HEADER: &str = "x-waf-unique-id";

/// The response for an intervention, or `Err` to close the connection
/// (`drop`). A block names the request's id, in its body and in
/// [`UNIQUE_ID_HEADER`]: someone blocked by mistake has something to quote,
/// and whoever reads the logs finds the rule from it.
fn intervention_response(
    i: &Intervention,
    unique_id: &str,
    page: Option<&BlockPage>,
) -> Result<Response<ProxyBody>, BoxError> {
    match i.action {
        "drop" => Err(ProxyError::Dropped),
        "redirect" => {
            let status = StatusCode::from_u16(i.status)
                .ok()
                .filter(|s| s.is_redirection())
                .unwrap_or(StatusCode::FOUND);
            let mut r = local_response(status, "");
            if let Some(v) = i.url.as_deref().and_then(|u| HeaderValue::from_str(u).ok()) {
                r.headers_mut().insert(LOCATION, v);
            }
            Ok(r)
        }
        _ => {
            let status = StatusCode::from_u16(i.status).unwrap_or(StatusCode::FORBIDDEN);
            let what = match status.as_u16() {
                413 => "request body too large",
                500 => "internal server error",
                _ => "request blocked",
            };
            Ok(block_response(status, what, unique_id, page))
        }
    }
}

/// A block: the site's page if it has one, else `what` and the request's
/// id as text; either way the id in [`UNIQUE_ID_HEADER`] too.
fn block_response(
    status: StatusCode,
    what: &str,
    unique_id: &str,
    page: Option<&BlockPage>,
) -> Response<ProxyBody> {
    let mut r = local_response(status, "");
    let body = match page {
        Some(p) => {
            r.headers_mut()
                .insert(hyper::header::CONTENT_TYPE, p.content_type.clone());
            p.render(status.as_u16(), unique_id)
        }
        None => Bytes::from(format!("{what}\nrequest id: {unique_id}\n")),
    };
    *r.body_mut() = Full::new(body).map_err(|never| match never {}).boxed();
    if let Ok(v) = HeaderValue::from_str(unique_id) {
        r.headers_mut()
            .insert(HeaderName::from_static(UNIQUE_ID_HEADER), v);
    }
    r
}

pub(crate) fn version_bytes(v: Version) -> &'static [u8] {
    match v {
        Version::HTTP_09 => b"",
        Version::HTTP_10 => b"HTTP/1.0",
        Version::HTTP_2 => b"HTTP/2.0",
        Version::HTTP_3 => b"HTTP/3.0",
        _ => b"HTTP/1.1",
    }
}

/// Hop-by-hop headers, never forwarded (RFC 9110, section 7.6.1).
fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
    )
}

/// A request's transaction until it is logged. The logging phase and the
/// log ([`Pending::log`]: error-log lines, audit record, the engine's
/// counters) happen once, on whichever path answers. A request hyper drops
/// before that (its client left while it waited for the upstream, or
/// while it sent its body) is logged when this drops, with nginx's 499:
/// the rules that matched still have their lines, as warnings under the
/// anomaly threshold and everything in `DetectionOnly` must.
struct Pending<'s, 'r> {
    state: &'s State,
    tx: Transaction<'r>,
    /// The request as a drop logs it (its body and the response are the
    /// answering paths' to give).
    request: Exchange<'s>,
    logged: bool,
}

impl<'s, 'r> Pending<'s, 'r> {
    fn new(state: &'s State, tx: Transaction<'r>, request: Exchange<'s>) -> Pending<'s, 'r> {
        Pending {
            state,
            tx,
            request,
            logged: false,
        }
    }

    /// Writes the matched rules that log, and the intervention, to the
    /// error log; and the transaction to the audit log when it is
    /// relevant. Only the first call writes.
    fn log(&mut self, x: &Exchange<'_>) {
        if std::mem::replace(&mut self.logged, true) {
            return;
        }
        let (state, tx) = (self.state, &self.tx);
        state.metrics.engine(tx);
        for line in tx.log_lines() {
            state.log.write(line);
        }
        if let (Some(audit_log), Some(parts)) = (&state.audit, tx.audit_log_parts()) {
            audit_log.write(audit::record(tx, x, parts));
        }
        if state.config().profile {
            state.metrics.profile(tx);
        }
    }

    /// Runs the logging phase and logs the transaction as `x` says.
    fn end(&mut self, guard: &mut Guard<'_>, x: &Exchange<'_>) {
        let _ = guard.run(5, || self.tx.process_logging());
        self.log(x);
    }

    /// Ends the transaction with an answer the proxy made itself (a limit,
    /// a timeout, a bad request target), logged with its status.
    fn answer(
        &mut self,
        guard: &mut Guard<'_>,
        x: &Exchange<'_>,
        r: Response<ProxyBody>,
    ) -> Response<ProxyBody> {
        self.end(
            guard,
            &Exchange {
                status: r.status().as_u16(),
                ..*x
            },
        );
        r
    }

    /// Ends the transaction unlogged: the engine failed on it, and the
    /// proxy's own error-log line says so.
    fn dismiss(&mut self) {
        self.logged = true;
    }
}

impl<'r> std::ops::Deref for Pending<'_, 'r> {
    type Target = Transaction<'r>;

    fn deref(&self) -> &Transaction<'r> {
        &self.tx
    }
}

impl<'r> std::ops::DerefMut for Pending<'_, 'r> {
    fn deref_mut(&mut self) -> &mut Transaction<'r> {
        &mut self.tx
    }
}

impl Drop for Pending<'_, '_> {
    fn drop(&mut self) {
        // A panic unwinding through the request is a bug of its own: no
        // engine run on top of it.
        if self.logged || std::thread::panicking() {
            return;
        }
        let start = Instant::now();
        let tx = &mut self.tx;
        let ran = std::panic::catch_unwind(AssertUnwindSafe(|| tx.process_logging()));
        let took = start.elapsed();
        access::note(|n| n.waf_time += took);
        self.state.metrics.phase_time(5, took);
        if ran.is_err() {
            self.state.metrics.engine_failure();
            self.logged = true;
            return;
        }
        let x = Exchange {
            status: access::CLIENT_CLOSED,
            ..self.request
        };
        self.log(&x);
    }
}

/// `x` with the part of the request body read so far.
fn with_body<'a>(x: &Exchange<'a>, body: &'a [u8]) -> Exchange<'a> {
    Exchange {
        request_body: body,
        ..*x
    }
}

/// Ends the transaction (logging phase, error log) and answers with its
/// intervention.
fn finish_with_intervention(
    state: &State,
    tx: &mut Pending<'_, '_>,
    x: &Exchange<'_>,
    page: Option<&BlockPage>,
) -> Result<Response<ProxyBody>, BoxError> {
    tx.process_logging();
    let status = tx.intervention().map_or(500, |i| i.status);
    tx.log(&Exchange { status, ..*x });
    match tx.intervention() {
        Some(i) => {
            access::note(|n| {
                n.rule_id = Some(i.rule_id);
                n.blocked = true;
            });
            state.metrics.intervention(i.rule_id, i.status);
            intervention_response(i, tx.unique_id(), page)
        }
        None => Ok(local_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            "no intervention\n",
        )),
    }
}

/// The engine's time on one request, and what a failure or an overrun
/// means for it ([`Config::on_error`], [`Config::time_budget`]).
struct Guard<'a> {
    state: &'a State,
    spent: Duration,
    /// Time per phase (1 to 5), for the histograms: observed once per request
    /// and phase when the guard goes.
    per_phase: [Option<Duration>; 5],
    /// Set once the engine failed or the budget ran out under
    /// `on_error: open`: the rest of the request is not inspected.
    open: bool,
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        let spent = self.spent;
        access::note(|n| n.waf_time += spent);
        for (i, t) in self.per_phase.iter().enumerate() {
            if let Some(t) = t {
                self.state.metrics.phase_time(i as u8 + 1, *t);
            }
        }
    }
}

/// Why the engine could not finish a request.
enum Fault {
    /// It panicked (a bug; the transaction's cache is cleared).
    Failed,
    /// Its time went over the budget.
    OverBudget,
}

impl<'a> Guard<'a> {
    fn new(state: &'a State) -> Guard<'a> {
        Guard {
            state,
            spent: Duration::ZERO,
            per_phase: [None; 5],
            open: false,
        }
    }

    /// Runs one engine step of `phase`, timed; `None` when the request is no
    /// longer inspected (`on_error: open` after a fault).
    fn run<T>(&mut self, phase: u8, step: impl FnOnce() -> T) -> Result<Option<T>, Fault> {
        if self.open {
            return Ok(None);
        }
        let start = Instant::now();
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(step));
        let took = start.elapsed();
        self.spent += took;
        if let Some(t) = self.per_phase.get_mut(usize::from(phase).wrapping_sub(1)) {
            *t = Some(t.unwrap_or_default() + took);
        }
        let fault = match outcome {
            Err(_) => {
                self.state.metrics.engine_failure();
                Fault::Failed
            }
            Ok(v) => match self.state.config().time_budget {
                Some(b) if self.spent > b => {
                    self.state.metrics.over_budget();
                    // What the step decided stands (an intervention wins);
                    // the budget decides what happens next.
                    if self.state.config().on_error == OnError::Open {
                        self.open = true;
                        self.state.metrics.failed_open();
                        return Ok(Some(v));
                    }
                    return Err(Fault::OverBudget);
                }
                _ => return Ok(Some(v)),
            },
        };
        if self.state.config().on_error == OnError::Open {
            self.open = true;
            self.state.metrics.failed_open();
            return Ok(None);
        }
        Err(fault)
    }
}

/// The answer to a request the engine could not finish under `on_error:
/// closed`. Its transaction is not logged: this function's line says what
/// happened.
fn fault_response(
    state: &State,
    tx: &mut Pending<'_, '_>,
    fault: Fault,
    uri: &str,
) -> Response<ProxyBody> {
    let why = match fault {
        Fault::Failed => {
            // Whatever state the failure left must not reach another request.
            let _ = std::panic::catch_unwind(AssertUnwindSafe(|| tx.clear_cache()));
            "the engine failed"
        }
        Fault::OverBudget => "the WAF time budget ran out",
    };
    state.log.write(format!(
        "ModSecurity: Access denied with code 503 ({why}; on_error: closed) [uri \"{}\"] [unique_id \"{}\"]",
        uri.escape_debug(),
        tx.unique_id()
    ));
    tx.dismiss();
    local_response(StatusCode::SERVICE_UNAVAILABLE, "request not checked\n")
}

/// One request, from headers to logging.
async fn handle(
    state: Arc<State>,
    client: &UpstreamClient,
    req: Request<Incoming>,
    conn: Conn,
) -> Result<Response<ProxyBody>, BoxError> {
    state.metrics.request();
    let Conn { remote, local, tls } = conn;
    let (mut parts, mut body) = req.into_parts();
    // A protocol switch (WebSocket...): the client's side of the tunnel,
    // handed over by hyper once the `101` is sent (an HTTP/2 client's
    // extended CONNECT: once the `200` is).
    let h2_switch = crate::upgrade::extended_connect(&parts);
    if let Some(protocol) = &h2_switch {
        crate::upgrade::as_http1_switch(&mut parts, protocol);
    }
    let switch = h2_switch
        .clone()
        .or_else(|| crate::upgrade::requested(parts.version, &parts.headers));
    let client_side = switch
        .as_ref()
        .and_then(|_| parts.extensions.remove::<hyper::upgrade::OnUpgrade>());
    // The connection's peer, and the client: the same unless the peer is a
    // trusted proxy that says whom it forwards (`X-Forwarded-For`). The
    // client is what the rules, the filters and the logs see.
    let peer = remote;
    let remote = SocketAddr::new(
        state
            .config()
            .trusted_proxies
            .client(peer.ip(), &parts.headers),
        peer.port(),
    );
    access::note(|n| n.client = Some(remote.ip()));
    let path_and_query = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    // The request target as the client sent it: an HTTP/1 absolute-form
    // target (`GET http://host/path`) stays whole, as Apache hands it to
    // ModSecurity (HTTP/2 always carries a scheme and an authority: the
    // target there is the path).
    let target = if parts.version < Version::HTTP_2 && parts.uri.scheme().is_some() {
        parts.uri.to_string()
    } else {
        path_and_query.to_string()
    };
    let version_text = version_bytes(parts.version);
    // What sites and filters read as the host, and what the application
    // gets: the same host, or a 400 (see `host`).
    let host = match crate::host::request_host(&parts) {
        Ok(host) => host,
        Err(e) => {
            state.metrics.malformed();
            return Ok(local_response(StatusCode::BAD_REQUEST, e.text()));
        }
    };
    // hyper undoes `chunked`, the last coding; any other was applied to the
    // body before it and would reach neither the rules nor the application
    // undone (nginx answers the same).
    if other_transfer_coding(&parts.headers) {
        state.metrics.malformed();
        return Ok(local_response(
            StatusCode::NOT_IMPLEMENTED,
            "transfer codings other than chunked are not supported\n",
        ));
    }
    let view = RequestView {
        host: &host.name,
        method: parts.method.as_str().as_bytes(),
        // Origin form, whatever the client sent: what goes upstream (an
        // absolute-form target's `http://host` is not part of its path).
        uri: path_and_query.as_bytes(),
        version: version_text,
        headers: &parts.headers,
        src: remote.ip(),
        dst_port: local.port(),
        tls,
    };
    let sites = state.sites.load_full();
    let Some(site) = sites.select(&view) else {
        state.metrics.no_site();
        return Ok(local_response(
            StatusCode::NOT_FOUND,
            "no site for this request\n",
        ));
    };
    access::note(|n| n.site = Some(site.counts.clone()));
    // What the upstream's balance chooses a server by (the client, a key).
    let balance_key = site.upstream.key(&view);
    // The transaction comes first: a custom rule's block or log line names
    // the request's id too.
    let rs = site.rules.current();
    let mut tx = {
        let config = state.config();
        rs.transaction_with(waf_engine::EvalOptions {
            profile: config.profile,
            xcache_records: config.value_cache,
            ..rs.eval_options()
        })
    };
    site.apply_exceptions(&view, &mut tx);
    // A trusted proxy's request id becomes the request's (see
    // request_id.rs).
    let request_id_header = {
        // One read of the settings, not held past this block.
        let config = state.config();
        if let Some(name) = &config.request_id_header {
            if config.trusted_proxies.trusts(peer.ip()) {
                if let Some(id) = crate::request_id::from_proxy(&parts.headers, name) {
                    tx.set_unique_id(id);
                }
            }
        }
        config.request_id_header.clone()
    };
    if state.access.is_some() {
        access::note(|n| n.unique_id = Some(tx.unique_id().to_string()));
    }
    let log_custom = |c: &crate::site::CustomRule, what: &str| {
        state.log.write(format!(
            "waf serve: custom rule \"{}\" {what} [when \"{}\"] [client \"{}\"] [uri \"{}\"] [unique_id \"{}\"]",
            c.name.escape_debug(),
            c.when.source().escape_debug(),
            remote.ip(),
            target.escape_debug(),
            tx.unique_id(),
        ));
    };
    let custom = site.custom_action(&view, |c, dry_run| match (&c.action, dry_run) {
        (CustomAction::RateLimit(limit), Some(retry_after)) => {
            state.metrics.custom(&c.name, "rate_limit_dry_run");
            log_custom(c, &limit.over_message(retry_after));
        }
        _ => {
            state.metrics.custom(&c.name, "log");
            log_custom(c, "matched");
        }
    });
    let mut allow_all = false;
    if let Some(acting) = custom {
        let c = acting.rule;
        match &c.action {
            &CustomAction::Redirect(status, ref location) => {
                access::note(|n| {
                    n.custom_rule = Some(c.name.clone());
                    n.blocked = true;
                });
                state.metrics.custom(&c.name, "redirect");
                let Ok(to) = location.render(&host.name, path_and_query) else {
                    log_custom(c, "matched, but the request's host is not a host name: 400");
                    return Ok(local_response(StatusCode::BAD_REQUEST, "bad host\n"));
                };
                log_custom(c, &format!("redirected with {status}"));
                let status = StatusCode::from_u16(status).unwrap_or(StatusCode::MOVED_PERMANENTLY);
                let mut r = local_response(status, "");
                r.headers_mut().insert(LOCATION, to);
                return Ok(r);
            }
            &CustomAction::Block(status) => {
                access::note(|n| {
                    n.custom_rule = Some(c.name.clone());
                    n.blocked = true;
                });
                state.metrics.custom(&c.name, "block");
                state.metrics.intervention(0, status);
                log_custom(c, &format!("blocked with {status}"));
                let status = StatusCode::from_u16(status).unwrap_or(StatusCode::FORBIDDEN);
                return Ok(block_response(
                    status,
                    "request blocked",
                    tx.unique_id(),
                    site.block_page.as_deref(),
                ));
            }
            CustomAction::RateLimit(limit) => {
                access::note(|n| {
                    n.custom_rule = Some(c.name.clone());
                    n.blocked = true;
                });
                state.metrics.custom(&c.name, "rate_limit");
                state.metrics.intervention(0, limit.status);
                log_custom(c, &limit.over_message(acting.retry_after));
                let status =
                    StatusCode::from_u16(limit.status).unwrap_or(StatusCode::TOO_MANY_REQUESTS);
                let mut r = block_response(
                    status,
                    "too many requests",
                    tx.unique_id(),
                    site.block_page.as_deref(),
                );
                r.headers_mut().insert(
                    hyper::header::RETRY_AFTER,
                    HeaderValue::from(acting.retry_after),
                );
                return Ok(r);
            }
            CustomAction::Allow => {
                access::note(|n| n.custom_rule = Some(c.name.clone()));
                state.metrics.custom(&c.name, "allow");
                allow_all = true;
            }
            CustomAction::Log => {}
        }
    }
    if allow_all {
        tx.remove_rules_by_id(0, u64::MAX);
    }
    let mut guard = Guard::new(&state);
    let version = String::from_utf8_lossy(version_text).into_owned();
    let request = Exchange {
        remote,
        local,
        method: parts.method.as_str(),
        uri: &target,
        version: &version,
        request_headers: &parts.headers,
        request_body: &[],
        status: 0,
        response_headers: None,
        response_body: &[],
    };
    // From here on, every way out logs the transaction once (see Pending).
    let mut tx = Pending::new(&state, tx, request);
    // What the paths that answer log: the request's body once read, the
    // response once there is one.
    let mut exchange = request;

    // Phase 1.
    let phase1 = guard.run(1, || {
        tx.process_connection(
            crate::net::IpText::of(remote.ip()).as_str(),
            remote.port(),
            crate::net::IpText::of(local.ip()).as_str(),
            local.port(),
        );
        tx.process_uri(
            target.as_bytes(),
            parts.method.as_str().as_bytes(),
            version_text,
        );
        if parts.headers.get(HOST).is_none() {
            if let Some(a) = parts.uri.authority() {
                tx.add_request_header(b"Host", a.as_str().as_bytes());
            }
        }
        for (name, value) in &parts.headers {
            tx.add_request_header(name.as_str().as_bytes(), value.as_bytes());
        }
        tx.process_request_headers();
    });
    if let Err(f) = phase1 {
        return Ok(fault_response(&state, &mut tx, f, &target));
    }
    if tx.intervention().is_some() {
        return finish_with_intervention(&state, &mut tx, &exchange, site.block_page.as_deref());
    }
    if parts.method == hyper::Method::CONNECT {
        // A reverse proxy opens no tunnels; the WAF still saw and logged it.
        tx.end(
            &mut guard,
            &Exchange {
                status: 405,
                ..exchange
            },
        );
        let mut r = local_response(StatusCode::METHOD_NOT_ALLOWED, "CONNECT is not supported\n");
        r.headers_mut().insert(
            hyper::header::ALLOW,
            HeaderValue::from_static("GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"),
        );
        return Ok(r);
    }

    // A body declared larger than the proxy takes is refused before a byte
    // of it is read.
    let max_body = state.config().max_request_body;
    if body
        .size_hint()
        .exact()
        .is_some_and(|n| n > max_body as u64)
    {
        let r = local_response(StatusCode::PAYLOAD_TOO_LARGE, "request body too large\n");
        return Ok(tx.answer(&mut guard, &exchange, r));
    }

    // The request body: fed while the engine wants it, held until phase 2.
    // One the engine does not inspect (`SecRequestBodyAccess Off`, engine
    // `Off`) is not held: phase 2 runs at once and the body streams on,
    // `max_request_body` still its limit.
    let mut held = Vec::new();
    // Trailers that end the held body go on with it (gRPC and other
    // HTTP/2 clients may send some).
    let mut request_trailers = None;
    let mut lease = Lease::new();
    let mut wanted = tx.inspects_request_body();
    // A compressed body (`Content-Encoding: gzip` or `deflate`, which many
    // applications inflate) is inspected as the application will read it,
    // and one that cannot be (damaged, or in a coding the proxy does not
    // decode) is refused (400, 415) rather than passed on uninspected: the
    // engine's `RequestBodyFeed`, as for the other front ends. The bytes
    // forwarded stay the client's.
    let mut feed = RequestBodyFeed::default();
    let deadline = tokio::time::Instant::now() + state.config().body_timeout;
    while wanted {
        let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) => {
                let r = local_response(StatusCode::REQUEST_TIMEOUT, "request body timeout\n");
                return Ok(tx.answer(&mut guard, &with_body(&exchange, &held), r));
            }
            Ok(None) => break,
            Ok(Some(Err(e))) if malformed_body(&e) => {
                let r = malformed_body_response(&state, &e, remote, &target, &tx);
                return Ok(tx.answer(&mut guard, &with_body(&exchange, &held), r));
            }
            Ok(Some(Err(e))) => {
                // The client is gone with its body half sent: nginx logs
                // that 400 too.
                let x = Exchange {
                    status: 400,
                    ..with_body(&exchange, &held)
                };
                tx.end(&mut guard, &x);
                return Err(ProxyError::Http(e));
            }
            Ok(Some(Ok(frame))) => frame,
        };
        let data = match frame.into_data() {
            Ok(data) => data,
            Err(frame) => {
                request_trailers = frame.into_trailers().ok();
                continue;
            }
        };
        state.metrics.body_bytes(data.len());
        if held.len() + data.len() > max_body {
            let r = local_response(StatusCode::PAYLOAD_TOO_LARGE, "request body too large\n");
            return Ok(tx.answer(&mut guard, &with_body(&exchange, &held), r));
        }
        if !lease.grow(&state.metrics, data.len(), state.config().max_held_bodies) {
            return Ok(tx.answer(&mut guard, &with_body(&exchange, &held), over_budget()));
        }
        if wanted {
            let fed = feed.feed(&mut tx, &data, |tx, b| feed_request_body(&mut guard, tx, b));
            wanted = match fed {
                Ok(w) => w,
                Err(f) => return Ok(fault_response(&state, &mut tx, f, &target)),
            };
            if tx.intervention().is_some() {
                held.extend_from_slice(&data);
                let x = with_body(&exchange, &held);
                return finish_with_intervention(&state, &mut tx, &x, site.block_page.as_deref());
            }
        }
        held.extend_from_slice(&data);
        if !wanted {
            // ProcessPartial past the limit (or DetectionOnly past a Reject
            // limit): phase 2 decides on what it saw, the rest is streamed
            // upstream as it arrives, never held.
            break;
        }
    }
    if wanted {
        // The end of a compressed body: what the decoder holds, and a body
        // cut short is refused as the application would refuse it.
        if let Err(f) = feed.finish(&mut tx, true, |tx, b| feed_request_body(&mut guard, tx, b)) {
            return Ok(fault_response(&state, &mut tx, f, &target));
        }
        if tx.intervention().is_some() {
            let x = with_body(&exchange, &held);
            return finish_with_intervention(&state, &mut tx, &x, site.block_page.as_deref());
        }
    }
    let stream_rest = !wanted && !body.is_end_stream();
    let held = Bytes::from(held);
    exchange.request_body = &held;
    if let Err(f) = guard.run(2, || tx.process_request_body()) {
        return Ok(fault_response(&state, &mut tx, f, &target));
    }
    if tx.intervention().is_some() {
        return finish_with_intervention(&state, &mut tx, &exchange, site.block_page.as_deref());
    }

    // Upstream.
    // The client's headers as they are (a copy of the map, not a rebuild
    // header by header), less the hop-by-hop ones; made again for a
    // request sent once more (see `may_resend`).
    let upstream_headers = || {
        let mut headers = parts.headers.clone();
        headers.retain_hop_by_hop();
        // HTTP/2 clients may send their cookies as several `cookie` fields;
        // joined with "; " before they go on (RFC 9113, 8.2.3: an HTTP/1.1
        // application takes one `Cookie` header, often the first only).
        join_cookies(&mut headers);
        // An HTTP/2 client's `:authority` and an absolute-form target's
        // authority: an HTTP/1.1 application gets it as `Host`, as it would
        // from an HTTP/1.1 client (not the upstream's address, which hyper
        // would put there, nor a `Host` the target overrides).
        if let Some(v) = &host.upstream {
            headers.insert(HOST, v.clone());
        }
        state
            .config()
            .trusted_proxies
            .set_forwarded(&mut headers, peer.ip(), remote.ip(), tls);
        // The request's id in the WAF's logs (error, audit, access), so that
        // the application's own logs can name it; a client's is replaced.
        if let Ok(id) = HeaderValue::from_str(tx.unique_id()) {
            if let Some(name) = &request_id_header {
                headers.insert(name.clone(), id.clone());
            }
            headers.insert(HeaderName::from_static(UNIQUE_ID_HEADER), id);
        }
        if let Some(protocol) = &switch {
            crate::upgrade::mark(&mut headers, protocol.clone());
        }
        if tx.response_body_access() {
            // Only codings phase 4 can read (see encoding.rs).
            crate::encoding::restrict_accept_encoding(&mut headers);
        }
        headers
    };
    let mut headers = upstream_headers();
    // `TE: trailers`, the one `TE` HTTP/2 allows, says the client takes
    // trailers: gRPC servers want it (their status comes in a trailer).
    let te_trailers = switch.is_none() && accepts_trailers(&parts.headers);
    // A body held whole can go to another server of the upstream when one
    // cannot be reached (see upstream.rs); so can one streaming through, as
    // long as no connection read it (it is taken back from a failed
    // attempt). The streamed one keeps the lease on its held head until it
    // is sent; a held one's lease goes once the upstream has answered.
    let (streamed, held_lease) = if stream_rest {
        let head = Full::new(held.clone()).map_err(|never| match never {});
        let body = StreamAfter {
            head: Some(head),
            rest: Capped {
                inner: body,
                left: max_body.saturating_sub(held.len()),
            },
        };
        let body = holding(body.boxed(), lease);
        (Some(Arc::new(std::sync::Mutex::new(Some(body)))), None)
    } else {
        (None, Some(lease))
    };
    // A request on which the application closed its connection without a
    // byte of answer (a kept-alive connection whose idle timeout raced the
    // request: Node's is 5 s, gunicorn's 2 s) goes once more on another
    // connection when sending it again is safe: an idempotent method (RFC
    // 9110, 9.2.2) with its body held, as nginx retries a request that
    // failed on a cached connection.
    let mut may_resend = streamed.is_none() && switch.is_none() && idempotent(&parts.method);
    let deadline = tokio::time::Instant::now() + state.config().upstream_timeout;
    let mut tried = 0u64;
    // The request in progress on the server tried last (for
    // `least_conn`), until its response has been passed on.
    let mut active: Option<crate::upstream::Active>;
    let sent = loop {
        let (i, server) = site.upstream.pick(tried, balance_key);
        tried |= 1 << i;
        access::note(|n| n.upstream = Some(server.url.clone()));
        let Some(uri) = server.uri(path_and_query) else {
            let r = local_response(StatusCode::BAD_REQUEST, "bad request target\n");
            return Ok(tx.answer(&mut guard, &exchange, r));
        };
        let replay = site.upstream.untried(tried);
        let body = match &streamed {
            Some(slot) => Reclaimable {
                slot: slot.clone(),
                body: None,
            }
            .boxed(),
            None => with_trailers(
                Full::new(held.clone()).map_err(|never| match never {}),
                request_trailers.clone(),
            ),
        };
        let mut up = Request::new(body);
        *up.method_mut() = parts.method.clone();
        *up.uri_mut() = uri;
        *up.headers_mut() = if replay {
            headers.clone()
        } else {
            std::mem::take(&mut headers)
        };
        if server.http2 {
            // HTTP/2 names the host in `:authority` (the upstream's, from
            // the URI); a `Host` that differs from it makes the request
            // malformed (RFC 9113, 8.3.1). The client's host still goes as
            // `X-Forwarded-Host`.
            up.headers_mut().remove(HOST);
            if te_trailers {
                up.headers_mut()
                    .insert(hyper::header::TE, HeaderValue::from_static("trailers"));
            }
        }
        let client = client.to(server, switch.is_some());
        active = Some(site.upstream.begin(i));
        let asked = Instant::now();
        let outcome = tokio::time::timeout_at(deadline, client.request(up)).await;
        let took = asked.elapsed();
        if let Some(stats) = site.upstream.stats(i) {
            match &outcome {
                Ok(Ok(r)) => stats.answered(r.status().as_u16(), took),
                // The client's body failed (too large, malformed, cut
                // off), not the server; or the connection's idle timeout
                // raced the request, which goes again.
                Ok(Err(e)) if client_body_error(e).is_some() => {}
                Ok(Err(e)) if may_resend && closed_unanswered(e) => {}
                _ => stats.failed(),
            }
        }
        access::note(|n| n.upstream_time = Some(took));
        match outcome {
            Ok(Err(e)) if may_resend && closed_unanswered(&e) => {
                may_resend = false;
                headers = upstream_headers();
                continue;
            }
            Ok(Err(e)) if e.is_connect() && site.upstream.several() => {
                site.upstream.mark_down(i);
                state.metrics.upstream_server_down();
                state.log.write(format!(
                    "waf serve: upstream server {} unreachable, left out for {} s: {} [uri \"{}\"] [unique_id \"{}\"]",
                    server.url,
                    crate::upstream::DOWN_FOR.as_secs(),
                    error_chain(&e).escape_debug(),
                    target.escape_debug(),
                    tx.unique_id()
                ));
                // A streamed body no connection took is still there.
                let body_left = streamed
                    .as_ref()
                    .is_none_or(|slot| slot.lock().is_ok_and(|b| b.is_some()));
                if replay && body_left {
                    continue;
                }
                break Ok(Err(e));
            }
            other => break other,
        }
    };
    drop(held_lease);
    let response = match sent {
        Err(_) => {
            state.metrics.upstream_error();
            tx.end(
                &mut guard,
                &Exchange {
                    status: 504,
                    ..exchange
                },
            );
            return Ok(local_response(
                StatusCode::GATEWAY_TIMEOUT,
                "upstream timeout\n",
            ));
        }
        Ok(Err(e)) if client_body_error(&e).is_some() => {
            // The body streamed on failed on the client's side: past the
            // limit (the upload was cut, and the client is told why),
            // malformed (400, as when it is held), or cut off (the client
            // is gone; the 400 is for the logs).
            let response = match client_body_error(&e) {
                Some(ProxyError::BodyTooLarge) => {
                    local_response(StatusCode::PAYLOAD_TOO_LARGE, "request body too large\n")
                }
                Some(ProxyError::Http(h)) if malformed_body(h) => {
                    malformed_body_response(&state, h, remote, &target, &tx)
                }
                _ => local_response(StatusCode::BAD_REQUEST, "request body cut off\n"),
            };
            tx.end(
                &mut guard,
                &Exchange {
                    status: response.status().as_u16(),
                    ..exchange
                },
            );
            return Ok(response);
        }
        Ok(Err(e)) => {
            return Ok(upstream_failed(
                &state,
                &mut guard,
                &mut tx,
                &exchange,
                "upstream unavailable",
                &e,
            ));
        }
        Ok(Ok(r)) => r,
    };

    // Phase 3.
    let (mut rparts, rbody) = response.into_parts();
    // Each piece of the body within the upstream timeout of the one
    // before, held for phase 4 or streamed (see read_timeout.rs).
    let rbody = ReadTimeout::new(
        Holding::new(rbody, active.take()).map_err(ProxyError::Http),
        state.config().upstream_timeout,
    );
    for (name, value) in &rparts.headers {
        tx.add_response_header(name.as_str().as_bytes(), value.as_bytes());
    }
    let status = rparts.status.as_u16();
    if let Err(f) = guard.run(3, || {
        tx.process_response_headers(status, version_bytes(rparts.version))
    }) {
        return Ok(fault_response(&state, &mut tx, f, &target));
    }
    if tx.intervention().is_some() {
        return finish_with_intervention(&state, &mut tx, &exchange, site.block_page.as_deref());
    }
    if rparts.status == StatusCode::SWITCHING_PROTOCOLS {
        return Ok(switch_protocols(
            &state,
            &mut guard,
            &mut tx,
            exchange,
            rparts,
            client_side,
            h2_switch.is_some(),
        ));
    }
    rparts.headers.retain_hop_by_hop();
    // The client is answered in the proxy's HTTP version, not the
    // upstream's (hyper answers an HTTP/1.0 client in 1.0, and an HTTP/2
    // one in 2): an HTTP/1.0 upstream's version passed on made every
    // response close its client's connection.
    rparts.version = Version::HTTP_11;

    let coding = crate::encoding::coding(&rparts.headers);
    let inspect = !guard.open && tx.inspects_response_body();
    if inspect && coding == crate::encoding::Coding::Other {
        not_decoded(
            &state,
            &rparts.headers,
            &remote,
            &target,
            "its coding is not gzip or deflate",
        );
    }
    if !inspect || coding == crate::encoding::Coding::Other {
        // Streamed untouched: SSE, downloads, anything not inspected.
        tx.end(
            &mut guard,
            &Exchange {
                status: rparts.status.as_u16(),
                response_headers: Some(&rparts.headers),
                ..exchange
            },
        );
        let body = rbody.boxed();
        return Ok(Response::from_parts(rparts, body));
    }

    // Phase 4: buffer what the engine inspects, decide before sending. A
    // compressed body is decoded for the engine; the client gets it as it
    // came.
    let mut rbody = rbody;
    let mut buffered = Vec::new();
    let mut lease = Lease::new();
    let mut wanted = true;
    let mut decoder = crate::encoding::Decoder::new(coding);
    let mut decoded = Vec::new();
    let mut response_trailers = None;
    while wanted {
        match rbody.frame().await {
            None => {
                if let Some(d) = decoder.as_mut() {
                    let fed = d.finish_feeding(&mut decoded, |b| {
                        feed_response_body(&mut guard, &mut tx, b)
                    });
                    match fed {
                        Ok(_) => {}
                        Err(FeedError::Feed(f)) => {
                            return Ok(fault_response(&state, &mut tx, f, &target))
                        }
                        Err(FeedError::Decode(e)) => {
                            not_decoded(&state, &rparts.headers, &remote, &target, &e.to_string())
                        }
                    }
                }
                break;
            }
            // No byte of the answer has gone to the client yet: it gets
            // a 502, as when the upstream does not answer (nginx's
            // "upstream prematurely closed connection"), not a closed
            // connection.
            Some(Err(e)) => {
                let x = Exchange {
                    response_headers: Some(&rparts.headers),
                    response_body: &buffered,
                    ..exchange
                };
                let what = match e {
                    ProxyError::UpstreamTimeout => "upstream response body timed out",
                    _ => "upstream response body broken off",
                };
                return Ok(upstream_failed(&state, &mut guard, &mut tx, &x, what, &e));
            }
            Some(Ok(frame)) => {
                let data = match frame.into_data() {
                    Ok(data) => data,
                    Err(frame) => {
                        response_trailers = frame.into_trailers().ok();
                        continue;
                    }
                };
                match decoder.as_mut() {
                    None => {
                        wanted = match feed_response_body(&mut guard, &mut tx, &data) {
                            Ok(w) => w,
                            Err(f) => return Ok(fault_response(&state, &mut tx, f, &target)),
                        };
                    }
                    // Decoded a piece at a time, stopping when the engine
                    // wants no more (its limit counts decoded bytes), so a
                    // decompression bomb costs the limit.
                    Some(d) => {
                        let fed = d.feed(&data, &mut decoded, |b| {
                            feed_response_body(&mut guard, &mut tx, b)
                        });
                        wanted = match fed {
                            Ok(w) => w,
                            Err(FeedError::Feed(f)) => {
                                return Ok(fault_response(&state, &mut tx, f, &target))
                            }
                            Err(FeedError::Decode(e)) => {
                                // Inspected as far as it decoded; the rest passes.
                                not_decoded(
                                    &state,
                                    &rparts.headers,
                                    &remote,
                                    &target,
                                    &e.to_string(),
                                );
                                false
                            }
                        };
                    }
                }
                if !lease.grow(&state.metrics, data.len(), state.config().max_held_bodies) {
                    tx.end(
                        &mut guard,
                        &Exchange {
                            status: 503,
                            ..exchange
                        },
                    );
                    return Ok(over_budget());
                }
                buffered.extend_from_slice(&data);
                if tx.intervention().is_some() {
                    let read = decoded_body(&tx, decoder.is_some());
                    let x = Exchange {
                        response_body: read.as_deref().unwrap_or(&buffered),
                        ..exchange
                    };
                    return finish_with_intervention(
                        &state,
                        &mut tx,
                        &x,
                        site.block_page.as_deref(),
                    );
                }
            }
        }
    }
    if let Err(f) = guard.run(4, || tx.process_response_body()) {
        return Ok(fault_response(&state, &mut tx, f, &target));
    }
    let read = decoded_body(&tx, decoder.is_some());
    let x = Exchange {
        status: rparts.status.as_u16(),
        response_headers: Some(&rparts.headers),
        response_body: read.as_deref().unwrap_or(&buffered),
        ..exchange
    };
    if tx.intervention().is_some() {
        return finish_with_intervention(&state, &mut tx, &x, site.block_page.as_deref());
    }
    tx.end(&mut guard, &x);
    let head = Full::new(Bytes::from(buffered)).map_err(|never| match never {});
    let body: ProxyBody = if rbody.is_end_stream() {
        with_trailers(head, response_trailers)
    } else {
        // The engine stopped wanting bytes (ProcessPartial past the limit):
        // what it saw, then the rest as it comes.
        let rest = rbody;
        StreamAfter {
            head: Some(head),
            rest,
        }
        .boxed()
    };
    Ok(Response::from_parts(rparts, holding(body, lease)))
}

/// A request body streamed on as it arrives, cut with
/// [`ProxyError::BodyTooLarge`] past `left` more bytes (the upstream
/// client's error then has it among its sources).
struct Capped {
    inner: Incoming,
    left: usize,
}

impl Body for Capped {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, BoxError>>> {
        use std::task::Poll;
        match std::pin::Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let n = frame.data_ref().map_or(0, Bytes::len);
                if n > self.left {
                    return Poll::Ready(Some(Err(ProxyError::BodyTooLarge)));
                }
                self.left -= n;
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(ProxyError::Http(e)))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// A request body that can be taken back from an attempt that never read
/// it (the connection to the server failed): it stays in `slot` until the
/// first time a connection polls it.
struct Reclaimable {
    slot: Arc<std::sync::Mutex<Option<ProxyBody>>>,
    body: Option<ProxyBody>,
}

impl Reclaimable {
    /// What `f` says of the body, wherever it is now.
    fn peek<T>(&self, f: impl Fn(&ProxyBody) -> T, none: T) -> T {
        match &self.body {
            Some(b) => f(b),
            None => match self.slot.lock() {
                Ok(b) => b.as_ref().map_or(none, f),
                Err(_) => none,
            },
        }
    }
}

impl Body for Reclaimable {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, BoxError>>> {
        if self.body.is_none() {
            self.body = self.slot.lock().ok().and_then(|mut b| b.take());
        }
        match self.body.as_mut() {
            Some(b) => std::pin::Pin::new(b).poll_frame(cx),
            None => std::task::Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.peek(Body::is_end_stream, true)
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.peek(Body::size_hint, hyper::body::SizeHint::with_exact(0))
    }
}

/// A held body, then the trailers that ended it, if any.
fn with_trailers<B>(body: B, trailers: Option<hyper::HeaderMap>) -> ProxyBody
where
    B: Body<Data = Bytes, Error = BoxError> + Send + Sync + 'static,
{
    match trailers {
        None => body.boxed(),
        Some(t) => body.with_trailers(std::future::ready(Some(Ok(t)))).boxed(),
    }
}

/// `body`, keeping `lease` until it is dropped (see budget.rs).
fn holding(body: ProxyBody, lease: Lease) -> ProxyBody {
    if lease.is_empty() {
        body
    } else {
        Holding::new(body, lease).boxed()
    }
}

/// The answer when the bodies held by all requests reached the budget.
fn over_budget() -> Response<ProxyBody> {
    let mut r = local_response(
        StatusCode::SERVICE_UNAVAILABLE,
        "too many bodies in memory: retry\n",
    );
    r.headers_mut()
        .insert(hyper::header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

/// The application agreed to switch protocols (`101`): the logging phase
/// runs, the client gets the `101` (an HTTP/2 client, `h2`: the `200` that
/// opens its extended CONNECT's stream), and a task joins the two
/// connections once hyper hands them over (see upgrade.rs). A `101` the
/// client did not ask for is a broken upstream: 502.
fn switch_protocols(
    state: &Arc<State>,
    guard: &mut Guard<'_>,
    tx: &mut Pending<'_, '_>,
    exchange: Exchange<'_>,
    mut rparts: hyper::http::response::Parts,
    client_side: Option<hyper::upgrade::OnUpgrade>,
    h2: bool,
) -> Response<ProxyBody> {
    let protocol = rparts.headers.get(hyper::header::UPGRADE).cloned();
    let upstream_side = rparts.extensions.remove::<hyper::upgrade::OnUpgrade>();
    let (Some(client_side), Some(upstream_side), Some(protocol)) =
        (client_side, upstream_side, protocol)
    else {
        state.metrics.upstream_error();
        tx.end(
            guard,
            &Exchange {
                status: 502,
                ..exchange
            },
        );
        return local_response(
            StatusCode::BAD_GATEWAY,
            "the upstream switched protocols unasked\n",
        );
    };
    rparts.headers.retain_hop_by_hop();
    if h2 {
        crate::upgrade::as_h2_answer(&mut rparts);
    } else {
        crate::upgrade::mark(&mut rparts.headers, protocol);
    }
    tx.end(
        guard,
        &Exchange {
            status: rparts.status.as_u16(),
            response_headers: Some(&rparts.headers),
            ..exchange
        },
    );
    let open = state.metrics.tunnel_open();
    let (metrics, idle) = (state.metrics.clone(), state.config().tunnel_idle_timeout);
    tokio::spawn(async move {
        let _open = open;
        // Either side failing to hand over (the client left) drops the
        // other, which closes it.
        let Ok((client, upstream)) = tokio::try_join!(client_side, upstream_side) else {
            return;
        };
        let (end, up, down) =
            crate::upgrade::copy_both_ways(TokioIo::new(client), TokioIo::new(upstream), idle)
                .await;
        metrics.tunnel_closed(matches!(end, Ok(crate::upgrade::End::Idle)), up, down);
    });
    Response::from_parts(rparts, Empty::new().map_err(|never| match never {}).boxed())
}

/// Feeds response body bytes to phase 4, timed; whether the engine wants
/// more. Nothing to feed (a compressed piece that decoded to nothing yet)
/// leaves it wanting.
/// Feeds request-body bytes to the engine (phase 2's time): whether it
/// wants more.
fn feed_request_body(
    guard: &mut Guard<'_>,
    tx: &mut Transaction<'_>,
    bytes: &[u8],
) -> Result<bool, Fault> {
    Ok(guard
        .run(2, || tx.append_request_body(bytes))?
        .unwrap_or(false))
}

fn feed_response_body(
    guard: &mut Guard<'_>,
    tx: &mut Transaction<'_>,
    bytes: &[u8],
) -> Result<bool, Fault> {
    if bytes.is_empty() {
        return Ok(true);
    }
    Ok(guard
        .run(4, || tx.append_response_body(bytes))?
        .unwrap_or(false))
}

/// For the audit log, the body as phase 4 read it when that is not the
/// bytes received (a compressed body, decoded): a copy, as the log record
/// is written while the transaction is still in use.
fn decoded_body(tx: &waf_engine::Transaction<'_>, decoding: bool) -> Option<Vec<u8>> {
    decoding.then(|| tx.response_body().to_vec())
}

/// A response body phase 4 should have read but cannot (an unknown coding,
/// or one that does not decode): counted and logged, then sent as it is.
fn not_decoded(
    state: &State,
    headers: &hyper::HeaderMap,
    remote: &SocketAddr,
    target: &str,
    why: &str,
) {
    state.metrics.response_not_decoded();
    let coding = headers
        .get(hyper::header::CONTENT_ENCODING)
        .map_or("", |v| v.to_str().unwrap_or("?"));
    state.log.write(format!(
        "waf serve: response body not inspected: {why} [content-encoding \"{}\"] [client \"{}\"] [uri \"{}\"]",
        coding.escape_debug(),
        remote.ip(),
        target.escape_debug(),
    ));
}

/// An error and its sources (refused, reset, a certificate that did not
/// verify): hyper's own message is only "client error (Connect)".
pub(crate) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    sources(e)
        .map(|s| s.to_string())
        .collect::<Vec<_>>()
        .join(": ")
}

/// An error, then each of its sources in turn.
fn sources<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(e), |s| s.source())
}

/// Whether the upstream closed the connection a request went on without
/// answering it (the connection ended, or was reset, before a response
/// head came back).
fn closed_unanswered(e: &(dyn std::error::Error + 'static)) -> bool {
    sources(e).any(|s| {
        s.downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_incomplete_message)
            || s.downcast_ref::<std::io::Error>().is_some_and(|io| {
                matches!(
                    io.kind(),
                    std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
                )
            })
    })
}

/// Whether a request with this method may be sent twice (RFC 9110,
/// 9.2.2).
fn idempotent(method: &hyper::Method) -> bool {
    use hyper::Method as M;
    [M::GET, M::HEAD, M::OPTIONS, M::TRACE, M::PUT, M::DELETE].contains(method)
}

/// Joins several `cookie` fields into one, with "; ".
fn join_cookies(headers: &mut hyper::HeaderMap) {
    // What filters read as `http.cookie`, too.
    let joined = match crate::filter::combined(headers, "cookie", b"; ") {
        std::borrow::Cow::Owned(joined) => joined,
        std::borrow::Cow::Borrowed(_) => return,
    };
    if let Ok(v) = HeaderValue::from_bytes(&joined) {
        headers.insert(hyper::header::COOKIE, v);
    }
}

/// Whether the client's `TE` lists `trailers`.
fn accepts_trailers(headers: &hyper::HeaderMap) -> bool {
    headers
        .get_all(hyper::header::TE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| {
            t.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("trailers"))
        })
}

/// Whether a request's `Transfer-Encoding` names a coding other than
/// `chunked` (RFC 9112 section 6.1: a server that does not understand one
/// should answer 501).
fn other_transfer_coding(headers: &hyper::HeaderMap) -> bool {
    headers
        .get_all(hyper::header::TRANSFER_ENCODING)
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .any(|t| !t.trim_ascii().eq_ignore_ascii_case(b"chunked"))
}

trait RetainHopByHop {
    fn retain_hop_by_hop(&mut self);
}

impl RetainHopByHop for hyper::HeaderMap {
    /// Removes the hop-by-hop headers of an upstream response.
    fn retain_hop_by_hop(&mut self) {
        let names: Vec<HeaderName> = self.keys().filter(|n| hop_by_hop(n)).cloned().collect();
        for n in names {
            self.remove(n);
        }
    }
}

/// A buffered head, then the rest of a streamed body.
struct StreamAfter<H, R> {
    head: Option<H>,
    rest: R,
}

impl<H, R> Body for StreamAfter<H, R>
where
    H: Body<Data = Bytes, Error = BoxError> + Unpin,
    R: Body<Data = Bytes, Error = BoxError> + Unpin,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, BoxError>>> {
        use std::task::Poll;
        if let Some(head) = self.head.as_mut() {
            match std::pin::Pin::new(head).poll_frame(cx) {
                Poll::Ready(None) => self.head = None,
                other => return other,
            }
        }
        std::pin::Pin::new(&mut self.rest).poll_frame(cx)
    }
}

/// `SecCollectionTimeout`'s default.
const DEFAULT_COLLECTION_TIMEOUT: u64 = 3600;

/// The settings that belong to the process rather than to a server: the
/// persistent-collection store's size (shared by every ruleset compiled
/// here, see `rules::collection_store`).
fn apply_process_settings(config: &Config) {
    crate::rules::collection_store().set_limits(waf_engine::StoreLimits {
        max_bytes: config.collection_memory,
    });
}
