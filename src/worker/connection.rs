//! The connection to the coordinator: connect, `Hello`, `Register`, then read
//! `TaskAssign`/`TaskCancel` until the connection ends; on loss cancel every
//! in-flight task and reconnect with capped exponential backoff. Once the
//! pool drains, every connection says `Draining` and refuses assignments.

use crate::protocol::{
    CoordinatorToWorker, FrameCodec, Hello, ProtocolError, Role, TaskOutcome, WorkerId,
    WorkerMessage, PROTOCOL_VERSION,
};
use crate::security::Secret;
use crate::worker::heartbeat;
use crate::worker::pool::{Assignment, TaskPool};
use crate::worker::transport::{CoordinatorStream, Transport};
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use slog::{debug, error, info, warn, Logger};
use std::time::Duration;
use thiserror::Error;
use tokio::sync::mpsc;
use tokio_util::codec::Framed;
use tokio_util::sync::CancellationToken;

type Connection =
    Framed<Box<dyn CoordinatorStream>, FrameCodec<CoordinatorToWorker, WorkerMessage>>;

/// Frames queued for the writer; heartbeats and results wait here when the
/// socket is slow instead of piling up without bound.
const WRITE_QUEUE: usize = 256;
/// Longest wait for connect, `Hello` and `Registered` together, so a
/// coordinator that accepts but never answers does not stall the worker.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// First reconnection delay; doubles up to `reconnect-max-millis`.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// Longest wait, when a connection closes, to write the frames already
/// queued (a drained worker's last results); a stalled socket cannot hold
/// the worker up for longer.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a connection attempt or an established connection ended.
#[derive(Debug, Error)]
pub enum ConnectionError {
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    #[error("coordinator refused the connection: {0}")]
    Refused(String),
    #[error("coordinator speaks protocol version {theirs}, this worker {ours}")]
    VersionMismatch { ours: u32, theirs: u32 },
    #[error("connection closed by the coordinator")]
    Closed,
    #[error("no registration within {0:?}")]
    HandshakeTimeout(Duration),
    #[error("frame writer failed: {0}")]
    Writer(String),
}

/// What one worker needs to (re)connect; lives as long as `run`.
pub struct Worker {
    pub coordinator: String,
    pub transport: Transport,
    pub worker_id: WorkerId,
    pub capacity: u32,
    pub heartbeat: Duration,
    pub reconnect_max: Duration,
    pub max_frame_bytes: usize,
    pub pool: TaskPool,
    pub log: Logger,
}

/// Connects, serves and reconnects until `shutdown` is cancelled. The delay
/// between attempts starts at 100 ms, doubles up to `reconnect_max`, and is
/// reset once a registration succeeds.
pub async fn run(worker: Worker, shutdown: CancellationToken) {
    let mut backoff = Backoff::new(worker.reconnect_max);
    loop {
        let attempt = tokio::select! {
            _ = shutdown.cancelled() => break,
            attempt = tokio::time::timeout(HANDSHAKE_TIMEOUT, worker.connect_and_register()) => {
                attempt.unwrap_or(Err(ConnectionError::HandshakeTimeout(HANDSHAKE_TIMEOUT)))
            }
        };
        match attempt {
            Ok(conn) => {
                backoff.reset();
                let end = worker.serve(conn, &shutdown).await;
                worker.log_end(end, &shutdown);
            }
            Err(e) => worker.log_failure(&e),
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(backoff.next_delay()) => {}
        }
    }
    info!(worker.log, "worker stopped");
}

impl Worker {
    async fn connect_and_register(&self) -> Result<Connection, ConnectionError> {
        let stream = self.transport.connect().await?;
        let codec = FrameCodec::new(self.max_frame_bytes).dialling(Role::Worker);
        let mut conn = Framed::new(stream, codec);
        let token = self.transport.token.as_ref().map(Secret::expose);
        conn.send(WorkerMessage::Hello(Hello::new(Role::Worker, token)))
            .await?;
        self.expect_hello(&mut conn).await?;
        let register = WorkerMessage::Register {
            worker_id: self.worker_id.clone(),
            capacity: self.capacity,
            task_types: self.pool.task_types(),
        };
        conn.send(register).await?;
        self.expect_registered(&mut conn).await?;
        info!(self.log, "registered"; "coordinator" => &self.coordinator, "capacity" => self.capacity);
        Ok(conn)
    }

    async fn expect_hello(&self, conn: &mut Connection) -> Result<(), ConnectionError> {
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
                other => self.unexpected(other, "Hello")?,
            }
        }
    }

    async fn expect_registered(&self, conn: &mut Connection) -> Result<(), ConnectionError> {
        loop {
            match next_frame(conn).await? {
                CoordinatorToWorker::Registered { worker_id } if worker_id == self.worker_id => {
                    return Ok(())
                }
                CoordinatorToWorker::Registered { worker_id } => {
                    warn!(self.log, "registered under another id"; "theirs" => %worker_id);
                    return Ok(());
                }
                other => self.unexpected(other, "Registered")?,
            }
        }
    }

    /// An `Error` frame ends the connection; anything else is logged and skipped.
    fn unexpected(
        &self,
        frame: CoordinatorToWorker,
        waiting_for: &str,
    ) -> Result<(), ConnectionError> {
        match frame {
            CoordinatorToWorker::Error { message } => Err(ConnectionError::Refused(message)),
            other => {
                warn!(self.log, "unexpected frame ignored"; "frame" => ?other, "waiting_for" => waiting_for);
                Ok(())
            }
        }
    }

    /// Runs one registered connection until it ends. On return the writer,
    /// the heartbeat and every task started on this connection are stopped:
    /// their leases die with the connection.
    async fn serve(
        &self,
        conn: Connection,
        shutdown: &CancellationToken,
    ) -> Result<(), ConnectionError> {
        let (sink, stream) = conn.split();
        let (frames, queued) = mpsc::channel(WRITE_QUEUE);
        let live = shutdown.child_token();
        let writer = tokio::spawn(write_frames(sink, queued, live.clone()));
        let beat = tokio::spawn(heartbeat::run(self.heartbeat, frames.clone(), live.clone()));
        let announce = tokio::spawn(announce_draining(
            self.pool.draining().clone(),
            frames.clone(),
            live.clone(),
        ));
        let read = self.read_frames(stream, &frames, &live).await;
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
        frames: &mpsc::Sender<WorkerMessage>,
        live: &CancellationToken,
    ) -> Result<(), ConnectionError> {
        loop {
            let frame = tokio::select! {
                _ = live.cancelled() => return Ok(()),
                frame = stream.next() => frame,
            };
            match frame.ok_or(ConnectionError::Closed)?? {
                CoordinatorToWorker::TaskAssign {
                    job_id,
                    lease,
                    task_type,
                    payload,
                    timeout_ms,
                } => {
                    let assignment = Assignment {
                        job_id,
                        lease,
                        task_type,
                        payload,
                        timeout_ms,
                    };
                    self.assign(assignment, live, frames).await;
                }
                CoordinatorToWorker::TaskCancel { job_id, lease } => {
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
        live: &CancellationToken,
        frames: &mpsc::Sender<WorkerMessage>,
    ) {
        let (job_id, lease) = (a.job_id, a.lease);
        let why = if self.pool.draining().is_cancelled() {
            "is draining".to_string()
        } else {
            match self.pool.assign(a, live, frames.clone()) {
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
        let _ = frames.send(refusal).await;
    }

    fn log_end(&self, end: Result<(), ConnectionError>, shutdown: &CancellationToken) {
        match end {
            Ok(()) if shutdown.is_cancelled() => info!(self.log, "connection closed for shutdown"),
            Ok(()) => warn!(self.log, "connection ended"),
            Err(e) => self.log_failure(&e),
        }
    }

    fn log_failure(&self, e: &ConnectionError) {
        match e {
            ConnectionError::Refused(message) => {
                error!(self.log, "coordinator refused the connection"; "coordinator" => &self.coordinator, "message" => message)
            }
            ConnectionError::VersionMismatch { .. } => {
                error!(self.log, "protocol version mismatch"; "coordinator" => &self.coordinator, "reason" => %e)
            }
            _ => {
                warn!(self.log, "connection to coordinator failed"; "coordinator" => &self.coordinator, "reason" => %e)
            }
        }
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

/// The only writer of the socket, so frames never interleave. Stops when
/// `live` is cancelled (then writes what is already queued, for at most
/// `FLUSH_TIMEOUT`, and closes the socket) or on a write error (then
/// cancels `live`, which ends the reader too).
async fn write_frames(
    mut sink: SplitSink<Connection, WorkerMessage>,
    mut queued: mpsc::Receiver<WorkerMessage>,
    live: CancellationToken,
) -> Result<(), ProtocolError> {
    loop {
        let frame = tokio::select! {
            _ = live.cancelled() => break,
            frame = queued.recv() => frame,
        };
        let Some(frame) = frame else { break };
        if let Err(e) = write_queued(&mut sink, frame, &mut queued).await {
            live.cancel();
            return Err(e);
        }
    }
    let flush = async {
        while let Ok(frame) = queued.try_recv() {
            sink.feed(frame).await?;
        }
        sink.close().await
    };
    tokio::time::timeout(FLUSH_TIMEOUT, flush)
        .await
        .unwrap_or(Ok(()))
}

/// Writes `first` and every frame already queued behind it, then flushes
/// once, so a burst of results shares one write to the socket.
async fn write_queued(
    sink: &mut SplitSink<Connection, WorkerMessage>,
    first: WorkerMessage,
    queued: &mut mpsc::Receiver<WorkerMessage>,
) -> Result<(), ProtocolError> {
    sink.feed(first).await?;
    while let Ok(frame) = queued.try_recv() {
        sink.feed(frame).await?;
    }
    sink.flush().await
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
