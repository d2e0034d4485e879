//! SQLite storage of job rows: open (with migration), load everything at
//! start-up, and commit batches of changed rows in one transaction each.

pub mod schema;
pub mod wal_prealloc;

use crate::config::Synchronous;
use crate::protocol::{Attempt, AttemptOutcome, JobId, JobState, LeaseId, Priority, WorkerId};
use crate::scheduler::{Job, JobRow};
use rusqlite::{params, Connection, OpenFlags, Row};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use uuid::Uuid;

/// A storage failure, naming the database file and what SQLite said.
#[derive(Debug, thiserror::Error)]
#[error("database {path}: {reason}")]
pub struct StoreError {
    pub path: PathBuf,
    pub reason: String,
}

/// The open database. Owned by exactly one thread (the `Persistence` actor
/// after start-up), so no locking is needed around it.
pub struct JobStore {
    conn: Connection,
    path: PathBuf,
}

const COLUMNS: &str = "id, task_type, payload, priority, sequence, submitted_at, state, attempts, \
    max_attempts, timeout_ms, lease, worker_id, assigned_at, next_retry_at, result, error, \
    idempotency_key, updated_at, finished_at, not_before, last_attempt_number, last_attempt_worker, \
    last_attempt_lease, last_attempt_started_at, last_attempt_ended_at, last_attempt_outcome";

/// WAL pages after which a commit checkpoints (see `JobStore::open`).
const CHECKPOINT_PAGES: u64 = 8_000;

/// The columns of `UPDATE` (same numbers), then those fixed at submission.
const INSERT: &str = "INSERT INTO jobs (id, state, attempts, max_attempts, lease, worker_id, \
    assigned_at, next_retry_at, result, error, updated_at, finished_at, not_before, \
    last_attempt_number, last_attempt_worker, last_attempt_lease, last_attempt_started_at, \
    last_attempt_ended_at, last_attempt_outcome, task_type, payload, priority, sequence, \
    submitted_at, timeout_ms, idempotency_key) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, \
    ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26)";

/// The columns a transition can change; submission fields never do.
const UPDATE: &str = "UPDATE jobs SET state = ?2, attempts = ?3, max_attempts = ?4, lease = ?5, \
    worker_id = ?6, assigned_at = ?7, next_retry_at = ?8, result = ?9, error = ?10, \
    updated_at = ?11, finished_at = ?12, not_before = ?13, last_attempt_number = ?14, \
    last_attempt_worker = ?15, last_attempt_lease = ?16, last_attempt_started_at = ?17, \
    last_attempt_ended_at = ?18, last_attempt_outcome = ?19 WHERE id = ?1";

const UPSERT_ATTEMPT: &str = "INSERT INTO attempts (job_id, number, worker_id, lease, started_at, \
    ended_at, outcome) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
    ON CONFLICT(job_id, number) DO UPDATE SET ended_at = excluded.ended_at, outcome = excluded.outcome";

impl JobStore {
    /// Opens or creates the database (and its directory), checks it is
    /// readable, sets WAL mode and `synchronous`, and migrates the schema.
    pub fn open(path: &Path, synchronous: Synchronous) -> Result<JobStore, StoreError> {
        let fail = |reason: String| StoreError {
            path: path.to_path_buf(),
            reason,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| fail(format!("cannot create directory {}: {e}", dir.display())))?;
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut conn = Connection::open_with_flags(path, flags).map_err(|e| fail(e.to_string()))?;
        // Reading the schema first makes a corrupt or foreign file fail here,
        // before any pragma or migration could write to it.
        conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
            r.get::<_, i64>(0)
        })
        .map_err(|e| fail(e.to_string()))?;
        schema::migrate(&mut conn).map_err(|e| fail(e.to_string()))?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(|e| fail(e.to_string()))?;
        conn.pragma_update(None, "synchronous", synchronous.to_string())
            .map_err(|e| fail(e.to_string()))?;
        // Neither setting changes what is durable when (every commit still
        // fsyncs the WAL under FULL); both cut work on the commit path.
        // The page cache stays at SQLite's default 2 MiB: every commit
        // walks the whole cache (a B-tree split renumbers pages through the
        // lock-byte page, 262145, which defeats SQLite's shortcut for
        // that), so a 32 MiB cache cost up to a fifth of the persistence
        // thread at 200,000 rows (BENCHMARKS.md). Writes touch the newest
        // pages (ids are UUID v7), which a small cache holds.
        conn.pragma_update(None, "cache_size", -2_000)
            .map_err(|e| fail(e.to_string()))?;
        // Checkpoint the WAL every 8,000 pages (default 1,000, ~32 MiB
        // instead of 4 MiB): pages rewritten between checkpoints are copied
        // back to the database once, and the checkpoint's fsyncs are paid
        // 8 times less often. Costs at most that much WAL on disk.
        conn.pragma_update(None, "wal_autocheckpoint", CHECKPOINT_PAGES)
            .map_err(|e| fail(e.to_string()))?;
        Ok(JobStore {
            conn,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Fills the WAL with zeros up to the size it reaches between
    /// checkpoints, so commits overwrite it in place instead of growing it
    /// (see `wal_prealloc`). Returns the bytes added. Changes nothing a
    /// reader sees; on failure the WAL is as it was.
    pub fn preallocate_wal(&self) -> Result<u64, StoreError> {
        let page_size: u64 = self
            .conn
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .map_err(|e| self.error(e))?;
        let wal = wal_prealloc::wal_path(&self.path);
        let target = wal_prealloc::wal_bytes(page_size, CHECKPOINT_PAGES);
        wal_prealloc::preallocate(&wal, target).map_err(|e| StoreError {
            path: self.path.clone(),
            reason: format!("cannot preallocate {}: {e}", wal.display()),
        })
    }

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
        self.stage(rows)?;
        if self.conn.is_autocommit() {
            return Ok(());
        }
        let result = self.conn.execute_batch("COMMIT").map_err(|e| self.error(e));
        if result.is_err() {
            self.rollback();
        }
        result
    }

    /// Abandons the open transaction, if any.
    fn rollback(&mut self) {
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
        let fail = |reason: String| StoreError {
            path: path.clone(),
            reason,
        };
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
        let mut attempts = statement(UPSERT_ATTEMPT)?;
        for row in rows {
            write_job(&mut update, &mut insert, row)
                .map_err(|e| fail(format!("writing job {}: {e}", row.id)))?;
            // The last attempt is stored in the job's own row; the ones
            // before it (closed for good) get a row of their own here.
            let earlier = row.changed_attempts.len().saturating_sub(1);
            for attempt in &row.changed_attempts[..earlier] {
                write_attempt(&mut attempts, row.id, attempt)
                    .map_err(|e| fail(format!("writing attempt of job {}: {e}", row.id)))?;
            }
        }
        Ok(())
    }

    fn error(&self, e: rusqlite::Error) -> StoreError {
        StoreError {
            path: self.path.clone(),
            reason: e.to_string(),
        }
    }
}

/// Updates the mutable columns of a stored job, or inserts the whole row
/// if it is not stored yet (a new submission).
fn write_job(
    update: &mut rusqlite::CachedStatement<'_>,
    insert: &mut rusqlite::CachedStatement<'_>,
    job: &JobRow,
) -> rusqlite::Result<()> {
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
    if update.execute(changes)? == 0 {
        let submission = params![
            job.task_type,
            &job.payload[..],
            job.priority.level(),
            job.sequence as i64,
            job.submitted_at,
            job.timeout_ms as i64,
            job.idempotency_key,
        ];
        insert.execute(rusqlite::params_from_iter(
            changes.iter().chain(submission.iter()),
        ))?;
    }
    Ok(())
}

fn write_attempt(
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
fn outcome_text(outcome: &AttemptOutcome) -> Option<String> {
    serde_json::to_string(outcome).ok()
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

fn conversion(column: usize, reason: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(column, rusqlite::types::Type::Text, reason.into())
}

fn read_row(row: &Row<'_>) -> rusqlite::Result<Job> {
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
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A stored-looking job: `sequence` also names its idempotency key.
    pub(crate) fn job(sequence: u64, state: JobState) -> Job {
        let lease = LeaseId::new_random();
        let mut job = Job {
            id: JobId::mint(),
            task_type: "echo".into(),
            payload: vec![0x80].into(),
            priority: Priority::High,
            sequence,
            submitted_at: 10,
            state,
            attempts: 1,
            max_attempts: 3,
            timeout_ms: 500,
            lease: Some(lease),
            worker_id: Some(WorkerId("w".into())),
            assigned_at: Some(11),
            next_retry_at: None,
            result: Some(b"r".to_vec().into()),
            error: None,
            idempotency_key: Some(format!("key-{sequence}")),
            not_before: Some(5),
            updated_at: 12,
            finished_at: None,
            history: vec![Attempt {
                number: 1,
                worker_id: WorkerId("w".into()),
                lease,
                started_at: 11,
                ended_at: None,
                outcome: None,
            }],
            progress: None,
        };
        // Only a RUNNING job has an open attempt.
        if state != JobState::Running {
            job.end_attempt(AttemptOutcome::Failed { error: "e".into() }, 12);
        }
        job
    }

    /// `job(sequence, state)` as the row of its first write.
    pub(crate) fn row(sequence: u64, state: JobState) -> JobRow {
        JobRow::whole(&job(sequence, state))
    }

    /// The rows of a first write of `jobs`, every attempt included.
    fn rows(jobs: &[&Job]) -> Vec<JobRow> {
        jobs.iter().map(|job| JobRow::whole(job)).collect()
    }

    #[test]
    fn committed_rows_load_back_identically() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("sub/t.db");
        let mut store = JobStore::open(&path, Synchronous::Full).expect("open");
        let mut a = job(1, JobState::Running);
        let b = job(2, JobState::Queued);
        store.commit(&rows(&[&a, &b])).expect("commit");
        a.state = JobState::Succeeded;
        a.finished_at = Some(20);
        a.end_attempt(AttemptOutcome::Succeeded, 20);
        store.commit(&rows(&[&a])).expect("update");
        drop(store);
        let store = JobStore::open(&path, Synchronous::Full).expect("reopen");
        let mut loaded = store.load_all().expect("load");
        loaded.sort_by_key(|j| j.sequence);
        assert_eq!(loaded, vec![a, b]);
    }

    #[test]
    fn staged_rows_are_durable_only_once_committed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("t.db");
        let mut store = JobStore::open(&path, Synchronous::Full).expect("open");
        let (a, b, c) = (
            job(1, JobState::Queued),
            job(2, JobState::Queued),
            job(3, JobState::Queued),
        );
        store.commit(&rows(&[&a])).expect("commit");
        store.stage(&rows(&[&b])).expect("stage");
        let other = JobStore::open(&path, Synchronous::Full).expect("second connection");
        assert_eq!(
            other.load_all().expect("load"),
            vec![a.clone()],
            "staged is not visible"
        );
        store.commit(&rows(&[&c])).expect("commit");
        assert_eq!(
            other.load_all().expect("load").len(),
            3,
            "the commit carries b and c"
        );
        store.stage(&[row(4, JobState::Queued)]).expect("stage");
        drop(store);
        drop(other);
        let mut loaded = JobStore::open(&path, Synchronous::Full)
            .expect("reopen")
            .load_all()
            .expect("load");
        loaded.sort_by_key(|j| j.sequence);
        assert_eq!(
            loaded,
            vec![a, b, c],
            "rows staged but never committed are lost"
        );
    }

    #[test]
    fn a_preallocated_wal_keeps_every_commit_across_a_crash_and_a_restart() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("t.db");
        let mut store = JobStore::open(&path, Synchronous::Full).expect("open");
        let target = store.preallocate_wal().expect("preallocate");
        assert!(target > 32 << 20, "{target} bytes");
        let (a, b) = (job(1, JobState::Queued), job(2, JobState::Queued));
        store.commit(&rows(&[&a])).expect("commit");
        // A crash: the files as they are now, the WAL never checkpointed.
        let crashed = dir.path().join("crashed");
        std::fs::create_dir(&crashed).expect("dir");
        for name in ["t.db", "t.db-wal"] {
            std::fs::copy(dir.path().join(name), crashed.join(name)).expect("copy");
        }
        drop(store);

        let copy = crashed.join("t.db");
        let mut store = JobStore::open(&copy, Synchronous::Full).expect("recover");
        assert_eq!(store.load_all().expect("load"), vec![a.clone()]);
        assert_eq!(store.preallocate_wal().expect("already full"), 0);
        store.commit(&rows(&[&b])).expect("commit");
        drop(store);
        let mut loaded = JobStore::open(&copy, Synchronous::Full)
            .expect("reopen")
            .load_all()
            .expect("load");
        loaded.sort_by_key(|j| j.sequence);
        assert_eq!(loaded, vec![a, b]);
    }

    #[test]
    fn a_failed_stage_rolls_back_everything_staged_since_the_last_commit() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("t.db");
        let mut store = JobStore::open(&path, Synchronous::Full).expect("open");
        let a = job(1, JobState::Queued);
        store.commit(&rows(&[&a])).expect("commit");
        store.stage(&[row(2, JobState::Queued)]).expect("stage");
        let mut clash = row(3, JobState::Queued);
        clash.idempotency_key = a.idempotency_key.clone();
        let err = store
            .stage(&[clash])
            .expect_err("a second job with a's key");
        assert!(err.reason.contains("UNIQUE"), "{err}");
        let c = job(4, JobState::Queued);
        store.commit(&rows(&[&c])).expect("a new transaction");
        let mut loaded = store.load_all().expect("load");
        loaded.sort_by_key(|j| j.sequence);
        assert_eq!(loaded, vec![a, c], "job 2 went with the failed stage");
    }

    #[test]
    fn a_row_carrying_only_its_changed_attempt_keeps_the_stored_ones() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("t.db");
        let mut store = JobStore::open(&path, Synchronous::Full).expect("open");
        let mut full = job(1, JobState::Running);
        full.end_attempt(AttemptOutcome::Failed { error: "e".into() }, 15);
        full.history.push(Attempt {
            number: 2,
            started_at: 16,
            ..full.history[0].clone()
        });
        store.commit(&rows(&[&full])).expect("commit");
        let changed_only = succeed_second_attempt(&mut full);
        store.commit(&[changed_only]).expect("update");
        let loaded = store.load_all().expect("load");
        assert_eq!(loaded, vec![full]);
    }

    /// Ends `job`'s second (last) attempt with success; returns the row as
    /// `take_dirty` would send it: the first attempt, stored, left out.
    fn succeed_second_attempt(job: &mut Job) -> JobRow {
        job.end_attempt(AttemptOutcome::Succeeded, 20);
        job.state = JobState::Succeeded;
        let row = JobRow::with_attempts_from(job, 1);
        assert_eq!(row.changed_attempts.len(), 1);
        row
    }

    fn attempt_rows(store: &JobStore) -> i64 {
        store
            .conn
            .query_row("SELECT count(*) FROM attempts", [], |r| r.get(0))
            .expect("count")
    }

    #[test]
    fn the_last_attempt_lives_in_the_job_row_until_a_later_one_starts() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("t.db");
        let mut store = JobStore::open(&path, Synchronous::Full).expect("open");
        let mut running = job(1, JobState::Running);
        store.commit(&rows(&[&running])).expect("commit");
        assert_eq!(
            attempt_rows(&store),
            0,
            "the only attempt is in the job row"
        );
        running.end_attempt(AttemptOutcome::Failed { error: "e".into() }, 15);
        store.commit(&rows(&[&running])).expect("end attempt");
        assert_eq!(attempt_rows(&store), 0, "still the last attempt");
        assert_eq!(store.load_all().expect("load"), vec![running.clone()]);
        running.history.push(Attempt {
            number: 2,
            started_at: 16,
            lease: LeaseId::new_random(),
            ..running.history[0].clone()
        });
        store.commit(&rows(&[&running])).expect("second attempt");
        assert_eq!(attempt_rows(&store), 1, "the first attempt got its own row");
        assert_eq!(store.load_all().expect("load"), vec![running]);
    }

    #[test]
    fn a_version_2_history_survives_the_migration_and_its_open_attempt_closes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("t.db");
        let mut running = job(1, JobState::Running);
        running.end_attempt(AttemptOutcome::Failed { error: "e".into() }, 15);
        running.history.push(Attempt {
            number: 2,
            started_at: 16,
            ..running.history[0].clone()
        });
        {
            // A version-2 database: every attempt, the open one too, in `attempts`.
            let mut conn = Connection::open(&path).expect("create");
            schema::migrate_to(&mut conn, 2).expect("v2");
            conn.execute(
                "INSERT INTO jobs (id, task_type, payload, priority, sequence, submitted_at, \
                 state, attempts, max_attempts, timeout_ms, lease, worker_id, assigned_at, \
                 idempotency_key, not_before, result, updated_at) \
                 VALUES (?1, 'echo', x'80', 2, 1, 10, 'RUNNING', 1, 3, 500, ?2, 'w', 11, \
                 'key-1', 5, x'72', 12)",
                params![running.id.to_string(), running.lease.map(|l| l.to_string())],
            )
            .expect("v2 job");
            let mut insert = conn.prepare_cached(UPSERT_ATTEMPT).expect("prepare");
            for attempt in &running.history {
                write_attempt(&mut insert, running.id, attempt).expect("v2 attempt");
            }
        }
        let mut store = JobStore::open(&path, Synchronous::Full).expect("migrate");
        assert_eq!(store.load_all().expect("load"), vec![running.clone()]);
        let changed_only = succeed_second_attempt(&mut running);
        store.commit(&[changed_only]).expect("close");
        assert_eq!(
            store.load_all().expect("load"),
            vec![running],
            "the row's closed copy wins over the stored open one"
        );
    }

    #[test]
    fn newer_schema_is_refused_untouched() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("t.db");
        let conn = Connection::open(&path).expect("create");
        conn.pragma_update(None, "user_version", 99)
            .expect("set version");
        drop(conn);
        let before = std::fs::read(&path).expect("read");
        let err = JobStore::open(&path, Synchronous::Full)
            .err()
            .expect("refused");
        assert!(err.to_string().contains("newer than this binary"), "{err}");
        assert!(err.to_string().contains("t.db"), "{err}");
        assert_eq!(std::fs::read(&path).expect("read"), before);
    }

    #[test]
    fn garbage_file_is_refused_naming_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("garbage.db");
        std::fs::write(&path, vec![0x5a; 8192]).expect("write");
        let err = JobStore::open(&path, Synchronous::Full)
            .err()
            .expect("refused");
        assert!(err.to_string().contains("garbage.db"), "{err}");
        assert_eq!(std::fs::read(&path).expect("read"), vec![0x5a; 8192]);
    }
}
