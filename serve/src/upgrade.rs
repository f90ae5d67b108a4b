//! Protocol switches (`Upgrade`, RFC 9110 section 7.8): WebSocket and the
//! like, over HTTP/1.1; and their HTTP/2 form, an extended `CONNECT` with a
//! `:protocol` (RFC 8441, what browsers use for a WebSocket when the server
//! offers it), which the proxy passes on to the application as the
//! HTTP/1.1 switch (applications and their frameworks speak that), then
//! answers the client with the `200` that opens the stream.
//!
//! To the WAF the handshake is a request like any other: phases 1 and 2 on
//! the client's request, phase 3 on the application's `101 Switching
//! Protocols`, then the logging phase; a rule that denies answers instead
//! of the switch, and the application never sees the request. What follows
//! the switch is no longer HTTP: the client's connection and the one to the
//! application are joined and bytes are copied both ways, uninspected (as
//! ModSecurity does behind nginx), until both sides have closed or nothing
//! has passed for the idle timeout.
//!
//! `Connection` and `Upgrade` are hop-by-hop headers, so the proxy drops
//! them like the others and puts them back, on the request to the
//! application and on the `101` to the client, only for a switch.
//!
//! A switch to HTTP itself (`h2c`, `h2`, `HTTP/2.0`) or to TLS (RFC 2817's
//! `TLS/1.2`, with HTTP inside) is never asked for: the tunnel would carry
//! HTTP requests from the client to the application that no rule sees
//! ("h2c smuggling": an application that takes the switch, Go's `h2c`
//! handler for one, then serves whatever the client sends through it). The
//! request goes on as a plain one, without `Upgrade`, as nginx sends it
//! unless told otherwise.

use hyper::header::{
    HeaderMap, HeaderValue, CONNECTION, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_KEY, UPGRADE,
};
use hyper::Version;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The protocol the client asks to switch to: its `Upgrade` header, when
/// the request is HTTP/1.1 and `Connection` lists `upgrade` (HTTP/2 has no
/// such switch).
pub(crate) fn requested(version: Version, headers: &HeaderMap) -> Option<HeaderValue> {
    if version != Version::HTTP_11 {
        return None;
    }
    let asked = headers
        .get_all(CONNECTION)
        .iter()
        .any(|v| lists(v, b"upgrade"));
    asked
        .then(|| headers.get(UPGRADE).filter(|p| tunnels_no_http(p)).cloned())
        .flatten()
}

/// Whether none of the protocols an `Upgrade` (or `:protocol`) lists is
/// HTTP or TLS (see the module's comment). Each is `name[/version]`.
fn tunnels_no_http(protocols: &HeaderValue) -> bool {
    protocols.as_bytes().split(|&b| b == b',').all(|p| {
        let p = p.trim_ascii();
        let name = p.split(|&b| b == b'/').next().unwrap_or(p);
        !(name.eq_ignore_ascii_case(b"h2c")
            || name.eq_ignore_ascii_case(b"h2")
            || name.eq_ignore_ascii_case(b"http")
            || name.eq_ignore_ascii_case(b"tls"))
    })
}

/// The protocol an HTTP/2 client asks for with an extended `CONNECT`
/// (RFC 8441: `:method CONNECT`, `:protocol websocket`).
pub(crate) fn extended_connect(parts: &hyper::http::request::Parts) -> Option<HeaderValue> {
    if parts.version != Version::HTTP_2 || parts.method != hyper::Method::CONNECT {
        return None;
    }
    let protocol = parts.extensions.get::<hyper::ext::Protocol>()?;
    HeaderValue::from_str(protocol.as_str())
        .ok()
        .filter(tunnels_no_http)
}

/// Turns an extended `CONNECT` into the HTTP/1.1 request that asks the
/// application for the same switch: a `GET` of the same target, which the
/// rules then see as they see an HTTP/1.1 client's handshake. A WebSocket
/// gets the `Sec-WebSocket-Key` HTTP/1.1 requires (RFC 8441 drops it):
/// 16 random bytes, base64.
pub(crate) fn as_http1_switch(parts: &mut hyper::http::request::Parts, protocol: &HeaderValue) {
    use base64::Engine;
    parts.method = hyper::Method::GET;
    if protocol.as_bytes().eq_ignore_ascii_case(b"websocket")
        && !parts.headers.contains_key(SEC_WEBSOCKET_KEY)
    {
        let mut nonce = [0u8; 16];
        // No randomness from the system is a broken system; the key then
        // still differs per request (time and counter), which is what the
        // application checks.
        if getrandom::getrandom(&mut nonce).is_err() {
            static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            nonce[..8].copy_from_slice(&n.to_le_bytes());
            nonce[8..].copy_from_slice(&t.to_le_bytes());
        }
        let key = base64::engine::general_purpose::STANDARD.encode(nonce);
        if let Ok(v) = HeaderValue::from_str(&key) {
            parts.headers.insert(SEC_WEBSOCKET_KEY, v);
        }
    }
}

/// The application's `101` as the answer to an extended `CONNECT`: `200`,
/// without the HTTP/1.1 switch's own headers (RFC 8441 section 5).
pub(crate) fn as_h2_answer(parts: &mut hyper::http::response::Parts) {
    parts.status = hyper::StatusCode::OK;
    for name in [CONNECTION, UPGRADE, SEC_WEBSOCKET_ACCEPT] {
        parts.headers.remove(name);
    }
}

/// Whether a comma-separated header value lists `token` (ASCII case aside).
fn lists(value: &HeaderValue, token: &[u8]) -> bool {
    value
        .as_bytes()
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

/// Marks a message as a switch to `protocol`: the request to the
/// application, or the `101` to the client.
pub(crate) fn mark(headers: &mut HeaderMap, protocol: HeaderValue) {
    headers.insert(CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(UPGRADE, protocol);
}

/// How a tunnel ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum End {
    /// Both sides closed.
    Closed,
    /// Nothing passed either way for the idle timeout.
    Idle,
}

/// Copies bytes both ways between `a` and `b` until both have closed their
/// sending side (each close is passed on to the other) or nothing moves for
/// `idle`: a read that waits longer, or a write the other side does not
/// take in that time. Returns how it ended and the bytes copied from `a`
/// to `b` and from `b` to `a`.
pub(crate) async fn copy_both_ways<A, B>(
    a: A,
    b: B,
    idle: Duration,
) -> (std::io::Result<End>, u64, u64)
where
    A: AsyncRead + AsyncWrite,
    B: AsyncRead + AsyncWrite,
{
    let (mut a_read, mut a_write) = tokio::io::split(a);
    let (mut b_read, mut b_write) = tokio::io::split(b);
    // Small: a server may hold tens of thousands of mostly idle WebSockets
    // (nginx's default proxy buffer is 4 or 8 KiB).
    let mut a_buf = vec![0u8; 4 << 10];
    let mut b_buf = vec![0u8; 4 << 10];
    let (mut a_open, mut b_open) = (true, true);
    let (mut a_to_b, mut b_to_a) = (0u64, 0u64);
    let end = loop {
        if !a_open && !b_open {
            break Ok(End::Closed);
        }
        // `read` is cancel-safe: the arm not taken loses no byte.
        let step = tokio::time::timeout(idle, async {
            tokio::select! {
                r = a_read.read(&mut a_buf), if a_open => {
                    pass_on(r?, &a_buf, &mut b_write, &mut a_open, &mut a_to_b).await
                }
                r = b_read.read(&mut b_buf), if b_open => {
                    pass_on(r?, &b_buf, &mut a_write, &mut b_open, &mut b_to_a).await
                }
            }
        })
        .await;
        match step {
            Err(_) => break Ok(End::Idle),
            Ok(Err(e)) => break Err(e),
            Ok(Ok(())) => {}
        }
    };
    (end, a_to_b, b_to_a)
}

/// Passes what one side's read gave (`n` bytes of `buf`; 0: it closed its
/// sending side) on to the other side.
async fn pass_on<W: AsyncWrite + Unpin>(
    n: usize,
    buf: &[u8],
    to: &mut W,
    open: &mut bool,
    copied: &mut u64,
) -> std::io::Result<()> {
    if n == 0 {
        *open = false;
        return to.shutdown().await;
    }
    to.write_all(&buf[..n]).await?;
    *copied += n as u64;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::duplex;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.append(*n, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn a_switch_needs_http_1_1_connection_upgrade_and_a_protocol() {
        let ws = headers(&[
            ("connection", "keep-alive, Upgrade"),
            ("upgrade", "websocket"),
        ]);
        assert_eq!(
            requested(Version::HTTP_11, &ws),
            Some(HeaderValue::from_static("websocket"))
        );
        assert_eq!(requested(Version::HTTP_10, &ws), None);
        assert_eq!(requested(Version::HTTP_2, &ws), None);
        let no_token = headers(&[("connection", "keep-alive"), ("upgrade", "websocket")]);
        assert_eq!(requested(Version::HTTP_11, &no_token), None);
        let no_protocol = headers(&[("connection", "upgrade")]);
        assert_eq!(requested(Version::HTTP_11, &no_protocol), None);
        let second_line = headers(&[
            ("connection", "keep-alive"),
            ("connection", "UPGRADE"),
            ("upgrade", "echo/2"),
        ]);
        assert_eq!(
            requested(Version::HTTP_11, &second_line),
            Some(HeaderValue::from_static("echo/2"))
        );
        // A switch to HTTP or TLS: no switch (h2c smuggling).
        for protocol in [
            "h2c",
            "H2C",
            "h2",
            "HTTP/2.0",
            "http/1.1",
            "TLS/1.2",
            "websocket, h2c",
        ] {
            let smuggling = headers(&[
                ("connection", "Upgrade, HTTP2-Settings"),
                ("upgrade", protocol),
            ]);
            assert_eq!(requested(Version::HTTP_11, &smuggling), None, "{protocol}");
        }
        // A token that only contains the word is not it.
        let lookalike = headers(&[("connection", "upgraded"), ("upgrade", "websocket")]);
        assert_eq!(requested(Version::HTTP_11, &lookalike), None);
    }

    #[tokio::test]
    async fn bytes_go_both_ways_and_closes_are_passed_on() {
        let (client, a) = duplex(64);
        let (b, app) = duplex(64);
        let tunnel = tokio::spawn(copy_both_ways(a, b, Duration::from_secs(5)));
        let (mut client, mut app) = (client, app);
        client.write_all(b"ping").await.expect("write");
        let mut got = [0u8; 4];
        app.read_exact(&mut got).await.expect("read");
        assert_eq!(&got, b"ping");
        // More than the duplex's buffer: written while the other side reads.
        let big = vec![7u8; 10_000];
        let writer = tokio::spawn(async move {
            app.write_all(&big).await.expect("write");
            app.shutdown().await.expect("shutdown");
            app
        });
        let mut back = Vec::new();
        client.read_to_end(&mut back).await.expect("read");
        assert_eq!(
            back.len(),
            10_000,
            "the application's close reaches the client"
        );
        let mut app = writer.await.expect("task");
        client.shutdown().await.expect("shutdown");
        let mut rest = Vec::new();
        app.read_to_end(&mut rest).await.expect("read");
        assert!(rest.is_empty());
        let (end, up, down) = tunnel.await.expect("task");
        assert_eq!((end.expect("ends"), up, down), (End::Closed, 4, 10_000));
    }

    #[tokio::test(start_paused = true)]
    async fn a_tunnel_where_nothing_moves_ends_at_the_idle_timeout() {
        let (_client, a) = duplex(64);
        let (b, mut app) = duplex(64);
        let tunnel = tokio::spawn(copy_both_ways(a, b, Duration::from_secs(60)));
        tokio::time::sleep(Duration::from_secs(30)).await;
        app.write_all(b"still here").await.expect("write");
        // The write above restarted the clock: 30 s later it is still open.
        tokio::time::sleep(Duration::from_secs(45)).await;
        assert!(!tunnel.is_finished());
        let (end, _, down) = tunnel.await.expect("task");
        assert_eq!((end.expect("ends"), down), (End::Idle, 10));
    }

    #[tokio::test(start_paused = true)]
    async fn a_side_that_takes_nothing_ends_the_tunnel_at_the_idle_timeout() {
        // The client never reads: the copy to it stalls once the pipe is full.
        let (_client, a) = duplex(16);
        let (b, mut app) = duplex(1 << 20);
        app.write_all(&vec![1u8; 100_000]).await.expect("write");
        let (end, _, _) = copy_both_ways(a, b, Duration::from_secs(60)).await;
        assert_eq!(end.expect("ends"), End::Idle);
    }
}
