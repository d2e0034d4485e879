//! Dirty-row tracking: which jobs the next batch must write, and which of
//! their attempts may have changed, so a commit rewrites no old attempt.

use crate::scheduler::hash_map::HashMap;
use crate::scheduler::job::Job;
use crate::scheduler::row::JobRow;
use crate::scheduler::state::CoordinatorState;
use std::collections::hash_map::Entry;
use taskyard_protocol::JobId;

/// The jobs changed since the last batch was taken, in the order they
/// first changed, each at most once.
#[derive(Debug, Default)]
pub(super) struct DirtyRows {
    /// Each dirty job with the index of the first attempt that may have
    /// changed: only the last attempt ever changes, so attempts before the
    /// one that was last when the job was first marked are already stored.
    order: Vec<(JobId, usize)>,
    /// Each dirty job's position in `order`. Cleared, not replaced, by
    /// `take`, so it keeps its capacity from batch to batch.
    position: HashMap<JobId, usize>,
}

impl DirtyRows {
    /// Marks `id` dirty with attempts from index `from` on; a job marked
    /// again keeps its place and the earlier of the two indexes.
    fn mark(&mut self, id: JobId, from: usize) {
        match self.position.entry(id) {
            Entry::Occupied(e) => {
                let earliest = &mut self.order[*e.get()].1;
                *earliest = (*earliest).min(from);
            }
            Entry::Vacant(e) => {
                e.insert(self.order.len());
                self.order.push((id, from));
            }
        }
    }

    /// The rows of every dirty job still in `jobs`, in marking order; none
    /// is dirty afterwards.
    fn take(&mut self, jobs: &HashMap<JobId, Box<Job>>) -> Vec<JobRow> {
        self.position.clear();
        self.order
            .drain(..)
            .filter_map(|(id, first)| {
                let job = jobs.get(&id)?;
                Some(JobRow::with_attempts_from(job, first))
            })
            .collect()
    }

    /// True when `id` waits for the next batch.
    pub(super) fn contains(&self, id: JobId) -> bool {
        self.position.contains_key(&id)
    }

    /// Verifies that `position` gives each dirty job's place in `order`
    /// and that no job is there twice; for tests.
    pub(super) fn check_invariants(&self) -> Result<(), String> {
        if self.order.len() != self.position.len() {
            return Err(format!(
                "{} dirty rows, {} positions",
                self.order.len(),
                self.position.len()
            ));
        }
        for (at, (id, _)) in self.order.iter().enumerate() {
            if self.position.get(id) != Some(&at) {
                return Err(format!("dirty job {id} at {at} is indexed elsewhere"));
            }
        }
        Ok(())
    }
}

impl CoordinatorState {
    /// Marks the whole job, every attempt included, for the next batch.
    pub(super) fn mark_dirty(&mut self, id: JobId) {
        self.dirty.mark(id, 0);
    }

    /// Marks the job for the next batch; attempts from index `from` on
    /// may have changed.
    pub(super) fn mark_dirty_from(&mut self, id: JobId, from: usize) {
        self.dirty.mark(id, from);
    }

    /// True when transitions are waiting to be persisted.
    pub fn has_dirty(&self) -> bool {
        !self.dirty.order.is_empty()
    }

    /// How many rows the next `take_dirty` returns.
    pub fn dirty_rows(&self) -> usize {
        self.dirty.order.len()
    }

    /// The rows changed since the last call, in the order they first
    /// changed. Each row carries only the attempts that may have changed
    /// since the row was last taken (earlier ones are stored already and
    /// never change), so a commit rewrites no old attempt; it always
    /// carries the last attempt, if the job has one (see `JobRow`).
    pub fn take_dirty(&mut self) -> Vec<JobRow> {
        self.dirty.take(&self.jobs)
    }

    /// Marks rows dirty again (their commit failed and must be retried).
    pub fn remark_dirty(&mut self, ids: impl IntoIterator<Item = JobId>) {
        for id in ids {
            self.mark_dirty(id);
        }
    }
}

/// The rows `GroupCommit` stages: the jobs changed since they were last
/// taken.
impl crate::scheduler::group_commit::RowSource for CoordinatorState {
    type Row = JobRow;

    fn dirty_count(&self) -> usize {
        self.dirty_rows()
    }

    fn take_dirty(&mut self) -> Vec<JobRow> {
        CoordinatorState::take_dirty(self)
    }

    fn job_of(row: &JobRow) -> JobId {
        row.id
    }

    fn remark_dirty(&mut self, jobs: Vec<JobId>) {
        CoordinatorState::remark_dirty(self, jobs)
    }
}
