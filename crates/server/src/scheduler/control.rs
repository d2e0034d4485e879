//! What clients may do to jobs after submitting them: cancel a job, and
//! requeue failed or cancelled ones with a fresh attempt budget.

use crate::scheduler::state::CoordinatorState;
use slog::info;
use taskyard_client::clock::Now;
use taskyard_protocol::{AttemptOutcome, JobId, JobState};

/// Why a cancel changed nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelRefused {
    NotFound,
    AlreadyFinished(JobState),
}

/// Why a requeue changed nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequeueRefused {
    NotFound,
    /// Only FAILED and CANCELLED jobs can be requeued.
    NotFailed(JobState),
    /// `max-active-jobs` reached.
    Admission(String),
    /// The job is being deleted.
    BeingDeleted,
}

impl CoordinatorState {
    /// QUEUED or RETRY_WAIT: CANCELLED at once. RUNNING: the attempt ends
    /// as cancelled, the job is CANCELLED, its worker slot is freed and the
    /// worker is sent `TaskCancel`. Every non-terminal state may move to
    /// CANCELLED, so a refused move is a bug: it is logged, nothing
    /// changes, and the answer is a refusal naming the job's state.
    pub fn cancel(&mut self, id: JobId, now: Now) -> Result<(), CancelRefused> {
        let state = self.jobs.get(&id).ok_or(CancelRefused::NotFound)?.state;
        if state.is_terminal() {
            return Err(CancelRefused::AlreadyFinished(state));
        }
        let attempt = (state == JobState::Running)
            .then(|| self.current_attempt(id))
            .flatten();
        let cancelled = self.transition(id, JobState::Cancelled, now, |job| {
            job.end_attempt(AttemptOutcome::Cancelled, now.wall_ms);
            job.error = Some("cancelled by a client".into());
            job.lease = None;
            job.next_retry_at = None;
        });
        match cancelled {
            Ok(()) => {
                info!(self.log, "job cancelled"; "job" => %id, "was" => %state);
                self.revoke_attempt(id, attempt);
                Ok(())
            }
            Err(refused) => {
                self.log_refused("cancel", &refused);
                Err(CancelRefused::AlreadyFinished(state))
            }
        }
    }

    /// Puts a FAILED or CANCELLED job back to QUEUED with a fresh attempt
    /// budget, keeping its history. It is ordered as if submitted now.
    /// Both states may move to QUEUED, so a refused move is a bug: it is
    /// logged, nothing changes, and the answer names the job's state.
    pub fn requeue(&mut self, id: JobId, now: Now) -> Result<(), RequeueRefused> {
        let state = self.jobs.get(&id).ok_or(RequeueRefused::NotFound)?.state;
        if !matches!(state, JobState::Failed | JobState::Cancelled) {
            return Err(RequeueRefused::NotFailed(state));
        }
        if self.deleting.contains(&id) {
            return Err(RequeueRefused::BeingDeleted);
        }
        if self.active_jobs >= self.policy.max_active_jobs {
            return Err(RequeueRefused::Admission(self.admission_refusal()));
        }
        let requeued = self.transition(id, JobState::Queued, now, |job| {
            job.attempts = 0;
            job.error = None;
            job.result = None;
            job.worker_id = None;
            job.finished_at = None;
            job.not_before = Some(now.wall_ms);
        });
        match requeued {
            Ok(()) => {
                info!(self.log, "job requeued"; "job" => %id, "was" => %state);
                Ok(())
            }
            Err(refused) => {
                self.log_refused("requeue", &refused);
                Err(RequeueRefused::NotFailed(state))
            }
        }
    }

    /// Requeues at most `limit` FAILED jobs in memory (of `task_type`, and
    /// finished at or before `failed_before`, if given), oldest first,
    /// until the admission limit stops it; returns the requeued ids and the
    /// reason it stopped early, if it did.
    pub fn requeue_failed(
        &mut self,
        task_type: Option<&str>,
        failed_before: Option<i64>,
        limit: usize,
        now: Now,
    ) -> (Vec<JobId>, Option<String>) {
        self.requeue_finished(JobState::Failed, task_type, failed_before, limit, now)
    }

    /// `requeue_failed` of the jobs in `state` (FAILED or CANCELLED; any
    /// other state requeues nothing).
    pub fn requeue_finished(
        &mut self,
        state: JobState,
        task_type: Option<&str>,
        failed_before: Option<i64>,
        limit: usize,
        now: Now,
    ) -> (Vec<JobId>, Option<String>) {
        let failed: Vec<JobId> = self
            .by_sequence
            .iter()
            .filter_map(|key| self.jobs.get(&key.2))
            .filter(|j| j.state == state)
            .filter(|j| task_type.is_none_or(|t| j.task_type == t))
            .filter(|j| failed_before.is_none_or(|b| j.finished_at.is_some_and(|f| f <= b)))
            .map(|j| j.id)
            .take(limit)
            .collect();
        let mut requeued = Vec::with_capacity(failed.len());
        for id in failed {
            match self.requeue(id, now) {
                Ok(()) => requeued.push(id),
                Err(RequeueRefused::Admission(reason)) => return (requeued, Some(reason)),
                Err(_) => {}
            }
        }
        (requeued, None)
    }
}
