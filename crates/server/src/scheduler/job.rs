//! The coordinator's record of one job: what was submitted, where it is in
//! the state machine, and the current attempt.

use crate::scheduler::queues::effective_level;
use crate::scheduler::schedule::keys::KeyOrigin;
use std::sync::Arc;
use taskyard_protocol::{
    summary_error, Attempt, AttemptOutcome, ByteChunk, ByteField, JobId, JobState, JobSummary,
    JobView, LeaseId, Priority, WorkerId,
};

/// One job as the coordinator holds it in memory, and as
/// `JobStore::load_all` reads it back (its job row plus its `attempts`
/// rows). Only `CoordinatorState`'s methods change it, every state move
/// through `CoordinatorState::transition`, and only the `Coordinator`
/// actor (the single writer) calls them. A batch writes it as a `JobRow`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub id: JobId,
    pub task_type: String,
    /// MessagePack; immutable after submission, shared with outgoing frames.
    pub payload: Arc<[u8]>,
    pub priority: Priority,
    /// Persistent submission order: FIFO within a priority level.
    pub sequence: u64,
    pub submitted_at: i64,
    pub state: JobState,
    /// Attempts started so far, including the current one.
    pub attempts: u32,
    pub max_attempts: u32,
    pub timeout_ms: u64,
    pub lease: Option<LeaseId>,
    pub worker_id: Option<WorkerId>,
    pub assigned_at: Option<i64>,
    pub next_retry_at: Option<i64>,
    pub result: Option<Arc<[u8]>>,
    pub error: Option<String>,
    pub idempotency_key: Option<String>,
    /// The job's concurrency key (flow control), if it has one.
    pub concurrency_key: Option<String>,
    /// Not to be assigned before this time (a delayed or requeued job): a
    /// wall time, stored and shown; the wait runs on the monotonic clock.
    pub not_before: Option<i64>,
    pub updated_at: i64,
    pub finished_at: Option<i64>,
    /// Every attempt, oldest first; the last one is open while RUNNING.
    pub history: Vec<Attempt>,
    /// The running attempt's latest progress report; kept in memory only
    /// and cleared when the attempt ends.
    pub progress: Option<Progress>,
}

pub use taskyard_protocol::Progress;

/// The position of a job in submission order: sequence, then submission
/// time (legacy rows share sequence 0), then id. Used for listing.
pub type OrderKey = (u64, i64, JobId);

/// The position of a job in its ready queue: the time it became runnable,
/// then sequence, then id. For a job submitted without a delay the ready
/// time is its submission time, so this is submission order.
pub type ReadyKey = (i64, u64, JobId);

impl Job {
    pub fn order_key(&self) -> OrderKey {
        (self.sequence, self.submitted_at, self.id)
    }

    /// When the job became (or becomes) eligible to run: its submission,
    /// or its `not_before` if later. Aging counts from here.
    pub fn ready_at(&self) -> i64 {
        self.not_before
            .map_or(self.submitted_at, |t| t.max(self.submitted_at))
    }

    pub fn ready_key(&self) -> ReadyKey {
        (self.ready_at(), self.sequence, self.id)
    }

    /// When the current attempt runs out of time, if the job is running, as
    /// a wall time; the timer itself runs on the monotonic clock, set from
    /// this when the attempt starts (see `CoordinatorState::index`).
    pub fn deadline(&self) -> Option<i64> {
        match (self.state, self.assigned_at) {
            (JobState::Running, Some(at)) => {
                Some(at.saturating_add(i64::try_from(self.timeout_ms).unwrap_or(i64::MAX)))
            }
            _ => None,
        }
    }

    /// The level the job is scheduled at at `now`: raised by aging only
    /// while it is QUEUED (the ready queues are where aging acts, counted
    /// from `ready_at` as they count it); a job in any other state, running,
    /// waiting for a retry or finished, is at its base level.
    pub fn shown_level(&self, now: i64, aging_step_ms: u64) -> u8 {
        match self.state {
            JobState::Queued => effective_level(self.priority, self.ready_at(), now, aging_step_ms),
            _ => self.priority.level(),
        }
    }

    /// The schedule that submitted the job and its slot (none for a manual
    /// trigger), read off the idempotency key.
    pub fn origin(&self) -> (Option<String>, Option<i64>) {
        match self.idempotency_key.as_deref().and_then(KeyOrigin::of) {
            Some(origin) => (Some(origin.schedule().to_string()), origin.slot_ms()),
            None => (None, None),
        }
    }

    /// A read-only view for clients; `no_worker` is filled by the caller,
    /// `effective_level` is `shown_level` at `now` under `aging_step_ms`.
    pub fn view(&self, no_worker: bool, now: i64, aging_step_ms: u64) -> JobView {
        let (schedule, schedule_slot) = self.origin();
        JobView {
            job_id: self.id,
            task_type: self.task_type.clone(),
            payload: self.payload.to_vec(),
            state: self.state,
            priority: self.priority,
            effective_level: self.shown_level(now, aging_step_ms),
            sequence: self.sequence,
            attempts: self.attempts,
            max_attempts: self.max_attempts,
            timeout_ms: self.timeout_ms,
            submitted_at: self.submitted_at,
            updated_at: self.updated_at,
            worker_id: self.worker_id.clone(),
            lease: self.lease,
            result: self.result.as_ref().map(|r| r.to_vec()),
            error: self.error.clone(),
            next_retry_at: self.next_retry_at,
            not_before: self.not_before,
            no_worker,
            history: self.history.clone(),
            progress: self.progress.clone(),
            payload_bytes: self.payload.len() as u64,
            payload_omitted: false,
            result_bytes: self.result.as_ref().map(|r| r.len() as u64),
            result_omitted: false,
            history_omitted: 0,
            idempotency_key: self.idempotency_key.clone(),
            schedule,
            schedule_slot,
            key_omitted: false,
            concurrency_key: self.concurrency_key.clone(),
            waiting: None,
        }
    }

    /// What `List` shows of the job: `view` without payload, result and
    /// history (so without copying them), the error cut short.
    pub fn summary(&self, no_worker: bool, now: i64, aging_step_ms: u64) -> JobSummary {
        let (schedule, schedule_slot) = self.origin();
        JobSummary {
            job_id: self.id,
            task_type: self.task_type.clone(),
            state: self.state,
            priority: self.priority,
            effective_level: self.shown_level(now, aging_step_ms),
            sequence: self.sequence,
            attempts: self.attempts,
            max_attempts: self.max_attempts,
            submitted_at: self.submitted_at,
            updated_at: self.updated_at,
            worker_id: self.worker_id.clone(),
            error: self.error.as_deref().map(summary_error),
            next_retry_at: self.next_retry_at,
            not_before: self.not_before,
            no_worker,
            progress_percent: self.progress.as_ref().map(|p| p.percent),
            payload_bytes: self.payload.len() as u64,
            result_bytes: self.result.as_ref().map(|r| r.len() as u64),
            schedule,
            schedule_slot,
        }
    }

    /// Up to `max_bytes` of the payload or result from `offset`, or why
    /// there are none to give.
    pub fn chunk(
        &self,
        field: ByteField,
        offset: u64,
        max_bytes: u32,
    ) -> Result<ByteChunk, String> {
        let bytes: &[u8] = match field {
            ByteField::Payload => &self.payload,
            ByteField::Result => match &self.result {
                Some(result) => result,
                None if self.state == JobState::Succeeded => &[],
                None => {
                    return Err(format!(
                        "job {} is {}; only a SUCCEEDED job has a result",
                        self.id, self.state
                    ))
                }
            },
        };
        let total = bytes.len() as u64;
        if offset > total {
            return Err(format!(
                "offset {offset} is past the end of the {field} of job {} ({total} bytes)",
                self.id
            ));
        }
        let start = offset as usize;
        let end = start.saturating_add(max_bytes as usize).min(bytes.len());
        Ok(ByteChunk {
            job_id: self.id,
            field,
            offset,
            total,
            bytes: bytes[start..end].to_vec(),
        })
    }

    /// Closes the open attempt (the last one) with `outcome`.
    pub fn end_attempt(&mut self, outcome: AttemptOutcome, now: i64) {
        self.progress = None;
        if let Some(attempt) = self.history.last_mut().filter(|a| a.outcome.is_none()) {
            attempt.ended_at = Some(now);
            attempt.outcome = Some(outcome);
        }
    }
}
