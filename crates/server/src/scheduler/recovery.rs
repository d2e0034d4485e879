//! Recovery after a restart: the stored active set (and a window of
//! recently finished jobs) loaded back, the attempts the restart may have
//! interrupted left awaiting their claim (see `claims`), and the counters and idempotency keys of everything
//! stored restored without loading those jobs.

use crate::scheduler::counts::StateCounts;
use crate::scheduler::job::Job;
use crate::scheduler::state::CoordinatorState;
use taskyard_client::clock::Now;
use taskyard_protocol::{JobId, JobState};

/// Error text of a job whose final attempt was interrupted by a restart.
pub const RESTARTED_DURING_FINAL_ATTEMPT: &str = "restarted during final attempt";

/// What recovery did with the loaded rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecoverySummary {
    /// Jobs loaded into memory: the active set and the finished window.
    pub loaded: usize,
    /// RUNNING jobs kept RUNNING, awaiting their worker's claim (see
    /// `claims`); the ones nobody claims in time are requeued or failed
    /// by a later sweep.
    pub awaiting_claim: usize,
    /// RUNNING rows without a lease or worker (written before leases were
    /// stored): nobody can claim them, so they were requeued (or failed,
    /// in their final attempt) at once.
    pub unclaimable: usize,
    /// Jobs the database holds, loaded or not.
    pub stored: u64,
}

/// What the database holds at start-up, as recovery needs it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stored {
    /// Every non-terminal job, and finished ones to keep in memory.
    pub jobs: Vec<Job>,
    /// The idempotency key of every stored job, with its job.
    pub idempotency: Vec<(String, JobId)>,
    /// Stored jobs per (task type, state), loaded or not.
    pub counts: Vec<(String, JobState, u64)>,
    /// The largest stored sequence and the submission time of its job,
    /// loaded or not, so new jobs sort after every stored one.
    pub newest: Option<(u64, i64)>,
}

impl Stored {
    /// Every stored job loaded: keys and counts follow from the rows.
    pub fn everything(jobs: Vec<Job>) -> Stored {
        let idempotency = jobs
            .iter()
            .filter_map(|j| j.idempotency_key.clone().map(|k| (k, j.id)))
            .collect();
        let counts = jobs
            .iter()
            .map(|j| (j.task_type.clone(), j.state, 1))
            .collect();
        let newest = jobs.iter().map(|j| (j.sequence, j.submitted_at)).max();
        Stored {
            jobs,
            idempotency,
            counts,
            newest,
        }
    }
}

impl CoordinatorState {
    /// Recovers from every stored row (see `recover_stored`).
    pub fn recover(&mut self, rows: Vec<Job>, now: Now) -> RecoverySummary {
        self.recover_stored(Stored::everything(rows), now)
    }

    /// Loads the stored jobs. RUNNING rows (their attempt's outcome is
    /// unknown) stay RUNNING, awaiting the claim of the worker that may
    /// still run them until `heartbeat-timeout-millis` after `now` (see
    /// `claims`); all other rows load as they are. Finished jobs enter the
    /// retention window in
    /// the order they finished, as durable (the window's bounds apply at
    /// the next sweep). Counts per state are `stored.counts`, and every
    /// stored idempotency key stays
    /// resolvable. The sequence resumes past the largest stored, and
    /// submission times never go below the newest stored. A RETRY_WAIT
    /// row's `next_retry_at` and a delayed row's `not_before` are wall
    /// times (the monotonic base died with the old process): their waits
    /// resume as monotonic timers of what remains by the wall clock at
    /// `now`, so a wall-clock step while the coordinator was down
    /// lengthens or shortens them by the step; so does a RUNNING row's
    /// deadline.
    pub fn recover_stored(&mut self, stored: Stored, now: Now) -> RecoverySummary {
        let mut summary = RecoverySummary {
            loaded: stored.jobs.len(),
            stored: stored.counts.iter().map(|(_, _, n)| n).sum(),
            ..Default::default()
        };
        self.state_counts = StateCounts::default();
        for (task_type, state, n) in &stored.counts {
            self.state_counts.add_n(task_type, *state, *n);
        }
        self.idempotency.extend(stored.idempotency);
        if let Some((sequence, submitted_at)) = stored.newest {
            self.next_sequence = self.next_sequence.max(sequence + 1);
            self.latest_submission = self.latest_submission.max(submitted_at);
        }
        let (active, mut finished): (Vec<Job>, Vec<Job>) = stored
            .jobs
            .into_iter()
            .partition(|j| !j.state.is_terminal());
        finished.sort_by_key(|j| j.finished_at);
        let mut unclaimable = Vec::new();
        for job in active {
            if let Some(id) = self.recover_active(job, now, &mut summary) {
                unclaimable.push(id);
            }
        }
        for job in finished {
            self.next_sequence = self.next_sequence.max(job.sequence + 1);
            let bytes = crate::scheduler::retention::held_bytes(&job);
            self.finished
                .finished(job.id, job.finished_at.unwrap_or(now.wall_ms), bytes);
            self.insert(job, now);
        }
        // Loaded finished rows are durable; jobs failed just now are not
        // until the coordinator's first batch commits (it seals them).
        self.seal_finished(0);
        self.await_claims(now);
        for id in unclaimable {
            self.end_unclaimed(id, now);
        }
        summary
    }

    /// Loads one non-terminal row; a RUNNING one waits for its claim.
    /// Returns the id of a RUNNING row nobody can claim (no lease or no
    /// worker), to be ended at once.
    fn recover_active(
        &mut self,
        job: Job,
        now: Now,
        summary: &mut RecoverySummary,
    ) -> Option<JobId> {
        self.next_sequence = self.next_sequence.max(job.sequence + 1);
        let id = job.id;
        let running = job.state == JobState::Running;
        let claimable = job.lease.is_some() && job.worker_id.is_some();
        if running && claimable {
            summary.awaiting_claim += 1;
        } else if running {
            summary.unclaimable += 1;
        }
        if running {
            self.unclaimed.insert(id);
        }
        self.active_jobs += 1;
        self.insert(job, now);
        (running && !claimable).then_some(id)
    }
}
