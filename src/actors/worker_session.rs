//! `WorkerSession`: one per worker connection. Translates frames into
//! coordinator messages and coordinator instructions into frames; holds no
//! job state.

use crate::actors::coordinator::{
    Coordinator, RegisterWorker, WorkerDisconnected, WorkerDraining, WorkerHeartbeat,
    WorkerTaskProgress, WorkerTaskResult,
};
use crate::actors::handshake::SessionContext;
use crate::actors::outbox::SendToWorker;
use crate::protocol::{CoordinatorToWorker, FrameCodec, ProtocolError, WorkerId, WorkerMessage};
use crate::scheduler::SessionId;
use actix::io::{FramedWrite, WriteHandler};
use actix::{Actor, ActorContext, Addr, AsyncContext, Context, Handler, Running, StreamHandler};
use slog::{debug, info, warn, Logger};
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::FramedRead;

static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

/// A fresh id for each connection.
pub fn next_session_id() -> SessionId {
    SessionId(NEXT_SESSION.fetch_add(1, Ordering::Relaxed))
}

type Writer<W> =
    FramedWrite<CoordinatorToWorker, W, FrameCodec<WorkerMessage, CoordinatorToWorker>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    AwaitingHello,
    AwaitingRegister,
    Registered,
    Closing,
}

/// See the module documentation.
pub struct WorkerSession<W: AsyncWrite + Unpin + 'static> {
    id: SessionId,
    coordinator: Addr<Coordinator>,
    writer: Writer<W>,
    phase: Phase,
    /// Set at registration and kept while closing, so the disconnect is
    /// always reported for a registered worker.
    worker_id: Option<WorkerId>,
    conn: SessionContext,
    log: Logger,
}

impl<W: AsyncWrite + Unpin + 'static> WorkerSession<W> {
    /// Starts a session over a connection's two halves.
    pub fn start<R: AsyncRead + Unpin + 'static>(
        read: R,
        write: W,
        coordinator: Addr<Coordinator>,
        conn: SessionContext,
    ) -> Addr<Self> {
        let max_frame_bytes = conn.policy.max_frame_bytes;
        WorkerSession::create(|ctx| {
            ctx.add_stream(FramedRead::new(
                read,
                FrameCodec::<WorkerMessage, CoordinatorToWorker>::new(max_frame_bytes),
            ));
            let id = next_session_id();
            WorkerSession {
                id,
                coordinator,
                writer: FramedWrite::new(write, FrameCodec::new(max_frame_bytes), ctx),
                phase: Phase::AwaitingHello,
                worker_id: None,
                log: conn.log.new(slog::o!("session" => id.0)),
                conn,
            }
        })
    }

    /// Sends an error frame, then closes; `WriteHandler::finished` stops the
    /// actor once the frame is flushed.
    fn close_with_error(&mut self, message: String) {
        warn!(self.log, "closing worker connection"; "reason" => &message);
        self.write(CoordinatorToWorker::Error { message });
        self.phase = Phase::Closing;
        self.writer.close();
    }

    fn write(&mut self, frame: CoordinatorToWorker) {
        // Encoding errors reach WriteHandler::error, which ends the session.
        self.writer.write(frame);
    }

    fn on_frame(&mut self, frame: WorkerMessage, ctx: &mut Context<Self>) {
        let registered = match (&self.worker_id, self.phase) {
            (Some(id), Phase::Registered) => Some(id.clone()),
            _ => None,
        };
        match (self.phase, registered, frame) {
            (Phase::AwaitingHello, _, WorkerMessage::Hello(h)) => {
                match self.conn.policy.check_hello(&h) {
                    Ok(()) => {
                        self.write(CoordinatorToWorker::Hello(self.conn.policy.hello()));
                        self.phase = Phase::AwaitingRegister;
                    }
                    Err(message) => self.close_with_error(message),
                }
            }
            (
                Phase::AwaitingRegister,
                _,
                WorkerMessage::Register {
                    worker_id,
                    capacity,
                    task_types,
                },
            ) => self.register(worker_id, capacity, task_types, ctx),
            (_, Some(worker_id), WorkerMessage::Heartbeat) => {
                // do_send: small liveness events must never be dropped or block the read.
                self.coordinator.do_send(WorkerHeartbeat {
                    session: self.id,
                    worker_id,
                });
            }
            (
                _,
                Some(worker_id),
                WorkerMessage::TaskResult {
                    job_id,
                    lease,
                    outcome,
                },
            ) => {
                debug!(self.log, "task result"; "job" => %job_id, "lease" => %lease);
                // do_send: a result must not be dropped; it is small and rate-bound by assignments.
                self.coordinator.do_send(WorkerTaskResult {
                    session: self.id,
                    worker_id,
                    job_id,
                    lease,
                    outcome,
                });
            }
            (
                _,
                Some(worker_id),
                WorkerMessage::TaskProgress {
                    job_id,
                    lease,
                    percent,
                    message,
                },
            ) => {
                // do_send: progress is small and rate-limited by the worker.
                self.coordinator.do_send(WorkerTaskProgress {
                    session: self.id,
                    worker_id,
                    job_id,
                    lease,
                    percent,
                    message: truncate(message, MAX_PROGRESS_MESSAGE),
                });
            }
            (_, Some(worker_id), WorkerMessage::Draining) => {
                self.coordinator.do_send(WorkerDraining {
                    session: self.id,
                    worker_id,
                });
            }
            (Phase::Closing, _, _) => {}
            (_, _, other) => self.close_with_error(format!(
                "unexpected {} frame at this point of the worker protocol",
                frame_name(&other)
            )),
        }
    }

    fn register(
        &mut self,
        worker_id: WorkerId,
        capacity: u32,
        task_types: Vec<String>,
        ctx: &mut Context<Self>,
    ) {
        let invalid = crate::protocol::payloads::validate_task_type(&worker_id.0)
            .err()
            .map(|e| format!("worker_id: {}", e.reason))
            .or_else(|| (capacity == 0).then(|| "capacity: must be at least 1".to_string()))
            .or_else(|| {
                task_types.iter().find_map(|t| {
                    crate::protocol::payloads::validate_task_type(t)
                        .err()
                        .map(|e| e.to_string())
                })
            });
        if let Some(reason) = invalid {
            return self.close_with_error(format!("registration refused: {reason}"));
        }
        info!(self.log, "worker connected"; "worker" => %worker_id);
        self.phase = Phase::Registered;
        self.worker_id = Some(worker_id.clone());
        self.coordinator.do_send(RegisterWorker {
            session: self.id,
            reply_to: ctx.address().recipient(),
            worker_id,
            capacity,
            task_types,
        });
    }
}

/// Longest progress message kept, in bytes.
const MAX_PROGRESS_MESSAGE: usize = 200;

/// `text` cut to at most `max` bytes at a character boundary.
fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let cut = (0..=max)
            .rev()
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(0);
        text.truncate(cut);
    }
    text
}

fn frame_name(frame: &WorkerMessage) -> &'static str {
    match frame {
        WorkerMessage::Hello(_) => "Hello",
        WorkerMessage::Register { .. } => "Register",
        WorkerMessage::Heartbeat => "Heartbeat",
        WorkerMessage::TaskResult { .. } => "TaskResult",
        WorkerMessage::TaskProgress { .. } => "TaskProgress",
        WorkerMessage::Draining => "Draining",
    }
}

impl<W: AsyncWrite + Unpin + 'static> Actor for WorkerSession<W> {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.run_later(self.conn.policy.handshake_timeout, |act, _| {
            if act.phase == Phase::AwaitingHello {
                act.close_with_error(act.conn.handshake_expired());
            }
        });
    }

    fn stopping(&mut self, _: &mut Context<Self>) -> Running {
        if let Some(worker_id) = &self.worker_id {
            self.coordinator.do_send(WorkerDisconnected {
                session: self.id,
                worker_id: worker_id.clone(),
                reason: "connection closed".into(),
            });
        }
        Running::Stop
    }
}

impl<W: AsyncWrite + Unpin + 'static> StreamHandler<Result<WorkerMessage, ProtocolError>>
    for WorkerSession<W>
{
    fn handle(&mut self, item: Result<WorkerMessage, ProtocolError>, ctx: &mut Context<Self>) {
        match item {
            Ok(frame) => self.on_frame(frame, ctx),
            Err(_) if self.phase == Phase::Closing => {}
            Err(e) => self.close_with_error(e.to_string()),
        }
    }

    fn finished(&mut self, ctx: &mut Context<Self>) {
        // The peer closed its side; a pending error frame still gets flushed.
        if self.phase != Phase::Closing {
            ctx.stop();
        }
    }
}

impl<W: AsyncWrite + Unpin + 'static> WriteHandler<ProtocolError> for WorkerSession<W> {
    fn error(&mut self, err: ProtocolError, _: &mut Context<Self>) -> Running {
        warn!(self.log, "worker connection write failed"; "error" => %err);
        Running::Stop
    }
}

impl<W: AsyncWrite + Unpin + 'static> Handler<SendToWorker> for WorkerSession<W> {
    type Result = ();

    fn handle(&mut self, m: SendToWorker, _: &mut Context<Self>) {
        if self.phase == Phase::Closing {
            return;
        }
        match (m.frame, m.then_close) {
            (CoordinatorToWorker::Error { message }, true) => self.close_with_error(message),
            (frame, then_close) => {
                self.write(frame);
                if then_close {
                    self.phase = Phase::Closing;
                    self.writer.close();
                }
            }
        }
    }
}
