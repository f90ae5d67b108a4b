//! A deadline for a connection's first byte. hyper's header timeout starts
//! once a request begins; before that, the HTTP/1-or-2 detection of
//! `hyper_util`'s auto builder (and a TLS connection after its handshake)
//! would wait for a first byte forever, so idle connections that never send
//! anything would pile up. This wrapper fails the read with `TimedOut` when
//! the first byte does not arrive in time; after it, reads pass through.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// `inner` whose first byte must arrive within the deadline.
pub(crate) struct FirstByte<S> {
    inner: S,
    deadline: Option<Pin<Box<Sleep>>>,
}

impl<S> FirstByte<S> {
    pub(crate) fn new(inner: S, within: Duration) -> FirstByte<S> {
        FirstByte {
            inner,
            deadline: Some(Box::pin(tokio::time::sleep(within))),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for FirstByte<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(r) => {
                if buf.filled().len() > before {
                    self.deadline = None;
                }
                Poll::Ready(r)
            }
            Poll::Pending => {
                let expired = match self.deadline.as_mut() {
                    Some(d) => d.as_mut().poll(cx).is_ready(),
                    None => false,
                };
                if expired {
                    Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "no request within the header timeout",
                    )))
                } else {
                    Poll::Pending
                }
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for FirstByte<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::send_timeout::SendTimeout;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// The stack a plain connection is served through passes writes on as
    /// the socket takes them: gathered writes stay gathered (hyper then
    /// sends a response's head and body in one `writev`, not copied into
    /// one buffer), and flush, shutdown and reads reach the socket.
    #[tokio::test]
    async fn the_connection_stack_passes_every_write_method_through() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let client = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (server, _) = listener.accept().await.expect("accept");
        let limit = Duration::from_secs(30);
        let mut wrapped = FirstByte::new(SendTimeout::new(server, limit), limit);
        assert!(wrapped.is_write_vectored(), "a TCP socket gathers writes");

        let mut peer = client;
        peer.write_all(b"ping").await.expect("peer write");
        let mut got = [0u8; 4];
        wrapped.read_exact(&mut got).await.expect("read through");
        assert_eq!(&got, b"ping");

        let parts = [io::IoSlice::new(b"head, "), io::IoSlice::new(b"body")];
        // An empty socket buffer takes both slices in one call (a write
        // method not passed on would write the first slice alone).
        let n = wrapped.write_vectored(&parts).await.expect("writev");
        assert_eq!(n, 10, "both slices in one write");
        wrapped.flush().await.expect("flush");
        wrapped.shutdown().await.expect("shutdown");
        let mut all = Vec::new();
        peer.read_to_end(&mut all).await.expect("peer read");
        assert_eq!(all, b"head, body", "in order, then the end");

        // A writer that does not gather says so through both wrappers.
        let plain = FirstByte::new(SendTimeout::new(OneSlice, limit), limit);
        assert!(!plain.is_write_vectored());
    }

    /// A writer without gathered writes (the trait's default).
    struct OneSlice;

    impl AsyncWrite for OneSlice {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            Poll::Ready(Ok(buf.len()))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }
}
