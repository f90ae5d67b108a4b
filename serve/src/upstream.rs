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

use hyper::Uri;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long a server that could not be reached is left out.
pub(crate) const DOWN_FOR: Duration = Duration::from_secs(10);

/// The most servers an upstream may have (the servers a request has tried
/// are a bit set).
pub(crate) const MAX_SERVERS: usize = 64;

/// An upstream: its servers, the next in turn, and when each may be tried
/// again after a failure.
pub(crate) struct Upstream {
    servers: Vec<Endpoint>,
    next: AtomicUsize,
    /// Per server: milliseconds since [`epoch`] before which it is not
    /// tried (0: up).
    down_until: Vec<AtomicU64>,
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
    /// An upstream of one server.
    pub(crate) fn new(uri: &Uri) -> Result<Upstream, String> {
        Self::of(std::slice::from_ref(uri))
    }

    /// An upstream of these servers (at least one, at most
    /// [`MAX_SERVERS`]).
    pub(crate) fn of(uris: &[Uri]) -> Result<Upstream, String> {
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
            down_until: servers.iter().map(|_| AtomicU64::new(0)).collect(),
            servers,
            next: AtomicUsize::new(0),
        })
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
    /// server) if it can: the next one in turn that is up, else the one
    /// back soonest (all down: trying is better than refusing).
    pub(crate) fn pick(&self, tried: u64) -> (usize, &Endpoint) {
        let n = self.servers.len();
        if n == 1 {
            return (0, &self.servers[0]);
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed) % n;
        let now = now_ms();
        let mut soonest: Option<(usize, u64)> = None;
        for k in 0..n {
            let i = (start + k) % n;
            if tried & (1 << i) != 0 {
                continue;
            }
            let until = self.down_until[i].load(Ordering::Relaxed);
            if until <= now {
                return (i, &self.servers[i]);
            }
            if soonest.is_none_or(|(_, u)| until < u) {
                soonest = Some((i, until));
            }
        }
        let i = soonest.map_or(start, |(i, _)| i);
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
        Upstream::of(&uris).unwrap_or_else(|e| panic!("{e}"))
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
        assert!(Upstream::of(&[]).is_err());
        let ftp: Uri = "ftp://a:1".parse().unwrap_or_default();
        let e = Upstream::new(&ftp).err().unwrap_or_default();
        assert!(e.contains("h2c://"), "{e}");
        let h2c: Uri = "h2c://a:50051/api/".parse().unwrap_or_default();
        let u = Upstream::new(&h2c).unwrap_or_else(|e| panic!("{e}"));
        let (_, e) = u.pick(0);
        assert!(e.http2);
        let uri = e.uri("/x?y").map(|u| u.to_string()).unwrap_or_default();
        assert_eq!(uri, "http://a:50051/api/x?y");
    }
}
