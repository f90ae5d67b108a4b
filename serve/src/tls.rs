//! TLS for the listener (rustls, with the `ring` provider): a certificate
//! chain and a private key from PEM files, HTTP/2 and HTTP/1.1 offered by
//! ALPN.
//!
//! Certificates are renewed every few weeks (ACME, an internal PKI), and a
//! WAF in front of traffic must not restart for it: the files are read
//! again with the rules ([`Tls::reload`]: SIGHUP, or a change the file
//! watch sees), and new handshakes get the new certificate while
//! connections already open keep theirs. A pair that does not load (a bad
//! PEM, a key that does not go with the certificate) is refused and the
//! running one stays.

use arc_swap::ArcSwap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_rustls::rustls::crypto::CryptoProvider;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert};
use tokio_rustls::rustls::sign::CertifiedKey;
use tokio_rustls::rustls::{crypto, ServerConfig};
pub use tokio_rustls::TlsAcceptor;

/// The listener's TLS: its acceptor, and the certificate it serves, which
/// can be read again from its files.
#[derive(Clone)]
pub struct Tls {
    acceptor: TlsAcceptor,
    certificate: Arc<Certificate>,
}

impl Tls {
    /// The acceptor: every handshake gets the certificate loaded last.
    pub fn acceptor(&self) -> TlsAcceptor {
        self.acceptor.clone()
    }

    /// Reads the certificate and key files again; on error the running pair
    /// stays.
    pub fn reload(&self) -> Result<(), String> {
        let c = &self.certificate;
        let (key, digests) = read_pair(&c.cert, &c.key, &c.provider)?;
        c.current.store(Arc::new(key));
        c.digests.store(Arc::new(digests));
        Ok(())
    }

    /// The certificate and key files, with a digest of what was read (for
    /// the file watch).
    pub(crate) fn inputs(&self) -> crate::watch::Inputs {
        let c = &self.certificate;
        let (cert, key) = **c.digests.load();
        crate::watch::Inputs {
            files: vec![(c.cert.clone(), Some(cert)), (c.key.clone(), Some(key))],
            globs: vec![],
        }
    }
}

/// Loads `cert` (PEM, the chain, leaf first) and `key` (PEM, PKCS#8,
/// PKCS#1 or SEC1).
pub fn load(cert: &Path, key: &Path) -> Result<Tls, String> {
    let provider = Arc::new(crypto::ring::default_provider());
    let (first, digests) = read_pair(cert, key, &provider)?;
    let certificate = Arc::new(Certificate {
        cert: cert.to_path_buf(),
        key: key.to_path_buf(),
        provider: provider.clone(),
        current: ArcSwap::from_pointee(first),
        digests: ArcSwap::from_pointee(digests),
    });
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_cert_resolver(certificate.clone());
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Tls {
        acceptor: TlsAcceptor::from(Arc::new(config)),
        certificate,
    })
}

/// [`load`]'s acceptor, for a listener that never reloads (tests).
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, String> {
    load(cert, key).map(|t| t.acceptor())
}

/// The certificate and key served, and where they are read from.
struct Certificate {
    cert: PathBuf,
    key: PathBuf,
    provider: Arc<CryptoProvider>,
    current: ArcSwap<CertifiedKey>,
    /// Digests of the files as last read (certificate, key).
    digests: ArcSwap<(u64, u64)>,
}

impl std::fmt::Debug for Certificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certificate")
            .field("cert", &self.cert)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

/// Reads and checks a pair (the key must go with the certificate); with
/// the digests of the two files as read.
fn read_pair(
    cert: &Path,
    key: &Path,
    provider: &CryptoProvider,
) -> Result<(CertifiedKey, (u64, u64)), String> {
    let cert_pem = std::fs::read(cert).map_err(|e| format!("`{}`: {e}", cert.display()))?;
    let key_pem = std::fs::read(key).map_err(|e| format!("`{}`: {e}", key.display()))?;
    let certs = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("`{}`: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!("`{}`: no certificate in it", cert.display()));
    }
    let der =
        PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| format!("`{}`: {e}", key.display()))?;
    let certified = CertifiedKey::from_der(certs, der, provider)
        .map_err(|e| format!("the certificate and the key do not go together: {e}"))?;
    let digests = (
        crate::watch::digest(&cert_pem),
        crate::watch::digest(&key_pem),
    );
    Ok((certified, digests))
}

impl ResolvesServerCert for Certificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}
