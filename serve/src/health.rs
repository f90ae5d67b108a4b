//! Active health checks of upstream servers (the manifest's
//! `health_checks`).
//!
//! A server is left out by the requests it fails only when its connection
//! fails (see upstream.rs). An application that still accepts connections
//! but answers 500s, or one an operator drains before a deploy by turning
//! its health endpoint to 503, keeps getting requests. So each server of a
//! checked upstream is asked for a path every interval, on its own task;
//! after `fails` failed checks in a row it is left out, after `passes`
//! passed checks in a row it is back. A check passes when the server
//! answers within the timeout with a status in the expected ranges (2xx
//! and 3xx by default, as nginx Plus and HAProxy take them).
//!
//! A gRPC server is checked as gRPC load balancers and Kubernetes check
//! one: a call of the standard health service (`grpc.health.v1.Health/
//! Check`, for one service or the server as a whole), which passes when
//! the call succeeds and the answer is `SERVING`. The request and the
//! answer are two-field protocol buffers, encoded and read here.
//!
//! Servers start healthy, so that a start or a reload sends traffic at
//! once (a reload keeps what the running upstream knew, see
//! `Upstream::adopt_state`). The task holds its upstream weakly: when a
//! reload replaces the upstream and its last request is done, the task
//! ends.

use crate::log::ErrorLog;
use crate::metrics::Metrics;
use crate::proxy::UpstreamClient;
use crate::upstream::{Endpoint, Upstream};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::header::{HeaderValue, CONTENT_TYPE, HOST, TE, USER_AGENT};
use hyper::Request;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// What a health check asks and what it takes for an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HealthCheck {
    /// The path (and query) asked for with `GET` (a gRPC check calls
    /// [`GRPC_HEALTH_PATH`]).
    pub path: String,
    /// A gRPC check: the service asked about (empty: the server as a
    /// whole).
    pub grpc: Option<String>,
    /// The `Host` sent to HTTP/1.1 servers (default: the server's own
    /// address, as in its URL).
    pub host: Option<HeaderValue>,
    /// Time between the end of one check and the start of the next.
    pub interval: Duration,
    /// Time a check waits for the status line.
    pub timeout: Duration,
    /// Failed checks in a row that leave a server out.
    pub fails: u32,
    /// Passed checks in a row that bring it back.
    pub passes: u32,
    /// Statuses that pass (inclusive ranges).
    pub status: Vec<(u16, u16)>,
}

impl HealthCheck {
    /// The defaults: every 5 s, a 2 s timeout, out after 2 failures, back
    /// after 2 passes, 200-399 pass.
    pub fn new(path: String) -> HealthCheck {
        HealthCheck {
            path,
            grpc: None,
            host: None,
            interval: Duration::from_secs(5),
            timeout: Duration::from_secs(2),
            fails: 2,
            passes: 2,
            status: vec![(200, 399)],
        }
    }

    fn passes_status(&self, status: u16) -> bool {
        self.status.iter().any(|&(a, b)| (a..=b).contains(&status))
    }
}

/// A server's standing with its health check. Written by the server's
/// check task only; read by every request that picks a server.
#[derive(Debug)]
pub(crate) struct ServerHealth {
    healthy: AtomicBool,
    /// Checks in a row that went against the current standing (failures
    /// while healthy, passes while not).
    streak: AtomicU32,
    /// Checks failed, in all.
    failed: AtomicU64,
}

impl ServerHealth {
    pub(crate) fn new() -> ServerHealth {
        ServerHealth {
            healthy: AtomicBool::new(true),
            streak: AtomicU32::new(0),
            failed: AtomicU64::new(0),
        }
    }

    /// Whether requests may go to the server (always, unchecked).
    pub(crate) fn healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }

    /// Checks failed since the server was first checked.
    pub(crate) fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// Takes the standing of the same server in the upstream a reload
    /// replaces.
    pub(crate) fn adopt(&self, old: &ServerHealth) {
        self.healthy.store(old.healthy(), Ordering::Relaxed);
        self.streak
            .store(old.streak.load(Ordering::Relaxed), Ordering::Relaxed);
        self.failed.store(old.failed(), Ordering::Relaxed);
    }

    /// Records a check; returns the new standing when it changes.
    pub(crate) fn record(&self, passed: bool, check: &HealthCheck) -> Option<bool> {
        if !passed {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
        let healthy = self.healthy();
        if passed == healthy {
            self.streak.store(0, Ordering::Relaxed);
            return None;
        }
        let streak = self.streak.load(Ordering::Relaxed) + 1;
        let needed = if healthy { check.fails } else { check.passes };
        if streak >= needed {
            self.streak.store(0, Ordering::Relaxed);
            self.healthy.store(passed, Ordering::Relaxed);
            Some(passed)
        } else {
            self.streak.store(streak, Ordering::Relaxed);
            None
        }
    }
}

/// What the check tasks share: a client of the upstreams (its own pool),
/// the error log, the counters, and the shutdown signal.
#[derive(Clone)]
pub(crate) struct Checker {
    pub client: Arc<UpstreamClient>,
    pub log: ErrorLog,
    pub metrics: Arc<Metrics>,
    pub stop: tokio::sync::watch::Receiver<bool>,
    pub runtime: tokio::runtime::Handle,
}

impl Checker {
    /// Starts a check task per server of `upstream`, if it is checked.
    pub(crate) fn spawn(&self, upstream: &Arc<Upstream>) {
        if upstream.check.is_none() {
            return;
        }
        for i in 0..upstream.servers().len() {
            let task = self.clone().run(Arc::downgrade(upstream), i);
            self.runtime.spawn(task);
        }
    }

    async fn run(mut self, upstream: Weak<Upstream>, i: usize) {
        loop {
            if *self.stop.borrow() {
                return;
            }
            let Some(up) = upstream.upgrade() else { return };
            let Some(check) = up.check.as_ref() else {
                return;
            };
            let (Some(server), Some(health)) = (up.servers().get(i), up.health.get(i)) else {
                return;
            };
            let outcome = probe(&self.client, server, check).await;
            match health.record(outcome.is_ok(), check) {
                Some(false) => {
                    self.metrics.upstream_server_unhealthy();
                    let why = outcome.err().unwrap_or_default();
                    let (what, asked) = match &check.grpc {
                        Some(service) => ("grpc", service),
                        None => ("path", &check.path),
                    };
                    self.log.write(format!(
                        "waf serve: upstream {} server {} failed {} health checks in a row, left out until it passes {}: {} [{what} \"{}\"]",
                        up.name,
                        server.url,
                        check.fails,
                        check.passes,
                        why.escape_debug(),
                        asked.escape_debug()
                    ));
                }
                Some(true) => self.log.write(format!(
                    "waf serve: upstream {} server {} passed {} health checks in a row, back in",
                    up.name, server.url, check.passes
                )),
                None => {}
            }
            let interval = check.interval;
            // The upstream is not kept alive between checks.
            drop(up);
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = self.stop.changed() => return,
            }
        }
    }
}

/// The most of a check's response body read (so that its connection can
/// be reused); a longer body is left unread and its connection closed.
const BODY_READ: usize = 64 * 1024;

/// Checks `server`: passed, or why not (`HTTP 503`, `no answer within
/// 2 s`, `NOT_SERVING`...).
async fn probe(
    client: &UpstreamClient,
    server: &Endpoint,
    check: &HealthCheck,
) -> Result<(), String> {
    let ask = async {
        match &check.grpc {
            Some(service) => grpc_probe(client, server, check, service).await,
            None => {
                let status = http_probe(client, server, check).await?;
                if check.passes_status(status) {
                    Ok(())
                } else {
                    Err(format!("HTTP {status}"))
                }
            }
        }
    };
    match tokio::time::timeout(check.timeout, ask).await {
        Ok(outcome) => outcome,
        Err(_) => Err(format!(
            "no answer within {} s",
            check.timeout.as_secs_f64()
        )),
    }
}

/// Sends a check's request for its path to `server`: `method`, `body`
/// and `headers`, with the checker's `User-Agent` and, to an HTTP/1.1
/// server, the check's `Host`. The answer's head, or why there is none.
async fn send_check(
    client: &UpstreamClient,
    server: &Endpoint,
    check: &HealthCheck,
    method: hyper::Method,
    body: crate::proxy::ProxyBody,
    headers: &[(hyper::header::HeaderName, &'static str)],
) -> Result<hyper::Response<hyper::body::Incoming>, String> {
    let uri = server
        .uri(&check.path)
        .ok_or_else(|| format!("bad check path: `{}`", check.path))?;
    let mut req = Request::new(body);
    *req.method_mut() = method;
    *req.uri_mut() = uri;
    let h = req.headers_mut();
    h.insert(
        USER_AGENT,
        HeaderValue::from_static("waf-serve-health-check"),
    );
    for (name, value) in headers {
        h.insert(name, HeaderValue::from_static(value));
    }
    if let (Some(host), false) = (&check.host, server.http2) {
        h.insert(HOST, host.clone());
    }
    client
        .to(server, false)
        .request(req)
        .await
        .map_err(|e| crate::proxy::error_chain(&e))
}

/// Asks `server` for the check's path: its status, or why there is none.
async fn http_probe(
    client: &UpstreamClient,
    server: &Endpoint,
    check: &HealthCheck,
) -> Result<u16, String> {
    let body = Empty::new().map_err(|never| match never {}).boxed();
    let response = send_check(client, server, check, hyper::Method::GET, body, &[]).await?;
    let status = response.status().as_u16();
    let mut body = response.into_body();
    let mut read = 0;
    while read <= BODY_READ {
        match body.frame().await {
            Some(Ok(frame)) => read += frame.data_ref().map_or(0, |d| d.len()),
            Some(Err(_)) | None => break,
        }
    }
    Ok(status)
}

/// The standard gRPC health service's `Check` method (a gRPC check's path).
pub(crate) const GRPC_HEALTH_PATH: &str = "/grpc.health.v1.Health/Check";

/// Calls `server`'s health service about `service`: passed when the call
/// succeeds (`grpc-status: 0`) and the answer is `SERVING`.
async fn grpc_probe(
    client: &UpstreamClient,
    server: &Endpoint,
    check: &HealthCheck,
    service: &str,
) -> Result<(), String> {
    let body = Full::new(Bytes::from(grpc_health_request(service)))
        .map_err(|never| match never {})
        .boxed();
    let grpc = [(CONTENT_TYPE, "application/grpc"), (TE, "trailers")];
    let response = send_check(client, server, check, hyper::Method::POST, body, &grpc).await?;
    if response.status() != hyper::StatusCode::OK {
        return Err(format!("HTTP {}", response.status().as_u16()));
    }
    // A call that fails at once answers with its status in the headers
    // ("Trailers-Only"); else it comes in the trailers, after the message.
    let mut grpc_status = grpc_status_of(response.headers());
    let mut body = response.into_body();
    let mut message = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| crate::proxy::error_chain(&e))?;
        match frame.into_data() {
            Ok(data) if message.len() + data.len() <= BODY_READ => message.extend_from_slice(&data),
            Ok(_) => return Err("an answer of more than 64 KiB".into()),
            Err(frame) => {
                if let Ok(trailers) = frame.into_trailers() {
                    grpc_status = grpc_status_of(&trailers).or(grpc_status);
                }
            }
        }
    }
    match grpc_status {
        Some((0, _)) => serving_status(&message),
        Some((code, text)) => Err(format!("gRPC status {code}{text}")),
        None => Err("no grpc-status".into()),
    }
}

/// `grpc-status` as a number, with `grpc-message` (`: text`) if any.
fn grpc_status_of(headers: &hyper::HeaderMap) -> Option<(u32, String)> {
    let code = headers
        .get("grpc-status")?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let text = headers
        .get("grpc-message")
        .and_then(|m| m.to_str().ok())
        .filter(|m| !m.is_empty())
        .map_or_else(String::new, |m| format!(": {m}"));
    Some((code, text))
}

/// A `HealthCheckRequest { service }` as one gRPC message: the frame's
/// prefix (not compressed, length) and the protocol buffer (field 1, a
/// string; absent when empty, as proto3 writes it).
fn grpc_health_request(service: &str) -> Vec<u8> {
    let mut pb = Vec::new();
    if !service.is_empty() {
        pb.push(0x0a);
        let mut n = service.len();
        while n >= 0x80 {
            pb.push((n as u8 & 0x7f) | 0x80);
            n >>= 7;
        }
        pb.push(n as u8);
        pb.extend_from_slice(service.as_bytes());
    }
    let mut out = vec![0];
    out.extend_from_slice(&(pb.len() as u32).to_be_bytes());
    out.extend_from_slice(&pb);
    out
}

/// Passed when the answer, one gRPC message holding a
/// `HealthCheckResponse`, says `SERVING` (its field 1, an enum, is 1);
/// else which status it says.
fn serving_status(frame: &[u8]) -> Result<(), String> {
    let (flag, rest) = frame.split_first().ok_or("an empty answer")?;
    if *flag != 0 {
        return Err("a compressed answer (none was offered)".into());
    }
    let len = rest
        .get(..4)
        .map(|l| u32::from_be_bytes([l[0], l[1], l[2], l[3]]) as usize)
        .ok_or("a truncated answer")?;
    let mut pb = rest.get(4..4 + len).ok_or("a truncated answer")?;
    // proto3 leaves a field at its default (0, UNKNOWN) out.
    let mut status = 0;
    while !pb.is_empty() {
        let key = varint(&mut pb).ok_or("a malformed answer")?;
        match (key >> 3, key & 7) {
            (1, 0) => status = varint(&mut pb).ok_or("a malformed answer")?,
            (_, 0) => {
                varint(&mut pb).ok_or("a malformed answer")?;
            }
            (_, wire) => {
                let skip = match wire {
                    1 => 8,
                    5 => 4,
                    2 => usize::try_from(varint(&mut pb).ok_or("a malformed answer")?)
                        .map_err(|_| "a malformed answer")?,
                    _ => return Err("a malformed answer".into()),
                };
                pb = pb.get(skip..).ok_or("a malformed answer")?;
            }
        }
    }
    match status {
        1 => Ok(()),
        0 => Err("UNKNOWN".into()),
        2 => Err("NOT_SERVING".into()),
        3 => Err("SERVICE_UNKNOWN".into()),
        n => Err(format!("serving status {n}")),
    }
}

/// Reads a protocol-buffer varint off the front of `b`.
fn varint(b: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = b.split_first()?;
        *b = rest;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_goes_out_after_fails_in_a_row_and_back_after_passes() {
        let check = HealthCheck {
            fails: 2,
            passes: 3,
            ..HealthCheck::new("/healthz".into())
        };
        let h = ServerHealth::new();
        assert!(h.healthy());
        // A failure between passes does not count up.
        assert_eq!(h.record(false, &check), None);
        assert_eq!(h.record(true, &check), None);
        assert_eq!(h.record(false, &check), None);
        assert!(h.healthy());
        assert_eq!(h.record(false, &check), Some(false));
        assert!(!h.healthy());
        // Out: passes must come three in a row.
        assert_eq!(h.record(true, &check), None);
        assert_eq!(h.record(true, &check), None);
        assert_eq!(h.record(false, &check), None);
        assert_eq!(h.record(true, &check), None);
        assert_eq!(h.record(true, &check), None);
        assert_eq!(h.record(true, &check), Some(true));
        assert!(h.healthy());
        assert_eq!(h.failed(), 4);
        // The standing survives a reload.
        let again = ServerHealth::new();
        assert_eq!(h.record(false, &check), None);
        assert_eq!(h.record(false, &check), Some(false));
        again.adopt(&h);
        assert!(!again.healthy());
        assert_eq!(again.failed(), 6);
    }

    #[test]
    fn grpc_health_messages_are_encoded_and_read() {
        // HealthCheckRequest { service: "shop.Cart" }, as protoc encodes it.
        assert_eq!(
            grpc_health_request("shop.Cart"),
            b"\0\0\0\0\x0b\x0a\x09shop.Cart".to_vec()
        );
        // The server as a whole: an empty message.
        assert_eq!(grpc_health_request(""), vec![0, 0, 0, 0, 0]);
        // A name of 200 bytes takes a two-byte length.
        let long = "s".repeat(200);
        let frame = grpc_health_request(&long);
        assert_eq!(&frame[..8], &[0, 0, 0, 0, 203, 0x0a, 0xc8, 0x01]);
        assert_eq!(frame.len(), 5 + 203);
        // HealthCheckResponse { status }: SERVING passes, the rest say why.
        assert_eq!(serving_status(b"\0\0\0\0\x02\x08\x01"), Ok(()));
        for (answer, want) in [
            (&b"\0\0\0\0\x02\x08\x02"[..], "NOT_SERVING"),
            (b"\0\0\0\0\x02\x08\x03", "SERVICE_UNKNOWN"),
            (b"\0\0\0\0\0", "UNKNOWN"),
            (b"\0\0\0\0\x02\x08\x07", "serving status 7"),
            (b"", "an empty answer"),
            (
                b"\x01\0\0\0\x02\x08\x01",
                "a compressed answer (none was offered)",
            ),
            (b"\0\0\0\0\x09\x08\x01", "a truncated answer"),
            (b"\0\0\0", "a truncated answer"),
            (b"\0\0\0\0\x02\x08\xff", "a malformed answer"),
            (b"\0\0\0\0\x01\x0f", "a malformed answer"),
            (b"\0\0\0\0\x03\x12\x05a", "a malformed answer"),
        ] {
            assert_eq!(serving_status(answer), Err(want.to_string()), "{answer:?}");
        }
        // Unknown fields of every wire type are skipped, before and after.
        let mut pb = vec![0x10, 0x96, 0x01]; // field 2, varint 150
        pb.extend_from_slice(&[0x19, 1, 2, 3, 4, 5, 6, 7, 8]); // field 3, fixed64
        pb.extend_from_slice(&[0x22, 0x02, b'h', b'i']); // field 4, bytes
        pb.extend_from_slice(&[0x08, 0x01]); // status: SERVING
        pb.extend_from_slice(&[0x2d, 1, 2, 3, 4]); // field 5, fixed32
        let mut frame = vec![0];
        frame.extend_from_slice(&(pb.len() as u32).to_be_bytes());
        frame.extend_from_slice(&pb);
        assert_eq!(serving_status(&frame), Ok(()));
        // A varint of more than ten bytes is malformed, not a panic.
        assert_eq!(varint(&mut &[0xff; 11][..]), None);
        assert_eq!(varint(&mut &[0xac, 0x02][..]), Some(300));
    }

    #[test]
    fn statuses_pass_by_range() {
        let mut check = HealthCheck::new("/".into());
        assert!(check.passes_status(200) && check.passes_status(302));
        assert!(!check.passes_status(404) && !check.passes_status(503));
        check.status = vec![(200, 200), (418, 418)];
        assert!(check.passes_status(418) && !check.passes_status(204));
    }
}
