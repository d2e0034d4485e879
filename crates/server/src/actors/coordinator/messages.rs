//! The `Coordinator`'s API: one message per event it reacts to. None of
//! them returns job state directly; answers travel through the outbox once
//! durable.

use crate::actors::outbox::{ClientAnswer, QueryAnswer, SendToWorker};
use crate::scheduler::SessionId;
use actix::{Message, Recipient};
use taskyard_protocol::{ClientRequest, JobId, LeaseId, RunningAttempt, TaskOutcome, WorkerId};

/// `WorkerSession` → coordinator, after `Hello` and `Register`. Replaces any
/// older session of the same worker id. Answered with `Registered` via
/// `reply_to`.
#[derive(Message)]
#[rtype(result = "()")]
pub struct RegisterWorker {
    pub session: SessionId,
    pub reply_to: Recipient<SendToWorker>,
    pub worker_id: WorkerId,
    pub capacity: u32,
    pub task_types: Vec<String>,
    /// The attempts the worker still holds; see `CoordinatorState::register_worker_claiming`.
    pub running: Vec<RunningAttempt>,
}

/// `WorkerSession` → coordinator: the worker is alive.
#[derive(Message)]
#[rtype(result = "()")]
pub struct WorkerHeartbeat {
    pub session: SessionId,
    pub worker_id: WorkerId,
}

/// `WorkerSession` → coordinator: an attempt's outcome. Applied only if the
/// job is RUNNING under `lease`; otherwise logged as stale and dropped.
#[derive(Message)]
#[rtype(result = "()")]
pub struct WorkerTaskResult {
    pub session: SessionId,
    pub worker_id: WorkerId,
    pub job_id: JobId,
    pub lease: LeaseId,
    pub outcome: TaskOutcome,
}

/// `WorkerSession` → coordinator: how far a running attempt has got. Kept
/// in memory for `status`; ignored unless `lease` is the current attempt.
#[derive(Message)]
#[rtype(result = "()")]
pub struct WorkerTaskProgress {
    pub session: SessionId,
    pub worker_id: WorkerId,
    pub job_id: JobId,
    pub lease: LeaseId,
    pub percent: u8,
    pub message: String,
}

/// `WorkerSession` → coordinator: the worker is shutting down; assign it
/// nothing new. Its running tasks finish or are lost with its connection.
#[derive(Message)]
#[rtype(result = "()")]
pub struct WorkerDraining {
    pub session: SessionId,
    pub worker_id: WorkerId,
}

/// `WorkerSession` → coordinator: the connection ended. The worker's
/// running jobs are retried or failed; a replaced session changes nothing.
#[derive(Message)]
#[rtype(result = "()")]
pub struct WorkerDisconnected {
    pub session: SessionId,
    pub worker_id: WorkerId,
    pub reason: String,
}

/// `ClientSession` → coordinator: one client request. The answer arrives
/// later at `reply_to` as a `ClientAnswer` carrying `request_id`.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ClientCommand {
    pub reply_to: Recipient<ClientAnswer>,
    pub request_id: u64,
    pub request: ClientRequest,
    /// The HTTP peer's address (none over TCP, where the connection
    /// itself is the peer): history reads are shared out per peer.
    pub peer: Option<std::net::IpAddr>,
}

/// HTTP API → coordinator: a read the wire protocol has no request for.
/// Changes nothing; like `ClientCommand`, the answer goes to `reply_to`
/// through the outbox, tagged with the newest batch sent, so it never shows
/// state that is not yet durable.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Query {
    pub reply_to: Recipient<QueryAnswer>,
    pub request_id: u64,
    pub query: QueryKind,
}

/// What a `Query` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryKind {
    /// Counts, queues, workers and metrics; answered with `Stats`.
    Stats,
    /// The last hour per task type and minute; answered with `Timeline`.
    Timeline,
    /// Answered with `Ready` once everything sent to the database is durable.
    Ready,
}

/// `Sweeper` (or a test) → coordinator: run the periodic pass. The reply
/// comes after the pass, so tests use it as a barrier.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Sweep;

/// Stop gracefully: freeze state (ignore new events), commit everything
/// pending, then stop the actix system, which closes every socket.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Shutdown;

/// Inspection for tests and `taskyard bench`: the number of non-terminal
/// jobs, how many jobs memory holds, effects still held, the newest durable batch and how many batches
/// and rows were committed, after checking every state invariant (a pass
/// over every job: not for a hot path).
#[derive(Message)]
#[rtype(result = "Result<Inspection, String>")]
pub struct Inspect;

/// What `Inspect` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inspection {
    pub active_jobs: u64,
    pub held_effects: usize,
    pub durable_batch: u64,
    /// Persistence batches committed since start-up.
    pub batches_committed: u64,
    /// Job rows written by those batches (a row changed twice while one
    /// batch was in flight counts once).
    pub rows_committed: u64,
    /// Jobs held in memory, of every state.
    pub jobs_in_memory: usize,
    /// Finished jobs held in memory (the retention window).
    pub finished_in_memory: usize,
}

/// Node → coordinator: the leader lease is lost (or no longer trusted):
/// stop at once, dropping every held answer and effect unsent. Nothing is
/// flushed and nothing released: another coordinator may already lead.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Depose {
    pub reason: String,
}

/// Coordinator → node: a commit failed its epoch check (another
/// coordinator holds the lease); the coordinator has deposed itself.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct Fenced {
    pub reason: String,
    /// The epoch of the coordinator whose commit was fenced: a late answer
    /// about an earlier term never ends a newer one.
    pub epoch: u64,
}
