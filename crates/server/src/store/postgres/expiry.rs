//! Expiry: finished jobs past their retention deleted with their attempts
//! and taken off the counts, a small batch per (fenced) transaction.

use super::write::write_counts;
use super::PostgresStore;
use crate::store::write::CountChanges;
use crate::store::{ExpiredJob, ExpiryCutoffs, StoreError};
use taskyard_protocol::{JobId, JobState};
use uuid::Uuid;

/// Oldest finishes first, through `jobs_finished_at`. (`GREATEST` is not
/// in the SQL standard but every major engine has it.)
const DELETE_JOBS: &str = "DELETE FROM taskyard.jobs WHERE id IN (
    SELECT id FROM taskyard.jobs
    WHERE finished_at < GREATEST($1::bigint, $2::bigint)
      AND ((state = 'FAILED' AND finished_at < $2)
           OR (state IN ('SUCCEEDED', 'CANCELLED') AND finished_at < $1))
    ORDER BY finished_at LIMIT $3)
    RETURNING id, idempotency_key, task_type, state, last_attempt_number";

/// The named jobs that are finished.
const DELETE_FINISHED_IDS: &str = "DELETE FROM taskyard.jobs WHERE id = ANY($1::uuid[])
    AND state IN ('SUCCEEDED', 'FAILED', 'CANCELLED')
    RETURNING id, idempotency_key, task_type, state, last_attempt_number";

impl PostgresStore {
    /// Deletes up to `limit` expired jobs in a transaction of its own
    /// (fenced like every write) and returns them, durable.
    pub(super) fn delete_expired(
        &mut self,
        cutoffs: ExpiryCutoffs,
        limit: usize,
    ) -> Result<Vec<ExpiredJob>, StoreError> {
        let limit = limit.min(i64::MAX as usize) as i64;
        self.delete_committed(
            DELETE_JOBS,
            &[&cutoffs.finished_before, &cutoffs.failed_before, &limit],
        )
    }

    /// Deletes those of `ids` that are finished, with their attempts, in a
    /// (fenced) transaction of its own, and returns them, durable.
    pub(super) fn delete_finished_ids(
        &mut self,
        ids: &[JobId],
    ) -> Result<Vec<ExpiredJob>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<Uuid> = ids.iter().map(|id| id.0).collect();
        self.delete_committed(DELETE_FINISHED_IDS, &[&ids])
    }

    /// Runs `sql` (see `delete_in_transaction`) and commits.
    fn delete_committed(
        &mut self,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<Vec<ExpiredJob>, StoreError> {
        let result = self.delete_in_transaction(sql, params);
        match result {
            Ok(expired) => match self.conn()?.client.batch_execute("COMMIT") {
                Ok(()) => {
                    self.in_transaction = false;
                    Ok(expired)
                }
                Err(e) => {
                    self.in_transaction = false;
                    Err(self.driver(&e))
                }
            },
            Err(e) => {
                self.rollback();
                Err(e)
            }
        }
    }

    /// Runs `sql`, a DELETE of job rows RETURNING id, key, task type,
    /// state and last attempt number, deletes those jobs' attempts and
    /// takes them off the counts, in the open write transaction.
    fn delete_in_transaction(
        &mut self,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<Vec<ExpiredJob>, StoreError> {
        self.begin_write()?;
        let deleted = {
            let conn = self.conn()?;
            conn.client.query(sql, params)
        }
        .map_err(|e| self.driver(&e))?;
        let mut expired = Vec::with_capacity(deleted.len());
        // A job whose only attempt is its first keeps it in its own row.
        let mut with_attempts: Vec<Uuid> = Vec::new();
        for row in &deleted {
            let id: Uuid = row.get(0);
            let state: &str = row.get(3);
            let state = state
                .parse::<JobState>()
                .map_err(|e| self.fail(format!("job {id}: stored state: {e}")))?;
            if row.get::<_, Option<i32>>(4).is_none_or(|n| n > 1) {
                with_attempts.push(id);
            }
            expired.push(ExpiredJob {
                id: JobId(id),
                idempotency_key: row.get(1),
                task_type: row.get(2),
                state,
            });
        }
        let mut counts = CountChanges::default();
        for job in &expired {
            counts.add(&job.task_type, job.state, -1);
        }
        let shard = self.shard;
        let conn = self.conn()?;
        let written = match with_attempts.is_empty() {
            true => Ok(0),
            false => conn.client.execute(
                "DELETE FROM taskyard.attempts WHERE job_id = ANY($1::uuid[])",
                &[&with_attempts],
            ),
        }
        .and_then(|_| write_counts(&mut conn.client, &conn.statements.counts, shard, counts));
        written.map_err(|e| self.driver(&e))?;
        Ok(expired)
    }
}
