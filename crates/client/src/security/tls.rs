//! TLS for both listeners (rustls): the coordinator's certificate and key,
//! and the CA that workers and clients trust. The framing is the same inside.

use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::path::Path;
use std::sync::Arc;
use tokio_rustls::{TlsAcceptor, TlsConnector};

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let certs: Vec<_> = rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: not a PEM certificate file: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no certificate in it", path.display()));
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let pem = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    rustls_pemfile::private_key(&mut pem.as_slice())
        .map_err(|e| format!("{}: not a PEM key file: {e}", path.display()))?
        .ok_or_else(|| format!("{}: no private key in it", path.display()))
}

/// The coordinator's TLS side from PEM files. Errors name the file.
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, String> {
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(read_certs(cert)?, read_key(key)?)
        .map_err(|e| {
            format!(
                "{} and {} do not form a usable pair: {e}",
                cert.display(),
                key.display()
            )
        })?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// A client-side TLS configuration trusting only the CA certificates in `ca`.
pub fn client_config(ca: &Path) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in read_certs(ca)? {
        roots
            .add(cert)
            .map_err(|e| format!("{}: unusable CA certificate: {e}", ca.display()))?;
    }
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// For async connections (the worker).
pub fn connector(ca: &Path) -> Result<TlsConnector, String> {
    client_config(ca).map(TlsConnector::from)
}

/// The name the coordinator's certificate must carry: `server_name` if
/// given, else the host part of `addr` (`host:port`).
pub fn server_name(server_name: &str, addr: &str) -> Result<ServerName<'static>, String> {
    let host = if server_name.is_empty() {
        addr.rsplit_once(':').map_or(addr, |(host, _)| host)
    } else {
        server_name
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string())
        .map_err(|e| format!("{host:?} is not a TLS server name: {e}"))
}
