//! The periodic sweep: what happens to jobs as time passes. Dead workers,
//! expired deadlines, due retries and due delayed jobs, then scheduling.
//! Every one is measured on the monotonic clock (`Now::mono_ms`), so a
//! wall-clock step neither brings them forward nor holds them back.

use crate::scheduler::state::{CoordinatorState, Effect};
use std::collections::BTreeSet;
use taskyard_client::clock::Now;
use taskyard_protocol::{AttemptOutcome, JobId, JobState};

impl CoordinatorState {
    /// The periodic pass, in order: dead workers, expired deadlines,
    /// recovered attempts nobody claimed in time, due retries, due delayed
    /// jobs, held `buffer-one` slots whose run ended, due schedule slots,
    /// then scheduling. True when more schedule
    /// slots are due than one pass decides (see `schedule_pass`).
    pub fn sweep(&mut self, now: Now) -> bool {
        self.detect_dead_workers(now);
        self.detect_expired_deadlines(now);
        self.expire_unclaimed(now);
        self.promote_due_retries(now);
        self.release_due_delays(now);
        self.release_buffered_schedules(now);
        self.schedule_pass(now)
    }

    /// A schedule pass between sweeps (see `fire_due_schedules`), then
    /// scheduling. True when another pass is worth running at once.
    pub fn schedule_pass(&mut self, now: Now) -> bool {
        let more = self.fire_due_schedules(now);
        self.assign_queued(now);
        more
    }

    fn detect_dead_workers(&mut self, now: Now) {
        let timeout = i64::try_from(self.policy.heartbeat_timeout_ms).unwrap_or(i64::MAX);
        for (worker, session) in self
            .workers
            .silent_since(now.mono_ms.saturating_sub(timeout))
        {
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
    fn detect_expired_deadlines(&mut self, now: Now) {
        let mut refused = Vec::new();
        while let Some((deadline, job_id)) = pop_due(&mut self.deadlines, |d| d < now.mono_ms) {
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

    /// Moves delayed QUEUED jobs whose time has come into the ready queues.
    fn release_due_delays(&mut self, now: Now) {
        while let Some((due, job_id)) = pop_due(&mut self.delayed, |due| due <= now.mono_ms) {
            self.timers.remove(&job_id);
            // Ready from the moment the delay ran out, not from submission.
            self.stage_started_us
                .insert(job_id, due.saturating_mul(1000).min(now.mono_us));
            if let Some(job) = self.jobs.remove(&job_id) {
                self.make_ready(&job);
                self.jobs.insert(job_id, job);
            }
        }
    }

    /// Requeues RETRY_WAIT jobs whose backoff has passed. Like deadlines,
    /// each timer is popped before its job moves; a refused move (a bug,
    /// logged) puts it back for the next sweep.
    fn promote_due_retries(&mut self, now: Now) {
        let mut refused = Vec::new();
        while let Some((due, job_id)) = pop_due(&mut self.retries, |due| due <= now.mono_ms) {
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
