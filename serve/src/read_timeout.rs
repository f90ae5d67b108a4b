//! A deadline between two reads of an upstream's response body streamed to
//! the client. An application that sends its response headers and then
//! stalls (a hung worker, a lost database) would otherwise hold the
//! client's connection, the upstream's and a place in the worker for ever:
//! `upstream_timeout` bounds only the wait for the headers. As nginx's
//! `proxy_read_timeout`, a wait for the next piece of the body longer than
//! the timeout ends the response (the client sees it cut, as from nginx);
//! every piece starts the clock again, so a slow but moving download or an
//! event stream with heartbeats is not cut.

use crate::proxy::ProxyError;
use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::{Instant, Sleep};

/// `inner`, whose next frame must come within `limit`.
pub(crate) struct ReadTimeout<B> {
    inner: B,
    limit: Duration,
    /// Armed while a read waits (made when first needed: most bodies are
    /// read as fast as they come).
    stalled: Option<Pin<Box<Sleep>>>,
    waiting: bool,
}

impl<B> ReadTimeout<B> {
    pub(crate) fn new(inner: B, limit: Duration) -> ReadTimeout<B> {
        ReadTimeout {
            inner,
            limit,
            stalled: None,
            waiting: false,
        }
    }
}

impl<B> Body for ReadTimeout<B>
where
    B: Body<Data = Bytes, Error = ProxyError> + Unpin,
{
    type Data = Bytes;
    type Error = ProxyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ProxyError>>> {
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                self.waiting = false;
                Poll::Ready(frame)
            }
            Poll::Pending => {
                let limit = self.limit;
                let new_wait = !std::mem::replace(&mut self.waiting, true);
                let timer = self
                    .stalled
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
                if new_wait {
                    timer.as_mut().reset(Instant::now() + limit);
                }
                if timer.as_mut().poll(cx).is_ready() {
                    Poll::Ready(Some(Err(ProxyError::UpstreamTimeout)))
                } else {
                    Poll::Pending
                }
            }
        }
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
    use http_body_util::BodyExt;

    /// A body that yields `pieces`, each after its delay.
    fn paced(
        pieces: Vec<(Duration, &'static str)>,
    ) -> http_body_util::StreamBody<
        impl futures_util::Stream<Item = Result<Frame<Bytes>, ProxyError>> + Unpin,
    > {
        let stream = futures_util::stream::iter(pieces).then(|(delay, text)| async move {
            tokio::time::sleep(delay).await;
            Ok(Frame::data(Bytes::from_static(text.as_bytes())))
        });
        http_body_util::StreamBody::new(Box::pin(stream))
    }

    use futures_util::StreamExt;

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stops_coming_fails_at_the_timeout() {
        let body = paced(vec![
            (Duration::ZERO, "head"),
            (Duration::from_secs(3600), "never"),
        ]);
        let mut body = ReadTimeout::new(body, Duration::from_secs(30));
        let first = body.frame().await.and_then(|f| f.ok()?.into_data().ok());
        assert_eq!(first.as_deref(), Some(&b"head"[..]));
        let start = Instant::now();
        let second = body.frame().await;
        assert!(matches!(second, Some(Err(ProxyError::UpstreamTimeout))));
        let waited = start.elapsed();
        assert!(
            waited >= Duration::from_secs(30) && waited < Duration::from_secs(31),
            "{waited:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_body_that_keeps_coming_is_not_cut() {
        let pieces = (0..10).map(|_| (Duration::from_secs(20), "beat")).collect();
        let body = ReadTimeout::new(paced(pieces), Duration::from_secs(30));
        let start = Instant::now();
        let all = body.collect().await.ok().map(|c| c.to_bytes());
        assert_eq!(all.map(|b| b.len()), Some(40));
        assert!(start.elapsed() >= Duration::from_secs(200));
    }
}
