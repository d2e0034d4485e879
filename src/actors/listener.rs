//! Accept loops for the two listeners; each connection becomes a session.

use slog::{warn, Logger};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};

/// Accepts connections until the actix system stops, handing each to
/// `start_session`. Accept errors (such as running out of file descriptors)
/// are logged and retried after a short pause instead of spinning.
pub async fn accept_loop<F>(listener: TcpListener, log: Logger, start_session: F)
where
    F: Fn(TcpStream) + 'static,
{
    loop {
        match listener.accept().await {
            Ok((stream, _peer)) => {
                let _ = stream.set_nodelay(true);
                start_session(stream);
            }
            Err(e) => {
                warn!(log, "accept failed"; "error" => %e);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}
