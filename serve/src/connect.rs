//! Connections to the upstreams: plain TCP for `http://`, TLS (rustls, the
//! `ring` provider, as on the listener) for `https://`.
//!
//! An application behind the WAF is often reached over TLS (another host, a
//! service mesh, a platform that only speaks HTTPS). The server certificate
//! is verified against the certificates of `upstream_ca` when one is given
//! (the usual case for an internal CA or a self-signed backend), else
//! against the system's bundle (`SSL_CERT_FILE`, or the Debian/Red Hat
//! paths); the name checked is the upstream URL's host (a DNS name, or an
//! IP address in the certificate's SANs). There is no switch to skip the
//! check: a WAF that forwards inspected traffic to whoever answers would
//! hand it to an attacker on the path.

use hyper::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{crypto, ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Where the system's CA certificates usually are.
const SYSTEM_BUNDLES: [&str; 2] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
];

/// The TLS clients for `https://` and `h2://` upstreams: trusting the
/// certificates in `ca` (PEM), or with none given the system's bundle.
/// `Ok(None)` when no file was given and the system has no bundle (such an
/// upstream then fails, and says why).
pub(crate) fn tls_connectors(ca: Option<&Path>) -> Result<Option<TlsConnectors>, String> {
    let file: PathBuf = match ca {
        Some(f) => f.to_path_buf(),
        None => {
            let system = std::env::var_os("SSL_CERT_FILE")
                .map(PathBuf::from)
                .into_iter()
                .chain(SYSTEM_BUNDLES.iter().map(PathBuf::from))
                .find(|p| p.is_file());
            match system {
                Some(f) => f,
                None => return Ok(None),
            }
        }
    };
    let mut roots = RootCertStore::empty();
    let certs =
        CertificateDer::pem_file_iter(&file).map_err(|e| format!("`{}`: {e}", file.display()))?;
    for cert in certs {
        let cert = cert.map_err(|e| format!("`{}`: {e}", file.display()))?;
        // A bundle may carry a certificate rustls cannot use; the others
        // still count.
        let _ = roots.add(cert);
    }
    if roots.is_empty() {
        return Err(format!("`{}`: no CA certificate in it", file.display()));
    }
    let provider = Arc::new(crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    // Each client offers the one protocol it speaks.
    let mut http2 = config.clone();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    http2.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Some(TlsConnectors {
        http1: TlsConnector::from(Arc::new(config)),
        http2: TlsConnector::from(Arc::new(http2)),
    }))
}

/// TLS for upstreams, one per protocol: ALPN `http/1.1` (`https://`) or
/// `h2` (`h2://`).
#[derive(Clone)]
pub(crate) struct TlsConnectors {
    pub http1: TlsConnector,
    pub http2: TlsConnector,
}

/// How long connecting may take, read at each connection (a reload may
/// change it).
pub(crate) type ConnectTimeout = Arc<dyn Fn() -> Duration + Send + Sync>;

/// Connects to upstreams: TCP, then TLS for `https://`, both within the
/// connect timeout.
#[derive(Clone)]
pub(crate) struct Connector {
    tcp: HttpConnector,
    tls: Option<TlsConnector>,
    timeout: ConnectTimeout,
}

impl Connector {
    pub(crate) fn new(
        mut tcp: HttpConnector,
        tls: Option<TlsConnector>,
        timeout: ConnectTimeout,
    ) -> Connector {
        // The scheme is this connector's business.
        tcp.enforce_http(false);
        Connector { tcp, tls, timeout }
    }
}

impl tower_service::Service<Uri> for Connector {
    type Response = Stream;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Stream, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.tcp.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let https = uri.scheme_str() == Some("https");
        // `[::1]` in a URI is the address `::1` in a certificate.
        let host = uri
            .host()
            .unwrap_or("")
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let connecting = self.tcp.call(uri);
        let tls = self.tls.clone();
        let limit = (self.timeout)();
        let connect = async move {
            let tcp = connecting.await?;
            if !https {
                return Ok(Stream::Plain(tcp));
            }
            let tls = tls.ok_or(
                "no CA certificates to verify a TLS upstream with: give upstream_ca (--upstream-ca)",
            )?;
            let name = ServerName::try_from(host)?;
            let stream = tls.connect(name, tcp.into_inner()).await?;
            Ok(Stream::Tls(Box::new(TokioIo::new(stream))))
        };
        // A connection the pool goes on opening after its request gave up
        // (the client's connects run in the background) is bounded too.
        Box::pin(async move {
            match tokio::time::timeout(limit, connect).await {
                Ok(done) => done,
                Err(_) => Err(format!("connecting took over {} s", limit.as_secs_f64()).into()),
            }
        })
    }
}

/// A connection to an upstream.
pub(crate) enum Stream {
    Plain(TokioIo<TcpStream>),
    Tls(Box<TokioIo<TlsStream<TcpStream>>>),
}

impl Connection for Stream {
    fn connected(&self) -> Connected {
        match self {
            Stream::Plain(s) => s.connected(),
            Stream::Tls(s) => s.inner().get_ref().0.connected(),
        }
    }
}

impl hyper::rt::Read for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl hyper::rt::Write for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }
}
