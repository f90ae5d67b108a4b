//! What the loopback tests share: a real backend, a log sink, a client.

#![allow(dead_code)]

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use waf_serve::{ErrorLog, Logs};

/// The backend: counts requests; `/leak` answers a secret in HTML, `/events`
/// an event stream, `/headers` the request's header lines as it got them,
/// `/bomb` 20 MB of HTML, `/ws` switches to the `echo` protocol when asked
/// (`101`, then every byte sent back until the client closes), anything
/// else echoes the request body. Under
/// `/gzip/...` the same answers come gzip-compressed (`/gzip/broken`: cut
/// short), under `/br/...` labelled `br` (not really compressed).
pub async fn backend(hits: Arc<AtomicUsize>) -> SocketAddr {
    listen(move |stream| {
        let hits = hits.clone();
        async move {
            let service =
                hyper::service::service_fn(move |mut req: Request<hyper::body::Incoming>| {
                    let hits = hits.clone();
                    async move {
                        hits.fetch_add(1, Ordering::SeqCst);
                        let path = req.uri().path().to_string();
                        if path == "/ws" && req.headers().contains_key("upgrade") {
                            let on = hyper::upgrade::on(&mut req);
                            tokio::spawn(async move {
                                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                                let Ok(io) = on.await else { return };
                                let mut io = TokioIo::new(io);
                                let mut buf = [0u8; 1024];
                                while let Ok(n) = io.read(&mut buf).await {
                                    if n == 0 || io.write_all(&buf[..n]).await.is_err() {
                                        break;
                                    }
                                }
                                let _ = io.shutdown().await;
                            });
                            // What the handshake looked like, for the tests:
                            // the method, `Upgrade` and a WebSocket key.
                            let seen = format!(
                                "{} {} key={}",
                                req.method(),
                                String::from_utf8_lossy(
                                    req.headers()
                                        .get("upgrade")
                                        .map_or(&b""[..], |v| v.as_bytes())
                                ),
                                String::from_utf8_lossy(
                                    req.headers()
                                        .get("sec-websocket-key")
                                        .map_or(&b""[..], |v| v.as_bytes())
                                ),
                            );
                            let mut r = Response::new(Full::new(Bytes::new()));
                            *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
                            r.headers_mut()
                                .insert("connection", "upgrade".parse().expect("header"));
                            r.headers_mut()
                                .insert("upgrade", "echo".parse().expect("header"));
                            r.headers_mut().insert(
                                "sec-websocket-accept",
                                "not-checked".parse().expect("header"),
                            );
                            if let Ok(v) = seen.parse() {
                                r.headers_mut().insert("x-handshake", v);
                            }
                            return Ok::<_, std::convert::Infallible>(r);
                        }
                        let header_lines: String = req
                            .headers()
                            .iter()
                            .map(|(n, v)| {
                                format!("{n}: {}\n", String::from_utf8_lossy(v.as_bytes()))
                            })
                            .collect();
                        if path == "/slow" {
                            tokio::time::sleep(Duration::from_secs(3)).await;
                        }
                        let body = req
                            .into_body()
                            .collect()
                            .await
                            .map(|b| b.to_bytes())
                            .unwrap_or_default();
                        let (coding, path) = match path.split_once('/') {
                            Some(("", rest)) if rest.starts_with("gzip/") => {
                                ("gzip", rest["gzip".len()..].to_string())
                            }
                            Some(("", rest)) if rest.starts_with("br/") => {
                                ("br", rest["br".len()..].to_string())
                            }
                            _ => ("", path),
                        };
                        let (ctype, text) = match path.as_str() {
                            "/bomb" => ("text/html", Bytes::from(vec![b'a'; 20 << 20])),
                            // A download nothing inspects (streamed).
                            "/large" => (
                                "application/octet-stream",
                                Bytes::from(vec![b'x'; 32 << 20]),
                            ),
                            "/leak" => ("text/html", Bytes::from_static(b"<p>SECRET-LEAK</p>")),
                            "/events" => (
                                "text/event-stream",
                                Bytes::from_static(b"data: SECRET-LEAK\n\n"),
                            ),
                            "/headers" => ("text/plain", Bytes::from(header_lines)),
                            _ => (
                                "text/html",
                                if body.is_empty() {
                                    Bytes::from_static(b"hello from backend")
                                } else {
                                    body
                                },
                            ),
                        };
                        let text = if coding == "gzip" {
                            use std::io::Write;
                            let mut e = flate2::write::GzEncoder::new(
                                Vec::new(),
                                flate2::Compression::default(),
                            );
                            e.write_all(&text).expect("compress");
                            let mut z = e.finish().expect("compress");
                            if path == "/broken" {
                                z.truncate(z.len() / 2);
                            }
                            Bytes::from(z)
                        } else {
                            text
                        };
                        let mut r = Response::new(Full::new(text));
                        r.headers_mut()
                            .insert("content-type", ctype.parse().expect("header"));
                        if !coding.is_empty() {
                            r.headers_mut()
                                .insert("content-encoding", coding.parse().expect("header"));
                        }
                        Ok::<_, std::convert::Infallible>(r)
                    }
                });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades()
                .await;
        }
    })
    .await
}

/// `n` [`backend`]s, each with a hit counter of its own: the counters and
/// the addresses, in the same order.
pub async fn backends(n: usize) -> (Vec<Arc<AtomicUsize>>, Vec<SocketAddr>) {
    let hits: Vec<Arc<AtomicUsize>> = (0..n).map(|_| Arc::new(AtomicUsize::new(0))).collect();
    let mut addrs = Vec::new();
    for h in &hits {
        addrs.push(backend(h.clone()).await);
    }
    (hits, addrs)
}

/// Binds a loopback port and hands every connection accepted on it to
/// `serve`, on a task of its own: the frame each of the tests' backends
/// shares. The port's address.
pub async fn listen<F, Fut>(serve: F) -> SocketAddr
where
    F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(serve(stream));
        }
    });
    addr
}

/// Reads a request head from a backend's connection, to its blank line and
/// not a byte further (the next request on the connection stays unread);
/// `None` when the connection ends first.
pub async fn read_request_head(stream: &mut tokio::net::TcpStream) -> Option<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte).await {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
    }
    Some(head)
}

/// A loopback address nothing listens on (a port bound, then let go): an
/// upstream server that refuses connections.
pub fn unused_port() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
}

/// Opens a connection to `addr` and writes `bytes` on it as they are, for
/// what a client library would not send (or not send that way); the
/// connection, to go on with.
pub async fn connect_and_write(addr: SocketAddr, bytes: &[u8]) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt;
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream.write_all(bytes).await.expect("write");
    stream
}

/// Reads from `stream` until it is closed (or `limit` passes); returns what
/// was read and whether the peer closed.
pub async fn read_until_closed(
    stream: &mut tokio::net::TcpStream,
    limit: Duration,
) -> (String, bool) {
    use tokio::io::AsyncReadExt;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return (String::from_utf8_lossy(&out).into_owned(), false),
            Ok(Ok(0)) | Ok(Err(_)) => return (String::from_utf8_lossy(&out).into_owned(), true),
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
        }
    }
}

/// Raw bytes on a new connection ([`connect_and_write`]), and what the
/// server answers until it closes the connection or `limit` passes
/// ([`read_until_closed`]): the answer and whether it closed.
pub async fn raw_answer(addr: SocketAddr, bytes: &[u8], limit: Duration) -> (String, bool) {
    let mut stream = connect_and_write(addr, bytes).await;
    read_until_closed(&mut stream, limit).await
}

/// Sends `request` as is on a new connection; what came back until the
/// proxy closed it (which it must within 5 s).
pub async fn raw_exchange(addr: SocketAddr, request: &str) -> String {
    let (answer, closed) = raw_answer(addr, request.as_bytes(), Duration::from_secs(5)).await;
    assert!(closed, "{answer}");
    answer
}

/// Waits while `busy` holds (looking every 10 ms), for `limit` at most: a
/// bounded wait for what the server does in its own time (bytes given back,
/// a tunnel's task ending); the caller then asserts on the state.
pub async fn wait_while(limit: Duration, mut busy: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while busy() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// An HTTP/2 connection (prior knowledge) to `addr`: the sender, and the
/// task that drives the connection (it ends when the connection does).
pub async fn h2_connect<B>(
    addr: SocketAddr,
) -> (
    hyper::client::conn::http2::SendRequest<B>,
    tokio::task::JoinHandle<hyper::Result<()>>,
)
where
    B: hyper::body::Body + Unpin + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .expect("h2 handshake");
    (send, tokio::spawn(conn))
}

/// A `Write` the test can read back.
#[derive(Clone, Default)]
pub struct Shared(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| std::io::ErrorKind::Other)?
            .extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Shared {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("lock")).into_owned()
    }
}

/// A request with `Host: example.com` and a form body; the status, headers
/// and body of the answer.
pub async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
) -> Result<(StatusCode, hyper::HeaderMap, String), String> {
    send_to_host(addr, "example.com", method, path, body).await
}

/// [`send`] with another `Host`.
pub async fn send_to_host(
    addr: SocketAddr,
    host: &str,
    method: &str,
    path: &str,
    body: &str,
) -> Result<(StatusCode, hyper::HeaderMap, String), String> {
    send_with_headers(addr, host, method, path, body, &[]).await
}

/// [`send_to_host`] with more headers.
pub async fn send_with_headers(
    addr: SocketAddr,
    host: &str,
    method: &str,
    path: &str,
    body: &str,
    headers: &[(&str, &str)],
) -> Result<(StatusCode, hyper::HeaderMap, String), String> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let mut req = Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"))
        .header("host", host)
        .header("content-type", "application/x-www-form-urlencoded");
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let req = req
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(|e| e.to_string())?;
    let r = tokio::time::timeout(Duration::from_secs(10), client.request(req))
        .await
        .map_err(|_| "timeout".to_string())?
        .map_err(|e| e.to_string())?;
    let (parts, body) = r.into_parts();
    let bytes = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
    Ok((
        parts.status,
        parts.headers,
        String::from_utf8_lossy(&bytes).into_owned(),
    ))
}

/// A fresh directory for one test's files.
pub fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("waf-serve-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// Logs that go nowhere.
pub fn quiet_logs() -> Logs {
    Logs {
        error: ErrorLog::to_writer(Box::new(std::io::sink())),
        audit: None,
        access: None,
    }
}

/// Where [`self_signed`] made no certificate: says that `what` is skipped,
/// and fails instead where `WAF_REQUIRE_TLS_TOOLS` is set (CI has openssl).
pub fn skip_without_openssl(what: &str) {
    eprintln!("SKIP {what}: no openssl command to make a certificate");
    assert!(
        std::env::var_os("WAF_REQUIRE_TLS_TOOLS").is_none(),
        "openssl is required"
    );
}

/// A self-signed certificate for `localhost`, made by the openssl command.
pub fn self_signed(dir: &std::path::Path) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let ok = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
            "-addext",
            "basicConstraints=critical,CA:FALSE",
            "-addext",
            "extendedKeyUsage=serverAuth",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    ok.then_some((cert, key))
}
