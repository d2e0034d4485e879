//! Submission: what a client may ask for (the limits), how a request is
//! validated, and admission under `max-active-jobs`. A rejected
//! submission changes nothing; an accepted one is a new QUEUED job.

use crate::scheduler::job::Job;
use crate::scheduler::state::CoordinatorState;
use slog::debug;
use taskyard_client::clock::Now;
use taskyard_protocol::fit;
use taskyard_protocol::register::cut_at_char_boundary;
use taskyard_protocol::{limits, payloads};
use taskyard_protocol::{JobId, JobState, SubmitAnswer, SubmitRejected, SubmitRequest};

/// The submission limits, re-exported from the one place that defines
/// every numeric range (`protocol::limits`).
pub use taskyard_protocol::limits::{
    MAX_ATTEMPTS as MAX_ATTEMPTS_LIMIT, MAX_DELAY_MS, MAX_TIMEOUT_MS,
};
/// Longest accepted idempotency key, in bytes.
pub const MAX_IDEMPOTENCY_KEY_BYTES: usize = 256;

impl CoordinatorState {
    /// Admits a job if it is valid and below `max-active-jobs`. A rejected
    /// submission changes nothing.
    /// A valid submission with a key seen before returns the original
    /// job's id and creates nothing; an invalid one is rejected whatever
    /// its key (a key does not make a bad request good).
    pub fn submit(&mut self, req: SubmitRequest, now: Now) -> SubmitAnswer {
        let checked = match self.validate(&req) {
            Ok(checked) => checked,
            Err(reason) => return self.reject(reason),
        };
        if let Some(answer) = self.resubmission(&req) {
            return answer;
        }
        let job = match self.admit(req, checked, now) {
            Ok(job) => job,
            Err(reason) => return self.reject(reason),
        };
        self.metrics.record_submission(&job.task_type);
        let (job_id, no_worker) = (job.id, !self.workers.advertised(&job.task_type));
        // debug, not info: one line per job is a formatted write per job
        // at full load, and release builds compile debug lines out.
        debug!(self.log, "job submitted"; "job" => %job_id, "task_type" => &job.task_type,
              "priority" => %job.priority, "sequence" => job.sequence);
        self.next_sequence += 1;
        self.active_jobs += 1;
        self.state_counts.add(&job.task_type, job.state);
        self.insert(job, now);
        self.mark_dirty(job_id);
        SubmitAnswer::Accepted { job_id, no_worker }
    }

    /// The answer to a submission whose idempotency key was seen before:
    /// the original job's id. The key of a finished job evicted from
    /// memory is still held (see `idempotency`); such a job runs nothing
    /// more, so `no_worker` is false.
    fn resubmission(&self, req: &SubmitRequest) -> Option<SubmitAnswer> {
        let id = *self.idempotency.get(req.idempotency_key.as_ref()?)?;
        let no_worker = self
            .jobs
            .get(&id)
            .is_some_and(|job| !self.workers.advertised(&job.task_type));
        Some(SubmitAnswer::Accepted {
            job_id: id,
            no_worker,
        })
    }

    fn reject(&mut self, mut reason: String) -> SubmitAnswer {
        self.metrics.rejected += 1;
        // Bounded, so a batch's answers have a known worst case.
        cut_at_char_boundary(&mut reason, fit::MAX_REJECTION_REASON_BYTES);
        SubmitAnswer::Rejected(SubmitRejected { reason })
    }

    /// A validated submission (`checked`: its attempt budget and timeout)
    /// as a new job, unless `max-active-jobs` are active.
    fn admit(&self, req: SubmitRequest, checked: (u32, u64), now: Now) -> Result<Job, String> {
        let (max_attempts, timeout_ms) = checked;
        if self.active_jobs >= self.policy.max_active_jobs {
            return Err(self.admission_refusal());
        }
        // Scheduling compares only the head of each FIFO, which is right only
        // while sequence order is also submission-time order (the oldest job
        // of a level is then its highest effective level). A wall clock that
        // steps back must not break that, so submission time never decreases.
        let submitted_at = now.wall_ms.max(self.latest_submission);
        // The delay counts from now on the wall clock it is shown on, not
        // from a submission time held up by a clock that stepped back; it
        // runs on the monotonic clock (see `CoordinatorState::index`).
        let not_before = req.delay_ms.map(|d| {
            now.wall_ms
                .saturating_add(i64::try_from(d).unwrap_or(i64::MAX))
        });
        Ok(Job {
            id: JobId::mint(),
            task_type: req.task_type,
            payload: req.payload.into(),
            priority: req.priority,
            sequence: self.next_sequence,
            submitted_at,
            state: JobState::Queued,
            attempts: 0,
            max_attempts,
            timeout_ms,
            lease: None,
            worker_id: None,
            assigned_at: None,
            next_retry_at: None,
            result: None,
            error: None,
            idempotency_key: req.idempotency_key,
            not_before,
            updated_at: submitted_at,
            finished_at: None,
            history: Vec::new(),
            progress: None,
            concurrency_key: req.concurrency_key,
        })
    }

    /// Checks every field of a submission; the error names the field.
    /// Returns the effective attempt budget and per-attempt timeout.
    fn validate(&self, req: &SubmitRequest) -> Result<(u32, u64), String> {
        if req.payload.len() > self.policy.max_payload_bytes {
            return Err(format!(
                "payload: {} bytes exceeds max-payload-bytes ({})",
                req.payload.len(),
                self.policy.max_payload_bytes
            ));
        }
        payloads::validate(&req.task_type, &req.payload).map_err(|e| e.to_string())?;
        let max_attempts = req.max_attempts.unwrap_or(self.policy.default_max_attempts);
        let max_attempts = limits::MAX_ATTEMPTS_RANGE
            .check_u32(max_attempts.into())
            .map_err(|e| e.to_string())?;
        let timeout_ms = req.timeout_ms.unwrap_or(self.policy.default_timeout_ms);
        let timeout_ms = limits::TIMEOUT_MS
            .check(timeout_ms)
            .map_err(|e| e.to_string())?;
        if let Some(delay_ms) = req.delay_ms {
            limits::DELAY_MS
                .check(delay_ms)
                .map_err(|e| e.to_string())?;
        }
        if let Some(key) = &req.concurrency_key {
            taskyard_protocol::flow::validate_key("concurrency_key", key)
                .map_err(|e| e.to_string())?;
        }
        match &req.idempotency_key {
            Some(key) if key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY_BYTES => Err(format!(
                "idempotency_key: must be 1 to {MAX_IDEMPOTENCY_KEY_BYTES} bytes"
            )),
            _ => Ok((max_attempts, timeout_ms)),
        }
    }

    /// The typed reason a submission or requeue is refused at the limit.
    pub(super) fn admission_refusal(&self) -> String {
        format!("max-active-jobs ({}) reached", self.policy.max_active_jobs)
    }
}
