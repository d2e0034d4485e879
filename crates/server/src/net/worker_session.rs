//! `WorkerSession`: one per worker connection. Translates frames into
//! coordinator messages and coordinator instructions into frames; holds no
//! job state.

use crate::actors::coordinator::{
    Coordinator, RegisterWorker, WorkerDisconnected, WorkerDraining, WorkerHeartbeat,
    WorkerTaskProgress, WorkerTaskResult,
};
use crate::actors::outbox::SendToWorker;
use crate::net::handshake::SessionContext;
use crate::net::session_io::{SessionIo, SessionPhase};
use crate::net::write_budget::{StallWatch, MIN_PROGRESS_BYTES};
use crate::scheduler::SessionId;
use actix::io::WriteHandler;
use actix::{Actor, ActorContext, Addr, AsyncContext, Context, Handler, Running, StreamHandler};
use slog::{debug, info};
use std::sync::atomic::{AtomicU64, Ordering};
use taskyard_protocol::limits;
use taskyard_protocol::register::{
    cut_at_char_boundary, validate_claims, validate_register, REGISTRATION_REFUSED,
};
use taskyard_protocol::{
    CoordinatorToWorker, ProtocolError, RunningAttempt, TaskOutcome, WorkerId, WorkerMessage,
};
use tokio::io::{AsyncRead, AsyncWrite};

static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

/// A fresh id for each connection.
pub fn next_session_id() -> SessionId {
    SessionId(NEXT_SESSION.fetch_add(1, Ordering::Relaxed))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    AwaitingHello,
    AwaitingRegister,
    Registered,
    Closing,
}

impl SessionPhase for Phase {
    const AWAITING_HELLO: Phase = Phase::AwaitingHello;
    const CLOSING: Phase = Phase::Closing;

    /// A worker's handshake ends with its `Register`, so a connection that
    /// said `Hello` and nothing more cannot hold a slot past the timeout.
    fn awaited(self) -> Option<&'static str> {
        match self {
            Phase::AwaitingHello => Some("Hello"),
            Phase::AwaitingRegister => Some("Register"),
            Phase::Registered | Phase::Closing => None,
        }
    }
}

/// See the module documentation.
pub struct WorkerSession<W: AsyncWrite + Unpin + 'static> {
    id: SessionId,
    coordinator: Addr<Coordinator>,
    io: SessionIo<Phase, WorkerMessage, CoordinatorToWorker, W>,
    /// Set at registration and kept while closing, so the disconnect is
    /// always reported for a registered worker.
    worker_id: Option<WorkerId>,
    /// Whether the worker still takes the assignments it is owed.
    stall: StallWatch,
}

impl<W: AsyncWrite + Unpin + 'static> WorkerSession<W> {
    /// Starts a session over a connection's two halves.
    pub fn start<R: AsyncRead + Unpin + 'static>(
        read: R,
        write: W,
        coordinator: Addr<Coordinator>,
        conn: SessionContext,
    ) -> Addr<Self> {
        WorkerSession::create(|ctx| {
            let id = next_session_id();
            let log = conn.log.new(slog::o!("session" => id.0));
            let limits = &conn.policy.worker_limits;
            let stall = StallWatch::new(limits.max_unwritten_bytes, limits.stall_patience);
            WorkerSession {
                stall,
                id,
                coordinator,
                io: SessionIo::open(read, write, conn, log, ctx),
                worker_id: None,
            }
        })
    }

    fn on_frame(&mut self, frame: WorkerMessage, ctx: &mut Context<Self>) {
        let registered = match (&self.worker_id, self.io.phase()) {
            (Some(id), Phase::Registered) => Some(id.clone()),
            _ => None,
        };
        match (self.io.phase(), registered, frame) {
            (Phase::AwaitingHello, _, WorkerMessage::Hello(h)) => {
                match self.io.policy().check_hello(&h) {
                    Ok(()) => {
                        let hello = self.io.policy().hello();
                        self.io.write(CoordinatorToWorker::Hello(hello));
                        self.io.set_phase(Phase::AwaitingRegister);
                    }
                    Err(message) => self.io.close_with_error_bounded(message, ctx),
                }
            }
            (
                Phase::AwaitingRegister,
                _,
                WorkerMessage::Register {
                    worker_id,
                    capacity,
                    task_types,
                    running,
                },
            ) => self.register(worker_id, capacity, task_types, running, ctx),
            (_, Some(_), WorkerMessage::Heartbeat) if self.not_reading() => {
                let limits = &self.io.policy().worker_limits;
                let message = format!(
                    "not reading: {} bytes of assignments unread, over max-unwritten-worker-bytes \
                     ({}), and under {} bytes taken in heartbeat-timeout-millis ({})",
                    self.io.unwritten(),
                    limits.max_unwritten_bytes,
                    MIN_PROGRESS_BYTES,
                    limits.stall_patience.as_millis()
                );
                self.io.close_with_error_bounded(message, ctx);
            }
            (_, Some(worker_id), WorkerMessage::Heartbeat) => {
                // do_send: small liveness events must never be dropped or block the read.
                self.coordinator.do_send(WorkerHeartbeat {
                    session: self.id,
                    worker_id,
                });
                self.io.write(CoordinatorToWorker::HeartbeatAck);
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
                debug!(self.io.log(), "task result"; "job" => %job_id, "lease" => %lease);
                let outcome = match outcome {
                    TaskOutcome::Failed { error, retryable } => TaskOutcome::Failed {
                        error: self.io.policy().worker_limits.cap_error(error),
                        retryable,
                    },
                    succeeded => succeeded,
                };
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
                if let Err(refused) = limits::PROGRESS_PERCENT.check(percent.into()) {
                    return self.io.close_with_error_bounded(
                        format!("task progress refused: {refused}"),
                        ctx,
                    );
                }
                // do_send: progress is small and rate-limited by the worker.
                self.coordinator.do_send(WorkerTaskProgress {
                    session: self.id,
                    worker_id,
                    job_id,
                    lease,
                    percent,
                    message: {
                        let mut message = message;
                        cut_at_char_boundary(&mut message, MAX_PROGRESS_MESSAGE);
                        message
                    },
                });
            }
            (_, Some(worker_id), WorkerMessage::Draining) => {
                self.coordinator.do_send(WorkerDraining {
                    session: self.id,
                    worker_id,
                });
            }
            (Phase::Closing, _, _) => {}
            (_, _, other) => self.io.close_with_error_bounded(
                format!(
                    "unexpected {} frame at this point of the worker protocol",
                    frame_name(&other)
                ),
                ctx,
            ),
        }
    }

    /// True once the worker has been owed too much for too long without
    /// taking it (checked at each heartbeat).
    fn not_reading(&mut self) -> bool {
        let (unwritten, written) = (self.io.unwritten(), self.io.written());
        self.stall
            .stalled(unwritten, written, std::time::Instant::now())
    }

    fn register(
        &mut self,
        worker_id: WorkerId,
        capacity: u32,
        task_types: Vec<String>,
        running: Vec<RunningAttempt>,
        ctx: &mut Context<Self>,
    ) {
        let limits = &self.io.policy().worker_limits;
        let valid = validate_register(&worker_id, capacity, &task_types, limits)
            .and_then(|()| validate_claims(running.len(), capacity));
        if let Err(refused) = valid {
            return self
                .io
                .close_with_error_bounded(format!("{REGISTRATION_REFUSED}: {refused}"), ctx);
        }
        info!(self.io.log(), "worker connected"; "worker" => %worker_id);
        self.io.set_phase(Phase::Registered);
        self.worker_id = Some(worker_id.clone());
        self.coordinator.do_send(RegisterWorker {
            session: self.id,
            reply_to: ctx.address().recipient(),
            worker_id,
            capacity,
            task_types,
            running,
        });
    }
}

/// Longest progress message kept, in bytes.
const MAX_PROGRESS_MESSAGE: usize = 200;

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
        self.io.arm_handshake_timer(ctx, |act| &mut act.io);
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
            Err(_) if self.io.is_closing() => {}
            Err(e) => self.io.close_with_error_bounded(e.to_string(), ctx),
        }
    }

    fn finished(&mut self, ctx: &mut Context<Self>) {
        self.io.input_ended(ctx);
    }
}

impl<W: AsyncWrite + Unpin + 'static> WriteHandler<ProtocolError> for WorkerSession<W> {
    fn error(&mut self, err: ProtocolError, _: &mut Context<Self>) -> Running {
        self.io.write_failed(&err)
    }
}

impl<W: AsyncWrite + Unpin + 'static> Handler<SendToWorker> for WorkerSession<W> {
    type Result = ();

    fn handle(&mut self, m: SendToWorker, ctx: &mut Context<Self>) {
        if self.io.is_closing() {
            // Already closing, perhaps towards a peer that does not read:
            // the coordinator's close still ends the session in bounded time.
            if m.then_close {
                ctx.run_later(self.io.policy().handshake_timeout, |_, ctx| ctx.stop());
            }
            return;
        }
        match (m.frame, m.then_close) {
            // Bounded: a worker declared lost may not be reading at all.
            (CoordinatorToWorker::Error { message }, true) => {
                self.io.close_with_error_bounded(message, ctx)
            }
            (frame, then_close) => {
                self.io.write(frame);
                if then_close {
                    self.io.close();
                }
            }
        }
    }
}
