//! Deleting finished jobs on request: which named jobs may be deleted now,
//! and the jobs being deleted, which nothing may change until the database
//! has answered (a requeue meanwhile would write the row back).

use crate::scheduler::state::CoordinatorState;
use taskyard_protocol::{JobId, JobState, Refusal};

/// Why a job named for deletion is not deleted.
pub fn refusal(job_id: JobId, reason: impl Into<String>) -> Refusal {
    Refusal {
        job_id,
        reason: reason.into(),
    }
}

impl CoordinatorState {
    /// Splits `ids` into the jobs that may be deleted now and refusals: a
    /// job memory holds must be finished, its last change already sent to
    /// the database (so no later write brings the row back), and not
    /// already being deleted. A job memory does not hold is finished or
    /// gone (memory holds every job that is not finished), so it is a
    /// candidate: the database deletes it if it has it. Duplicates count once.
    pub fn deletable(&self, ids: &[JobId]) -> (Vec<JobId>, Vec<Refusal>) {
        let mut candidates = Vec::with_capacity(ids.len());
        let mut refused = Vec::new();
        for &id in ids {
            if candidates.contains(&id) || refused.iter().any(|r: &Refusal| r.job_id == id) {
                continue;
            }
            match self.deletion_blocker(id) {
                Some(reason) => refused.push(refusal(id, reason)),
                None => candidates.push(id),
            }
        }
        (candidates, refused)
    }

    fn deletion_blocker(&self, id: JobId) -> Option<String> {
        if self.deleting.contains(&id) {
            return Some("already being deleted".into());
        }
        let job = self.jobs.get(&id)?;
        if !job.state.is_terminal() {
            return Some(format!(
                "job is {}; only SUCCEEDED, FAILED or CANCELLED jobs can be deleted",
                job.state
            ));
        }
        if self.dirty.contains(id) {
            return Some("its last change is not stored yet; try again in a moment".into());
        }
        None
    }

    /// Marks `ids` as being deleted: `requeue` and `restore` refuse them
    /// until `deleted` is called.
    pub fn deleting(&mut self, ids: &[JobId]) {
        self.deleting.extend(ids.iter().copied());
    }

    /// The database answered for `ids` (deleted or not): they may change again.
    pub fn deleted(&mut self, ids: &[JobId]) {
        for id in ids {
            self.deleting.remove(id);
        }
    }

    /// True while `id` is being deleted.
    pub fn is_deleting(&self, id: JobId) -> bool {
        self.deleting.contains(&id)
    }

    /// How many jobs are being deleted now.
    pub fn deleting_count(&self) -> usize {
        self.deleting.len()
    }
}

/// True for the states `DeleteFinished` may name.
pub fn deletable_state(state: JobState) -> bool {
    state.is_terminal()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::tests::{accepted, consistent, echo, state};
    use taskyard_client::clock::Now;

    #[test]
    fn only_finished_stored_jobs_not_being_deleted_may_be_deleted() {
        let mut s = state();
        let now = Now::both(0);
        let queued = accepted(s.submit(echo("a"), now));
        let cancelled = accepted(s.submit(echo("b"), now));
        s.cancel(cancelled, now).expect("cancel");
        let unknown = JobId::mint();
        let (ok, refused) = s.deletable(&[queued, cancelled, unknown]);
        assert_eq!(ok, vec![unknown], "the cancelled one is not stored yet");
        assert_eq!(refused.len(), 2);
        assert!(refused[0].reason.contains("QUEUED"), "{:?}", refused[0]);
        assert!(
            refused[1].reason.contains("not stored yet"),
            "{:?}",
            refused[1]
        );
        s.take_dirty();
        let (ok, _) = s.deletable(&[cancelled, cancelled]);
        assert_eq!(ok, vec![cancelled], "once, though named twice");
        s.deleting(&ok);
        assert!(
            s.requeue(cancelled, now).is_err(),
            "no requeue while deleting"
        );
        let (ok, refused) = s.deletable(&[cancelled]);
        assert!(ok.is_empty());
        assert_eq!(refused[0].reason, "already being deleted");
        s.deleted(&[cancelled]);
        assert!(!s.is_deleting(cancelled));
        assert!(s.requeue(cancelled, now).is_ok());
        consistent(&s);
    }
}
