//! Every frame body that crosses the wire, grouped by direction.
//!
//! Bodies are MessagePack maps with named fields, so a field added later is
//! ignored by an older peer instead of breaking it.

use crate::byte_fields;
use crate::cursor::PageCursor;
use crate::hello::Hello;
use crate::id_prefix::IdPrefix;
use crate::ids::{JobId, LeaseId, WorkerId};
use crate::job_state::JobState;
use crate::leader::LeaderAddresses;
use crate::priority::Priority;
use crate::queue_stats::QueueStats;
use crate::schedule::{ScheduleSpec, ScheduleView};
use crate::views::{ByteChunk, ByteField, JobList, JobView, WorkerView};
use serde::{Deserialize, Serialize};

// ---------------------------------------------------------------- workers

/// Frames a worker sends to the coordinator's worker listener.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum WorkerMessage {
    Hello(Hello),
    /// Sent once after `Hello`; answered by `Registered`.
    Register {
        worker_id: WorkerId,
        capacity: u32,
        task_types: Vec<String>,
        /// The attempts this worker is still running (or has finished but
        /// not yet reported) from an earlier connection: a coordinator that
        /// holds the job RUNNING under that lease, awaiting its claim after
        /// a restart or takeover, re-attaches it to this worker; any other
        /// is answered with `TaskCancel`. At most `capacity` entries.
        #[serde(default)]
        running: Vec<RunningAttempt>,
    },
    /// Liveness signal on the worker's own timer.
    Heartbeat,
    /// The outcome of the attempt identified by `lease`.
    TaskResult {
        job_id: JobId,
        lease: LeaseId,
        outcome: TaskOutcome,
    },
    /// How far the attempt under `lease` has got (0–100) and what it is
    /// doing; the coordinator keeps the latest, in memory only.
    TaskProgress {
        job_id: JobId,
        lease: LeaseId,
        percent: u8,
        message: String,
    },
    /// The worker is shutting down: it takes no new tasks and finishes (or,
    /// at its drain timeout, abandons) the ones it has.
    Draining,
}

/// One attempt a registering worker still holds: (job, lease).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RunningAttempt {
    pub job_id: JobId,
    pub lease: LeaseId,
}

/// What an attempt produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaskOutcome {
    #[serde(with = "byte_fields")]
    Succeeded(Vec<u8>),
    /// A retryable failure is retried while the job's budget lasts; one that
    /// is not (an invalid payload, a program not allowed) fails the job at once.
    Failed {
        error: String,
        #[serde(default = "retryable_by_default")]
        retryable: bool,
    },
}

fn retryable_by_default() -> bool {
    true
}

impl TaskOutcome {
    /// A failure another attempt might not repeat.
    pub fn failed(error: impl Into<String>) -> Self {
        TaskOutcome::Failed {
            error: error.into(),
            retryable: true,
        }
    }

    /// A failure every attempt would repeat: the job fails at once.
    pub fn failed_permanently(error: impl Into<String>) -> Self {
        TaskOutcome::Failed {
            error: error.into(),
            retryable: false,
        }
    }
}

/// Frames the coordinator sends to a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum CoordinatorToWorker {
    Hello(Hello),
    /// The registration is accepted; tasks may follow. `epoch` (as in
    /// the frames below) is the epoch of the coordinator's leader lease: 0
    /// on SQLite, which has no lease; on PostgreSQL it grows with every
    /// takeover.
    Registered {
        worker_id: WorkerId,
        #[serde(default)]
        epoch: u64,
    },
    /// Run this attempt; report its result under `lease`. A worker ignores
    /// one whose `epoch` is older than the newest it has seen (it comes
    /// from a deposed leader).
    TaskAssign {
        job_id: JobId,
        lease: LeaseId,
        task_type: String,
        #[serde(with = "byte_fields")]
        payload: Vec<u8>,
        timeout_ms: u64,
        #[serde(default)]
        epoch: u64,
        /// The attempt's number: 1 for the first run, 2 for the first
        /// retry; 0 from a coordinator older than this field.
        #[serde(default)]
        attempt: u32,
    },
    /// Stop the attempt under `lease`; its result will be ignored. Ignored
    /// like `TaskAssign` when its `epoch` is older than the newest seen.
    TaskCancel {
        job_id: JobId,
        lease: LeaseId,
        #[serde(default)]
        epoch: u64,
    },
    /// The connection is about to be closed for the stated reason.
    Error {
        message: String,
    },
    /// Sent instead of `Hello` by a standby coordinator, which then closes
    /// the connection: go to `leader` (`None`: no coordinator leads right
    /// now; try again later).
    NotLeader {
        leader: Option<LeaderAddresses>,
    },
    /// The answer to every `Heartbeat`: the coordinator is alive and
    /// reading. A worker that hears nothing for `coordinator-timeout-millis`
    /// leaves that coordinator (a paused or partitioned one) for the next
    /// address.
    HeartbeatAck,
}

// ---------------------------------------------------------------- clients

/// One job as a client asks for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmitRequest {
    pub task_type: String,
    /// MessagePack encoding of the task's payload.
    #[serde(with = "byte_fields")]
    pub payload: Vec<u8>,
    #[serde(default)]
    pub priority: Priority,
    /// `None`: the coordinator's `default-max-attempts`.
    #[serde(default, deserialize_with = "crate::limits::deserialize_max_attempts")]
    pub max_attempts: Option<u32>,
    /// `None`: the coordinator's `task-timeout-millis`.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// A client-chosen key: a second submission with the same key returns
    /// the first job's id instead of creating a job, also after a restart.
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// Not to run before this many milliseconds after admission.
    #[serde(default)]
    pub delay_ms: Option<u64>,
    /// At most the limit set on this key (or a pattern matching it) of the
    /// jobs carrying it run at once (`flow::LimitSpec`); unlimited without
    /// a limit. At most `flow::MAX_FLOW_KEY_BYTES` bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency_key: Option<String>,
}

impl SubmitRequest {
    /// A submission with the coordinator's defaults for everything optional.
    pub fn new(task_type: impl Into<String>, payload: Vec<u8>) -> Self {
        SubmitRequest {
            task_type: task_type.into(),
            payload,
            priority: Priority::Normal,
            max_attempts: None,
            timeout_ms: None,
            idempotency_key: None,
            delay_ms: None,
            concurrency_key: None,
        }
    }
}

pub use crate::limits::MAX_LIST_JOBS;

/// The most jobs one `RequeueFailed` requeues; a client sends it again for
/// the rest (the client library does). Small, because the evicted ones are
/// read back whole (payload, result, attempts) to be requeued.
pub const MAX_REQUEUE_JOBS: usize = 100;

/// The most ids one `RequeueJobs` or `Delete` names, and the most jobs one
/// `DeleteFinished` deletes; a larger request is answered `Overloaded`.
pub const MAX_BULK_JOBS: usize = 100;

/// Which end of the submission order a `List` starts from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ListOrder {
    /// Newest submission first (the default).
    #[default]
    NewestFirst,
    /// Oldest submission first; a cursor then resumes after the job it
    /// names towards newer ones.
    OldestFirst,
}

/// What a `ListJobs` asks for. `priority` keeps jobs of that base
/// priority and `id_prefix` jobs whose id starts with it; neither changes
/// the counts, which are those of the task type (of every job without one).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ListQuery {
    pub state: Option<JobState>,
    pub task_type: Option<String>,
    pub priority: Option<Priority>,
    pub id_prefix: Option<IdPrefix>,
    pub order: ListOrder,
    /// At most `MAX_LIST_JOBS`, whatever this asks.
    pub limit: u32,
    /// The `next` of a previous page in the same order.
    pub cursor: Option<PageCursor>,
}

/// One job a bulk request did not act on, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Refusal {
    pub job_id: JobId,
    pub reason: String,
}

/// What a bulk retry or delete did: `done` the jobs it acted on, `refused`
/// the named jobs it did not; `more` is true when a filter form stopped at
/// its bound and may have left matching jobs (send it again).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = Bulk)]
pub struct BulkAnswer {
    pub done: Vec<JobId>,
    #[schema(inline)]
    pub refused: Vec<Refusal>,
    /// A filter-form call stopped at its bound (1000 jobs) and more may match: call again.
    pub more: bool,
}

/// Requests a client may send after `Hello`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientRequest {
    Submit(SubmitRequest),
    /// Many submissions in one frame; answered with one `SubmitAnswer` each, in order.
    SubmitBatch(Vec<SubmitRequest>),
    Status {
        job_id: JobId,
    },
    /// Summaries, newest first; `None` filters mean every state or task
    /// type. At most `MAX_LIST_JOBS` jobs are listed, whatever `limit`
    /// asks, and fewer when more would not fit one frame. `cursor` (the
    /// `next` of a previous page, or an HTTP `next_cursor`) resumes after
    /// the job it names.
    List {
        state: Option<JobState>,
        limit: u32,
        #[serde(default)]
        task_type: Option<String>,
        #[serde(default)]
        cursor: Option<PageCursor>,
    },
    /// `List` with every filter and order (`ListQuery`); answered `Jobs`.
    ListJobs(ListQuery),
    /// The one job whose id starts with `prefix`: answered `Resolved`,
    /// `NoMatch`, or `Ambiguous` listing up to `MAX_CANDIDATES` of them.
    Resolve {
        prefix: IdPrefix,
    },
    /// Up to `max_bytes` of a job's payload or result from `offset`;
    /// answered with `Chunk`, or `ChunkRefused` (no such bytes, or an
    /// offset past their end), or `NotFound`. The coordinator lowers
    /// `max_bytes` to what fits its frame.
    ReadChunk {
        job_id: JobId,
        field: ByteField,
        offset: u64,
        max_bytes: u32,
    },
    Workers,
    /// QUEUED or RETRY_WAIT: cancelled at once; RUNNING: its lease is
    /// revoked and the worker told to stop. Answered with the job, or
    /// `CancelRefused` for a job already finished.
    Cancel {
        job_id: JobId,
    },
    /// Puts a FAILED or CANCELLED job back to QUEUED with a fresh attempt
    /// budget, keeping its history. Answered with `Requeued` or `RequeueRefused`.
    Requeue {
        job_id: JobId,
    },
    /// Requeues FAILED jobs (of one task type, if given, and that failed
    /// at or before `failed_before`, unix milliseconds, if given), at most
    /// `MAX_REQUEUE_JOBS` of them; fewer requeued means none are left.
    /// Repeated with the same `failed_before`, it never picks a job that
    /// failed again after being requeued.
    /// `state` FAILED (the default) or CANCELLED picks which finished jobs
    /// are requeued.
    RequeueFailed {
        #[serde(default)]
        task_type: Option<String>,
        #[serde(default)]
        failed_before: Option<i64>,
        #[serde(default)]
        state: Option<JobState>,
    },
    /// `Requeue` of each job named (at most `MAX_BULK_JOBS`); answered `Bulk`.
    RequeueJobs {
        job_ids: Vec<JobId>,
    },
    /// Deletes the named finished jobs (at most `MAX_BULK_JOBS`) with their
    /// attempts from the database; answered `Bulk` once durable. A job not
    /// finished is refused.
    Delete {
        job_ids: Vec<JobId>,
    },
    /// Deletes up to `MAX_BULK_JOBS` finished jobs (of `state` if given,
    /// else any finished state; of `task_type`; finished at or before
    /// `finished_before`), oldest finish first; answered `Bulk`, whose
    /// `more` says whether to send it again.
    DeleteFinished {
        #[serde(default)]
        state: Option<JobState>,
        #[serde(default)]
        task_type: Option<String>,
        #[serde(default)]
        finished_before: Option<i64>,
    },
    /// Depth, age and latency per ready queue and per task type; answered
    /// `Queues`.
    Queues,
    /// Keeps an idle connection open (see `client-idle-timeout-millis`) and
    /// checks that it is alive; answered `Pong` by the connection itself,
    /// without touching any job.
    Ping,
    /// Adds a schedule (docs/guide/schedules.md); answered `Schedule` once it
    /// is durable, or `ScheduleRefused` with nothing stored.
    CreateSchedule(Box<ScheduleSpec>),
    /// Replaces the definition of the schedule of the same name; answered
    /// like `CreateSchedule`.
    UpdateSchedule(Box<ScheduleSpec>),
    /// Up to `MAX_LIST_SCHEDULES` schedules by name, after `after` if
    /// given; answered `Schedules`.
    ListSchedules {
        #[serde(default)]
        after: Option<String>,
    },
    /// One schedule with its next fire times and recent runs; answered
    /// `Schedule` or `ScheduleRefused` (unknown).
    ShowSchedule {
        name: String,
    },
    /// Answered `Schedule` once durable.
    PauseSchedule {
        name: String,
    },
    /// Answered `Schedule` once durable; slots missed while paused do not fire.
    ResumeSchedule {
        name: String,
    },
    /// Submits the schedule's job now (idempotency key
    /// `schedule:NAME:trigger:TIME`); answered `Submitted`.
    TriggerSchedule {
        name: String,
    },
    /// Removes the schedule (its jobs stay); answered `ScheduleDeleted`.
    DeleteSchedule {
        name: String,
    },
}

/// Most schedules one `ListSchedules` answer holds.
pub const MAX_LIST_SCHEDULES: usize = 200;

/// Why a schedule request changed nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScheduleRefusal {
    /// A field is invalid (`field` names it).
    Invalid,
    /// `CreateSchedule` of a name that exists.
    Exists,
    /// No schedule of that name.
    Unknown,
    /// `max-schedules` reached.
    Limit,
    /// The database did not store the change.
    Store,
}

/// Frames a client sends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientMessage {
    Hello(Hello),
    /// `request_id` is chosen by the client and echoed in the answer, so a
    /// client may pipeline requests.
    Request {
        request_id: u64,
        request: ClientRequest,
    },
}

/// The answer to one submission.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SubmitAnswer {
    /// Admitted and durable. `no_worker` is true when no connected worker
    /// advertises the task type (the job waits for one).
    Accepted { job_id: JobId, no_worker: bool },
    /// Not admitted; nothing was stored.
    Rejected(SubmitRejected),
}

/// Why a submission was refused. The reason names the offending field or limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{reason}")]
pub struct SubmitRejected {
    pub reason: String,
}

/// Answers to `ClientRequest`s.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientResponse {
    Submitted(SubmitAnswer),
    BatchSubmitted(Vec<SubmitAnswer>),
    Job(Box<JobView>),
    NotFound {
        job_id: JobId,
    },
    Jobs(JobList),
    Workers(Vec<WorkerView>),
    /// The job had already finished; nothing changed.
    CancelRefused {
        job_id: JobId,
        state: JobState,
    },
    /// These jobs are QUEUED again. `refused` says why requeueing stopped
    /// early (the admission limit), if it did.
    Requeued {
        job_ids: Vec<JobId>,
        refused: Option<String>,
    },
    /// Nothing changed, for the stated reason.
    RequeueRefused {
        job_id: JobId,
        reason: String,
    },
    /// The request was not run: a per-connection limit was hit.
    Overloaded {
        reason: String,
    },
    /// The request was applied in memory, but the commit carrying it
    /// failed (`reason`, naming the database's words): whether it took
    /// effect is unknown until the coordinator is ready again. Sending it
    /// again is safe with an idempotency key, or after a `status`.
    NotDurable {
        reason: String,
    },
    /// The answer to `Ping`.
    Pong,
    /// The answer to `Resolve`: the one job the prefix names.
    Resolved {
        job_id: JobId,
    },
    /// No job's id starts with `prefix` (it expired or never existed).
    NoMatch {
        prefix: IdPrefix,
    },
    /// More than one job's id starts with `prefix`; some of them, newest first.
    Ambiguous {
        prefix: IdPrefix,
        candidates: Vec<JobId>,
    },
    /// The request asks for something no job can be (too many ids, a
    /// state that is not finished): nothing was done.
    Invalid {
        reason: String,
    },
    /// The answer to `RequeueJobs`, `Delete` and `DeleteFinished`.
    Bulk(BulkAnswer),
    /// The answer to `Queues`.
    Queues(QueueStats),
    /// The answer to `ReadChunk`.
    Chunk(ByteChunk),
    /// A `ReadChunk` that cannot be answered with bytes, for the stated
    /// reason (the job has no result yet, the offset is past the end).
    ChunkRefused {
        job_id: JobId,
        reason: String,
    },
    /// The request was handled, but its answer (`size` bytes encoded) does
    /// not fit `max-frame-bytes` (`max`) even cut down; ask for less.
    AnswerTooLarge {
        size: u64,
        max: u64,
    },
    Schedule(Box<ScheduleView>),
    /// By name; `more`: ask again with `after` the last name.
    Schedules {
        schedules: Vec<ScheduleView>,
        more: bool,
    },
    ScheduleDeleted {
        name: String,
    },
    ScheduleRefused {
        kind: ScheduleRefusal,
        /// The field at fault, for `Invalid`.
        field: Option<String>,
        reason: String,
    },
}

/// Frames the coordinator sends to a client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CoordinatorToClient {
    Hello(Hello),
    Response {
        request_id: u64,
        response: ClientResponse,
    },
    /// The connection is about to be closed for the stated reason.
    Error {
        message: String,
    },
    /// Sent instead of `Hello` by a standby coordinator, which then closes
    /// the connection: go to `leader` (`None`: no coordinator leads right
    /// now; try again later).
    NotLeader {
        leader: Option<LeaderAddresses>,
    },
}
