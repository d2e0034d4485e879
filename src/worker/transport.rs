//! How a worker reaches the coordinator: TCP, optionally TLS, and the token
//! it presents in `Hello`.

use crate::config::WorkerConfig;
use crate::security::{tls, Secret};
use crate::worker::ConnectionError;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// A connected byte stream to the coordinator, plain or TLS.
pub trait CoordinatorStream: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> CoordinatorStream for T {}

/// Where and how to connect; built once from the config.
pub struct Transport {
    pub addr: String,
    pub token: Option<Secret>,
    tls: Option<(TlsConnector, ServerName<'static>)>,
}

impl Transport {
    /// Reads the token and TLS files named in `config`; errors name the key.
    pub fn from_config(config: &WorkerConfig) -> Result<Transport, String> {
        let token = config
            .secret()
            .map_err(|(key, reason)| format!("{key}: {reason}"))?;
        let tls = if config.tls_ca.as_os_str().is_empty() {
            None
        } else {
            let connector = tls::connector(&config.tls_ca).map_err(|e| format!("tls-ca: {e}"))?;
            let name = tls::server_name(&config.tls_server_name, &config.coordinator)
                .map_err(|e| format!("tls-server-name: {e}"))?;
            Some((connector, name))
        };
        Ok(Transport {
            addr: config.coordinator.clone(),
            token,
            tls,
        })
    }

    /// Opens a connection, with the TLS handshake done when configured.
    pub async fn connect(&self) -> Result<Box<dyn CoordinatorStream>, ConnectionError> {
        let stream =
            TcpStream::connect(&self.addr)
                .await
                .map_err(|source| ConnectionError::Connect {
                    addr: self.addr.clone(),
                    source,
                })?;
        let _ = stream.set_nodelay(true);
        let Some((connector, name)) = &self.tls else {
            return Ok(Box::new(stream));
        };
        let tls = connector
            .connect(name.clone(), stream)
            .await
            .map_err(|e| ConnectionError::Refused(format!("TLS handshake failed: {e}")))?;
        Ok(Box::new(tls))
    }
}
