//! TLS for the listener (rustls, with the `ring` provider): a certificate
//! chain and a private key from PEM files, HTTP/2 and HTTP/1.1 offered by
//! ALPN.

use std::path::Path;
use std::sync::Arc;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{crypto, ServerConfig};
pub use tokio_rustls::TlsAcceptor;

/// The acceptor for `cert` (PEM, the chain, leaf first) and `key` (PEM,
/// PKCS#8, PKCS#1 or SEC1).
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, String> {
    let certs = CertificateDer::pem_file_iter(cert)
        .map_err(|e| format!("`{}`: {e}", cert.display()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("`{}`: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!("`{}`: no certificate in it", cert.display()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("`{}`: {e}", key.display()))?;
    let provider = Arc::new(crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("the certificate and the key do not go together: {e}"))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
