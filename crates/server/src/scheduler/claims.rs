//! Takeover without duplicate work: attempts a worker is still running
//! when it registers again, re-attached instead of retried.
//!
//! After a restart (or a takeover by a standby) the RUNNING jobs loaded
//! from the store stay RUNNING, *awaiting their claim*, for
//! `heartbeat-timeout-millis` from the start: a worker that registers
//! listing (job, lease) of such an attempt gets it back (it takes a slot,
//! and its later result is applied as usual). The same holds when a worker
//! registers again while its older session is still known: the attempts
//! it lists move to the new session instead of being failed. A claim that
//! matches nothing (another lease, another worker, a finished or retried
//! job, no slot left) is answered with `TaskCancel`. Attempts still
//! unclaimed at the deadline end as a restart ended them before: QUEUED
//! while budget remains, else FAILED "restarted during final attempt".

use crate::scheduler::recovery::RESTARTED_DURING_FINAL_ATTEMPT;
use crate::scheduler::state::{CoordinatorState, Effect};
use crate::scheduler::workers::SessionId;
use slog::{info, warn};
use std::collections::HashSet;
use taskyard_client::clock::Now;
use taskyard_protocol::{
    AttemptOutcome, CoordinatorToWorker, JobId, JobState, RunningAttempt, WorkerId,
};

impl CoordinatorState {
    /// Waits for the claims of the RUNNING jobs just recovered until
    /// `heartbeat_timeout_ms` after `now`.
    pub(super) fn await_claims(&mut self, now: Now) {
        let wait = i64::try_from(self.policy.heartbeat_timeout_ms).unwrap_or(i64::MAX);
        self.claim_deadline = now.mono_ms.saturating_add(wait);
    }

    /// True while the RUNNING job `id` waits for its worker's claim.
    pub fn awaiting_claim(&self, id: JobId) -> bool {
        self.unclaimed.contains(&id)
    }

    /// How many recovered attempts still wait for their claim.
    pub fn unclaimed_count(&self) -> usize {
        self.unclaimed.len()
    }

    /// Sets the epoch stamped on every frame to workers from now on.
    pub fn set_epoch(&mut self, epoch: u64) {
        self.epoch = epoch;
    }

    /// The epoch stamped on frames to workers.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// `register_worker` for a worker that still holds `running` (from an
    /// earlier connection): each claim that matches the job's current
    /// attempt (RUNNING under that lease, on this worker, awaiting its
    /// claim or held by the session being replaced) is re-attached while
    /// the worker has a free slot; every other claim is answered with
    /// `TaskCancel` after `Registered`.
    pub fn register_worker_claiming(
        &mut self,
        worker: WorkerId,
        session: SessionId,
        capacity: u32,
        task_types: Vec<String>,
        mut running: Vec<RunningAttempt>,
        now: Now,
    ) {
        // A job listed twice is claimed once (a second claim must not
        // cancel the attempt the first re-attached).
        let mut seen = HashSet::new();
        running.retain(|a| seen.insert(a.job_id));
        let claimed: HashSet<JobId> = running.iter().map(|a| a.job_id).collect();
        // Its task types' counters are exported from now on, at zero until
        // used, so a rate over them starts at the first job.
        for task_type in &task_types {
            self.metrics.by_task_type.register(task_type);
        }
        let kept = self.register_replacing(&worker, session, capacity, task_types, &claimed, now);
        info!(self.log, "worker registered"; "worker" => %worker, "capacity" => capacity,
              "claims" => running.len());
        self.effects.push(Effect::SendWorker {
            session,
            frame: CoordinatorToWorker::Registered {
                worker_id: worker.clone(),
                epoch: self.epoch,
            },
        });
        for attempt in running {
            self.claim(&worker, session, attempt, &kept);
        }
    }

    /// Re-attaches one claimed attempt, or tells the worker to cancel it.
    /// `kept` are the claimed jobs the replaced session held.
    fn claim(
        &mut self,
        worker: &WorkerId,
        session: SessionId,
        attempt: RunningAttempt,
        kept: &HashSet<JobId>,
    ) {
        let RunningAttempt { job_id, lease } = attempt;
        let matches = self.jobs.get(&job_id).is_some_and(|job| {
            job.state == JobState::Running
                && job.lease == Some(lease)
                && job.worker_id.as_ref() == Some(worker)
        });
        let waiting = self.unclaimed.contains(&job_id) || kept.contains(&job_id);
        let room = self
            .workers
            .get(worker)
            .is_some_and(|w| (w.running.len() as u64) < u64::from(w.capacity));
        if matches && waiting && room {
            self.unclaimed.remove(&job_id);
            self.workers.start_job(worker, job_id);
            info!(self.log, "attempt re-attached"; "job" => %job_id, "lease" => %lease,
                  "worker" => %worker);
            return;
        }
        warn!(self.log, "claim refused; worker told to cancel"; "job" => %job_id,
              "lease" => %lease, "worker" => %worker, "matches" => matches, "room" => room);
        self.effects.push(Effect::SendWorker {
            session,
            frame: CoordinatorToWorker::TaskCancel {
                job_id,
                lease,
                epoch: self.epoch,
            },
        });
    }

    /// Registers the worker. An older session of the same worker is
    /// closed; its running jobs are lost, except those in `claimed`, which
    /// stay RUNNING and are returned for `claim` to move to the new session.
    fn register_replacing(
        &mut self,
        worker: &WorkerId,
        session: SessionId,
        capacity: u32,
        task_types: Vec<String>,
        claimed: &HashSet<JobId>,
        now: Now,
    ) -> HashSet<JobId> {
        let previous = self
            .workers
            .register(worker.clone(), session, capacity, task_types, now);
        let Some(old) = previous else {
            return HashSet::new();
        };
        warn!(self.log, "worker re-registered; closing its old session"; "worker" => %worker);
        self.effects.push(Effect::CloseWorker {
            session: old.session,
            reason: "replaced by a newer connection of the same worker".into(),
        });
        let lost = AttemptOutcome::WorkerLost {
            reason: "replaced by a newer connection".into(),
        };
        let (kept, gone): (HashSet<JobId>, HashSet<JobId>) =
            old.running.into_iter().partition(|j| claimed.contains(j));
        for job in gone {
            if let Err(refused) = self.fail_attempt(job, lost.clone(), now) {
                self.log_refused("worker replaced", &refused);
            }
        }
        kept
    }

    /// At the claim deadline, ends every attempt still unclaimed as a
    /// restart interrupted it: QUEUED while budget remains, else FAILED
    /// with `RESTARTED_DURING_FINAL_ATTEMPT`. A worker registered without
    /// claiming it is told to cancel it.
    pub(super) fn expire_unclaimed(&mut self, now: Now) {
        if self.unclaimed.is_empty() || now.mono_ms < self.claim_deadline {
            return;
        }
        let mut expired: Vec<JobId> = self.unclaimed.iter().copied().collect();
        expired.sort();
        warn!(self.log, "recovered attempts nobody claimed are treated as interrupted";
              "jobs" => expired.len());
        for job_id in expired {
            self.end_unclaimed(job_id, now);
        }
    }

    /// Ends one unclaimed attempt as interrupted and tells its worker, if
    /// registered, to stop it.
    pub(super) fn end_unclaimed(&mut self, job_id: JobId, now: Now) {
        let attempt = self.current_attempt(job_id);
        match self.end_interrupted(job_id, now) {
            Ok(()) => self.revoke_attempt(job_id, attempt),
            // A bug (RUNNING may always end so), logged; the job keeps
            // waiting and the next sweep tries again.
            Err(refused) => self.log_refused("unclaimed", &refused),
        }
    }

    /// Ends the attempt of a RUNNING job a restart interrupted.
    fn end_interrupted(
        &mut self,
        job_id: JobId,
        now: Now,
    ) -> Result<(), crate::scheduler::TransitionRefused> {
        let budget_left = self
            .jobs
            .get(&job_id)
            .is_some_and(|j| j.attempts < j.max_attempts);
        let target = if budget_left {
            JobState::Queued
        } else {
            JobState::Failed
        };
        self.transition(job_id, target, now, |job| {
            job.end_attempt(AttemptOutcome::Interrupted, now.wall_ms);
            job.lease = None;
            if !budget_left {
                job.error = Some(RESTARTED_DURING_FINAL_ATTEMPT.to_string());
            }
        })
    }
}
