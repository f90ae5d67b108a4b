//! A bound on the message bodies held in memory by all requests together.
//!
//! The proxy holds a request body until phase 2 allows it, and an
//! inspected response body until phase 4 has seen it. Each is bounded per
//! request (`max_request_body`, `SecResponseBodyLimit`), but nothing bounded
//! their sum: a few hundred clients uploading at once, each within its
//! limit, could hold more memory than the machine has. Every held byte is
//! now leased from one budget ([`Config::max_held_bodies`]); a request whose
//! next chunk does not fit is answered 503 with `Retry-After` (fail closed:
//! an uninspected pass-through would let a flood of uploads switch the WAF
//! off for everyone), counted in `waf_body_budget_exceeded_total`. The bytes
//! go back to the budget when the body has been sent on and dropped.
//!
//! [`Config::max_held_bodies`]: crate::Config::max_held_bodies

use crate::metrics::Metrics;
use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// Bytes one request holds, given back when it drops. A request that holds
/// nothing (most: no body, or one not inspected) touches no shared counter.
pub(crate) struct Lease {
    held: Option<Arc<Metrics>>,
    bytes: u64,
}

impl Lease {
    pub(crate) fn new() -> Lease {
        Lease {
            held: None,
            bytes: 0,
        }
    }

    /// Takes `n` more bytes from the budget of `limit`; `false` (and
    /// counted) when they do not fit.
    pub(crate) fn grow(&mut self, metrics: &Arc<Metrics>, n: usize, limit: u64) -> bool {
        if n == 0 {
            return true;
        }
        if !metrics.hold_body_bytes(n as u64, limit) {
            return false;
        }
        self.bytes += n as u64;
        if self.held.is_none() {
            self.held = Some(metrics.clone());
        }
        true
    }

    /// Whether it holds anything.
    pub(crate) fn is_empty(&self) -> bool {
        self.bytes == 0
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(m) = &self.held {
            m.release_body_bytes(self.bytes);
        }
    }
}

/// A body that keeps its bytes' lease (or another guard: an upstream
/// server's count of requests in progress) until it is dropped (sent on,
/// or abandoned by a client that left).
pub(crate) struct Holding<B, G = Lease> {
    inner: B,
    _guard: G,
}

impl<B, G> Holding<B, G> {
    /// `inner`, keeping `guard` (a lease, or anything else released when
    /// dropped) until the body is dropped.
    pub(crate) fn new(inner: B, guard: G) -> Holding<B, G> {
        Holding {
            inner,
            _guard: guard,
        }
    }
}

impl<B: Body<Data = Bytes> + Unpin, G: Unpin> Body for Holding<B, G> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Full};

    #[test]
    fn leases_share_one_budget_and_give_it_back_when_dropped() {
        let m = Arc::new(Metrics::default());
        let mut a = Lease::new();
        let mut b = Lease::new();
        assert!(a.grow(&m, 600, 1000));
        assert!(!b.grow(&m, 500, 1000), "600 + 500 is over 1000");
        assert!(b.grow(&m, 400, 1000));
        assert!(!a.grow(&m, 1, 1000));
        assert_eq!(m.held_body_bytes(), 1000);
        drop(a);
        assert_eq!(m.held_body_bytes(), 400);
        assert!(b.grow(&m, 600, 1000));
        drop(b);
        assert_eq!(m.held_body_bytes(), 0);
        assert_eq!(m.body_budget_exceeded(), 2);
        // Nothing held: nothing to give back, and no shared counter touched.
        let empty = Lease::new();
        assert!(empty.is_empty() && empty.held.is_none());
    }

    #[tokio::test]
    async fn a_body_keeps_its_lease_until_it_is_dropped() {
        let m = Arc::new(Metrics::default());
        let mut lease = Lease::new();
        assert!(lease.grow(&m, 5, 100));
        let body = Holding::new(Full::new(Bytes::from_static(b"hello")), lease);
        assert_eq!(m.held_body_bytes(), 5);
        let got = body.collect().await.expect("body").to_bytes();
        assert_eq!(&got[..], b"hello");
        assert_eq!(m.held_body_bytes(), 0, "collected, hence dropped");
    }
}
