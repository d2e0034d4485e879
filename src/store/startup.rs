//! What start-up reads: the active set, a bounded window of recently
//! finished jobs, the idempotency keys of every stored job, and the count
//! of stored jobs per task type and state. Its cost grows with the active
//! set and the window; history is read only as keys and counts.

use super::read::{conversion, read_row, with_stored_attempts, COLUMNS};
use super::{JobStore, StoreError};
use crate::protocol::{JobId, JobState};
use crate::scheduler::{Job, Stored};
use rusqlite::OptionalExtension;
use std::collections::HashMap;

/// The non-terminal rows: a job has `finished_at` exactly while it is
/// terminal (a requeue clears it). Matches the `jobs_active` index.
const ACTIVE: &str = "finished_at IS NULL";

impl JobStore {
    /// Everything recovery needs: every non-terminal job and the `window`
    /// most recently finished ones (each with its whole history), every
    /// stored idempotency key with its job, and the stored jobs per task
    /// type and state (a COUNT over the table).
    pub fn load_for_recovery(&self, window: usize) -> Result<Stored, StoreError> {
        let mut jobs = self.select_jobs(&format!("WHERE {ACTIVE}"), [])?;
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
            counts: self.state_counts()?,
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
        let mut stmt = self
            .conn
            .prepare("SELECT idempotency_key, id FROM jobs WHERE idempotency_key IS NOT NULL")
            .map_err(|e| self.error(e))?;
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

    fn state_counts(&self) -> Result<Vec<(String, JobState, u64)>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT task_type, state, count(*) FROM jobs GROUP BY task_type, state")
            .map_err(|e| self.error(e))?;
        let rows = stmt
            .query_map([], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, i64>(2)?,
                ))
            })
            .map_err(|e| self.error(e))?;
        let mut counts: HashMap<(String, JobState), u64> = HashMap::new();
        for row in rows {
            let (task_type, state, n) = row.map_err(|e| self.error(e))?;
            let state = state.parse::<JobState>().map_err(|e| StoreError {
                path: self.path.clone(),
                reason: format!("stored state: {e}"),
            })?;
            *counts.entry((task_type, state)).or_default() += n.max(0) as u64;
        }
        Ok(counts.into_iter().map(|((t, s), n)| (t, s, n)).collect())
    }
}
