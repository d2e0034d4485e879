//! Accept loops for the two listeners: enforce the connection limit, run
//! the TLS handshake when configured, and hand each connection to a session.

use bytes::BytesMut;
use serde::Serialize;
use slog::{info, warn, Logger};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use taskyard_protocol::FrameCodec;
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

/// Longest pause between accept attempts while they keep failing.
const MAX_ACCEPT_BACKOFF: Duration = Duration::from_secs(1);
/// First pause after a failed accept; doubles per failure in a row.
const MIN_ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

/// The refusal for a connection taken with the spare descriptor.
const OUT_OF_DESCRIPTORS: &str =
    "too many connections: the coordinator is out of file descriptors \
     (raise its open-files limit or lower max-connections)";

/// True for the accept errors that mean the process (EMFILE) or the system
/// (ENFILE) has no descriptor left for the connection waiting in the backlog.
pub fn out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

/// One descriptor held in reserve (the libev/nginx trick). When accept
/// fails for lack of descriptors, the connection stays in the backlog and
/// the listener stays readable: without a way to take it, the loop would
/// spin and the client would hang. Releasing the spare lets the loop accept
/// it, tell it why in an error frame and close it; then the spare is taken
/// back.
struct Spare(Option<std::fs::File>);

impl Spare {
    fn open() -> Spare {
        Spare(std::fs::File::open("/dev/null").ok())
    }

    /// Frees the descriptor; false when there was none to free.
    fn release(&mut self) -> bool {
        self.0.take().is_some()
    }

    fn restore(&mut self) {
        if self.0.is_none() {
            *self = Spare::open();
        }
    }
}

/// Accepts connections until the actix system stops, handing each to
/// `start_session`. Over the connection limit, a connection gets an error
/// frame and is closed. Out of file descriptors, the spare descriptor is
/// used to give the waiting connection the same kind of error frame; other
/// accept errors are logged. Either way failures in a row back off
/// (10 ms doubling to 1 s) instead of spinning.
pub async fn accept_loop<F>(
    listener: TcpListener,
    setup: ListenerSetup,
    log: Logger,
    start_session: F,
) where
    F: Fn(Accepted) + Clone + 'static,
{
    let setup = Arc::new(setup);
    let mut spare = Spare::open();
    let mut backoff = MIN_ACCEPT_BACKOFF;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => {
                backoff = MIN_ACCEPT_BACKOFF;
                accepted
            }
            Err(e) => {
                if out_of_descriptors(&e) {
                    shed_one(&listener, &mut spare, &setup, &log).await;
                } else {
                    warn!(log, "accept failed"; "error" => %e);
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_ACCEPT_BACKOFF);
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

/// Out of descriptors: frees the spare, accepts the waiting connection with
/// it, refuses it with an error frame, and takes the spare back.
async fn shed_one(listener: &TcpListener, spare: &mut Spare, setup: &ListenerSetup, log: &Logger) {
    if !spare.release() {
        warn!(log, "accept failed: out of file descriptors and no spare to refuse with";
              "listener" => setup.name);
        spare.restore();
        return;
    }
    // The connection is already in the backlog; the timeout only guards
    // against another thread having taken the freed descriptor first.
    let accepted = tokio::time::timeout(MIN_ACCEPT_BACKOFF, listener.accept()).await;
    if let Ok(Ok((stream, peer))) = accepted {
        warn!(log, "connection refused"; "peer" => %peer, "listener" => setup.name,
              "reason" => OUT_OF_DESCRIPTORS);
        refuse(
            stream,
            OUT_OF_DESCRIPTORS.to_string(),
            setup.max_frame_bytes,
        )
        .await;
    }
    spare.restore();
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

    #[test]
    fn only_running_out_of_descriptors_uses_the_spare() {
        for errno in [libc::EMFILE, libc::ENFILE] {
            assert!(out_of_descriptors(&std::io::Error::from_raw_os_error(
                errno
            )));
        }
        for errno in [libc::ECONNABORTED, libc::EINTR, libc::ENOBUFS] {
            assert!(!out_of_descriptors(&std::io::Error::from_raw_os_error(
                errno
            )));
        }
    }

    #[test]
    fn the_spare_is_released_once_and_restored() {
        let mut spare = Spare::open();
        assert!(spare.release());
        assert!(!spare.release(), "nothing left to release");
        spare.restore();
        assert!(spare.release());
    }
}
