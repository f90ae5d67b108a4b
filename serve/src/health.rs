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
//! Servers start healthy, so that a start or a reload sends traffic at
//! once (a reload keeps what the running upstream knew, see
//! `Upstream::adopt_state`). The task holds its upstream weakly: when a
//! reload replaces the upstream and its last request is done, the task
//! ends.

use crate::log::ErrorLog;
use crate::metrics::Metrics;
use crate::proxy::UpstreamClient;
use crate::upstream::{Endpoint, Upstream};
use http_body_util::{BodyExt, Empty};
use hyper::header::{HeaderValue, HOST, USER_AGENT};
use hyper::Request;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// What a health check asks and what it takes for an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HealthCheck {
    /// The path (and query) asked for with `GET`.
    pub path: String,
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
            let passed = matches!(outcome, Ok(s) if check.passes_status(s));
            match health.record(passed, check) {
                Some(false) => {
                    self.metrics.upstream_server_unhealthy();
                    let why = match outcome {
                        Ok(status) => format!("HTTP {status}"),
                        Err(e) => e,
                    };
                    self.log.write(format!(
                        "waf serve: upstream {} server {} failed {} health checks in a row, left out until it passes {}: {} [path \"{}\"]",
                        up.name,
                        server.url,
                        check.fails,
                        check.passes,
                        why.escape_debug(),
                        check.path.escape_debug()
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

/// Asks `server` for the check's path: its status, or why there is none.
async fn probe(
    client: &UpstreamClient,
    server: &Endpoint,
    check: &HealthCheck,
) -> Result<u16, String> {
    let uri = server
        .uri(&check.path)
        .map_err(|e| format!("bad check path: {e}"))?;
    let body = Empty::new().map_err(|never| match never {}).boxed();
    let mut req = Request::new(body);
    *req.uri_mut() = uri;
    let headers = req.headers_mut();
    headers.insert(
        USER_AGENT,
        HeaderValue::from_static("waf-serve-health-check"),
    );
    if let (Some(host), false) = (&check.host, server.http2) {
        headers.insert(HOST, host.clone());
    }
    let ask = async {
        let response = client
            .to(server, false)
            .request(req)
            .await
            .map_err(|e| crate::proxy::error_chain(&e))?;
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
    };
    match tokio::time::timeout(check.timeout, ask).await {
        Ok(outcome) => outcome,
        Err(_) => Err(format!(
            "no answer within {} s",
            check.timeout.as_secs_f64()
        )),
    }
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
    fn statuses_pass_by_range() {
        let mut check = HealthCheck::new("/".into());
        assert!(check.passes_status(200) && check.passes_status(302));
        assert!(!check.passes_status(404) && !check.passes_status(503));
        check.status = vec![(200, 200), (418, 418)];
        assert!(check.passes_status(418) && !check.passes_status(204));
    }
}
