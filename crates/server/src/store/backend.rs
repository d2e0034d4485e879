//! The contract `Persistence` drives, met by every storage backend
//! (SQLite: `JobStore`; PostgreSQL). One conformance suite checks both.

use super::{ExpiredJob, ExpiryCutoffs, StoreError};
use crate::scheduler::schedule::{ScheduleWrite, StoredSchedule};
use crate::scheduler::{JobRow, Stored};
use taskyard_protocol::JobId;

/// Durable storage of job rows. Owned by one thread (the persistence
/// actor); nothing else writes through it.
pub trait Store: Send + 'static {
    /// Writes `rows` into the open transaction, beginning one if none is
    /// open: nothing is durable or visible before `commit`. On failure the
    /// transaction is rolled back with everything staged before. A backend
    /// may keep the rows and write them with the commit instead (PostgreSQL
    /// does: every statement costs a round trip), so an error in them may
    /// first show at the commit.
    fn stage(&mut self, rows: &[JobRow]) -> Result<(), StoreError>;

    /// Writes `rows` like `stage`, then commits: on `Ok` every row staged
    /// since the last commit and every row of `rows` is durable; on
    /// failure none of them is.
    fn commit(&mut self, rows: &[JobRow]) -> Result<(), StoreError>;

    /// Deletes up to `limit` finished jobs past `cutoffs` in a transaction
    /// of its own (durable when it returns), or `None` without changing
    /// anything while rows of the next batch are staged.
    fn expire(
        &mut self,
        cutoffs: ExpiryCutoffs,
        limit: usize,
    ) -> Result<Option<Vec<ExpiredJob>>, StoreError>;

    /// Deletes those of `ids` that are finished (SUCCEEDED, FAILED or
    /// CANCELLED), with their attempts, in a transaction of its own
    /// (durable when it returns; counts updated), and returns them; `None`
    /// without changing anything while rows of the next batch are staged.
    fn delete_finished(&mut self, ids: &[JobId]) -> Result<Option<Vec<ExpiredJob>>, StoreError>;

    /// What recovery needs: the active set, the `window` most recently
    /// finished jobs, every idempotency key, the counts per task type and
    /// state, and the newest sequence.
    fn load_for_recovery(&mut self, window: usize) -> Result<Stored, StoreError>;

    /// From now on every transaction first checks, under a row lock, that
    /// the leader lease's epoch is still `epoch`, and fails with a fenced
    /// error (`StoreError::is_fenced`) without writing anything when it is
    /// not. `None`: no fence (a single coordinator on SQLite).
    fn set_fence(&mut self, epoch: Option<u64>);

    /// Writes or deletes a schedule, durable when it returns. Staged job
    /// rows are never lost by it (a backend may make them durable with it).
    fn write_schedule(&mut self, write: &ScheduleWrite) -> Result<(), StoreError>;

    /// Every stored schedule, by name, each with the newest slot its jobs
    /// recorded (see `store::schedules`).
    fn load_schedules(&mut self) -> Result<Vec<StoredSchedule>, StoreError>;

    /// Where the data lives, for logs (never with a password).
    fn describe(&self) -> String;

    /// Leaves this coordinator's addresses where a second coordinator
    /// refused the same database can read whom it found (SQLite: its lock
    /// file). Only advice; a store several coordinators share has nothing
    /// to record.
    fn record_holder(&self, _addresses: &str) -> std::io::Result<()> {
        Ok(())
    }
}

impl Store for super::JobStore {
    fn stage(&mut self, rows: &[JobRow]) -> Result<(), StoreError> {
        super::JobStore::stage(self, rows)
    }

    fn commit(&mut self, rows: &[JobRow]) -> Result<(), StoreError> {
        super::JobStore::commit(self, rows)
    }

    fn expire(
        &mut self,
        cutoffs: ExpiryCutoffs,
        limit: usize,
    ) -> Result<Option<Vec<ExpiredJob>>, StoreError> {
        super::JobStore::expire(self, cutoffs, limit)
    }

    fn delete_finished(&mut self, ids: &[JobId]) -> Result<Option<Vec<ExpiredJob>>, StoreError> {
        super::JobStore::delete_finished(self, ids)
    }

    fn load_for_recovery(&mut self, window: usize) -> Result<Stored, StoreError> {
        super::JobStore::load_for_recovery(self, window)
    }

    fn write_schedule(&mut self, write: &ScheduleWrite) -> Result<(), StoreError> {
        super::JobStore::write_schedule(self, write)
    }

    fn load_schedules(&mut self) -> Result<Vec<StoredSchedule>, StoreError> {
        super::JobStore::load_schedules(self)
    }

    /// SQLite has one writer process and no lease: there is nothing to
    /// fence against.
    fn set_fence(&mut self, _epoch: Option<u64>) {}

    fn describe(&self) -> String {
        format!("SQLite database {}", self.path().display())
    }

    fn record_holder(&self, addresses: &str) -> std::io::Result<()> {
        crate::store::owner_lock::record_addresses(self.path(), addresses)
    }
}
