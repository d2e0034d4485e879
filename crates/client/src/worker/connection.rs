//! The connection to the coordinator: find the leader among the configured
//! addresses (following `NotLeader`), `Hello`, `Register` (listing the
//! attempts still held from an earlier connection), then read
//! `TaskAssign`/`TaskCancel` until the connection ends, ignoring those of
//! an epoch older than the newest seen. A lost connection does not stop
//! running tasks: their results wait for the next connection, which is
//! sought with capped exponential backoff. Once the pool drains, every
//! connection says `Draining` and refuses assignments.

use crate::security::Secret;
use crate::worker::epoch::{EpochFilter, FrameObserver, ReceivedFrame};
use crate::worker::heartbeat;
use crate::worker::pool::{Assignment, Ledger, TaskPool};
use crate::worker::transport::{CoordinatorStream, Transport};
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use slog::{debug, info, warn, Logger};
use std::sync::Arc;
use std::time::Duration;
use taskyard_protocol::register::REGISTRATION_REFUSED;
use taskyard_protocol::{
    CoordinatorToWorker, FrameCodec, Hello, LeaderAddresses, LeaderSearch, ProtocolError, Role,
    TaskOutcome, WorkerId, WorkerMessage, PROTOCOL_VERSION, UNAUTHORIZED, VERSION_MISMATCH,
    WRONG_LISTENER,
};
use thiserror::Error;
use tokio::sync::{mpsc, Mutex};
use tokio_util::codec::Framed;
use tokio_util::sync::CancellationToken;

type Connection =
    Framed<Box<dyn CoordinatorStream>, FrameCodec<CoordinatorToWorker, WorkerMessage>>;

/// Frames queued for the writer; heartbeats and results wait here when the
/// socket is slow (or, results, while no connection is up) instead of
/// piling up without bound.
const WRITE_QUEUE: usize = 256;
/// Longest wait for connect, `Hello` and `Registered` together at one
/// address, so a coordinator that accepts but never answers does not
/// stall the worker (a paused one's kernel still accepts): short enough
/// that after leaving a silent leader the worker reaches the new one within
/// its claim window (`heartbeat-timeout-millis` from its recovery).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// First reconnection delay; doubles up to `reconnect-max-millis`.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// Longest wait, when the worker stops, to write the frames already
/// queued (a drained worker's last results); a stalled socket cannot hold
/// the worker up for longer.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a connection attempt or an established connection ended.
/// [`ConnectionError::is_definitive`] says whether trying again can help.
#[derive(Debug, Error)]
pub enum ConnectionError {
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// The coordinator sent an `Error` frame and closed the connection.
    #[error("{}", refusal_text(message))]
    Refused { message: String },
    #[error("coordinator speaks protocol version {theirs}, this worker {ours}")]
    VersionMismatch { ours: u32, theirs: u32 },
    /// The TLS handshake failed: a `rustls` error inside `source` is the
    /// peer's certificate or a peer that does not speak TLS; anything else
    /// (the connection dropped) is worth another try.
    #[error("TLS handshake failed: {}", tls_text(source))]
    Tls { source: std::io::Error },
    #[error("tls-server-name: {0}")]
    TlsServerName(String),
    #[error("connection closed by the coordinator")]
    Closed,
    /// Nothing, not even a heartbeat's answer, came for this long.
    #[error("coordinator silent for {0:?} (heartbeats unanswered)")]
    Silent(Duration),
    #[error("no registration within {0:?}")]
    HandshakeTimeout(Duration),
    #[error("frame writer failed: {0}")]
    Writer(String),
    /// The coordinator at `addr` is a standby; `leader` says who leads.
    #[error("coordinator at {addr} is a standby (leader: {})", leader_text(leader))]
    NotLeader {
        addr: String,
        leader: Option<Box<LeaderAddresses>>,
    },
    /// Registered by a coordinator of an epoch older than one already seen:
    /// a deposed leader.
    #[error("coordinator at {addr} leads epoch {theirs}, older than epoch {newest} seen before")]
    StaleEpoch {
        addr: String,
        theirs: u64,
        newest: u64,
    },
    #[error("no coordinator address to try")]
    NoAddress,
}

impl ConnectionError {
    /// True when a coordinator answered and refused this worker for a
    /// reason another attempt cannot change: a wrong or missing token, a
    /// protocol version or listener mismatch, a refused `Register`, a TLS
    /// mismatch (untrusted certificate, TLS against a plaintext port or the
    /// reverse) or an HTTP port. Everything else — no answer, a reset, a
    /// timeout, a standby's `NotLeader`, a full coordinator — is transient.
    pub fn is_definitive(&self) -> bool {
        match self {
            ConnectionError::Refused { message } => refusal_is_definitive(message),
            ConnectionError::VersionMismatch { .. } | ConnectionError::TlsServerName(_) => true,
            ConnectionError::Tls { source } => is_tls_error(source),
            ConnectionError::Protocol(ProtocolError::WrongPort { .. }) => true,
            _ => false,
        }
    }
}

/// The `Error` frames that refuse the worker itself rather than this
/// moment: they begin with texts the coordinator takes from `protocol`.
fn refusal_is_definitive(message: &str) -> bool {
    message == UNAUTHORIZED
        || [VERSION_MISMATCH, WRONG_LISTENER, REGISTRATION_REFUSED]
            .iter()
            .any(|prefix| message.starts_with(prefix))
}

fn refusal_text(message: &str) -> String {
    if message == UNAUTHORIZED {
        format!("{UNAUTHORIZED}: check the worker token (token or token-file)")
    } else {
        message.to_string()
    }
}

/// tokio-rustls reports what rustls refused (a certificate, a record that
/// is not TLS) as an `io::Error` wrapping a `rustls::Error`; an early end
/// of the stream or a reset carries no such error.
fn is_tls_error(e: &std::io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<rustls::Error>())
}

/// A record that is not TLS at all means a plaintext port: say so.
fn tls_text(e: &std::io::Error) -> String {
    let inner = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
    match inner {
        Some(rustls::Error::InvalidMessage(_)) => {
            format!("{e} (a plaintext port? then leave tls-ca unset)")
        }
        _ => e.to_string(),
    }
}

/// A coordinator refused this worker, or the two cannot agree on TLS, for
/// a reason another attempt cannot change (see
/// [`ConnectionError::is_definitive`]); the worker stops.
#[derive(Debug, Error)]
#[error("giving up on the coordinator at {addr}: {cause}")]
pub struct Refusal {
    pub addr: String,
    pub cause: ConnectionError,
}

fn leader_text(leader: &Option<Box<LeaderAddresses>>) -> String {
    match leader {
        Some(l) => format!(
            "{} at {}",
            l.node,
            l.worker.as_deref().unwrap_or("an unadvertised address")
        ),
        None => "none right now".to_string(),
    }
}

/// What one worker needs to (re)connect; lives as long as `run`.
pub struct Worker {
    pub transport: Transport,
    pub worker_id: WorkerId,
    pub capacity: u32,
    pub heartbeat: Duration,
    /// Silence from the coordinator that ends the connection.
    pub coordinator_timeout: Duration,
    pub reconnect_max: Duration,
    pub max_frame_bytes: usize,
    pub pool: TaskPool,
    /// Told about every frame received (tests record them).
    pub observer: Option<FrameObserver>,
    pub log: Logger,
}

/// What outlives a connection: the frames waiting for a writer and the
/// newest epoch seen.
struct Carried {
    sender: mpsc::Sender<WorkerMessage>,
    queued: Arc<Mutex<mpsc::Receiver<WorkerMessage>>>,
    epochs: EpochFilter,
    /// Index of the address that worked last: the next search starts there.
    start: usize,
}

/// Connects, serves and reconnects until `shutdown` is cancelled (`Ok`) or
/// a coordinator refuses the worker definitively (`Err`, not logged: the
/// caller reports it). Each failed attempt is logged once, naming its
/// address. The delay between rounds through the address list starts at
/// 100 ms, doubles up to `reconnect_max`, and is reset once a registration
/// succeeds. Tasks run under `shutdown`, not under a connection: only
/// stopping the worker (or a `TaskCancel`, or their deadline) cancels them.
pub async fn run(worker: Worker, shutdown: CancellationToken) -> Result<(), Refusal> {
    let mut backoff = Backoff::new(worker.reconnect_max);
    let (sender, queued) = mpsc::channel(WRITE_QUEUE);
    let mut carried = Carried {
        sender,
        queued: Arc::new(Mutex::new(queued)),
        epochs: EpochFilter::default(),
        start: 0,
    };
    loop {
        let found = tokio::select! {
            _ = shutdown.cancelled() => break,
            found = worker.find_leader(&mut carried) => found?,
        };
        if let Some((conn, addr)) = found {
            backoff.reset();
            worker
                .serve_until_lost(conn, &addr, &mut carried, &shutdown)
                .await;
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(backoff.next_delay()) => {}
        }
    }
    info!(worker.log, "worker stopped");
    Ok(())
}

impl Worker {
    /// Serves a registered connection until it ends, and logs why it did.
    async fn serve_until_lost(
        &self,
        conn: Connection,
        addr: &str,
        carried: &mut Carried,
        shutdown: &CancellationToken,
    ) {
        let end = self.serve(conn, addr, carried, shutdown).await;
        if matches!(end, Err(ConnectionError::Silent(_))) {
            // A paused or cut-off coordinator still accepts connections (its
            // kernel does) but never answers a Hello: try the others first,
            // so a new leader hears this worker's claims within its claim
            // window.
            carried.start = (carried.start + 1) % self.transport.addrs.len().max(1);
        }
        self.log_end(addr, end, shutdown);
    }

    /// One round through the address list, from the one that worked last,
    /// going to the leader a standby names; returns the first registered
    /// connection and its address, `None` when every attempt failed for a
    /// transient reason (each logged), or the first definitive refusal
    /// when the round ended without a connection. A refusal does not end
    /// the round: one misconfigured node (or one of an older version in a
    /// rolling upgrade) does not stop a worker another node accepts; that
    /// refusal is then logged once as a warning.
    async fn find_leader(
        &self,
        carried: &mut Carried,
    ) -> Result<Option<(Connection, String)>, Refusal> {
        let mut search = LeaderSearch::new(&self.transport.addrs, carried.start);
        let mut refused: Option<Refusal> = None;
        while let Some(addr) = search.next_addr() {
            let attempt = tokio::time::timeout(
                HANDSHAKE_TIMEOUT,
                self.connect_and_register(&addr, &mut carried.epochs),
            )
            .await
            .unwrap_or(Err(ConnectionError::HandshakeTimeout(HANDSHAKE_TIMEOUT)));
            match attempt {
                Ok(conn) => {
                    carried.start = search.position_of(&addr);
                    if let Some(r) = refused {
                        warn!(self.log, "a coordinator refused this worker; another accepted it";
                              "refused_by" => &r.addr, "reason" => %r.cause, "accepted_by" => &addr);
                    }
                    return Ok(Some((conn, addr)));
                }
                Err(cause) if cause.is_definitive() => {
                    refused.get_or_insert(Refusal { addr, cause });
                }
                Err(e) => {
                    self.log_failure(&addr, &e);
                    if let ConnectionError::NotLeader {
                        leader: Some(leader),
                        ..
                    } = &e
                    {
                        if let Some(to) = &leader.worker {
                            search.follow(to);
                        }
                    }
                }
            }
        }
        refused.map_or(Ok(None), Err)
    }

    async fn connect_and_register(
        &self,
        addr: &str,
        epochs: &mut EpochFilter,
    ) -> Result<Connection, ConnectionError> {
        let stream = self.transport.connect(addr).await?;
        let codec = FrameCodec::new(self.max_frame_bytes).dialling(Role::Worker);
        let mut conn = Framed::new(stream, codec);
        let token = self.transport.token.as_ref().map(Secret::expose);
        conn.send(WorkerMessage::Hello(Hello::new(Role::Worker, token)))
            .await?;
        self.expect_hello(&mut conn, addr).await?;
        let mut running = self.pool.ledger().unreported();
        running.truncate(self.capacity as usize);
        let claims = running.len();
        let register = WorkerMessage::Register {
            worker_id: self.worker_id.clone(),
            capacity: self.capacity,
            task_types: self.pool.task_types(),
            running,
        };
        conn.send(register).await?;
        self.expect_registered(&mut conn, addr, epochs).await?;
        info!(self.log, "registered"; "coordinator" => addr, "capacity" => self.capacity,
              "claims" => claims, "epoch" => epochs.newest());
        Ok(conn)
    }

    async fn expect_hello(&self, conn: &mut Connection, addr: &str) -> Result<(), ConnectionError> {
        loop {
            match next_frame(conn).await? {
                CoordinatorToWorker::Hello(h) if h.protocol_version == PROTOCOL_VERSION => {
                    return Ok(())
                }
                CoordinatorToWorker::Hello(h) => {
                    return Err(ConnectionError::VersionMismatch {
                        ours: PROTOCOL_VERSION,
                        theirs: h.protocol_version,
                    })
                }
                CoordinatorToWorker::NotLeader { leader } => {
                    return Err(ConnectionError::NotLeader {
                        addr: addr.to_string(),
                        leader: leader.map(Box::new),
                    })
                }
                other => self.unexpected(other, "Hello")?,
            }
        }
    }

    async fn expect_registered(
        &self,
        conn: &mut Connection,
        addr: &str,
        epochs: &mut EpochFilter,
    ) -> Result<(), ConnectionError> {
        loop {
            let frame = next_frame(conn).await?;
            let admitted = epochs.admit_frame(&frame);
            self.observe(addr, &frame, admitted, epochs);
            match frame {
                CoordinatorToWorker::Registered { epoch, .. } if !admitted => {
                    return Err(ConnectionError::StaleEpoch {
                        addr: addr.to_string(),
                        theirs: epoch,
                        newest: epochs.newest(),
                    })
                }
                CoordinatorToWorker::Registered { worker_id, .. } => {
                    if worker_id != self.worker_id {
                        warn!(self.log, "registered under another id"; "theirs" => %worker_id);
                    }
                    return Ok(());
                }
                other => self.unexpected(other, "Registered")?,
            }
        }
    }

    fn observe(
        &self,
        addr: &str,
        frame: &CoordinatorToWorker,
        acted_on: bool,
        epochs: &EpochFilter,
    ) {
        if let Some(observer) = &self.observer {
            observer(&ReceivedFrame {
                from: addr.to_string(),
                frame: frame.clone(),
                acted_on,
                newest_epoch: epochs.newest(),
            });
        }
    }

    /// An `Error` frame ends the connection; anything else is logged and skipped.
    fn unexpected(
        &self,
        frame: CoordinatorToWorker,
        waiting_for: &str,
    ) -> Result<(), ConnectionError> {
        match frame {
            CoordinatorToWorker::Error { message } => Err(ConnectionError::Refused { message }),
            other => {
                warn!(self.log, "unexpected frame ignored"; "frame" => ?other, "waiting_for" => waiting_for);
                Ok(())
            }
        }
    }

    /// Runs one registered connection until it ends. On return its writer
    /// and heartbeat are stopped; the tasks go on, and frames not yet
    /// written stay queued for the next connection (unless the worker is
    /// stopping: then they are written first, for at most `FLUSH_TIMEOUT`).
    async fn serve(
        &self,
        conn: Connection,
        addr: &str,
        carried: &mut Carried,
        shutdown: &CancellationToken,
    ) -> Result<(), ConnectionError> {
        let (sink, stream) = conn.split();
        let frames = carried.sender.clone();
        let live = shutdown.child_token();
        let writer = tokio::spawn(write_frames(
            sink,
            carried.queued.clone(),
            self.pool.ledger(),
            live.clone(),
            shutdown.clone(),
        ));
        let beat = tokio::spawn(heartbeat::run(self.heartbeat, frames.clone(), live.clone()));
        let announce = tokio::spawn(announce_draining(
            self.pool.draining().clone(),
            frames.clone(),
            live.clone(),
        ));
        let reading = Reading {
            addr,
            frames: &frames,
            live: &live,
            tasks: shutdown,
        };
        let read = self.read_frames(stream, reading, &mut carried.epochs).await;
        live.cancel();
        let _ = beat.await;
        let _ = announce.await;
        let written = match writer.await {
            Ok(result) => result.map_err(ConnectionError::from),
            Err(e) => Err(ConnectionError::Writer(e.to_string())),
        };
        read.and(written)
    }

    async fn read_frames(
        &self,
        mut stream: SplitStream<Connection>,
        r: Reading<'_>,
        epochs: &mut EpochFilter,
    ) -> Result<(), ConnectionError> {
        // A coordinator of this protocol version answers every heartbeat:
        // silence for coordinator-timeout-millis means it is paused or cut
        // off, though its socket may look open.
        let silence = self.coordinator_timeout;
        loop {
            let frame = tokio::select! {
                _ = r.live.cancelled() => return Ok(()),
                frame = tokio::time::timeout(silence, stream.next()) => {
                    frame.map_err(|_| ConnectionError::Silent(silence))?
                }
            };
            let frame = frame.ok_or(ConnectionError::Closed)??;
            if frame == CoordinatorToWorker::HeartbeatAck {
                continue;
            }
            let admitted = epochs.admit_frame(&frame);
            self.observe(r.addr, &frame, admitted, epochs);
            if !admitted {
                warn!(self.log, "frame of an older epoch ignored"; "coordinator" => r.addr,
                      "frame" => frame_name(&frame), "newest_epoch" => epochs.newest());
                continue;
            }
            match frame {
                CoordinatorToWorker::TaskAssign {
                    job_id,
                    lease,
                    task_type,
                    payload,
                    timeout_ms,
                    ..
                } => {
                    let assignment = Assignment {
                        job_id,
                        lease,
                        task_type,
                        payload,
                        timeout_ms,
                    };
                    self.assign(assignment, r.tasks, r.frames).await;
                }
                CoordinatorToWorker::TaskCancel { job_id, lease, .. } => {
                    let found = self.pool.cancel(job_id, lease);
                    debug!(self.log, "task cancel"; "job" => %job_id, "lease" => %lease, "was_running" => found);
                }
                other => self.unexpected(other, "TaskAssign or TaskCancel")?,
            }
        }
    }

    /// Hands the attempt to the pool. Once draining, or when every slot is
    /// taken (the coordinator assigned beyond the registered capacity), it
    /// is refused with a retryable failure naming why, so the coordinator
    /// runs it elsewhere; the attempts already running go on.
    async fn assign(
        &self,
        a: Assignment,
        tasks: &CancellationToken,
        frames: &mpsc::Sender<WorkerMessage>,
    ) {
        let (job_id, lease) = (a.job_id, a.lease);
        let why = if self.pool.draining().is_cancelled() {
            "is draining".to_string()
        } else {
            match self.pool.assign(a, tasks, frames.clone()) {
                Ok(()) => return,
                Err(full) => full.to_string(),
            }
        };
        debug!(self.log, "assignment refused"; "job" => %job_id, "reason" => &why);
        let refusal = WorkerMessage::TaskResult {
            job_id,
            lease,
            outcome: TaskOutcome::failed(format!("worker {} {why}", self.worker_id)),
        };
        self.pool.ledger().finished(job_id, lease, refusal.clone());
        let _ = frames.send(refusal).await;
    }

    fn log_end(&self, addr: &str, end: Result<(), ConnectionError>, shutdown: &CancellationToken) {
        match end {
            Ok(()) if shutdown.is_cancelled() => info!(self.log, "connection closed for shutdown"),
            Ok(()) => warn!(self.log, "connection ended"; "coordinator" => addr),
            Err(e) => self.log_failure(addr, &e),
        }
    }

    /// One line per failed attempt or ended connection, naming the address.
    fn log_failure(&self, addr: &str, e: &ConnectionError) {
        match e {
            ConnectionError::Refused { message } => {
                warn!(self.log, "coordinator refused the connection"; "coordinator" => addr, "message" => message)
            }
            ConnectionError::NotLeader { .. } => {
                info!(self.log, "coordinator is a standby"; "coordinator" => addr, "reason" => %e)
            }
            _ => {
                warn!(self.log, "connection to coordinator failed"; "coordinator" => addr, "reason" => %e)
            }
        }
    }
}

/// What reading one connection's frames needs.
struct Reading<'a> {
    addr: &'a str,
    frames: &'a mpsc::Sender<WorkerMessage>,
    /// Cancelled when the connection ends.
    live: &'a CancellationToken,
    /// The parent of every task's token: the worker's stop.
    tasks: &'a CancellationToken,
}

fn frame_name(frame: &CoordinatorToWorker) -> &'static str {
    match frame {
        CoordinatorToWorker::Hello(_) => "Hello",
        CoordinatorToWorker::Registered { .. } => "Registered",
        CoordinatorToWorker::TaskAssign { .. } => "TaskAssign",
        CoordinatorToWorker::TaskCancel { .. } => "TaskCancel",
        CoordinatorToWorker::Error { .. } => "Error",
        CoordinatorToWorker::NotLeader { .. } => "NotLeader",
        CoordinatorToWorker::HeartbeatAck => "HeartbeatAck",
    }
}

async fn next_frame(conn: &mut Connection) -> Result<CoordinatorToWorker, ConnectionError> {
    conn.next()
        .await
        .ok_or(ConnectionError::Closed)?
        .map_err(ConnectionError::from)
}

/// Sends `Draining` once `draining` is cancelled (at once on a connection
/// made after the drain began).
async fn announce_draining(
    draining: CancellationToken,
    frames: mpsc::Sender<WorkerMessage>,
    live: CancellationToken,
) {
    tokio::select! {
        _ = live.cancelled() => {}
        _ = draining.cancelled() => {
            let _ = frames.send(WorkerMessage::Draining).await;
        }
    }
}

/// The only writer of the socket, so frames never interleave. First it
/// writes the results `ledger` keeps (those a lost connection may have
/// swallowed), then what is queued, skipping results already written.
/// Stops when `live` is cancelled or on a write error (then cancels
/// `live`, which ends the reader too). Frames it has not taken stay queued
/// for the next connection's writer, unless the worker is stopping
/// (`stopping` cancelled): then what is queued is written first, for at
/// most `FLUSH_TIMEOUT`, and the socket closed. Each result flushed is
/// marked in `ledger`, so the next `Register` no longer lists its attempt.
async fn write_frames(
    mut sink: SplitSink<Connection, WorkerMessage>,
    queued: Arc<Mutex<mpsc::Receiver<WorkerMessage>>>,
    ledger: Ledger,
    live: CancellationToken,
    stopping: CancellationToken,
) -> Result<(), ProtocolError> {
    let mut queued = queued.lock().await;
    if let Err(e) = write_batch(&mut sink, ledger.results(), &ledger).await {
        live.cancel();
        return Err(e);
    }
    loop {
        let frame = tokio::select! {
            _ = live.cancelled() => break,
            frame = queued.recv() => frame,
        };
        let Some(first) = frame else { break };
        let mut batch = vec![first];
        while let Ok(frame) = queued.try_recv() {
            batch.push(frame);
        }
        if let Err(e) = write_batch(&mut sink, batch, &ledger).await {
            live.cancel();
            return Err(e);
        }
    }
    if !stopping.is_cancelled() {
        return Ok(());
    }
    let flush = async {
        let mut rest = Vec::new();
        while let Ok(frame) = queued.try_recv() {
            rest.push(frame);
        }
        write_batch(&mut sink, rest, &ledger).await?;
        sink.close().await
    };
    tokio::time::timeout(FLUSH_TIMEOUT, flush)
        .await
        .unwrap_or(Ok(()))
}

/// Writes `frames` and flushes once, so a burst of results shares one
/// write to the socket. A result whose attempt the ledger no longer holds
/// was written before and is skipped; the others are marked written once
/// the flush succeeds.
async fn write_batch(
    sink: &mut SplitSink<Connection, WorkerMessage>,
    frames: Vec<WorkerMessage>,
    ledger: &Ledger,
) -> Result<(), ProtocolError> {
    let mut results = Vec::new();
    for frame in frames {
        if let WorkerMessage::TaskResult { job_id, lease, .. } = &frame {
            if !ledger.holds(*job_id, *lease) || results.contains(&(*job_id, *lease)) {
                continue;
            }
            results.push((*job_id, *lease));
        }
        sink.feed(frame).await?;
    }
    sink.flush().await?;
    for (job_id, lease) in results {
        ledger.reported(job_id, lease);
    }
    Ok(())
}

/// Capped exponential backoff between connection attempts.
#[derive(Debug)]
struct Backoff {
    next: Duration,
    cap: Duration,
}

impl Backoff {
    fn new(cap: Duration) -> Self {
        Backoff {
            next: FIRST_BACKOFF.min(cap),
            cap,
        }
    }

    fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(self.cap);
        delay
    }

    fn reset(&mut self) {
        self.next = FIRST_BACKOFF.min(self.cap);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    fn refused(message: &str) -> ConnectionError {
        ConnectionError::Refused {
            message: message.to_string(),
        }
    }

    fn io_error(kind: io::ErrorKind) -> io::Error {
        io::Error::new(kind, "test")
    }

    #[test]
    fn refusals_of_the_worker_itself_are_definitive() {
        let definitive = [
            refused(UNAUTHORIZED),
            refused(&format!(
                "{VERSION_MISMATCH}: peer speaks version 2, this coordinator speaks version 3"
            )),
            refused(&format!(
                "{WRONG_LISTENER}: a worker connected to the client port"
            )),
            refused(&format!(
                "{REGISTRATION_REFUSED}: capacity: 9 is outside 1..=4"
            )),
            ConnectionError::VersionMismatch { ours: 3, theirs: 4 },
            ConnectionError::Protocol(ProtocolError::WrongPort {
                hint: taskyard_protocol::TLS_PORT_HINT,
            }),
            ConnectionError::Tls {
                source: io::Error::new(
                    io::ErrorKind::InvalidData,
                    rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
                ),
            },
            ConnectionError::TlsServerName("not a valid DNS name".into()),
        ];
        for e in definitive {
            assert!(e.is_definitive(), "{e} should stop the worker");
        }
    }

    #[test]
    fn failures_of_the_moment_are_transient() {
        let transient = [
            ConnectionError::Connect {
                addr: "127.0.0.1:1".into(),
                source: io_error(io::ErrorKind::ConnectionRefused),
            },
            ConnectionError::Protocol(ProtocolError::Io(io_error(io::ErrorKind::ConnectionReset))),
            ConnectionError::Protocol(ProtocolError::Truncated),
            ConnectionError::Tls {
                source: io_error(io::ErrorKind::UnexpectedEof),
            },
            ConnectionError::Closed,
            ConnectionError::HandshakeTimeout(HANDSHAKE_TIMEOUT),
            ConnectionError::Silent(Duration::from_secs(1)),
            ConnectionError::NotLeader {
                addr: "127.0.0.1:2".into(),
                leader: None,
            },
            ConnectionError::StaleEpoch {
                addr: "127.0.0.1:2".into(),
                theirs: 1,
                newest: 2,
            },
            refused("too many connections: max-connections (8) reached"),
            refused("no valid Hello within handshake-timeout-millis (5000)"),
            refused("coordinator is shutting down"),
            // Only an exact "unauthorized" is the token's refusal.
            refused("unauthorized-ish"),
        ];
        for e in transient {
            assert!(!e.is_definitive(), "{e} should be retried");
        }
    }

    #[test]
    fn a_refusal_names_the_address_and_what_to_check() {
        let refusal = Refusal {
            addr: "10.0.0.7:7401".into(),
            cause: refused(UNAUTHORIZED),
        };
        assert_eq!(
            refusal.to_string(),
            "giving up on the coordinator at 10.0.0.7:7401: unauthorized: \
             check the worker token (token or token-file)"
        );
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(700));
        let delays: Vec<u64> = (0..5).map(|_| b.next_delay().as_millis() as u64).collect();
        assert_eq!(delays, [100, 200, 400, 700, 700]);
        b.reset();
        assert_eq!(b.next_delay(), Duration::from_millis(100));
        assert_eq!(
            Backoff::new(Duration::from_millis(30)).next_delay(),
            Duration::from_millis(30)
        );
    }
}
