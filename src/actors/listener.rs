//! Accept loops for the two listeners: enforce the connection limit, run
//! the TLS handshake when configured, and hand each connection to a session.

use crate::protocol::FrameCodec;
use bytes::BytesMut;
use serde::Serialize;
use slog::{info, warn, Logger};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_util::codec::Encoder;

/// The read half of a connection, plain or TLS.
pub type ReadHalf = Box<dyn AsyncRead + Unpin>;
/// The write half of a connection, plain or TLS.
pub type WriteHalf = Box<dyn AsyncWrite + Unpin>;

/// One accepted connection, ready for a session.
pub struct Accepted {
    pub read: ReadHalf,
    pub write: WriteHalf,
    pub peer: SocketAddr,
    /// Held by the session; dropping it frees the connection slot.
    pub slot: Slot,
}

/// Counts open connections of one listener against its limit.
#[derive(Clone)]
pub struct Slots {
    open: Arc<AtomicUsize>,
    max: usize,
}

/// One occupied connection slot, released on drop.
pub struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Slots {
    pub fn new(max: usize) -> Slots {
        Slots {
            open: Arc::new(AtomicUsize::new(0)),
            max,
        }
    }

    /// A slot, or `None` when `max` connections are open.
    pub fn take(&self) -> Option<Slot> {
        let taken = self
            .open
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.max).then_some(n + 1)
            });
        taken.ok().map(|_| Slot(Arc::clone(&self.open)))
    }
}

/// What a listener needs besides its socket.
pub struct ListenerSetup {
    pub name: &'static str,
    pub slots: Slots,
    pub tls: Option<TlsAcceptor>,
    /// Bounds the TLS handshake like the `Hello` exchange.
    pub handshake_timeout: Duration,
    pub max_frame_bytes: usize,
}

/// Accepts connections until the actix system stops, handing each to
/// `start_session`. Accept errors (such as running out of file descriptors)
/// are logged and retried after a short pause instead of spinning. Over the
/// connection limit, a connection gets an error frame and is closed.
pub async fn accept_loop<F>(
    listener: TcpListener,
    setup: ListenerSetup,
    log: Logger,
    start_session: F,
) where
    F: Fn(Accepted) + Clone + 'static,
{
    let setup = Arc::new(setup);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                warn!(log, "accept failed"; "error" => %e);
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let Some(slot) = setup.slots.take() else {
            let message = format!(
                "too many connections: max-connections ({}) reached",
                setup.slots.max
            );
            warn!(log, "connection refused"; "peer" => %peer, "listener" => setup.name, "reason" => &message);
            actix_rt::spawn(refuse(stream, message, setup.max_frame_bytes));
            continue;
        };
        let (setup, log, start_session) = (Arc::clone(&setup), log.clone(), start_session.clone());
        actix_rt::spawn(async move {
            if let Some((read, write)) = secure(stream, &setup, peer, &log).await {
                start_session(Accepted {
                    read,
                    write,
                    peer,
                    slot,
                });
            }
        });
    }
}

/// Runs the TLS handshake if the listener has TLS; plain halves otherwise.
async fn secure(
    stream: TcpStream,
    setup: &ListenerSetup,
    peer: SocketAddr,
    log: &Logger,
) -> Option<(ReadHalf, WriteHalf)> {
    let Some(acceptor) = &setup.tls else {
        let (read, write) = stream.into_split();
        return Some((Box::new(read), Box::new(write)));
    };
    match tokio::time::timeout(setup.handshake_timeout, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => {
            let (read, write) = tokio::io::split(tls);
            Some((Box::new(read), Box::new(write)))
        }
        Ok(Err(e)) => {
            info!(log, "TLS handshake failed"; "peer" => %peer, "listener" => setup.name, "error" => %e);
            None
        }
        Err(_) => {
            info!(log, "TLS handshake timed out"; "peer" => %peer, "listener" => setup.name);
            None
        }
    }
}

/// Both listeners' error frames encode as `{"Error": {"message": ...}}`, so
/// one refusal serves either role.
#[derive(Serialize)]
enum Refusal {
    Error { message: String },
}

/// Writes one error frame and closes, bounded in time.
async fn refuse(mut stream: TcpStream, message: String, max_frame_bytes: usize) {
    let mut frame = BytesMut::new();
    let mut codec = FrameCodec::<Refusal, Refusal>::new(max_frame_bytes);
    if codec.encode(Refusal::Error { message }, &mut frame).is_ok() {
        let write = async {
            let _ = stream.write_all(&frame).await;
            let _ = stream.shutdown().await;
        };
        let _ = tokio::time::timeout(Duration::from_secs(1), write).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_stop_at_the_limit_and_come_back_when_dropped() {
        let slots = Slots::new(2);
        let a = slots.take().expect("first");
        let _b = slots.take().expect("second");
        assert!(slots.take().is_none());
        drop(a);
        assert!(slots.take().is_some());
    }
}
