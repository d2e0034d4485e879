//! Read-only snapshots a coordinator answers with: jobs, their attempts and
//! progress, pages of jobs, and workers.

use crate::protocol::byte_fields;
use crate::protocol::ids::{JobId, LeaseId, WorkerId};
use crate::protocol::job_state::JobState;
use crate::protocol::priority::Priority;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A page of jobs and how many jobs are in each state (of the listed task
/// type, if one was given).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobList {
    pub jobs: Vec<JobView>,
    pub counts: Vec<StateCount>,
}

/// How many jobs are in `state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateCount {
    pub state: JobState,
    pub count: u64,
}

/// A read-only snapshot of one job, as durable as the answer carrying it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobView {
    pub job_id: JobId,
    pub task_type: String,
    #[serde(with = "byte_fields")]
    pub payload: Vec<u8>,
    pub state: JobState,
    pub priority: Priority,
    /// The level the job is scheduled at when the view is taken: its base
    /// priority raised by aging (LOW 0, NORMAL 1, HIGH 2).
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
}

/// A running task's own account of how far it has got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// 0 to 100.
    pub percent: u8,
    pub message: String,
    /// When the coordinator received it (unix milliseconds).
    pub at: i64,
}

/// One assignment of a job to a worker and how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// 1 for the first attempt.
    pub number: u32,
    pub worker_id: WorkerId,
    pub lease: LeaseId,
    /// Unix milliseconds.
    pub started_at: i64,
    pub ended_at: Option<i64>,
    /// `None` while the attempt is running.
    pub outcome: Option<AttemptOutcome>,
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
