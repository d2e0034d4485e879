//! What start-up reads: the active set, a bounded window of recently
//! finished jobs, the idempotency keys of every stored job, and the count
//! of stored jobs per task type and state. Its cost grows with the active
//! set, the window and the stored keys (read through their partial index,
//! so rows without a key cost nothing); finished jobs are counted from
//! `terminal_counts`, not by reading them.

use super::read::{conversion, read_row, with_stored_attempts, COLUMNS};
use super::{JobStore, StoreError};
use crate::scheduler::{Job, Stored};
use rusqlite::OptionalExtension;
use std::collections::HashMap;
use taskyard_protocol::{JobId, JobState};

/// The non-terminal rows: a job has `finished_at` exactly while it is
/// terminal (a requeue clears it). Matches the `jobs_active` index.
const ACTIVE: &str = "finished_at IS NULL";

/// Every stored idempotency key with its job, through the partial index
/// `jobs_idempotency_key` (rows without a key are not in it).
pub(super) const KEYS: &str =
    "SELECT idempotency_key, id FROM jobs WHERE idempotency_key IS NOT NULL";

impl JobStore {
    /// Everything recovery needs: every non-terminal job and the `window`
    /// most recently finished ones (each with its whole history), every
    /// stored idempotency key with its job, and the stored jobs per task
    /// type and state (the loaded active jobs, plus `terminal_counts` for
    /// the finished ones).
    pub fn load_for_recovery(&self, window: usize) -> Result<Stored, StoreError> {
        let mut jobs = self.select_jobs(&format!("WHERE {ACTIVE}"), [])?;
        let counts = self.state_counts(&jobs)?;
        let mut finished = self.select_jobs(
            "WHERE finished_at IS NOT NULL AND state NOT IN ('QUEUED', 'RUNNING', 'RETRY_WAIT') \
             ORDER BY finished_at DESC LIMIT ?1",
            [window.min(i64::MAX as usize) as i64],
        )?;
        // Oldest finish first: the order the in-memory window evicts in.
        finished.reverse();
        jobs.extend(finished);
        Ok(Stored {
            jobs,
            idempotency: self.idempotency_keys()?,
            counts,
            newest: self.newest()?,
        })
    }

    /// The largest sequence stored and its job's submission time (one
    /// step down the `jobs_order` index).
    fn newest(&self) -> Result<Option<(u64, i64)>, StoreError> {
        self.conn
            .query_row(
                "SELECT sequence, submitted_at FROM jobs \
                 ORDER BY sequence DESC, submitted_at DESC LIMIT 1",
                [],
                |row| Ok((row.get::<_, i64>(0)?.max(0) as u64, row.get(1)?)),
            )
            .optional()
            .map_err(|e| self.error(e))
    }

    /// Jobs matching `filter` (SQL after `FROM jobs`), each with its history.
    fn select_jobs<P: rusqlite::Params>(
        &self,
        filter: &str,
        args: P,
    ) -> Result<Vec<Job>, StoreError> {
        let query = format!("SELECT {COLUMNS} FROM jobs {filter}");
        let mut stmt = self.conn.prepare(&query).map_err(|e| self.error(e))?;
        let jobs = stmt
            .query_map(args, read_row)
            .map_err(|e| self.error(e))?
            .collect::<rusqlite::Result<Vec<Job>>>()
            .map_err(|e| self.error(e))?;
        jobs.into_iter()
            .map(|job| with_stored_attempts(&self.conn, job).map_err(|e| self.error(e)))
            .collect()
    }

    fn idempotency_keys(&self) -> Result<Vec<(String, JobId)>, StoreError> {
        let mut stmt = self.conn.prepare(KEYS).map_err(|e| self.error(e))?;
        let rows = stmt
            .query_map([], |row| {
                let id: String = row.get(1)?;
                let parsed = id
                    .parse::<JobId>()
                    .map_err(|e| conversion(1, format!("job id {id:?}: {e}")))?;
                Ok((row.get::<_, String>(0)?, parsed))
            })
            .map_err(|e| self.error(e))?;
        rows.collect::<rusqlite::Result<_>>()
            .map_err(|e| self.error(e))
    }

    /// Stored jobs per (task type, state): `active` (every non-terminal
    /// job, loaded) counted here, finished ones read from `terminal_counts`.
    fn state_counts(&self, active: &[Job]) -> Result<Vec<(String, JobState, u64)>, StoreError> {
        let mut counts: HashMap<(String, JobState), u64> = HashMap::new();
        for job in active.iter().filter(|j| !j.state.is_terminal()) {
            *counts
                .entry((job.task_type.clone(), job.state))
                .or_default() += 1;
        }
        for (task_type, state, n) in self.terminal_counts()? {
            *counts.entry((task_type, state)).or_default() += n;
        }
        Ok(counts.into_iter().map(|((t, s), n)| (t, s, n)).collect())
    }

    /// The finished jobs stored per (task type, state), as the writes and
    /// deletions keep them in `terminal_counts`; emptied entries left out.
    pub(super) fn terminal_counts(&self) -> Result<Vec<(String, JobState, u64)>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT task_type, state, jobs FROM terminal_counts WHERE jobs > 0")
            .map_err(|e| self.error(e))?;
        let rows = stmt
            .query_map([], |row| {
                let state: String = row.get(1)?;
                let parsed = state
                    .parse::<JobState>()
                    .map_err(|e| conversion(1, format!("stored state {state:?}: {e}")))?;
                Ok((
                    row.get::<_, String>(0)?,
                    parsed,
                    row.get::<_, i64>(2)?.max(0) as u64,
                ))
            })
            .map_err(|e| self.error(e))?;
        rows.collect::<rusqlite::Result<_>>()
            .map_err(|e| self.error(e))
    }
}
