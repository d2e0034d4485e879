//! Reading the database back at start-up: every job row with its
//! attempt history, decoded and checked column by column.

use super::{JobStore, StoreError};
use crate::scheduler::Job;
use rusqlite::{Connection, Row};
use std::collections::HashMap;
use taskyard_protocol::{Attempt, AttemptOutcome, JobId, JobState, LeaseId, Priority, WorkerId};

pub(super) const COLUMNS: &str = "id, task_type, payload, priority, sequence, submitted_at, state, attempts, \
    max_attempts, timeout_ms, lease, worker_id, assigned_at, next_retry_at, result, error, \
    idempotency_key, updated_at, finished_at, not_before, last_attempt_number, last_attempt_worker, \
    last_attempt_lease, last_attempt_started_at, last_attempt_ended_at, last_attempt_outcome, \
    concurrency_key";

impl JobStore {
    /// Every stored job with its attempt history: one streamed SELECT per table.
    pub fn load_all(&self) -> Result<Vec<Job>, StoreError> {
        let mut histories = self.load_attempts()?;
        let query = format!("SELECT {COLUMNS} FROM jobs");
        let mut stmt = self.conn.prepare(&query).map_err(|e| self.error(e))?;
        let rows = stmt.query_map([], read_row).map_err(|e| self.error(e))?;
        rows.map(|row| {
            let mut job = row.map_err(|e| self.error(e))?;
            let stored = histories.remove(&job.id).unwrap_or_default();
            job.history = with_last_attempt(stored, job.history.pop());
            Ok(job)
        })
        .collect()
    }

    fn load_attempts(&self) -> Result<HashMap<JobId, Vec<Attempt>>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT job_id, number, worker_id, lease, started_at, ended_at, outcome \
                 FROM attempts ORDER BY job_id, number",
            )
            .map_err(|e| self.error(e))?;
        let rows = stmt
            .query_map([], read_attempt)
            .map_err(|e| self.error(e))?;
        let mut histories: HashMap<JobId, Vec<Attempt>> = HashMap::new();
        for row in rows {
            let (job_id, attempt) = row.map_err(|e| self.error(e))?;
            histories.entry(job_id).or_default().push(attempt);
        }
        Ok(histories)
    }
}

fn read_attempt(row: &Row<'_>) -> rusqlite::Result<(JobId, Attempt)> {
    let job_id: String = row.get(0)?;
    let job = job_id
        .parse::<JobId>()
        .map_err(|e| conversion(0, format!("attempt of job {job_id:?}: {e}")))?;
    Ok((job, attempt_at(row, 1, &job_id)?))
}

/// An attempt stored in six columns from `first`: number, worker, lease,
/// started, ended, outcome (in `attempts`, and as a job row's last attempt).
fn attempt_at(row: &Row<'_>, first: usize, job: &str) -> rusqlite::Result<Attempt> {
    let lease: String = row.get(first + 2)?;
    let outcome: Option<String> = row.get(first + 5)?;
    Ok(Attempt {
        number: row.get(first)?,
        worker_id: WorkerId(row.get(first + 1)?),
        lease: lease
            .parse::<LeaseId>()
            .map_err(|e| conversion(first + 2, format!("attempt of job {job}: lease: {e}")))?,
        started_at: row.get(first + 3)?,
        ended_at: row.get(first + 4)?,
        outcome: outcome
            .map(|o| serde_json::from_str::<AttemptOutcome>(&o))
            .transpose()
            .map_err(|e| conversion(first + 5, format!("attempt of job {job}: outcome: {e}")))?,
    })
}

/// `job` (read from its row, with only its last attempt) with the
/// attempts stored apart from the row added before that one.
pub(super) fn with_stored_attempts(conn: &Connection, mut job: Job) -> rusqlite::Result<Job> {
    let mut stmt = conn.prepare_cached(
        "SELECT job_id, number, worker_id, lease, started_at, ended_at, outcome \
         FROM attempts WHERE job_id = ?1 ORDER BY number",
    )?;
    let stored = stmt
        .query_map([job.id.to_string()], read_attempt)?
        .map(|row| row.map(|(_, attempt)| attempt))
        .collect::<rusqlite::Result<Vec<_>>>()?;
    job.history = with_last_attempt(stored, job.history.pop());
    Ok(job)
}

/// A job's history: the attempts stored on their own, then the last one
/// from the job row. The row's copy is the newer one when `attempts` also
/// holds that attempt (written as open by a version-2 binary).
fn with_last_attempt(mut history: Vec<Attempt>, last: Option<Attempt>) -> Vec<Attempt> {
    if let Some(last) = last {
        history.retain(|a| a.number != last.number);
        history.push(last);
    }
    history
}

/// The last attempt kept in a job row (columns 20–25), if it has one.
fn read_last_attempt(row: &Row<'_>, job: &str) -> rusqlite::Result<Option<Attempt>> {
    match row.get::<_, Option<u32>>(20)? {
        Some(_) => attempt_at(row, 20, job).map(Some),
        None => Ok(None),
    }
}

pub(super) fn conversion(column: usize, reason: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(column, rusqlite::types::Type::Text, reason.into())
}

pub(super) fn read_row(row: &Row<'_>) -> rusqlite::Result<Job> {
    let id: String = row.get(0)?;
    let lease: Option<String> = row.get(10)?;
    let state: String = row.get(6)?;
    let priority: i64 = row.get(3)?;
    let payload: Vec<u8> = row.get(2)?;
    let result: Option<Vec<u8>> = row.get(14)?;
    Ok(Job {
        id: id
            .parse::<JobId>()
            .map_err(|e| conversion(0, format!("job id {id:?}: {e}")))?,
        task_type: row.get(1)?,
        payload: payload.into(),
        priority: Priority::from_level(priority)
            .ok_or_else(|| conversion(3, format!("job {id}: priority {priority}")))?,
        sequence: row.get::<_, i64>(4)?.max(0) as u64,
        submitted_at: row.get(5)?,
        state: state
            .parse::<JobState>()
            .map_err(|e| conversion(6, format!("job {id}: {e}")))?,
        attempts: row.get(7)?,
        max_attempts: row.get(8)?,
        timeout_ms: row.get::<_, i64>(9)?.max(0) as u64,
        lease: lease
            .map(|l| l.parse::<LeaseId>())
            .transpose()
            .map_err(|e| conversion(10, format!("job {id}: lease: {e}")))?,
        worker_id: row.get::<_, Option<String>>(11)?.map(WorkerId),
        assigned_at: row.get(12)?,
        next_retry_at: row.get(13)?,
        result: result.map(Into::into),
        error: row.get(15)?,
        idempotency_key: row.get(16)?,
        updated_at: row.get(17)?,
        finished_at: row.get(18)?,
        not_before: row.get(19)?,
        // Only the last attempt, from the row; `load_all` adds the rest.
        history: read_last_attempt(row, &id)?.into_iter().collect(),
        progress: None,
        concurrency_key: row.get(26)?,
    })
}
