//! Upstreams: where requests go once the WAF lets them through. An upstream
//! is one or more servers of the same application; requests take them in
//! turn, and a server that cannot be reached is left out for a while.
//!
//! A WAF in front of an application that runs on several machines must not
//! make one of them a single point of failure, nor need a load balancer of
//! its own behind it. The policy is nginx's default one (round robin, a
//! server that fails to connect is not tried for 10 s): a request whose
//! body is held whole (the usual case: phase 2 needs it) goes to the next
//! server when one refuses the connection, so a server going down costs no
//! request. A request whose body is streaming through cannot be sent twice
//! and gets the 502.
//!
//! With a health check (see health.rs), a server that fails it is left out
//! too, until it passes again: what catches an application that still
//! accepts connections but answers errors, or one being drained for a
//! deploy.

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
    next: AtomicUsize,
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

    /// The upstream URI for a request target (path and query).
    pub(crate) fn uri(&self, path_and_query: &str) -> Result<Uri, hyper::http::Error> {
        let uri = format!("{}{}{}", self.scheme_authority, self.prefix, path_and_query);
        Ok(uri.parse::<Uri>()?)
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

impl Upstream {
    /// An upstream of one server, unchecked.
    pub(crate) fn new(name: &str, uri: &Uri) -> Result<Upstream, String> {
        Self::of(name, std::slice::from_ref(uri), None)
    }

    /// An upstream of these servers (at least one, at most
    /// [`MAX_SERVERS`]), health-checked if `check` is given.
    pub(crate) fn of(
        name: &str,
        uris: &[Uri],
        check: Option<HealthCheck>,
    ) -> Result<Upstream, String> {
        if uris.is_empty() {
            return Err("give at least one server URL".into());
        }
        if uris.len() > MAX_SERVERS {
            return Err(format!(
                "{} servers: an upstream has at most {MAX_SERVERS}",
                uris.len()
            ));
        }
        let servers = uris
            .iter()
            .map(Endpoint::new)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Upstream {
            name: name.into(),
            down_until: servers.iter().map(|_| AtomicU64::new(0)).collect(),
            health: servers
                .iter()
                .map(|s| ServerHealth::new(s.url.clone()))
                .collect(),
            stats: servers.iter().map(|_| OnceLock::new()).collect(),
            servers,
            next: AtomicUsize::new(0),
            check,
        })
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
    /// server) if it can: the next one in turn that is up and passes its
    /// health check; else the next that is up (every server failing its
    /// check: the check may be what is wrong, and trying is better than
    /// refusing); else the one back soonest.
    pub(crate) fn pick(&self, tried: u64) -> (usize, &Endpoint) {
        let n = self.servers.len();
        if n == 1 {
            return (0, &self.servers[0]);
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed) % n;
        let now = now_ms();
        let mut up_unhealthy: Option<usize> = None;
        let mut soonest: Option<(usize, u64)> = None;
        for k in 0..n {
            let i = (start + k) % n;
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
        let i = up_unhealthy.or(soonest.map(|(i, _)| i)).unwrap_or(start);
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

    fn upstream(urls: &[&str]) -> Upstream {
        let uris: Vec<Uri> = urls.iter().filter_map(|u| u.parse().ok()).collect();
        Upstream::of("app", &uris, None).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn servers_take_requests_in_turn() {
        let u = upstream(&["http://a:1", "http://b:1", "http://c:1"]);
        let picked: Vec<usize> = (0..6).map(|_| u.pick(0).0).collect();
        assert_eq!(picked, [0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn a_server_down_is_skipped_until_its_time_is_up() {
        let u = upstream(&["http://a:1", "http://b:1", "http://c:1"]);
        u.mark_down(1);
        let picked: Vec<usize> = (0..6).map(|_| u.pick(0).0).collect();
        assert_eq!(picked, [0, 2, 2, 0, 2, 2]);
        // Its time is up: back in turn.
        u.down_until[1].store(0, Ordering::Relaxed);
        assert!((0..3).any(|_| u.pick(0).0 == 1));
    }

    #[test]
    fn a_server_failing_its_checks_is_skipped_unless_all_are() {
        let check = HealthCheck {
            fails: 1,
            ..HealthCheck::new("/healthz".into())
        };
        let u = upstream(&["http://a:1", "http://b:1", "http://c:1"]);
        assert_eq!(u.health[2].record(false, &check), Some(false));
        let picked: Vec<usize> = (0..6).map(|_| u.pick(0).0).collect();
        assert_eq!(picked, [0, 1, 0, 0, 1, 0]);
        // Every server up failing: the next one up in turn, not refused.
        u.health[0].record(false, &check);
        u.mark_down(1);
        assert_eq!(u.pick(0).0, 0);
        u.health[1].record(false, &check);
        assert!((0..3).all(|_| u.pick(0).0 != 1), "down beats failing");
        // A reload keeps what was known of the servers it keeps.
        let uris: Vec<Uri> = ["http://c:1", "http://b:1", "http://d:1"]
            .iter()
            .filter_map(|u| u.parse().ok())
            .collect();
        let again = Upstream::of("app", &uris, None).unwrap_or_else(|e| panic!("{e}"));
        again.adopt_state(&u);
        assert!(!again.health[0].healthy() && !again.health[1].healthy());
        assert!(again.health[2].healthy());
        assert_ne!(again.down_until[1].load(Ordering::Relaxed), 0);
        let other = Upstream::of("other", &uris, None).unwrap_or_else(|e| panic!("{e}"));
        other.adopt_state(&u);
        assert!(
            other.health[0].healthy(),
            "another upstream's servers are its own"
        );
    }

    #[test]
    fn a_retry_takes_a_server_not_tried_and_all_down_still_picks_one() {
        let u = upstream(&["http://a:1", "http://b:1"]);
        let (first, _) = u.pick(0);
        let (second, _) = u.pick(1 << first);
        assert_ne!(first, second);
        assert!(!u.untried((1 << first) | (1 << second)));
        u.mark_down(0);
        u.mark_down(1);
        // Both down: the one back soonest (server 0, marked first).
        u.down_until[1].store(u64::MAX, Ordering::Relaxed);
        assert_eq!(u.pick(0).0, 0);
    }

    #[test]
    fn urls_are_checked() {
        assert!(Upstream::of("app", &[], None).is_err());
        let ftp: Uri = "ftp://a:1".parse().unwrap_or_default();
        let e = Upstream::new("app", &ftp).err().unwrap_or_default();
        assert!(e.contains("h2c://"), "{e}");
        let h2c: Uri = "h2c://a:50051/api/".parse().unwrap_or_default();
        let u = Upstream::new("app", &h2c).unwrap_or_else(|e| panic!("{e}"));
        let (_, e) = u.pick(0);
        assert!(e.http2);
        let uri = e.uri("/x?y").map(|u| u.to_string()).unwrap_or_default();
        assert_eq!(uri, "http://a:50051/api/x?y");
    }
}
