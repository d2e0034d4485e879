//! Read-only snapshots a coordinator answers with: jobs, their attempts and
//! progress, pages of jobs, and workers.

use crate::byte_fields;
use crate::cursor::PageCursor;
use crate::ids::{JobId, LeaseId, WorkerId};
use crate::job_state::JobState;
use crate::priority::Priority;
use serde::{Deserialize, Serialize};
use std::fmt;
use utoipa::ToSchema;

/// A page of job summaries (newest submission first) and how many jobs are
/// in each state (of the listed task type, if one was given). `next` is
/// present when more jobs may follow: pass it as the `List` cursor for the
/// next page. A page may hold fewer jobs than asked when more would not fit
/// one frame; `next` then says where it stopped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobList {
    pub jobs: Vec<JobSummary>,
    pub counts: Vec<StateCount>,
    #[serde(default)]
    pub next: Option<PageCursor>,
}

/// Longest `JobSummary::error`: the first bytes of the job's last error,
/// cut at a character boundary and marked with `…`. `status` has it whole.
pub const SUMMARY_ERROR_BYTES: usize = 128;

/// One job as `List` shows it: everything the `list` table needs, the
/// sizes of payload and result instead of their bytes, no attempt history,
/// and the last error cut to `SUMMARY_ERROR_BYTES`. Its size is bounded
/// whatever the job holds (task type, worker id and schedule name are at
/// most 64 bytes): it names the schedule and slot of a scheduled job but
/// not the idempotency key (up to 256 bytes, in `status`), so that a page
/// of one summary fits the smallest frame.
///
/// Every field is always present (`null` when it has no value), so the
/// OpenAPI schema requires them all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(description = "A list row: the same fields as `taskyard list --json`.")]
pub struct JobSummary {
    pub job_id: JobId,
    pub task_type: String,
    pub state: JobState,
    pub priority: Priority,
    /// The level the job is scheduled at now: its base priority, raised by aging only while it
    /// is QUEUED; its base level in any other state.
    #[schema(maximum = 2)]
    pub effective_level: u8,
    pub sequence: u64,
    pub attempts: u32,
    #[schema(schema_with = crate::limits::max_attempts_schema)]
    pub max_attempts: u32,
    /// Unix ms.
    pub submitted_at: i64,
    /// Unix ms.
    pub updated_at: i64,
    #[schema(required = true)]
    pub worker_id: Option<WorkerId>,
    /// The first 128 bytes of the last error (… when cut).
    #[schema(required = true)]
    pub error: Option<String>,
    #[schema(required = true)]
    pub next_retry_at: Option<i64>,
    #[schema(required = true)]
    pub not_before: Option<i64>,
    /// No connected worker runs the task type.
    pub no_worker: bool,
    /// The running attempt's latest progress, in percent.
    #[schema(required = true, maximum = 100)]
    pub progress_percent: Option<u8>,
    pub payload_bytes: u64,
    /// Null while the job has no result.
    #[schema(required = true)]
    pub result_bytes: Option<u64>,
    /// The schedule that submitted the job, read off its idempotency key (`schedule:NAME:SLOT`,
    /// or `schedule:NAME:trigger:TIME` for a manual trigger); null for any other job.
    #[serde(default)]
    #[schema(required = true)]
    pub schedule: Option<String>,
    /// Unix ms: the slot whose job this is; null for a manual trigger and for a job no schedule
    /// submitted.
    #[serde(default)]
    #[schema(required = true)]
    pub schedule_slot: Option<i64>,
}

impl JobSummary {
    /// The summary of `view`.
    pub fn of(view: &JobView) -> JobSummary {
        JobSummary {
            job_id: view.job_id,
            task_type: view.task_type.clone(),
            state: view.state,
            priority: view.priority,
            effective_level: view.effective_level,
            sequence: view.sequence,
            attempts: view.attempts,
            max_attempts: view.max_attempts,
            submitted_at: view.submitted_at,
            updated_at: view.updated_at,
            worker_id: view.worker_id.clone(),
            error: view.error.as_deref().map(summary_error),
            next_retry_at: view.next_retry_at,
            not_before: view.not_before,
            no_worker: view.no_worker,
            progress_percent: view.progress.as_ref().map(|p| p.percent),
            payload_bytes: view.payload_bytes,
            result_bytes: view.result_bytes,
            schedule: view.schedule.clone(),
            schedule_slot: view.schedule_slot,
        }
    }

    /// The cursor of a page that ends with this job.
    pub fn cursor(&self) -> PageCursor {
        PageCursor((self.sequence, self.submitted_at, self.job_id))
    }
}

/// `error` cut to `SUMMARY_ERROR_BYTES` at a character boundary, with `…`
/// when anything was cut.
pub fn summary_error(error: &str) -> String {
    if error.len() <= SUMMARY_ERROR_BYTES {
        return error.to_string();
    }
    let mut cut = error.to_string();
    crate::register::cut_at_char_boundary(&mut cut, SUMMARY_ERROR_BYTES);
    cut.push('…');
    cut
}

/// How many jobs are in `state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateCount {
    pub state: JobState,
    pub count: u64,
}

/// A read-only snapshot of one job, as durable as the answer carrying it.
///
/// Over TCP a view travels in one frame: when payload and result together
/// would not fit `max-frame-bytes`, the coordinator leaves out the payload,
/// or the result if only the payload fits, or both (their `*_omitted` flag
/// is set and `*_bytes` still
/// gives the size; read them with `ReadChunk`), then the oldest attempts
/// (`history_omitted` counts them). The HTTP API always has them whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobView {
    pub job_id: JobId,
    pub task_type: String,
    #[serde(with = "byte_fields")]
    pub payload: Vec<u8>,
    pub state: JobState,
    pub priority: Priority,
    /// The level the job is scheduled at when the view is taken (LOW 0,
    /// NORMAL 1, HIGH 2): its base priority, raised by aging only while the
    /// job is QUEUED and ready (the one place aging acts); in any other
    /// state its base level.
    #[serde(default)]
    pub effective_level: u8,
    pub sequence: u64,
    pub attempts: u32,
    pub max_attempts: u32,
    pub timeout_ms: u64,
    /// Unix milliseconds.
    pub submitted_at: i64,
    pub updated_at: i64,
    pub worker_id: Option<WorkerId>,
    pub lease: Option<LeaseId>,
    #[serde(default, with = "byte_fields::option")]
    pub result: Option<Vec<u8>>,
    pub error: Option<String>,
    pub next_retry_at: Option<i64>,
    /// Not to run before this time (a delayed or requeued job).
    #[serde(default)]
    pub not_before: Option<i64>,
    /// True when no connected worker advertises `task_type`.
    pub no_worker: bool,
    /// Every attempt so far, oldest first.
    #[serde(default)]
    pub history: Vec<Attempt>,
    /// The running attempt's latest progress report, if any.
    #[serde(default)]
    pub progress: Option<Progress>,
    /// The payload's size, also when `payload` was left out.
    #[serde(default)]
    pub payload_bytes: u64,
    /// True when `payload` is empty because it did not fit the frame.
    #[serde(default)]
    pub payload_omitted: bool,
    /// The result's size (`None`: the job has no result), also when
    /// `result` was left out.
    #[serde(default)]
    pub result_bytes: Option<u64>,
    /// True when `result` is `None` because it did not fit the frame.
    #[serde(default)]
    pub result_omitted: bool,
    /// How many of the oldest attempts `history` leaves out to fit the frame.
    #[serde(default)]
    pub history_omitted: u32,
    /// The key the job was submitted with, if any. This and the next two
    /// are left out of the frame when `None`, and left out altogether
    /// (`key_omitted`) when nothing else is left to cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// The schedule that submitted the job, read off its idempotency key
    /// (`schedule:NAME:SLOT` for a slot, `schedule:NAME:trigger:TIME` for
    /// a manual trigger); `None` for any other job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// The slot (unix milliseconds) whose job this is; `None` for a manual
    /// trigger (`schedule` set) and for a job no schedule submitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_slot: Option<i64>,
    /// True when the key, schedule and slot were left out because the view
    /// would not fit a frame with them (only the smallest frames, with every
    /// other field at its longest); absent from the frame when false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub key_omitted: bool,
    /// The concurrency key the job was submitted with, if any; left out
    /// with the idempotency key when the frame is too small.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency_key: Option<String>,
    /// Why a QUEUED job does not start though it is ready ("waiting for
    /// concurrency key K: 2/2 running"); `None` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
}

fn is_false(value: &bool) -> bool {
    !*value
}

/// Which of a job's byte fields a `ReadChunk` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ByteField {
    Payload,
    Result,
}

impl ByteField {
    pub fn name(self) -> &'static str {
        match self {
            ByteField::Payload => "payload",
            ByteField::Result => "result",
        }
    }
}

impl fmt::Display for ByteField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Bytes `offset..offset + bytes.len()` of a job's payload or result,
/// which is `total` bytes long. A read at `offset == total` is empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ByteChunk {
    pub job_id: JobId,
    pub field: ByteField,
    pub offset: u64,
    pub total: u64,
    #[serde(with = "byte_fields")]
    pub bytes: Vec<u8>,
}

/// A running task's own account of how far it has got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Progress {
    /// 0 to 100.
    #[schema(schema_with = crate::limits::progress_percent_schema)]
    pub percent: u8,
    pub message: String,
    /// Unix ms when the coordinator received it.
    pub at: i64,
}

/// One assignment of a job to a worker and how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Attempt {
    /// 1 for the first attempt.
    #[schema(minimum = 1)]
    pub number: u32,
    pub worker_id: WorkerId,
    pub lease: LeaseId,
    /// Unix ms.
    pub started_at: i64,
    #[schema(required = true)]
    pub ended_at: Option<i64>,
    /// Null while the attempt is running.
    #[schema(required = true)]
    pub outcome: Option<AttemptOutcome>,
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AttemptOutcome {
    Succeeded,
    /// The task reported failure.
    Failed {
        error: String,
    },
    /// The attempt passed its deadline and its lease was revoked.
    TimedOut {
        timeout_ms: u64,
    },
    /// The worker died, disconnected or was replaced while running it.
    WorkerLost {
        reason: String,
    },
    /// A client cancelled the job while it ran.
    Cancelled,
    /// The coordinator restarted while it ran; its outcome is unknown.
    Interrupted,
}

impl fmt::Display for AttemptOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttemptOutcome::Succeeded => f.write_str("succeeded"),
            AttemptOutcome::Failed { error } => write!(f, "failed: {error}"),
            AttemptOutcome::TimedOut { timeout_ms } => write!(f, "timed out after {timeout_ms} ms"),
            AttemptOutcome::WorkerLost { reason } => write!(f, "worker lost: {reason}"),
            AttemptOutcome::Cancelled => f.write_str("cancelled"),
            AttemptOutcome::Interrupted => f.write_str("interrupted by a coordinator restart"),
        }
    }
}

/// A connected worker's advertised shape and current load.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerView {
    pub worker_id: WorkerId,
    pub capacity: u32,
    pub active: u32,
    pub task_types: Vec<String>,
    /// Unix milliseconds.
    pub registered_at: i64,
    pub last_heartbeat_at: i64,
    /// The worker is shutting down and takes no new tasks.
    #[serde(default)]
    pub draining: bool,
}
