//! `JobRow`: what one persisted batch writes for one job.

use crate::scheduler::job::Job;
use std::sync::Arc;
use taskyard_protocol::{Attempt, JobId, JobState, LeaseId, Priority, WorkerId};

/// One job as one batch writes it: the columns a transition can change,
/// the fields fixed at submission (written only when the job has no row
/// yet), and the attempts that may have changed since the job was last
/// taken. Built by `CoordinatorState::take_dirty`; the store UPDATEs the
/// changeable columns and INSERTs the whole row when no row was updated.
/// Payload and result are shared with the job, not copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRow {
    pub id: JobId,

    // Changed by transitions.
    pub state: JobState,
    /// Attempts started so far, including the current one.
    pub attempts: u32,
    pub max_attempts: u32,
    pub lease: Option<LeaseId>,
    pub worker_id: Option<WorkerId>,
    pub assigned_at: Option<i64>,
    pub next_retry_at: Option<i64>,
    pub result: Option<Arc<[u8]>>,
    pub error: Option<String>,
    pub updated_at: i64,
    pub finished_at: Option<i64>,
    pub not_before: Option<i64>,

    // Fixed at submission.
    pub task_type: String,
    pub payload: Arc<[u8]>,
    pub priority: Priority,
    pub sequence: u64,
    pub submitted_at: i64,
    pub timeout_ms: u64,
    pub idempotency_key: Option<String>,
    pub concurrency_key: Option<String>,

    /// The attempts that may have changed, oldest first. Attempts left out
    /// are stored already and never change again. When the job has any
    /// attempt, the last one is always here and is stored in the job's own
    /// row; the ones before it here get a row each in `attempts`.
    pub changed_attempts: Vec<Attempt>,
}

impl JobRow {
    /// The row of `job` with its attempts from index `first_changed` on;
    /// the last attempt is included whatever `first_changed` says.
    pub fn with_attempts_from(job: &Job, first_changed: usize) -> JobRow {
        let first = first_changed.min(job.history.len().saturating_sub(1));
        JobRow {
            id: job.id,
            state: job.state,
            attempts: job.attempts,
            max_attempts: job.max_attempts,
            lease: job.lease,
            worker_id: job.worker_id.clone(),
            assigned_at: job.assigned_at,
            next_retry_at: job.next_retry_at,
            result: job.result.clone(),
            error: job.error.clone(),
            updated_at: job.updated_at,
            finished_at: job.finished_at,
            not_before: job.not_before,
            task_type: job.task_type.clone(),
            payload: Arc::clone(&job.payload),
            priority: job.priority,
            sequence: job.sequence,
            submitted_at: job.submitted_at,
            timeout_ms: job.timeout_ms,
            idempotency_key: job.idempotency_key.clone(),
            concurrency_key: job.concurrency_key.clone(),
            changed_attempts: job.history[first..].to_vec(),
        }
    }

    /// The row of `job` with every attempt: what a job never stored needs.
    pub fn whole(job: &Job) -> JobRow {
        JobRow::with_attempts_from(job, 0)
    }
}
