//! Recovery after a restart: every stored row loaded back, and the
//! attempts the restart interrupted ended.

use crate::protocol::{AttemptOutcome, JobState};
use crate::scheduler::job::Job;
use crate::scheduler::state::{CoordinatorState, TransitionRefused};

/// Error text of a job whose final attempt was interrupted by a restart.
pub const RESTARTED_DURING_FINAL_ATTEMPT: &str = "restarted during final attempt";

/// What recovery did with the loaded rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecoverySummary {
    pub loaded: usize,
    pub requeued: usize,
    pub failed: usize,
}

impl CoordinatorState {
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
