//! How a worker reaches the coordinator: TCP, optionally TLS, and the token
//! it presents in `Hello`.

use crate::security::{tls, Secret};
use crate::worker::ConnectionError;
use crate::worker::WorkerConfig;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// A connected byte stream to the coordinator, plain or TLS.
pub trait CoordinatorStream: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> CoordinatorStream for T {}

/// Where and how to connect; built once from the config.
pub struct Transport {
    /// The coordinators to try, in order (`coordinator`, a list).
    pub addrs: Vec<String>,
    pub token: Option<Secret>,
    tls: Option<Tls>,
}

struct Tls {
    connector: TlsConnector,
    /// `tls-server-name`; empty: the host of each address.
    server_name: String,
}

impl Transport {
    /// Reads the token and TLS files named in `config`; errors name the key.
    pub fn from_config(config: &WorkerConfig) -> Result<Transport, String> {
        let token = config
            .secret()
            .map_err(|(key, reason)| format!("{key}: {reason}"))?;
        let addrs = taskyard_protocol::parse_address_list(&config.coordinator)
            .map_err(|e| format!("coordinator: {e}"))?;
        let tls = if config.tls_ca.as_os_str().is_empty() {
            None
        } else {
            let connector = tls::connector(&config.tls_ca).map_err(|e| format!("tls-ca: {e}"))?;
            for addr in &addrs {
                tls::server_name(&config.tls_server_name, addr)
                    .map_err(|e| format!("tls-server-name: {e}"))?;
            }
            Some(Tls {
                connector,
                server_name: config.tls_server_name.clone(),
            })
        };
        Ok(Transport { addrs, token, tls })
    }

    /// Opens a connection to `addr`, with the TLS handshake done when configured.
    pub async fn connect(&self, addr: &str) -> Result<Box<dyn CoordinatorStream>, ConnectionError> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|source| ConnectionError::Connect {
                addr: addr.to_string(),
                source,
            })?;
        let _ = stream.set_nodelay(true);
        let Some(tls) = &self.tls else {
            return Ok(Box::new(stream));
        };
        let name = tls::server_name(&tls.server_name, addr)
            .map_err(|e| ConnectionError::TlsServerName(e.to_string()))?;
        let stream = tls
            .connector
            .connect(name, stream)
            .await
            .map_err(|source| ConnectionError::Tls { source })?;
        Ok(Box::new(stream))
    }
}
