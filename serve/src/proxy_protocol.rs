//! The PROXY protocol (HAProxy's, versions 1 and 2) on a listener: a load
//! balancer that forwards TCP (AWS's NLB, HAProxy in `mode tcp`, a TLS
//! passthrough) cannot add `X-Forwarded-For`, so it writes the client's
//! address in a header before the connection's first byte, and the WAF must
//! read it there: without it, every request's `REMOTE_ADDR` is the
//! balancer's, and CRS's and the manifest's address rules see one client.
//!
//! The header's bytes are found here (where it ends: a version 1 line is
//! read up to its `\n`, a version 2 block up to the length it gives) and
//! parsed by the `ppp` crate. The connection is peeked before it is read,
//! so that not one byte after the header is taken from the TLS handshake or
//! the HTTP request behind it; every byte consumed is one the header is
//! known to cover.

use ppp::{v1, v2};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// The version 2 signature (the twelve bytes every version 2 header starts
/// with).
const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";

/// A version 1 header starts with this.
const V1_PREFIX: &[u8; 6] = b"PROXY ";

/// A version 1 line is at most 107 bytes, `\r\n` included (the protocol's
/// limit).
const V1_MAX: usize = 107;

/// The longest version 2 header accepted: the 16 fixed bytes, the
/// addresses and TLVs up to this. Balancers add a few TLVs (AWS's VPC
/// endpoint id, HAProxy's ALPN, authority, unique id and TLS details: a
/// few hundred bytes); the protocol allows 64 KiB, which a connection
/// should not make the proxy hold before it says anything.
pub const V2_MAX: usize = 4096;

/// The addresses a header gives: the client's and the one it connected to
/// (on the balancer). `None` when the header says the connection is the
/// balancer's own (a version 2 `LOCAL`, a version 1 `UNKNOWN`, or
/// addresses neither IPv4 nor IPv6): the socket's addresses then stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Addresses {
    /// The client's address: `REMOTE_ADDR` and `REMOTE_PORT`.
    pub source: SocketAddr,
    /// The address the client connected to: `SERVER_ADDR` and
    /// `SERVER_PORT`.
    pub destination: SocketAddr,
}

/// Why a connection's header was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum HeaderError {
    /// The connection closed before its first byte: a balancer's TCP
    /// health check (connect and close) does this; not an error to log.
    ClosedBeforeHeader,
    /// Closed in the middle of the header.
    Truncated,
    /// Not a PROXY header (or a damaged one): what the parser says.
    Invalid(String),
    /// Longer than the protocol's (version 1) or this proxy's (version 2)
    /// limit.
    TooLong,
    /// Not complete within the header timeout.
    TimedOut,
    /// The socket failed.
    Io(std::io::ErrorKind),
}

impl std::fmt::Display for HeaderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeaderError::ClosedBeforeHeader => f.write_str("closed before the header"),
            HeaderError::Truncated => f.write_str("closed in the middle of the header"),
            HeaderError::Invalid(why) => write!(f, "not a PROXY protocol header: {why}"),
            HeaderError::TooLong => write!(
                f,
                "header too long (version 1: {V1_MAX} bytes, version 2: {V2_MAX})"
            ),
            HeaderError::TimedOut => f.write_str("header not received within the header timeout"),
            HeaderError::Io(kind) => write!(f, "{kind}"),
        }
    }
}

/// Where the header in `buf` (the connection's first bytes) ends.
#[derive(Debug, PartialEq, Eq)]
enum Extent {
    /// It ends after `n` bytes.
    Ends(usize),
    /// It goes on past `buf`: every byte of `buf` is the header's.
    Longer,
    /// `buf` does not start a header.
    NotAHeader,
    /// It would be longer than the limit.
    TooLong,
}

fn extent(buf: &[u8]) -> Extent {
    let starts = |sig: &[u8]| {
        let n = buf.len().min(sig.len());
        buf[..n] == sig[..n]
    };
    if starts(V2_SIGNATURE) {
        // Version, command, family, then the length (big-endian).
        let Some(len) = buf.get(14..16) else {
            return Extent::Longer;
        };
        let total = 16 + usize::from(u16::from_be_bytes([len[0], len[1]]));
        return if total > V2_MAX {
            Extent::TooLong
        } else if buf.len() >= total {
            Extent::Ends(total)
        } else {
            Extent::Longer
        };
    }
    if starts(V1_PREFIX) {
        return match memchr::memchr(b'\n', &buf[..buf.len().min(V1_MAX)]) {
            Some(i) => Extent::Ends(i + 1),
            None if buf.len() >= V1_MAX => Extent::TooLong,
            None => Extent::Longer,
        };
    }
    Extent::NotAHeader
}

/// The addresses of a complete header (`header` holds it and nothing more).
fn parse(header: &[u8]) -> Result<Option<Addresses>, HeaderError> {
    let invalid = |e: &dyn std::fmt::Display| HeaderError::Invalid(e.to_string());
    if header.starts_with(V2_SIGNATURE) {
        let h = v2::Header::try_from(header).map_err(|e| invalid(&e))?;
        if h.command == v2::Command::Local {
            return Ok(None);
        }
        return Ok(match h.addresses {
            v2::Addresses::IPv4(a) => Some(Addresses::from(a)),
            v2::Addresses::IPv6(a) => Some(Addresses::from(a)),
            v2::Addresses::Unspecified | v2::Addresses::Unix(_) => None,
        });
    }
    let h = v1::Header::try_from(header).map_err(|e| invalid(&e))?;
    Ok(match h.addresses {
        v1::Addresses::Tcp4(a) => Some(Addresses::from(a)),
        v1::Addresses::Tcp6(a) => Some(Addresses::from(a)),
        v1::Addresses::Unknown => None,
    })
}

// Both versions' addresses are the same two types in `ppp`.
impl From<v2::IPv4> for Addresses {
    fn from(a: v2::IPv4) -> Addresses {
        Addresses {
            source: SocketAddr::from((a.source_address, a.source_port)),
            destination: SocketAddr::from((a.destination_address, a.destination_port)),
        }
    }
}

impl From<v2::IPv6> for Addresses {
    fn from(a: v2::IPv6) -> Addresses {
        Addresses {
            source: SocketAddr::from((a.source_address, a.source_port)),
            destination: SocketAddr::from((a.destination_address, a.destination_port)),
        }
    }
}

/// Reads the connection's PROXY header (within `timeout`), leaving every
/// byte after it unread.
pub async fn read(
    stream: &mut TcpStream,
    timeout: Duration,
) -> Result<Option<Addresses>, HeaderError> {
    tokio::time::timeout(timeout, read_header(stream))
        .await
        .unwrap_or(Err(HeaderError::TimedOut))
}

async fn read_header(stream: &mut TcpStream) -> Result<Option<Addresses>, HeaderError> {
    let io = |e: std::io::Error| HeaderError::Io(e.kind());
    let mut header = Vec::new();
    let mut peeked = [0u8; 512];
    loop {
        // What has arrived, left in the socket; then only the header's
        // share of it is read out.
        let n = match stream.peek(&mut peeked).await {
            Ok(n) => n,
            // A check that resets its connection (a balancer's TCP check
            // may) has sent nothing either.
            Err(_) if header.is_empty() => 0,
            Err(e) => return Err(io(e)),
        };
        if n == 0 {
            return Err(if header.is_empty() {
                HeaderError::ClosedBeforeHeader
            } else {
                HeaderError::Truncated
            });
        }
        let before = header.len();
        header.extend_from_slice(&peeked[..n]);
        let (take, done) = match prefix(&header) {
            Prefix::Header { len, addresses } => (len - before, Some(addresses)),
            // All of it is the header's; the next peek waits for more.
            Prefix::NeedMore => (n, None),
            Prefix::Refused(e) => return Err(e),
        };
        stream.read_exact(&mut peeked[..take]).await.map_err(io)?;
        if let Some(addresses) = done {
            return Ok(addresses);
        }
    }
}

/// What a connection's first bytes hold (see [`prefix`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Prefix {
    /// A complete header.
    Header {
        /// Its length: the bytes after it are not the header's.
        len: usize,
        /// What it says (see [`Addresses`]).
        addresses: Option<Addresses>,
    },
    /// The start of a header: every byte is the header's, and more are
    /// needed.
    NeedMore,
    /// Not a header, or not one that is accepted.
    Refused(HeaderError),
}

/// What the connection's first bytes `buf` hold: a complete header and
/// where it ends, the start of one, or bytes that cannot start one. Given
/// more bytes after a `Header`, it gives the same `Header`; a `NeedMore`
/// for `buf` is one for each of its prefixes too (what the reader relies
/// on to take only the header's bytes; the `proxy_protocol` fuzz target
/// checks both).
pub fn prefix(buf: &[u8]) -> Prefix {
    match extent(buf) {
        Extent::Ends(len) => match parse(&buf[..len]) {
            Ok(addresses) => Prefix::Header { len, addresses },
            Err(e) => Prefix::Refused(e),
        },
        Extent::Longer => Prefix::NeedMore,
        Extent::NotAHeader => Prefix::Refused(HeaderError::Invalid(
            "it starts with neither `PROXY ` nor the version 2 signature".into(),
        )),
        Extent::TooLong => Prefix::Refused(HeaderError::TooLong),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    fn v2_header(source: SocketAddr, destination: SocketAddr, tlv: Option<&[u8]>) -> Vec<u8> {
        let mut b = v2::Builder::with_addresses(
            v2::Version::Two | v2::Command::Proxy,
            v2::Protocol::Stream,
            (source, destination),
        );
        if let Some(value) = tlv {
            b = b.write_tlv(v2::Type::NoOp, value).expect("tlv");
        }
        b.build().expect("header")
    }

    #[test]
    fn extents_of_both_versions() {
        let line = b"PROXY TCP4 203.0.113.7 192.0.2.1 56324 443\r\nGET /";
        assert_eq!(extent(line), Extent::Ends(44));
        assert_eq!(extent(&line[..20]), Extent::Longer);
        assert_eq!(extent(b"PRO"), Extent::Longer);
        assert_eq!(extent(b""), Extent::Longer);
        assert_eq!(extent(b"GET / HTTP/1.1\r\n"), Extent::NotAHeader);
        assert_eq!(extent(b"\x16\x03\x01"), Extent::NotAHeader);
        let mut long = b"PROXY ".to_vec();
        long.resize(V1_MAX, b'1');
        assert_eq!(extent(&long), Extent::TooLong);

        let v2 = v2_header(
            "203.0.113.7:56324".parse().expect("addr"),
            "192.0.2.1:443".parse().expect("addr"),
            None,
        );
        assert_eq!(v2.len(), 16 + 12);
        for cut in 0..v2.len() {
            assert_eq!(extent(&v2[..cut]), Extent::Longer, "{cut} bytes");
        }
        let mut more = v2.clone();
        more.extend_from_slice(b"\x16\x03\x01");
        assert_eq!(extent(&more), Extent::Ends(v2.len()));
        let mut huge = v2[..14].to_vec();
        huge.extend_from_slice(&u16::MAX.to_be_bytes());
        assert_eq!(extent(&huge), Extent::TooLong);
    }

    #[test]
    fn addresses_of_both_versions() {
        let want = Some(Addresses {
            source: "203.0.113.7:56324".parse().expect("addr"),
            destination: "192.0.2.1:443".parse().expect("addr"),
        });
        assert_eq!(
            parse(b"PROXY TCP4 203.0.113.7 192.0.2.1 56324 443\r\n"),
            Ok(want)
        );
        assert_eq!(parse(b"PROXY UNKNOWN\r\n"), Ok(None));
        let six = parse(b"PROXY TCP6 2001:db8::7 2001:db8::1 56324 443\r\n");
        assert_eq!(
            six.map(|a| a.map(|a| a.source)),
            Ok(Some("[2001:db8::7]:56324".parse().expect("addr")))
        );
        let (s, d) = want.map(|a| (a.source, a.destination)).expect("some");
        assert_eq!(parse(&v2_header(s, d, Some(b"vpce-0123"))), Ok(want));
        let local = v2::Builder::with_addresses(
            v2::Version::Two | v2::Command::Local,
            v2::Protocol::Unspecified,
            v2::Addresses::Unspecified,
        )
        .build()
        .expect("header");
        assert_eq!(parse(&local), Ok(None));
        for bad in [
            &b"PROXY TCP4 203.0.113 192.0.2.1 56324 443\r\n"[..],
            b"PROXY TCP4 203.0.113.7 192.0.2.1 56324\r\n",
            b"PROXY TCP5 203.0.113.7 192.0.2.1 56324 443\r\n",
            b"PROXY TCP4 203.0.113.7 192.0.2.1 56324 99999\r\n",
            b"PROXY TCP4 203.0.113.7 192.0.2.1 56324 443\n",
        ] {
            assert!(
                matches!(parse(bad), Err(HeaderError::Invalid(_))),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    /// A client writes `chunks` with pauses between them, then closes: what
    /// the reader answers, and the bytes left in the connection after it.
    async fn exchange(chunks: Vec<Vec<u8>>) -> (Result<Option<Addresses>, HeaderError>, Vec<u8>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let client = tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await.expect("connect");
            for c in chunks {
                s.write_all(&c).await.expect("write");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let _ = s.shutdown().await;
        });
        let (mut conn, _) = listener.accept().await.expect("accept");
        let got = read(&mut conn, Duration::from_secs(2)).await;
        // What follows the header is still there to read.
        let mut rest = Vec::new();
        let _ = conn.read_to_end(&mut rest).await;
        client.await.expect("client");
        (got, rest)
    }

    #[tokio::test]
    async fn a_header_in_pieces_leaves_the_bytes_after_it() {
        let line = b"PROXY TCP4 203.0.113.7 192.0.2.1 56324 443\r\n";
        // Byte by byte, then the request in the same write as the end.
        let mut chunks: Vec<Vec<u8>> = line[..40].iter().map(|&b| vec![b]).collect();
        let mut last = line[40..].to_vec();
        last.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
        chunks.push(last);
        let (got, rest) = exchange(chunks).await;
        assert_eq!(
            got.map(|a| a.map(|a| a.source)),
            Ok(Some("203.0.113.7:56324".parse().expect("addr")))
        );
        assert_eq!(rest, b"GET / HTTP/1.1\r\n\r\n");

        let mut v2 = v2_header(
            "[2001:db8::7]:1".parse().expect("addr"),
            "[2001:db8::1]:443".parse().expect("addr"),
            Some(&[7; 300]),
        );
        let split = v2.split_off(20);
        let mut tail = split;
        tail.extend_from_slice(b"\x16\x03\x01 client hello");
        let (got, rest) = exchange(vec![v2, tail]).await;
        assert_eq!(
            got.map(|a| a.map(|a| a.source)),
            Ok(Some("[2001:db8::7]:1".parse().expect("addr")))
        );
        assert_eq!(rest, b"\x16\x03\x01 client hello");
    }

    #[tokio::test]
    async fn connections_without_a_header_are_refused() {
        let (got, _) = exchange(vec![b"GET / HTTP/1.1\r\nHost: a\r\n\r\n".to_vec()]).await;
        assert!(matches!(got, Err(HeaderError::Invalid(_))), "{got:?}");
        let (got, _) = exchange(vec![]).await;
        assert_eq!(got, Err(HeaderError::ClosedBeforeHeader));
        let (got, _) = exchange(vec![b"PROXY TCP4 203.0".to_vec()]).await;
        assert_eq!(got, Err(HeaderError::Truncated));
        let mut long = b"PROXY TCP4 ".to_vec();
        long.resize(300, b'9');
        let (got, _) = exchange(vec![long]).await;
        assert_eq!(got, Err(HeaderError::TooLong));
    }

    #[tokio::test]
    async fn a_header_that_never_ends_times_out() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let mut client = TcpStream::connect(addr).await.expect("connect");
        client.write_all(b"PROXY TCP4 ").await.expect("write");
        let (mut conn, _) = listener.accept().await.expect("accept");
        let started = std::time::Instant::now();
        let got = read(&mut conn, Duration::from_millis(200)).await;
        assert_eq!(got, Err(HeaderError::TimedOut));
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
