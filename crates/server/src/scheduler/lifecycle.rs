//! What happens to jobs as workers come, run tasks, go silent or vanish:
//! registration, assignment, results and attempt failure. The periodic
//! sweep is in `sweep`, recovery after a restart in `recovery`.

use crate::scheduler::job::Progress;
use crate::scheduler::state::{CoordinatorState, Effect, TransitionRefused};
use crate::scheduler::workers::SessionId;
use slog::{debug, info, warn};
use taskyard_client::clock::Now;
use taskyard_protocol::{
    Attempt, AttemptOutcome, CoordinatorToWorker, JobId, JobState, LeaseId, TaskOutcome, WorkerId,
};

/// A result that did not match the job's current attempt and was dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleResult {
    pub reason: String,
}

impl CoordinatorState {
    /// Adds a worker (replacing an older session under the same id, whose
    /// running jobs are treated as lost) and answers `Registered`: a worker
    /// that claims nothing (see `register_worker_claiming`).
    pub fn register_worker(
        &mut self,
        worker: WorkerId,
        session: SessionId,
        capacity: u32,
        task_types: Vec<String>,
        now: Now,
    ) {
        self.register_worker_claiming(worker, session, capacity, task_types, Vec::new(), now);
    }

    /// Records a heartbeat from the worker's current session.
    pub fn heartbeat(&mut self, worker: &WorkerId, session: SessionId, now: Now) {
        if self.workers.is_current(worker, session) {
            self.workers.heartbeat(worker, now.mono_ms);
        }
    }

    /// The worker is shutting down: it gets no new tasks.
    pub fn worker_draining(&mut self, worker: &WorkerId) {
        self.workers.set_draining(worker);
    }

    /// The worker's session ended: its running jobs are retried or failed.
    /// Events from a session that was already replaced change nothing.
    pub fn worker_lost(&mut self, worker: &WorkerId, session: SessionId, reason: &str, now: Now) {
        if !self.workers.is_current(worker, session) {
            return;
        }
        let Some(entry) = self.workers.remove(worker) else {
            return;
        };
        warn!(self.log, "worker lost"; "worker" => %worker, "reason" => reason,
              "running" => entry.running.len());
        let lost = AttemptOutcome::WorkerLost {
            reason: reason.to_string(),
        };
        for job in entry.running {
            if let Err(refused) = self.fail_attempt(job, lost.clone(), now) {
                self.log_refused("worker lost", &refused);
            }
        }
    }

    /// Applies a task result if it belongs to the job's current attempt and
    /// comes from the worker running that attempt; anything else (a late
    /// result, an unknown job, a lease sent by another worker) is counted
    /// as stale, logged and changes nothing.
    /// The worker's slot is released only once the job has left RUNNING; a
    /// refused move (a bug, logged) leaves job and slot as they were.
    pub fn task_result(
        &mut self,
        worker: &WorkerId,
        job_id: JobId,
        lease: LeaseId,
        outcome: TaskOutcome,
        now: Now,
    ) -> Result<(), StaleResult> {
        if let Some(reason) = self.stale_reason(worker, job_id, lease) {
            self.metrics.stale_results += 1;
            // Rate-limited: a peer repeating stale results cannot flood the
            // log; the metric counts every one.
            if let Some(suppressed) = self.stale_warnings.admit(now.mono_ms) {
                warn!(self.log, "stale result dropped"; "job" => %job_id, "lease" => %lease,
                      "worker" => %worker, "reason" => &reason,
                      "suppressed_since_last" => suppressed);
            }
            return Err(StaleResult { reason });
        }
        let owner = worker.clone();
        let ended = match outcome {
            TaskOutcome::Succeeded(result) if result.len() > self.policy.max_result_bytes => {
                let error = format!(
                    "result of {} bytes exceeds max-result-bytes ({})",
                    result.len(),
                    self.policy.max_result_bytes
                );
                self.end_attempt_failed(job_id, AttemptOutcome::Failed { error }, false, now)
            }
            TaskOutcome::Succeeded(result) => {
                debug!(self.log, "job succeeded"; "job" => %job_id, "worker" => %owner);
                self.transition(job_id, JobState::Succeeded, now, |job| {
                    job.end_attempt(AttemptOutcome::Succeeded, now.wall_ms);
                    job.result = Some(result.into());
                    job.error = None;
                    job.lease = None;
                })
            }
            TaskOutcome::Failed { error, retryable } => {
                let outcome = AttemptOutcome::Failed { error };
                self.end_attempt_failed(job_id, outcome, retryable, now)
            }
        };
        match ended {
            Ok(()) => self.workers.finish_job(&owner, job_id),
            Err(refused) => self.log_refused("task result", &refused),
        }
        Ok(())
    }

    /// Why a result from `worker` for `lease` does not count, if it does not:
    /// only the worker holding the job's current lease may end the attempt.
    fn stale_reason(&self, worker: &WorkerId, job_id: JobId, lease: LeaseId) -> Option<String> {
        let Some(job) = self.jobs.get(&job_id) else {
            return Some("unknown job".to_string());
        };
        if job.state != JobState::Running || job.lease != Some(lease) {
            let current = job.lease.map(|l| l.to_string());
            return Some(format!("job is {} under lease {current:?}", job.state));
        }
        if self.unclaimed.contains(&job_id) {
            return Some("the attempt awaits its claim in a Register".to_string());
        }
        match &job.worker_id {
            Some(holder) if holder == worker => None,
            Some(holder) => Some(format!("the lease is held by worker {holder}")),
            None => Some("the running job has no worker".to_string()),
        }
    }

    /// Records progress of the attempt under `lease`; ignored for any other
    /// lease and from any worker but the one running that attempt.
    pub fn task_progress(
        &mut self,
        worker: &WorkerId,
        job_id: JobId,
        lease: LeaseId,
        progress: Progress,
    ) {
        if let Some(job) = self.jobs.get_mut(&job_id) {
            let holder = job.worker_id.as_ref() == Some(worker);
            if job.state == JobState::Running && job.lease == Some(lease) && holder {
                job.progress = Some(progress);
            }
        }
    }

    /// Ends the current attempt of a RUNNING job unsuccessfully and retries
    /// it while its budget lasts. See `end_attempt_failed`.
    pub(super) fn fail_attempt(
        &mut self,
        job_id: JobId,
        outcome: AttemptOutcome,
        now: Now,
    ) -> Result<(), TransitionRefused> {
        self.end_attempt_failed(job_id, outcome, true, now)
    }

    /// Ends the current attempt of a RUNNING job unsuccessfully: RETRY_WAIT
    /// with a backoff delay while budget remains and the failure is
    /// retryable, else FAILED with the outcome as its error. The worker's
    /// slot is the caller's: it releases it (or has lost the worker) once
    /// this returns `Ok`. On `Err` nothing changed.
    fn end_attempt_failed(
        &mut self,
        job_id: JobId,
        outcome: AttemptOutcome,
        retryable: bool,
        now: Now,
    ) -> Result<(), TransitionRefused> {
        let Some(job) = self.jobs.get(&job_id) else {
            return Err(TransitionRefused::UnknownJob(job_id));
        };
        let error = match &outcome {
            AttemptOutcome::Failed { error } => error.clone(),
            other => other.to_string(),
        };
        if retryable && job.attempts < job.max_attempts {
            let delay = self.policy.retry.delay_ms(job.attempts);
            let due = now
                .wall_ms
                .saturating_add(i64::try_from(delay).unwrap_or(i64::MAX));
            info!(self.log, "attempt failed; retry scheduled"; "job" => %job_id,
                  "attempt" => job.attempts, "delay_ms" => delay, "error" => &error);
            self.transition(job_id, JobState::RetryWait, now, |job| {
                job.end_attempt(outcome, now.wall_ms);
                job.next_retry_at = Some(due);
                job.error = Some(error);
                job.lease = None;
            })
        } else {
            warn!(self.log, "job failed"; "job" => %job_id, "attempts" => job.attempts,
                  "error" => &error);
            self.transition(job_id, JobState::Failed, now, |job| {
                job.end_attempt(outcome, now.wall_ms);
                job.error = Some(error);
                job.lease = None;
            })
        }
    }

    /// Assigns queued jobs, best first, to the least-loaded worker with a
    /// free slot for each, until no queued job has such a worker. A refused
    /// assignment (a bug, logged) ends the pass: the job it refused stays
    /// at the head of its queue, and the loop must not pick it forever.
    pub fn assign_queued(&mut self, now: Now) {
        loop {
            let workers = &self.workers;
            let best = self
                .queues
                .best(now.wall_ms, self.policy.aging_step_ms, |t| {
                    workers.has_free(t)
                })
                .map(|(id, task_type, _)| (id, workers.least_loaded(task_type).cloned()));
            let Some((job_id, Some(worker))) = best else {
                return;
            };
            if self.held_back(job_id) {
                continue;
            }
            if let Err(refused) = self.assign(job_id, worker, now) {
                self.log_refused("assign", &refused);
                return;
            }
        }
    }

    /// Starts a new attempt of a QUEUED job on `worker`: RUNNING under a
    /// fresh lease, counted against the worker's capacity, and a
    /// `TaskAssign` for it. If the move is refused none of that happens.
    fn assign(
        &mut self,
        job_id: JobId,
        worker: WorkerId,
        now: Now,
    ) -> Result<(), TransitionRefused> {
        let lease = LeaseId::new_random();
        let assigned_to = worker.clone();
        self.transition(job_id, JobState::Running, now, move |job| {
            job.attempts += 1;
            let started_at = start_time(job.not_before, now);
            job.history.push(Attempt {
                number: job.history.len() as u32 + 1,
                worker_id: assigned_to.clone(),
                lease,
                started_at,
                ended_at: None,
                outcome: None,
            });
            job.lease = Some(lease);
            job.worker_id = Some(assigned_to);
            job.assigned_at = Some(now.wall_ms);
            job.next_retry_at = None;
        })?;
        self.workers.start_job(&worker, job_id);
        let (Some(job), Some(entry)) = (self.jobs.get(&job_id), self.workers.get(&worker)) else {
            return Ok(());
        };
        debug!(self.log, "job assigned"; "job" => %job_id, "worker" => %worker,
               "lease" => %lease, "attempt" => job.attempts);
        self.effects.push(Effect::SendWorker {
            session: entry.session,
            frame: CoordinatorToWorker::TaskAssign {
                job_id,
                lease,
                task_type: job.task_type.clone(),
                payload: job.payload.to_vec(),
                timeout_ms: job.timeout_ms,
                epoch: self.epoch,
                attempt: job.attempts,
            },
        });
        Ok(())
    }

    /// The worker and lease of the job's current attempt, if it has one.
    pub(super) fn current_attempt(&self, job_id: JobId) -> Option<(WorkerId, LeaseId)> {
        let job = self.jobs.get(&job_id)?;
        Some((job.worker_id.clone()?, job.lease?))
    }

    /// Frees the worker slot `attempt` (from `current_attempt`, read before
    /// the job left RUNNING) held and tells the worker, best effort, to
    /// stop it.
    pub(super) fn revoke_attempt(&mut self, job_id: JobId, attempt: Option<(WorkerId, LeaseId)>) {
        let Some((worker, lease)) = attempt else {
            return;
        };
        self.workers.finish_job(&worker, job_id);
        if let Some(entry) = self.workers.get(&worker) {
            self.effects.push(Effect::SendWorker {
                session: entry.session,
                frame: CoordinatorToWorker::TaskCancel {
                    job_id,
                    lease,
                    epoch: self.epoch,
                },
            });
        }
    }
}

/// When an attempt starting at `now` is recorded to start. Timers run on
/// the monotonic clock and both clocks are read to the millisecond, so a
/// delayed job released on time can read up to a millisecond before its
/// `not_before` on the wall clock; it is recorded at its `not_before` then,
/// so no job is ever shown starting before its time. Any other gap (a
/// wall clock stepped since) is shown as the clock reads.
fn start_time(not_before: Option<i64>, now: Now) -> i64 {
    match not_before {
        Some(t) if t.saturating_sub(now.wall_ms) == 1 => t,
        _ => now.wall_ms,
    }
}

#[cfg(test)]
mod start_time_tests {
    use super::*;

    #[test]
    fn a_start_a_millisecond_early_by_the_wall_is_recorded_at_its_time_and_no_other() {
        assert_eq!(start_time(Some(101), Now::both(100)), 101);
        assert_eq!(start_time(Some(100), Now::both(100)), 100);
        assert_eq!(start_time(Some(50), Now::both(100)), 100);
        // A wall clock set back an hour: shown as it reads.
        assert_eq!(start_time(Some(3_600_100), Now::both(100)), 100);
        assert_eq!(start_time(None, Now::both(100)), 100);
    }
}
