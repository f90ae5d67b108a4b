//! Counters of the proxy, served in Prometheus' text format on the admin
//! address (`/metrics`), with `/healthz`.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// What the proxy counts. Cheap to update from every request: atomics, and
/// one short lock per intervention.
#[derive(Default)]
pub struct Metrics {
    requests: AtomicU64,
    /// (rule id, status) → interventions.
    interventions: Mutex<BTreeMap<(u64, u16), u64>>,
    upstream_errors: AtomicU64,
    request_body_bytes: AtomicU64,
    reloads: AtomicU64,
    reload_failures: AtomicU64,
}

impl Metrics {
    pub(crate) fn request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn intervention(&self, rule_id: u64, status: u16) {
        if let Ok(mut m) = self.interventions.lock() {
            *m.entry((rule_id, status)).or_default() += 1;
        }
    }

    pub(crate) fn upstream_error(&self) {
        self.upstream_errors.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn body_bytes(&self, n: usize) {
        self.request_body_bytes
            .fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Counts a reload and its outcome.
    pub fn reload(&self, ok: bool) {
        self.reloads.fetch_add(1, Ordering::Relaxed);
        if !ok {
            self.reload_failures.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Requests handled so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// The Prometheus text exposition of every counter.
    pub fn render(&self, error_log_dropped: u64) -> String {
        let mut s = String::new();
        let mut counter = |name: &str, help: &str, value: u64| {
            let _ = writeln!(
                s,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
            );
        };
        counter("waf_requests_total", "Requests received.", self.requests());
        counter(
            "waf_upstream_errors_total",
            "Requests the upstream did not answer (502/504).",
            self.upstream_errors.load(Ordering::Relaxed),
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
            error_log_dropped,
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
        s
    }
}
