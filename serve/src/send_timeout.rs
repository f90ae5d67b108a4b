//! A deadline for sending to a client that stopped reading. A client that
//! asks for a response and then reads it a byte at a time, or not at all
//! (the "slow read" attack), would otherwise hold its connection, the
//! upstream's response behind it and a place in the worker for ever: the
//! other timeouts only bound what the client sends. As nginx's
//! `send_timeout`, a write that makes no progress for the timeout fails
//! with `TimedOut`, and the connection closes; any progress starts the
//! clock again, so a slow but moving download is not cut.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// `inner` whose writes must progress within `limit`.
pub(crate) struct SendTimeout<S> {
    inner: S,
    limit: Duration,
    /// Armed while a write waits (made when first needed: most
    /// connections never wait to send).
    stalled: Option<Pin<Box<Sleep>>>,
    waiting: bool,
}

impl<S> SendTimeout<S> {
    pub(crate) fn new(inner: S, limit: Duration) -> SendTimeout<S> {
        SendTimeout {
            inner,
            limit,
            stalled: None,
            waiting: false,
        }
    }

    /// What a write that returned `outcome` means once the deadline is
    /// taken into account.
    fn check<T>(
        &mut self,
        cx: &mut Context<'_>,
        outcome: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match outcome {
            Poll::Ready(r) => {
                self.waiting = false;
                Poll::Ready(r)
            }
            Poll::Pending => {
                let limit = self.limit;
                let timer = self
                    .stalled
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
                if !self.waiting {
                    // A new wait: the full timeout from now.
                    timer.as_mut().reset(Instant::now() + limit);
                    self.waiting = true;
                }
                if timer.as_mut().poll(cx).is_ready() {
                    Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the client read nothing within the send timeout",
                    )))
                } else {
                    Poll::Pending
                }
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for SendTimeout<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for SendTimeout<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let outcome = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.check(cx, outcome)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let outcome = Pin::new(&mut self.inner).poll_flush(cx);
        self.check(cx, outcome)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let outcome = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.check(cx, outcome)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let outcome = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.check(cx, outcome)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test(start_paused = true)]
    async fn a_write_the_peer_never_takes_fails_at_the_timeout() {
        // A pipe whose reader never reads: writes stall once it is full.
        let (near, _far) = tokio::io::duplex(64);
        let mut s = SendTimeout::new(near, Duration::from_secs(30));
        let start = Instant::now();
        let e = s.write_all(&[0u8; 1024]).await.err().map(|e| e.kind());
        assert_eq!(e, Some(io::ErrorKind::TimedOut));
        let waited = start.elapsed();
        assert!(
            waited >= Duration::from_secs(30) && waited < Duration::from_secs(31),
            "{waited:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_reader_that_keeps_reading_is_not_cut() {
        use tokio::io::AsyncReadExt;
        let (near, mut far) = tokio::io::duplex(64);
        let mut s = SendTimeout::new(near, Duration::from_secs(30));
        // 64 bytes every 20 s: each stall is shorter than the timeout,
        // their sum much longer.
        let reader = tokio::spawn(async move {
            let mut buf = [0u8; 64];
            let mut total = 0;
            while total < 640 {
                tokio::time::sleep(Duration::from_secs(20)).await;
                match far.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => total += n,
                }
            }
            total
        });
        let start = Instant::now();
        s.write_all(&[0u8; 640]).await.expect("not cut");
        assert!(start.elapsed() > Duration::from_secs(100));
        drop(s);
        assert_eq!(reader.await.ok(), Some(640));
    }
}
