//! What happens to jobs as workers come, run tasks, go silent or vanish, and
//! as time passes: assignment, results, attempt failure, the periodic sweep
//! and recovery after a restart.

use crate::protocol::{
    Attempt, AttemptOutcome, CoordinatorToWorker, JobId, JobState, LeaseId, TaskOutcome, WorkerId,
};
use crate::scheduler::job::{Job, Progress};
use crate::scheduler::state::{CoordinatorState, Effect, TransitionRefused};
use crate::scheduler::workers::SessionId;
use slog::{debug, info, warn};
use std::collections::BTreeSet;

/// Error text of a job whose final attempt was interrupted by a restart.
pub const RESTARTED_DURING_FINAL_ATTEMPT: &str = "restarted during final attempt";

/// A result that did not match the job's current attempt and was dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleResult {
    pub reason: String,
}

/// What recovery did with the loaded rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecoverySummary {
    pub loaded: usize,
    pub requeued: usize,
    pub failed: usize,
}

impl CoordinatorState {
    /// Adds a worker (replacing an older session under the same id, whose
    /// running jobs are treated as lost) and answers `Registered`.
    pub fn register_worker(
        &mut self,
        worker: WorkerId,
        session: SessionId,
        capacity: u32,
        task_types: Vec<String>,
        now: i64,
    ) {
        let previous = self
            .workers
            .register(worker.clone(), session, capacity, task_types, now);
        if let Some(old) = previous {
            warn!(self.log, "worker re-registered; closing its old session"; "worker" => %worker);
            self.effects.push(Effect::CloseWorker {
                session: old.session,
                reason: "replaced by a newer connection of the same worker".into(),
            });
            let lost = AttemptOutcome::WorkerLost {
                reason: "replaced by a newer connection".into(),
            };
            for job in old.running {
                if let Err(refused) = self.fail_attempt(job, lost.clone(), now) {
                    self.log_refused("worker replaced", &refused);
                }
            }
        }
        info!(self.log, "worker registered"; "worker" => %worker, "capacity" => capacity);
        self.effects.push(Effect::SendWorker {
            session,
            frame: CoordinatorToWorker::Registered { worker_id: worker },
        });
    }

    /// Records a heartbeat from the worker's current session.
    pub fn heartbeat(&mut self, worker: &WorkerId, session: SessionId, now: i64) {
        if self.workers.is_current(worker, session) {
            self.workers.heartbeat(worker, now);
        }
    }

    /// The worker is shutting down: it gets no new tasks.
    pub fn worker_draining(&mut self, worker: &WorkerId) {
        self.workers.set_draining(worker);
    }

    /// The worker's session ended: its running jobs are retried or failed.
    /// Events from a session that was already replaced change nothing.
    pub fn worker_lost(&mut self, worker: &WorkerId, session: SessionId, reason: &str, now: i64) {
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

    /// Applies a task result if it belongs to the job's current attempt.
    /// The worker's slot is released only once the job has left RUNNING; a
    /// refused move (a bug, logged) leaves job and slot as they were.
    pub fn task_result(
        &mut self,
        worker: &WorkerId,
        job_id: JobId,
        lease: LeaseId,
        outcome: TaskOutcome,
        now: i64,
    ) -> Result<(), StaleResult> {
        let current = self.jobs.get(&job_id).and_then(|j| {
            (j.state == JobState::Running && j.lease == Some(lease)).then(|| j.worker_id.clone())
        });
        let Some(Some(owner)) = current else {
            let reason = match self.jobs.get(&job_id) {
                None => "unknown job".to_string(),
                Some(j) => format!(
                    "job is {} under lease {:?}",
                    j.state,
                    j.lease.map(|l| l.to_string())
                ),
            };
            self.metrics.stale_results += 1;
            warn!(self.log, "stale result dropped"; "job" => %job_id, "lease" => %lease,
                  "worker" => %worker, "reason" => &reason);
            return Err(StaleResult { reason });
        };
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
                    job.end_attempt(AttemptOutcome::Succeeded, now);
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

    /// Records progress of the attempt under `lease`; ignored for any other.
    pub fn task_progress(&mut self, job_id: JobId, lease: LeaseId, progress: Progress) {
        if let Some(job) = self.jobs.get_mut(&job_id) {
            if job.state == JobState::Running && job.lease == Some(lease) {
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
        now: i64,
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
        now: i64,
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
            let due = now.saturating_add(i64::try_from(delay).unwrap_or(i64::MAX));
            info!(self.log, "attempt failed; retry scheduled"; "job" => %job_id,
                  "attempt" => job.attempts, "delay_ms" => delay, "error" => &error);
            self.transition(job_id, JobState::RetryWait, now, |job| {
                job.end_attempt(outcome, now);
                job.next_retry_at = Some(due);
                job.error = Some(error);
                job.lease = None;
            })
        } else {
            warn!(self.log, "job failed"; "job" => %job_id, "attempts" => job.attempts,
                  "error" => &error);
            self.transition(job_id, JobState::Failed, now, |job| {
                job.end_attempt(outcome, now);
                job.error = Some(error);
                job.lease = None;
            })
        }
    }

    /// Assigns queued jobs, best first, to the least-loaded worker with a
    /// free slot for each, until no queued job has such a worker. A refused
    /// assignment (a bug, logged) ends the pass: the job it refused stays
    /// at the head of its queue, and the loop must not pick it forever.
    pub fn schedule(&mut self, now: i64) {
        loop {
            let workers = &self.workers;
            let best = self
                .queues
                .best(now, self.policy.aging_step_ms, |t| workers.has_free(t))
                .map(|(id, task_type, _)| (id, workers.least_loaded(task_type).cloned()));
            let Some((job_id, Some(worker))) = best else {
                return;
            };
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
        now: i64,
    ) -> Result<(), TransitionRefused> {
        let lease = LeaseId::new_random();
        let assigned_to = worker.clone();
        self.transition(job_id, JobState::Running, now, move |job| {
            job.attempts += 1;
            job.history.push(Attempt {
                number: job.history.len() as u32 + 1,
                worker_id: assigned_to.clone(),
                lease,
                started_at: now,
                ended_at: None,
                outcome: None,
            });
            job.lease = Some(lease);
            job.worker_id = Some(assigned_to);
            job.assigned_at = Some(now);
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
            },
        });
        Ok(())
    }

    /// The periodic pass, in order: dead workers, expired deadlines, due
    /// retries, due delayed jobs, then scheduling.
    pub fn sweep(&mut self, now: i64) {
        self.detect_dead_workers(now);
        self.detect_expired_deadlines(now);
        self.promote_due_retries(now);
        self.release_due_delays(now);
        self.schedule(now);
    }

    fn detect_dead_workers(&mut self, now: i64) {
        let timeout = i64::try_from(self.policy.heartbeat_timeout_ms).unwrap_or(i64::MAX);
        for (worker, session) in self.workers.silent_since(now.saturating_sub(timeout)) {
            let reason = format!("no heartbeat for {timeout} ms");
            self.effects.push(Effect::CloseWorker {
                session,
                reason: reason.clone(),
            });
            self.worker_lost(&worker, session, &reason, now);
        }
    }

    /// Ends every attempt whose deadline has passed: retried or failed,
    /// its slot freed and its worker told to stop. Each deadline is popped
    /// before its job moves, so the loop ends whatever the moves do; a job
    /// whose move is refused (a bug, logged) keeps its attempt, and its
    /// deadline is put back for the next sweep.
    fn detect_expired_deadlines(&mut self, now: i64) {
        let mut refused = Vec::new();
        while let Some((deadline, job_id)) = pop_due(&mut self.deadlines, |d| d < now) {
            let attempt = self.current_attempt(job_id);
            let timeout_ms = self.jobs.get(&job_id).map_or(0, |j| j.timeout_ms);
            match self.fail_attempt(job_id, AttemptOutcome::TimedOut { timeout_ms }, now) {
                Ok(()) => self.revoke_attempt(job_id, attempt),
                Err(e) => {
                    self.log_refused("deadline", &e);
                    refused.push((deadline, job_id));
                }
            }
        }
        self.deadlines.extend(refused);
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
                frame: CoordinatorToWorker::TaskCancel { job_id, lease },
            });
        }
    }

    /// Moves delayed QUEUED jobs whose time has come into the ready queues.
    fn release_due_delays(&mut self, now: i64) {
        while let Some((_, job_id)) = pop_due(&mut self.delayed, |due| due <= now) {
            if let Some(job) = self.jobs.get(&job_id) {
                self.queues
                    .push(&job.task_type, job.priority, job.ready_key());
            }
        }
    }

    /// Requeues RETRY_WAIT jobs whose backoff has passed. Like deadlines,
    /// each timer is popped before its job moves; a refused move (a bug,
    /// logged) puts it back for the next sweep.
    fn promote_due_retries(&mut self, now: i64) {
        let mut refused = Vec::new();
        while let Some((due, job_id)) = pop_due(&mut self.retries, |due| due <= now) {
            let promoted = self.transition(job_id, JobState::Queued, now, |job| {
                job.next_retry_at = None
            });
            if let Err(e) = promoted {
                self.log_refused("retry", &e);
                refused.push((due, job_id));
            }
        }
        self.retries.extend(refused);
    }

    /// Loads every stored row. RUNNING rows (their attempt's outcome is
    /// unknown) are requeued while budget remains, else FAILED; all other
    /// rows load as they are. The sequence resumes past the largest stored.
    pub fn recover(&mut self, rows: Vec<Job>, now: i64) -> RecoverySummary {
        let mut summary = RecoverySummary {
            loaded: rows.len(),
            ..Default::default()
        };
        for mut job in rows {
            self.next_sequence = self.next_sequence.max(job.sequence + 1);
            let rewritten = job.state == JobState::Running
                && match self.end_interrupted_attempt(&mut job, now) {
                    Ok(JobState::Queued) => {
                        summary.requeued += 1;
                        true
                    }
                    Ok(_) => {
                        summary.failed += 1;
                        true
                    }
                    Err(_) => false,
                };
            if !job.state.is_terminal() {
                self.active_jobs += 1;
            }
            let id = job.id;
            self.insert(job, now);
            if rewritten {
                self.mark_dirty(id);
            }
        }
        summary
    }

    /// Ends the attempt a restart interrupted: QUEUED while budget
    /// remains, else FAILED with `RESTARTED_DURING_FINAL_ATTEMPT`; returns
    /// the new state. RUNNING → QUEUED and RUNNING → FAILED are always
    /// allowed, so a refusal is a bug: it is logged and the row is left as
    /// loaded, RUNNING with its deadline, which then ends it like any
    /// attempt whose worker never reports.
    fn end_interrupted_attempt(
        &self,
        job: &mut Job,
        now: i64,
    ) -> Result<JobState, TransitionRefused> {
        let budget_left = job.attempts < job.max_attempts;
        let target = if budget_left {
            JobState::Queued
        } else {
            JobState::Failed
        };
        if let Err(e) = job.state.transition(target) {
            let refused = TransitionRefused::Illegal {
                job: job.id,
                from: e.from,
                to: e.to,
            };
            self.log_refused("recover", &refused);
            return Err(refused);
        }
        job.state = target;
        if !budget_left {
            job.error = Some(RESTARTED_DURING_FINAL_ATTEMPT.to_string());
            job.finished_at = Some(now);
        }
        job.end_attempt(AttemptOutcome::Interrupted, now);
        job.lease = None;
        job.updated_at = now;
        Ok(target)
    }
}

/// Removes and returns the first entry of a timer index if `is_due` says
/// its time has come; `None` once the earliest entry is not due.
fn pop_due(
    index: &mut BTreeSet<(i64, JobId)>,
    is_due: impl Fn(i64) -> bool,
) -> Option<(i64, JobId)> {
    let &(at, _) = index.first()?;
    if is_due(at) {
        index.pop_first()
    } else {
        None
    }
}
