//! The store against real database files: rows round-trip, staging and
//! commits, crash copies, rollback, attempts stored apart from the job
//! row, migration from version 2, and refusal of foreign files.

use super::write::{write_attempt, UPSERT_ATTEMPT};
use super::*;
use crate::scheduler::{Job, JobRow};
use rusqlite::{params, Connection};
use taskyard_protocol::{Attempt, AttemptOutcome, JobId, JobState, LeaseId, Priority, WorkerId};

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
        concurrency_key: None,
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
    let other = JobStore::open_beside_owner(&path).expect("second connection");
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
fn rows_staged_before_a_failed_schedule_write_fail_their_batch_and_are_not_stored() {
    use crate::scheduler::schedule::ScheduleWrite;
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("t.db");
    let mut store = JobStore::open(&path, Synchronous::Full).expect("open");
    let a = job(1, JobState::Queued);
    store.commit(&rows(&[&a])).expect("commit");
    // A schedule write that fails after rows of the next batch are staged.
    store
        .conn
        .execute_batch("ALTER TABLE schedules RENAME TO schedules_gone")
        .expect("rename");
    store.stage(&[row(2, JobState::Queued)]).expect("stage");
    store
        .write_schedule(&ScheduleWrite::Delete("nightly".into()))
        .expect_err("no schedules table");
    store.stage(&[row(3, JobState::Queued)]).expect("stage");
    let err = store
        .commit(&[row(4, JobState::Queued)])
        .expect_err("its staged rows are gone");
    assert!(err.reason.contains("schedule write"), "{err}");
    let mut loaded = store.load_all().expect("load");
    loaded.sort_by_key(|j| j.sequence);
    assert_eq!(loaded, vec![a], "nothing of the failed batch is stored");
    // The batch sent again commits whole.
    let again: Vec<JobRow> = (2..=4).map(|i| row(i, JobState::Queued)).collect();
    store.commit(&again).expect("sent again");
    assert_eq!(store.load_all().expect("load").len(), 4);
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

/// Rows in the `attempts` table.
pub(crate) fn attempt_rows(store: &JobStore) -> i64 {
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

/// Commits `jobs` to a store whose schema is older than version 5 (no
/// `terminal_counts`, which a write keeps, nor version 9's
/// `concurrency_key`): the table and the column are there only for the
/// write, as if the rows had been written by that older version.
pub(crate) fn commit_to_old_schema(store: &mut JobStore, jobs: &[crate::scheduler::Job]) {
    let rows: Vec<crate::scheduler::JobRow> =
        jobs.iter().map(crate::scheduler::JobRow::whole).collect();
    store
        .conn
        .execute_batch(
            "CREATE TABLE terminal_counts (task_type TEXT NOT NULL, state TEXT NOT NULL, \
             jobs INTEGER NOT NULL, PRIMARY KEY (task_type, state)) WITHOUT ROWID; \
             ALTER TABLE jobs ADD COLUMN concurrency_key TEXT;",
        )
        .expect("a table and a column for the write");
    store.commit(&rows).expect("commit");
    store
        .conn
        .execute_batch("DROP TABLE terminal_counts; ALTER TABLE jobs DROP COLUMN concurrency_key;")
        .expect("dropped again");
}
