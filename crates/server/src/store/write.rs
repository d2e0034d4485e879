//! Writing batches of changed rows: staged into the open transaction,
//! then committed; each row UPDATEs its job, or INSERTs it when new.

use super::{JobStore, StoreError};
use crate::scheduler::JobRow;
use rusqlite::params;
use taskyard_protocol::{Attempt, AttemptOutcome, JobId, JobState};
use uuid::Uuid;

/// The columns of `UPDATE` (same numbers), then those fixed at submission.
const INSERT: &str = "INSERT INTO jobs (id, state, attempts, max_attempts, lease, worker_id, \
    assigned_at, next_retry_at, result, error, updated_at, finished_at, not_before, \
    last_attempt_number, last_attempt_worker, last_attempt_lease, last_attempt_started_at, \
    last_attempt_ended_at, last_attempt_outcome, task_type, payload, priority, sequence, \
    submitted_at, timeout_ms, idempotency_key, concurrency_key) VALUES (?1, ?2, ?3, ?4, ?5, ?6, \
    ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, \
    ?26, ?27)";

/// The columns a transition can change; submission fields never do.
const UPDATE: &str = "UPDATE jobs SET state = ?2, attempts = ?3, max_attempts = ?4, lease = ?5, \
    worker_id = ?6, assigned_at = ?7, next_retry_at = ?8, result = ?9, error = ?10, \
    updated_at = ?11, finished_at = ?12, not_before = ?13, last_attempt_number = ?14, \
    last_attempt_worker = ?15, last_attempt_lease = ?16, last_attempt_started_at = ?17, \
    last_attempt_ended_at = ?18, last_attempt_outcome = ?19 WHERE id = ?1";

/// A job's stored state, when the store does not know it (see
/// `JobStore::unfinished`).
const STORED_STATE: &str = "SELECT state FROM jobs WHERE id = ?1";

/// Moves the count of finished jobs of one task type and state by `?3`.
pub(super) const ADD_TO_COUNT: &str = "INSERT INTO terminal_counts (task_type, state, jobs) \
    VALUES (?1, ?2, ?3) ON CONFLICT (task_type, state) DO UPDATE SET jobs = jobs + excluded.jobs";

pub(super) const UPSERT_ATTEMPT: &str = "INSERT INTO attempts (job_id, number, worker_id, lease, started_at, \
    ended_at, outcome) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
    ON CONFLICT(job_id, number) DO UPDATE SET ended_at = excluded.ended_at, outcome = excluded.outcome";

impl JobStore {
    /// Writes `rows` into the open transaction, beginning one if none is
    /// open: nothing is durable (or visible to other connections) until
    /// `commit`. On failure the transaction is rolled back, `rows` and
    /// everything staged before them with it.
    ///
    /// A row carries only the attempts that changed (see `JobRow`); stored
    /// attempts it leaves out are kept. A job's last attempt is kept in the
    /// job row itself, so starting or ending an attempt rewrites that one
    /// row; an attempt gets a row in `attempts` once a later one starts. A
    /// job staged twice is written twice; the later row wins.
    pub fn stage(&mut self, rows: &[JobRow]) -> Result<(), StoreError> {
        let result = self.write_rows(rows);
        if result.is_err() {
            self.rollback();
        }
        result
    }

    /// Writes `rows` like `stage`, then commits the transaction: after it
    /// returns `Ok`, every row staged since the last commit and every row
    /// of `rows` is durable. On failure none of them is.
    pub fn commit(&mut self, rows: &[JobRow]) -> Result<(), StoreError> {
        if let Some(reason) = self.staged_lost.take() {
            // Rows staged since belong to this failing batch too.
            self.rollback();
            return Err(StoreError::sqlite(
                &self.path,
                format!("rows staged for this batch were rolled back by a failed schedule write: {reason}"),
            ));
        }
        self.stage(rows)?;
        if self.conn.is_autocommit() {
            return Ok(());
        }
        let result = self.conn.execute_batch("COMMIT").map_err(|e| self.error(e));
        match &result {
            Ok(()) => self.committed(),
            Err(_) => self.rollback(),
        }
        result
    }

    /// Abandons the open transaction, if any.
    pub(super) fn rollback(&mut self) {
        // What the cache learnt from the abandoned writes is not stored.
        self.unfinished.clear();
        if !self.conn.is_autocommit() {
            // If even the rollback fails, SQLite has ended the transaction
            // itself: nothing of it can become durable later.
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }

    fn write_rows(&mut self, rows: &[JobRow]) -> Result<(), StoreError> {
        if rows.is_empty() {
            return Ok(());
        }
        let path = &self.path;
        let fail = |reason: String| StoreError::sqlite(path, reason);
        if self.conn.is_autocommit() {
            self.conn
                .execute_batch("BEGIN")
                .map_err(|e| fail(e.to_string()))?;
        }
        let statement = |sql| {
            self.conn
                .prepare_cached(sql)
                .map_err(|e| fail(e.to_string()))
        };
        let (mut update, mut insert) = (statement(UPDATE)?, statement(INSERT)?);
        let (mut attempts, mut stored_state) =
            (statement(UPSERT_ATTEMPT)?, statement(STORED_STATE)?);
        let mut counts = CountChanges::default();
        let mut inserted = Vec::new();
        for row in rows {
            let stored = match self.unfinished.get(&row.id) {
                Some(state) => Some(*state),
                None => read_state(&mut stored_state, row.id).map_err(|e| {
                    StoreError::sqlite_failed(path, &format!("reading job {}", row.id), &e)
                })?,
            };
            let new = write_job(&mut update, &mut insert, row, stored.is_some()).map_err(|e| {
                StoreError::sqlite_failed(path, &format!("writing job {}", row.id), &e)
            })?;
            if new {
                inserted.push(row);
            }
            counts.moved(&row.task_type, stored, row.state);
            match row.state.is_terminal() {
                true => self.unfinished.remove(&row.id),
                false => self.unfinished.insert(row.id, row.state),
            };
            // The last attempt is stored in the job's own row; the ones
            // before it (closed for good) get a row of their own here.
            let earlier = row.changed_attempts.len().saturating_sub(1);
            for attempt in &row.changed_attempts[..earlier] {
                write_attempt(&mut attempts, row.id, attempt).map_err(|e| {
                    let doing = format!("writing attempt of job {}", row.id);
                    StoreError::sqlite_failed(path, &doing, &e)
                })?;
            }
        }
        let mut add = statement(ADD_TO_COUNT)?;
        counts
            .write(&mut add)
            .map_err(|e| StoreError::sqlite_failed(path, "counting finished jobs", &e))?;
        drop((update, insert, attempts, stored_state, add));
        self.write_schedule_progress(&inserted)
    }
}

/// How the counts of finished jobs move in one transaction, per task type
/// and state: a handful of entries, written as one statement each.
#[derive(Debug, Default)]
pub(super) struct CountChanges(std::collections::HashMap<(String, JobState), i64>);

impl CountChanges {
    /// A row moves from `stored` (`None`: it had no row) to `now`.
    pub(super) fn moved(&mut self, task_type: &str, stored: Option<JobState>, now: JobState) {
        if stored == Some(now) {
            return;
        }
        if let Some(from) = stored.filter(|s| s.is_terminal()) {
            self.add(task_type, from, -1);
        }
        if now.is_terminal() {
            self.add(task_type, now, 1);
        }
    }

    pub(super) fn add(&mut self, task_type: &str, state: JobState, n: i64) {
        *self.0.entry((task_type.to_string(), state)).or_default() += n;
    }

    /// The non-zero changes: (task type, state, by how much).
    pub(super) fn changes(self) -> impl Iterator<Item = (String, JobState, i64)> {
        self.0
            .into_iter()
            .filter(|(_, n)| *n != 0)
            .map(|((task_type, state), n)| (task_type, state, n))
    }

    pub(super) fn write(self, add: &mut rusqlite::CachedStatement<'_>) -> rusqlite::Result<()> {
        for ((task_type, state), n) in self.0 {
            if n != 0 {
                add.execute(params![task_type, state.as_str(), n])?;
            }
        }
        Ok(())
    }
}

/// The stored state of job `id`, if it has a row.
fn read_state(
    stmt: &mut rusqlite::CachedStatement<'_>,
    id: JobId,
) -> rusqlite::Result<Option<JobState>> {
    use rusqlite::OptionalExtension;
    let state: Option<String> = stmt
        .query_row([id.to_string()], |row| row.get(0))
        .optional()?;
    state
        .map(|s| {
            s.parse::<JobState>().map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, e.into())
            })
        })
        .transpose()
}

/// Updates the mutable columns of a stored job, or inserts the whole row
/// if it is not stored yet (a new submission, or `stored` was wrong).
/// True when it inserted.
fn write_job(
    update: &mut rusqlite::CachedStatement<'_>,
    insert: &mut rusqlite::CachedStatement<'_>,
    job: &JobRow,
    stored: bool,
) -> rusqlite::Result<bool> {
    let mut id = Uuid::encode_buffer();
    let id = &*job.id.0.hyphenated().encode_lower(&mut id);
    let mut lease_buf = Uuid::encode_buffer();
    let lease = job
        .lease
        .map(|l| &*l.0.hyphenated().encode_lower(&mut lease_buf));
    let worker = job.worker_id.as_ref().map(|w| w.0.as_str());
    let last = job.changed_attempts.last();
    let mut last_lease_buf = Uuid::encode_buffer();
    let last_lease = last.map(|a| &*a.lease.0.hyphenated().encode_lower(&mut last_lease_buf));
    let last_outcome = last.and_then(|a| a.outcome.as_ref()).and_then(outcome_text);
    let changes = params![
        id,
        job.state.as_str(),
        job.attempts,
        job.max_attempts,
        lease,
        worker,
        job.assigned_at,
        job.next_retry_at,
        job.result.as_deref(),
        job.error,
        job.updated_at,
        job.finished_at,
        job.not_before,
        last.map(|a| a.number),
        last.map(|a| a.worker_id.0.as_str()),
        last_lease,
        last.map(|a| a.started_at),
        last.and_then(|a| a.ended_at),
        last_outcome,
    ];
    if !stored || update.execute(changes)? == 0 {
        let submission = params![
            job.task_type,
            &job.payload[..],
            job.priority.level(),
            job.sequence as i64,
            job.submitted_at,
            job.timeout_ms as i64,
            job.idempotency_key,
            job.concurrency_key,
        ];
        insert.execute(rusqlite::params_from_iter(
            changes.iter().chain(submission.iter()),
        ))?;
        return Ok(true);
    }
    Ok(false)
}

pub(super) fn write_attempt(
    stmt: &mut rusqlite::CachedStatement<'_>,
    job_id: JobId,
    attempt: &Attempt,
) -> rusqlite::Result<usize> {
    let outcome = attempt.outcome.as_ref().and_then(outcome_text);
    stmt.execute(params![
        job_id.to_string(),
        attempt.number,
        attempt.worker_id.0,
        attempt.lease.to_string(),
        attempt.started_at,
        attempt.ended_at,
        outcome,
    ])
}

/// How an attempt's outcome is stored: its JSON form.
pub(super) fn outcome_text(outcome: &AttemptOutcome) -> Option<String> {
    serde_json::to_string(outcome).ok()
}
