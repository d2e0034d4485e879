//! Expiry: finished jobs past their retention deleted with their
//! attempts, a small batch per transaction, so commits of live work
//! interleave between batches.

use super::read::conversion;
use super::write::{CountChanges, ADD_TO_COUNT};
use super::{JobStore, StoreError};
use rusqlite::types::Value;
use taskyard_protocol::{JobId, JobState};

pub use crate::scheduler::expiry_run::ExpiryCutoffs;

/// A deleted job, with the idempotency key that expired with it and what
/// it was counted as (its task type and stored state).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiredJob {
    pub id: JobId,
    pub idempotency_key: Option<String>,
    pub task_type: String,
    pub state: JobState,
}

/// Oldest finishes first, through `jobs_finished_at`.
const DELETE_JOBS: &str = "DELETE FROM jobs WHERE rowid IN (
    SELECT rowid FROM jobs
    WHERE finished_at < max(?1, ?2)
      AND ((state = 'FAILED' AND finished_at < ?2)
           OR (state IN ('SUCCEEDED', 'CANCELLED') AND finished_at < ?1))
    ORDER BY finished_at LIMIT ?3)
    RETURNING id, idempotency_key, task_type, state, last_attempt_number";

impl JobStore {
    /// Deletes up to `limit` expired jobs and their attempts in one
    /// transaction of its own, and returns them; durable once it returns.
    /// Returns `None`, changing nothing, while rows of the next batch are
    /// staged (a transaction is open): a deletion never shares a batch's
    /// transaction, so a batch that rolls back cannot undo it, nor it the
    /// batch. Fewer than `limit` jobs returned: nothing else has expired.
    pub fn expire(
        &mut self,
        cutoffs: ExpiryCutoffs,
        limit: usize,
    ) -> Result<Option<Vec<ExpiredJob>>, StoreError> {
        if !self.conn.is_autocommit() {
            return Ok(None);
        }
        let limit = limit.min(i64::MAX as usize) as i64;
        let params = [cutoffs.finished_before, cutoffs.failed_before, limit].map(Value::from);
        // On failure the transaction rolls back as it is dropped.
        self.delete_returning(DELETE_JOBS, &params).map(Some)
    }

    /// Deletes those of `ids` that are finished (SUCCEEDED, FAILED or
    /// CANCELLED) with their attempts, in one transaction of its own, and
    /// returns them; durable once it returns. `None`, changing nothing,
    /// while rows of the next batch are staged, as for `expire`.
    pub fn delete_finished(
        &mut self,
        ids: &[JobId],
    ) -> Result<Option<Vec<ExpiredJob>>, StoreError> {
        if !self.conn.is_autocommit() {
            return Ok(None);
        }
        if ids.is_empty() {
            return Ok(Some(Vec::new()));
        }
        let marks = vec!["?"; ids.len()].join(", ");
        let sql = format!(
            "DELETE FROM jobs WHERE id IN ({marks}) \
             AND state IN ('SUCCEEDED', 'FAILED', 'CANCELLED') \
             RETURNING id, idempotency_key, task_type, state, last_attempt_number"
        );
        let params: Vec<Value> = ids.iter().map(|id| Value::from(id.to_string())).collect();
        self.delete_returning(&sql, &params).map(Some)
    }

    /// Runs `sql` (a DELETE of job rows RETURNING id, key, task type, state
    /// and last attempt number), deletes those jobs' attempts and takes
    /// them off the counts, in one transaction.
    fn delete_returning(
        &mut self,
        sql: &str,
        params: &[Value],
    ) -> Result<Vec<ExpiredJob>, StoreError> {
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|e| error(&path, e))?;
        let expired = {
            let mut jobs = tx.prepare_cached(sql).map_err(|e| error(&path, e))?;
            let rows = jobs
                .query_map(rusqlite::params_from_iter(params), |row| {
                    // A job whose last attempt is its first has no row in
                    // `attempts` (its only attempt lives in the job row);
                    // rows from before version 3 have no last attempt.
                    let first_only = row
                        .get::<_, Option<i64>>(4)?
                        .is_some_and(|number| number <= 1);
                    let id: String = row.get(0)?;
                    let parsed = id
                        .parse::<JobId>()
                        .map_err(|e| conversion(0, format!("job id {id:?}: {e}")))?;
                    let state: String = row.get(3)?;
                    let job = ExpiredJob {
                        id: parsed,
                        idempotency_key: row.get(1)?,
                        task_type: row.get(2)?,
                        state: state
                            .parse::<JobState>()
                            .map_err(|e| conversion(3, format!("job {id}: {e}")))?,
                    };
                    Ok((job, first_only))
                })
                .map_err(|e| error(&path, e))?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
                .map_err(|e| error(&path, e))?
        };
        {
            let mut attempts = tx
                .prepare_cached("DELETE FROM attempts WHERE job_id = ?1")
                .map_err(|e| error(&path, e))?;
            for (job, _) in expired.iter().filter(|(_, first_only)| !first_only) {
                attempts
                    .execute([job.id.to_string()])
                    .map_err(|e| error(&path, e))?;
            }
        }
        {
            let mut counts = CountChanges::default();
            for (job, _) in &expired {
                counts.add(&job.task_type, job.state, -1);
            }
            let mut add = tx
                .prepare_cached(ADD_TO_COUNT)
                .map_err(|e| error(&path, e))?;
            counts.write(&mut add).map_err(|e| error(&path, e))?;
        }
        tx.commit().map_err(|e| error(&path, e))?;
        self.committed();
        Ok(expired.into_iter().map(|(job, _)| job).collect())
    }
}

fn error(path: &std::path::Path, e: rusqlite::Error) -> StoreError {
    StoreError::sqlite(path, e.to_string())
}
