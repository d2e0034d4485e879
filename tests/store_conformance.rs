//! One contract, two backends: every case here runs against a real SQLite
//! file and a real (throwaway) PostgreSQL database through `Store` and
//! `StoredJobReader` only. Migrations, batch commit, staging, what a failed
//! batch leaves, recovery, expiry, history reads, and (PostgreSQL) the
//! fence.

mod common;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use taskyard::config::Synchronous;
use taskyard::protocol::{
    Attempt, AttemptOutcome, IdPrefix, JobId, JobState, LeaseId, Priority, WorkerId,
};
use taskyard::protocol::{Overlap, ScheduleSpec};
use taskyard::scheduler::schedule::{ScheduleWrite, SkippedCounts, StoredSchedule};
use taskyard::scheduler::{Job, JobRow};
use taskyard::store::postgres::throwaway::ThrowawayPostgres;
use taskyard::store::postgres::{PgTarget, PostgresReader, PostgresStore};
use taskyard::store::{
    ExpiryCutoffs, JobReader, JobStore, PageFilter, ReadBudget, Store, StoreError, StoredJobReader,
    StoredSummary,
};

/// Where a case's data lives: a fresh SQLite file, or a fresh database on
/// a throwaway cluster shared by the cases running at the same time.
enum Backend {
    Sqlite {
        _dir: tempfile::TempDir,
        path: PathBuf,
    },
    Postgres {
        cluster: Arc<ThrowawayPostgres>,
        url: String,
    },
}

impl Backend {
    fn sqlite() -> Backend {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("conformance.db");
        Backend::Sqlite { _dir: dir, path }
    }

    /// `None` (the case skips) without PostgreSQL installed.
    fn postgres() -> Option<Backend> {
        static SHARED: Mutex<Weak<ThrowawayPostgres>> = Mutex::new(Weak::new());
        let cluster = {
            let mut shared = SHARED.lock().unwrap_or_else(|p| p.into_inner());
            match shared.upgrade() {
                Some(cluster) => cluster,
                None => {
                    let cluster = Arc::new(common::postgres::start()?);
                    *shared = Arc::downgrade(&cluster);
                    cluster
                }
            }
        };
        let name = format!("t_{}", uuid::Uuid::new_v4().simple());
        let url = cluster.create_database(&name).expect("create database");
        Some(Backend::Postgres { cluster, url })
    }

    fn open(&self) -> Result<Box<dyn Store>, StoreError> {
        Ok(match self {
            Backend::Sqlite { path, .. } => Box::new(JobStore::open(path, Synchronous::Full)?),
            Backend::Postgres { url, .. } => Box::new(PostgresStore::open(url)?),
        })
    }

    fn store(&self) -> Box<dyn Store> {
        self.open().expect("open store")
    }

    fn reader(&self) -> Box<dyn StoredJobReader> {
        match self {
            Backend::Sqlite { path, .. } => Box::new(JobReader::open(path).expect("reader")),
            Backend::Postgres { url, .. } => {
                Box::new(PostgresReader::open(PgTarget::parse(url).expect("url")).expect("reader"))
            }
        }
    }

    fn current_version(&self) -> i64 {
        match self {
            Backend::Sqlite { .. } => taskyard::store::schema::SCHEMA_VERSION,
            Backend::Postgres { .. } => taskyard::store::postgres::schema::SCHEMA_VERSION,
        }
    }

    /// One number from `sql` (SQLite spelling; `taskyard.` added for
    /// PostgreSQL's tables).
    fn number(&self, sqlite: &str, postgres: &str) -> i64 {
        match self {
            Backend::Sqlite { path, .. } => rusqlite::Connection::open(path)
                .expect("open")
                .query_row(sqlite, [], |r| r.get(0))
                .expect(sqlite),
            Backend::Postgres { url, .. } => self
                .pg(url)
                .query_one(postgres, &[])
                .expect(postgres)
                .get(0),
        }
    }

    fn execute(&self, sqlite: &str, postgres: &str) {
        match self {
            Backend::Sqlite { path, .. } => {
                rusqlite::Connection::open(path)
                    .expect("open")
                    .execute_batch(sqlite)
                    .expect(sqlite);
            }
            Backend::Postgres { url, .. } => self.pg(url).batch_execute(postgres).expect(postgres),
        }
    }

    fn pg(&self, url: &str) -> postgres::Client {
        postgres::Client::connect(url, postgres::NoTls).expect("connect")
    }

    fn schema_version(&self) -> i64 {
        self.number(
            "PRAGMA user_version",
            "SELECT version FROM taskyard.schema_version",
        )
    }

    fn job_count(&self) -> i64 {
        self.number(
            "SELECT count(*) FROM jobs",
            "SELECT count(*) FROM taskyard.jobs",
        )
    }

    fn attempt_rows(&self) -> i64 {
        self.number(
            "SELECT count(*) FROM attempts",
            "SELECT count(*) FROM taskyard.attempts",
        )
    }
}

/// A job as a coordinator would write it: `sequence` names its
/// idempotency key; RUNNING has an open attempt, other states a closed one.
fn job(sequence: u64, state: JobState) -> Job {
    let lease = LeaseId::new_random();
    let mut job = Job {
        id: JobId::mint(),
        task_type: "echo".into(),
        payload: vec![0x80, 1, 2].into(),
        priority: Priority::High,
        sequence,
        submitted_at: 10 + sequence as i64,
        state,
        attempts: 1,
        max_attempts: 3,
        timeout_ms: 500,
        lease: Some(lease),
        worker_id: Some(WorkerId("w".into())),
        assigned_at: Some(11),
        next_retry_at: None,
        result: None,
        error: None,
        idempotency_key: Some(format!("key-{sequence}")),
        not_before: Some(5),
        updated_at: 12,
        finished_at: state.is_terminal().then_some(100 + sequence as i64),
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
    match state {
        JobState::Running => {}
        JobState::Succeeded => {
            job.result = Some(b"done".to_vec().into());
            job.end_attempt(AttemptOutcome::Succeeded, 20);
        }
        _ => job.end_attempt(AttemptOutcome::Failed { error: "e".into() }, 20),
    }
    job
}

fn rows(jobs: &[&Job]) -> Vec<JobRow> {
    jobs.iter().map(|j| JobRow::whole(j)).collect()
}

fn sorted(mut jobs: Vec<Job>) -> Vec<Job> {
    jobs.sort_by_key(|j| j.sequence);
    jobs
}

fn count_of(stored: &taskyard::scheduler::Stored, state: JobState) -> u64 {
    stored
        .counts
        .iter()
        .filter(|(t, s, _)| t == "echo" && *s == state)
        .map(|(_, _, n)| n)
        .sum()
}

fn everything() -> PageFilter {
    PageFilter {
        limit: 1000,
        ..PageFilter::default()
    }
}

// ---- the cases ----

fn migrations_create_then_reopen_unchanged(b: &Backend) {
    drop(b.store());
    assert_eq!(
        b.schema_version(),
        b.current_version(),
        "fresh database migrated"
    );
    let a = job(1, JobState::Queued);
    b.store().commit(&rows(&[&a])).expect("commit");
    drop(b.store());
    assert_eq!(
        b.schema_version(),
        b.current_version(),
        "re-open keeps the version"
    );
    assert_eq!(b.job_count(), 1, "re-open keeps the rows");
}

fn a_newer_schema_is_refused_untouched(b: &Backend) {
    let a = job(1, JobState::Queued);
    b.store().commit(&rows(&[&a])).expect("commit");
    let newer = b.current_version() + 1;
    b.execute(
        &format!("PRAGMA user_version = {newer}"),
        &format!("UPDATE taskyard.schema_version SET version = {newer}"),
    );
    let err = b.open().err().expect("a newer schema is refused");
    assert!(err.to_string().contains("newer"), "{err}");
    assert!(!err.is_fenced());
    assert_eq!(b.schema_version(), newer, "the version is untouched");
    assert_eq!(b.job_count(), 1, "the rows are untouched");
}

fn a_batch_is_durable_after_commit_and_invisible_before(b: &Backend) {
    let mut store = b.store();
    let mut reader = b.reader();
    let (x, y) = (job(1, JobState::Queued), job(2, JobState::Running));
    store.stage(&rows(&[&x])).expect("stage");
    assert_eq!(
        page(&mut *reader, &everything()).expect("read"),
        vec![],
        "nothing before commit"
    );
    store.commit(&rows(&[&y])).expect("commit");
    let seen = sorted(page(&mut *reader, &everything()).expect("read"));
    assert_eq!(
        seen,
        vec![x.clone(), y.clone()],
        "staged and committed rows, read back"
    );
    drop(store);
    let stored = b.store().load_for_recovery(10).expect("load");
    assert_eq!(
        sorted(stored.jobs),
        vec![x, y],
        "durable: a new connection loads them"
    );
}

fn a_job_written_twice_in_a_batch_keeps_its_later_row(b: &Backend) {
    let mut store = b.store();
    let mut a = job(1, JobState::Queued);
    let first = JobRow::whole(&a);
    a.state = JobState::Cancelled;
    a.finished_at = Some(50);
    let second = JobRow::whole(&a);
    store.commit(&[first, second]).expect("commit");
    let stored = store.load_for_recovery(10).expect("load");
    assert_eq!(stored.jobs, vec![a.clone()]);
    assert_eq!(count_of(&stored, JobState::Cancelled), 1);
    // And an update of a stored job twice in one batch.
    a.state = JobState::Queued;
    a.finished_at = None;
    let requeued = JobRow::whole(&a);
    a.state = JobState::Succeeded;
    a.finished_at = Some(60);
    store
        .commit(&[requeued, JobRow::whole(&a)])
        .expect("commit");
    drop(store);
    let stored = b.store().load_for_recovery(10).expect("load");
    assert_eq!(stored.jobs, vec![a]);
    assert_eq!(count_of(&stored, JobState::Cancelled), 0);
    assert_eq!(count_of(&stored, JobState::Succeeded), 1);
}

fn a_failed_batch_leaves_nothing(b: &Backend) {
    let mut store = b.store();
    let first = job(1, JobState::Queued);
    let mut clash = job(2, JobState::Queued);
    clash.idempotency_key = first.idempotency_key.clone();
    store.stage(&rows(&[&first])).expect("stage");
    let err = store.commit(&rows(&[&clash])).expect_err("duplicate key");
    assert!(!err.is_fenced(), "{err}");
    assert!(
        err.is_refused(),
        "a constraint violated is refused for good: {err}"
    );
    assert_eq!(
        b.job_count(),
        0,
        "neither the staged nor the committed row is stored"
    );
    // Staging that fails fails the batch too (at once, or at its commit
    // when the backend writes staged rows then), and the next batch is fresh.
    let err = match store.stage(&rows(&[&first, &clash])) {
        Err(e) => e,
        Ok(()) => store.commit(&[]).expect_err("duplicate key, at the commit"),
    };
    assert!(!err.is_fenced(), "{err}");
    let next = job(3, JobState::Queued);
    store.commit(&rows(&[&next])).expect("a fresh transaction");
    drop(store);
    let stored = b.store().load_for_recovery(10).expect("load");
    assert_eq!(stored.jobs, vec![next], "only the later batch is stored");
    let keys: Vec<&str> = stored.idempotency.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, vec!["key-3"]);
}

fn recovery_loads_active_window_keys_counts_newest_and_attempts(b: &Backend) {
    let mut store = b.store();
    let queued = job(1, JobState::Queued);
    let running = job(2, JobState::Running);
    let old = job(3, JobState::Succeeded);
    let recent = job(4, JobState::Failed);
    store
        .commit(&rows(&[&queued, &running, &old, &recent]))
        .expect("commit");
    // A job retried twice: its earlier attempts live apart from its row.
    let mut retried = job(5, JobState::Running);
    store.commit(&rows(&[&retried])).expect("commit");
    for number in 2..=3 {
        retried.end_attempt(
            AttemptOutcome::Failed {
                error: "again".into(),
            },
            30,
        );
        let lease = LeaseId::new_random();
        retried.history.push(Attempt {
            number,
            worker_id: WorkerId(format!("w{number}")),
            lease,
            started_at: 30 + number as i64,
            ended_at: None,
            outcome: None,
        });
        retried.attempts = number;
        retried.lease = Some(lease);
        store
            .commit(&[JobRow::with_attempts_from(&retried, number as usize - 2)])
            .expect("commit attempt");
    }
    // A finished job requeued leaves the finished count.
    let mut requeued = job(6, JobState::Cancelled);
    store.commit(&rows(&[&requeued])).expect("commit");
    requeued.state = JobState::Queued;
    requeued.finished_at = None;
    store.commit(&rows(&[&requeued])).expect("requeue");
    drop(store);

    let stored = b.store().load_for_recovery(1).expect("load");
    let expected = sorted(vec![
        queued.clone(),
        running.clone(),
        retried.clone(),
        requeued.clone(),
    ]);
    let (finished, active): (Vec<Job>, Vec<Job>) = stored
        .jobs
        .iter()
        .cloned()
        .partition(|j| j.state.is_terminal());
    assert_eq!(
        sorted(active),
        expected,
        "the active set, each with its history"
    );
    assert_eq!(
        finished,
        vec![recent.clone()],
        "the window: the newest finish only"
    );
    let loaded_retried = stored
        .jobs
        .iter()
        .find(|j| j.id == retried.id)
        .expect("retried");
    assert_eq!(loaded_retried.history.len(), 3, "every attempt");
    let mut keys: Vec<String> = stored.idempotency.iter().map(|(k, _)| k.clone()).collect();
    keys.sort();
    assert_eq!(
        keys,
        (1..=6).map(|n| format!("key-{n}")).collect::<Vec<_>>()
    );
    assert_eq!(
        count_of(&stored, JobState::Succeeded),
        1,
        "counted, not loaded"
    );
    assert_eq!(count_of(&stored, JobState::Failed), 1);
    assert_eq!(
        count_of(&stored, JobState::Cancelled),
        0,
        "requeued: left the count"
    );
    assert_eq!(count_of(&stored, JobState::Queued), 2);
    assert_eq!(count_of(&stored, JobState::Running), 2);
    assert_eq!(stored.newest, Some((6, 16)));
    assert_eq!(
        b.attempt_rows(),
        2,
        "the retried job's two earlier attempts"
    );
}

fn expiry_deletes_old_finished_jobs_with_attempts_and_counts(b: &Backend) {
    let mut store = b.store();
    let done = job(1, JobState::Succeeded); // finished at 101
    let failed = job(2, JobState::Failed); // finished at 102
    let fresh = job(3, JobState::Succeeded); // finished at 103
    let active = job(4, JobState::Queued);
    let mut retried = job(5, JobState::Running);
    store
        .commit(&rows(&[&done, &failed, &fresh, &active]))
        .expect("commit");
    store.commit(&rows(&[&retried])).expect("commit");
    retried.end_attempt(AttemptOutcome::Failed { error: "x".into() }, 30);
    let lease = LeaseId::new_random();
    retried.history.push(Attempt {
        number: 2,
        worker_id: WorkerId("w".into()),
        lease,
        started_at: 31,
        ended_at: Some(40),
        outcome: Some(AttemptOutcome::Succeeded),
    });
    retried.state = JobState::Succeeded;
    retried.finished_at = Some(90);
    store
        .commit(&[JobRow::with_attempts_from(&retried, 0)])
        .expect("commit");
    assert_eq!(b.attempt_rows(), 1);

    let cutoffs = ExpiryCutoffs {
        finished_before: 102,
        failed_before: 200,
    };
    // Not while rows of a batch are staged.
    store
        .stage(&rows(&[&job(6, JobState::Queued)]))
        .expect("stage");
    assert_eq!(store.expire(cutoffs, 10).expect("expire"), None);
    store.commit(&[]).expect("commit the staged row");

    let expired = store.expire(cutoffs, 10).expect("expire").expect("ran");
    let mut ids: Vec<JobId> = expired.iter().map(|e| e.id).collect();
    ids.sort();
    let mut want = vec![done.id, failed.id, retried.id];
    want.sort();
    assert_eq!(ids, want, "SUCCEEDED before 102 and FAILED before 200");
    let keys: Vec<Option<String>> = expired
        .iter()
        .filter(|e| e.id == done.id)
        .map(|e| e.idempotency_key.clone())
        .collect();
    assert_eq!(keys, vec![Some("key-1".to_string())]);
    assert_eq!(b.attempt_rows(), 0, "attempts deleted with their job");
    drop(store);
    let stored = b.store().load_for_recovery(10).expect("load");
    assert_eq!(
        count_of(&stored, JobState::Succeeded),
        1,
        "only the fresh one"
    );
    assert_eq!(count_of(&stored, JobState::Failed), 0);
    assert_eq!(b.job_count(), 3);
    let again = b.store().expire(cutoffs, 10).expect("expire").expect("ran");
    assert_eq!(again, vec![], "nothing else has expired");
}

fn history_reads_jobs_pages_and_summaries(b: &Backend) {
    let mut store = b.store();
    let a = job(1, JobState::Succeeded);
    let c = job(2, JobState::Failed);
    let d = job(3, JobState::Queued);
    store.commit(&rows(&[&a, &c, &d])).expect("commit");
    let mut reader = b.reader();
    assert_eq!(reader.job(a.id).expect("job"), Some(a.clone()));
    assert_eq!(reader.job(JobId::mint()).expect("job"), None);
    let newest = page(&mut *reader, &everything()).expect("page");
    assert_eq!(
        newest,
        vec![d.clone(), c.clone(), a.clone()],
        "newest first"
    );
    let failed = page(
        &mut *reader,
        &PageFilter {
            state: Some(JobState::Failed),
            ..everything()
        },
    )
    .expect("page");
    assert_eq!(failed, vec![c.clone()]);
    let after = page(
        &mut *reader,
        &PageFilter {
            before: Some(d.order_key()),
            limit: 1,
            ..everything()
        },
    )
    .expect("page");
    assert_eq!(after, vec![c.clone()], "after a cursor, limited");
    let finished = page(
        &mut *reader,
        &PageFilter {
            finished_by: Some(101),
            ..everything()
        },
    )
    .expect("page");
    assert_eq!(finished, vec![a.clone()]);
    let summaries = summaries(&mut *reader, &everything()).expect("summaries");
    let summary = summaries
        .iter()
        .find(|s| s.job.id == a.id)
        .expect("summary");
    assert_eq!(summary.payload_bytes, 3);
    assert_eq!(summary.result_bytes, Some(4));
    assert!(summary.job.payload.is_empty(), "no payload bytes read");
}

fn named_finished_jobs_are_deleted_with_attempts_and_counts(b: &Backend) {
    let mut store = b.store();
    let done = job(1, JobState::Succeeded);
    let failed = job(2, JobState::Failed);
    let active = job(3, JobState::Queued);
    store
        .commit(&rows(&[&done, &failed, &active]))
        .expect("commit");
    store
        .stage(&rows(&[&job(4, JobState::Queued)]))
        .expect("stage");
    let named = [done.id, failed.id, active.id, JobId::mint()];
    assert_eq!(
        store.delete_finished(&named).expect("delete"),
        None,
        "not while rows are staged"
    );
    store.commit(&[]).expect("commit the staged row");
    let deleted = store.delete_finished(&named).expect("delete").expect("ran");
    let mut ids: Vec<JobId> = deleted.iter().map(|e| e.id).collect();
    ids.sort();
    let mut want = vec![done.id, failed.id];
    want.sort();
    assert_eq!(
        ids, want,
        "the finished ones of those named; not the QUEUED one"
    );
    let mut reader = b.reader();
    assert_eq!(reader.job(done.id).expect("read"), None);
    assert!(reader.job(active.id).expect("read").is_some());
    assert_eq!(store.delete_finished(&[]).expect("delete"), Some(vec![]));
    drop(store);
    let stored = b.store().load_for_recovery(10).expect("load");
    assert_eq!(count_of(&stored, JobState::Succeeded), 0);
    assert_eq!(count_of(&stored, JobState::Failed), 0);
    assert_eq!(count_of(&stored, JobState::Queued), 2);
}

fn history_pages_filter_by_priority_and_id_prefix_in_either_order(b: &Backend) {
    let mut store = b.store();
    let mut low = job(1, JobState::Failed);
    low.priority = Priority::Low;
    let high = job(2, JobState::Failed);
    let other = job(3, JobState::Succeeded);
    store.commit(&rows(&[&low, &high, &other])).expect("commit");
    let mut reader = b.reader();
    let oldest = page(
        &mut *reader,
        &PageFilter {
            oldest_first: true,
            ..everything()
        },
    )
    .expect("page");
    let order: Vec<u64> = oldest.iter().map(|j| j.sequence).collect();
    assert_eq!(order, vec![1, 2, 3], "oldest first");
    let after = page(
        &mut *reader,
        &PageFilter {
            oldest_first: true,
            before: Some(low.order_key()),
            limit: 1,
            ..everything()
        },
    )
    .expect("page");
    assert_eq!(
        after,
        vec![high.clone()],
        "a cursor resumes towards newer jobs"
    );
    let by_priority = page(
        &mut *reader,
        &PageFilter {
            priority: Some(Priority::Low),
            ..everything()
        },
    )
    .expect("page");
    assert_eq!(by_priority, vec![low.clone()]);
    let text = other.id.to_string();
    let by_prefix = summaries(
        &mut *reader,
        &PageFilter {
            id_prefix: Some(IdPrefix::parse(&text[..30]).expect("prefix")),
            ..everything()
        },
    )
    .expect("summaries");
    let found: Vec<JobId> = by_prefix.iter().map(|s| s.job.id).collect();
    assert_eq!(found, vec![other.id]);
    let none = page(
        &mut *reader,
        &PageFilter {
            id_prefix: Some(IdPrefix::parse("ffffffff").expect("prefix")),
            ..everything()
        },
    )
    .expect("page");
    assert!(none.is_empty());
}

fn nightly(updated_at: i64) -> StoredSchedule {
    StoredSchedule {
        spec: ScheduleSpec {
            cron: Some("0 3 * * *".into()),
            tz: Some("Europe/Berlin".into()),
            priority: Priority::High,
            max_attempts: Some(2),
            timeout_ms: Some(1000),
            overlap: Overlap::BufferOne,
            catchup_window_ms: Some(60_000),
            jitter_ms: 5,
            end_at: Some(9_000_000_000_000),
            ..ScheduleSpec::new("nightly", "echo", vec![0x80])
        },
        last_slot: None,
        updated_at,
        fired: 0,
        skipped: [0, 0],
    }
}

/// A schedule is stored whole and read back after a reopen; a job whose
/// key names one of its slots moves its `last_slot` and its fired count
/// with the job's own commit (never backwards, and not for a failed batch
/// or a trigger's key); a rewrite keeps the newest slot and the count; a
/// delete removes it.
fn schedules_are_stored_and_their_slots_move_with_their_jobs(b: &Backend) {
    let mut store = b.store();
    store
        .write_schedule(&ScheduleWrite::Put(Box::new(nightly(7))))
        .expect("put");
    let mut fired = job(1, JobState::Queued);
    fired.idempotency_key = Some("schedule:nightly:2026-12-05T02:00:00Z".into());
    let mut older = job(2, JobState::Queued);
    older.idempotency_key = Some("schedule:nightly:2026-12-04T02:00:00Z".into());
    let mut trigger = job(3, JobState::Queued);
    trigger.idempotency_key = Some("schedule:nightly:trigger:2026-12-06T02:00:00Z".into());
    store
        .commit(&rows(&[&fired, &older, &trigger]))
        .expect("commit");
    let slot = 1_796_436_000_000; // 2026-12-05T02:00:00Z
    drop(store);
    let mut store = b.store();
    let loaded = store.load_schedules().expect("load");
    let expected = StoredSchedule {
        last_slot: Some(slot),
        fired: 2,
        ..nightly(7)
    };
    assert_eq!(loaded, vec![expected.clone()]);
    // A rewrite from memory that has not seen the slot keeps it, and the count.
    store
        .write_schedule(&ScheduleWrite::Put(Box::new(nightly(8))))
        .expect("put");
    let rewritten = &store.load_schedules().expect("load")[0];
    assert_eq!((rewritten.last_slot, rewritten.fired), (Some(slot), 2));
    // A failed batch records nothing.
    let mut later = job(4, JobState::Queued);
    later.idempotency_key = Some("schedule:nightly:2026-12-07T02:00:00Z".into());
    let mut clash = job(5, JobState::Queued);
    clash.idempotency_key = fired.idempotency_key.clone();
    assert!(store.commit(&rows(&[&later, &clash])).is_err());
    let unchanged = &store.load_schedules().expect("load")[0];
    assert_eq!((unchanged.last_slot, unchanged.fired), (Some(slot), 2));
    // Later rows of a fired job (assigned, finished) count nothing again.
    let mut running = fired.clone();
    running.state = JobState::Running;
    store.commit(&rows(&[&running])).expect("commit");
    assert_eq!(store.load_schedules().expect("load")[0].fired, 2);
    // Skipped counts are written as memory has them, and read back.
    store
        .write_schedule(&ScheduleWrite::Skipped(vec![
            SkippedCounts {
                name: "nightly".into(),
                skipped: [3, 1],
            },
            SkippedCounts {
                name: "gone".into(),
                skipped: [9, 9],
            },
        ]))
        .expect("skipped");
    drop(store);
    let mut store = b.store();
    let counted = &store.load_schedules().expect("load")[0];
    // The counts, and nothing else: the floor stays where it was.
    assert_eq!((counted.skipped, counted.updated_at), ([3, 1], 8));
    store
        .write_schedule(&ScheduleWrite::Delete("nightly".into()))
        .expect("delete");
    assert!(store.load_schedules().expect("load").is_empty());
}

macro_rules! conformance {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $( #[test] fn $case() { super::$case(&super::Backend::sqlite()) } )*
        }
        mod postgresql {
            $( #[test] fn $case() {
                if let Some(backend) = super::Backend::postgres() {
                    super::$case(&backend)
                }
            } )*
        }
    };
}

conformance!(
    migrations_create_then_reopen_unchanged,
    a_newer_schema_is_refused_untouched,
    a_batch_is_durable_after_commit_and_invisible_before,
    a_job_written_twice_in_a_batch_keeps_its_later_row,
    a_failed_batch_leaves_nothing,
    recovery_loads_active_window_keys_counts_newest_and_attempts,
    expiry_deletes_old_finished_jobs_with_attempts_and_counts,
    history_reads_jobs_pages_and_summaries,
    named_finished_jobs_are_deleted_with_attempts_and_counts,
    history_pages_filter_by_priority_and_id_prefix_in_either_order,
    schedules_are_stored_and_their_slots_move_with_their_jobs,
);

// ---- PostgreSQL only ----

/// A batch is split between the store's write connections (by job, by
/// idempotency key when there is one): the parts commit together, a part
/// that fails rolls every part back, and the finished-job counts each
/// connection keeps add up.
#[test]
fn postgres_a_batch_split_between_writers_commits_or_rolls_back_whole() {
    let Some(b) = Backend::postgres() else {
        return;
    };
    let mut store = b.store();
    let keyed = job(1, JobState::Queued);
    store.commit(&rows(&[&keyed])).expect("commit");
    // Twenty jobs without a key spread over both writers (by their ids'
    // random bits); one more clashes with the stored key.
    let mut running: Vec<Job> = (2..22).map(|n| job(n, JobState::Running)).collect();
    for job in &mut running {
        job.idempotency_key = None;
    }
    let mut clash = job(30, JobState::Queued);
    clash.idempotency_key = keyed.idempotency_key.clone();
    let mut batch = rows(&running.iter().collect::<Vec<_>>());
    batch.extend(rows(&[&clash]));
    let err = store.commit(&batch).expect_err("duplicate key");
    assert!(!err.is_fenced(), "{err}");
    assert_eq!(b.job_count(), 1, "no part of the failed batch is stored");

    store
        .commit(&rows(&running.iter().collect::<Vec<_>>()))
        .expect("commit");
    assert_eq!(b.job_count(), 21);
    let succeeded: Vec<Job> = running
        .iter()
        .map(|j| {
            let mut j = j.clone();
            j.state = JobState::Succeeded;
            j.result = Some(b"done".to_vec().into());
            j.end_attempt(AttemptOutcome::Succeeded, 30);
            j.finished_at = Some(30);
            j
        })
        .collect();
    store
        .commit(&rows(&succeeded.iter().collect::<Vec<_>>()))
        .expect("commit");
    let shards = b.number(
        "",
        "SELECT count(DISTINCT shard) FROM taskyard.terminal_counts WHERE jobs > 0",
    );
    assert_eq!(shards, 2, "both writers counted finished jobs");
    let stored = b.store().load_for_recovery(100).expect("load");
    assert_eq!(count_of(&stored, JobState::Succeeded), 20);
    assert_eq!(stored.jobs.len(), 21, "{:?}", stored.jobs.len());
}

/// The fence: with the lease at the epoch this store holds, writes go
/// through; once the epoch moves on, commit, staging and expiry all fail
/// fenced and write nothing.
#[test]
fn postgres_a_moved_epoch_fences_every_write() {
    let Some(b) = Backend::postgres() else {
        return;
    };
    let mut store = b.store();
    store.set_fence(Some(0));
    let a = job(1, JobState::Queued);
    store.commit(&rows(&[&a])).expect("epoch 0 is the lease's");
    let old = job(2, JobState::Succeeded);
    store.commit(&rows(&[&old])).expect("commit");

    b.execute("", "UPDATE taskyard.leader SET epoch = 7 WHERE id = 1");
    let err = store
        .commit(&rows(&[&job(3, JobState::Queued)]))
        .expect_err("fenced");
    assert!(err.is_fenced(), "{err}");
    assert!(err.to_string().contains("epoch 7"), "{err}");
    assert!(
        err.to_string()
            .starts_with("PostgreSQL taskyard@127.0.0.1:"),
        "{err}"
    );
    // Staged rows are written by the commit: it is fenced.
    let err = match store.stage(&rows(&[&job(4, JobState::Queued)])) {
        Err(e) => e,
        Ok(()) => store.commit(&[]).expect_err("fenced"),
    };
    assert!(err.is_fenced(), "{err}");
    let cutoffs = ExpiryCutoffs {
        finished_before: i64::MAX,
        failed_before: i64::MAX,
    };
    let err = store.expire(cutoffs, 10).expect_err("fenced");
    assert!(err.is_fenced(), "{err}");
    assert_eq!(b.job_count(), 2, "nothing written after the epoch moved");

    store.set_fence(Some(7));
    store
        .commit(&rows(&[&job(5, JobState::Queued)]))
        .expect("the new epoch writes");
    store.set_fence(None);
    b.execute("", "UPDATE taskyard.leader SET epoch = 8 WHERE id = 1");
    store
        .commit(&rows(&[&job(6, JobState::Queued)]))
        .expect("no fence: nothing checked");
    assert_eq!(b.job_count(), 4);
}

/// Staged rows hold no lock: a batch is written by its commit, in one
/// transaction that checks the epoch under the lease row's share lock
/// first. A takeover while rows are staged fences that commit.
#[test]
fn postgres_staged_rows_hold_no_lock_and_their_commit_checks_the_epoch() {
    let Some(b) = Backend::postgres() else {
        return;
    };
    let Backend::Postgres { url, .. } = &b else {
        unreachable!()
    };
    let mut store = b.store();
    store.set_fence(Some(0));
    store
        .stage(&rows(&[&job(1, JobState::Queued)]))
        .expect("stage");
    let mut other = b.pg(url);
    other
        .batch_execute("SET lock_timeout = '2s'")
        .expect("set timeout");
    other
        .execute("UPDATE taskyard.leader SET epoch = 1 WHERE id = 1", &[])
        .expect("the lease row is free while rows are only staged");
    let err = store.commit(&[]).expect_err("fenced");
    assert!(err.is_fenced(), "{err}");
    assert_eq!(b.job_count(), 0, "nothing of the fenced batch is stored");
}

/// The password never shows: not in `describe`, not in the errors of a
/// bad password, an unreachable server or a bad URL, not in `Debug`.
#[test]
fn postgres_the_password_never_shows() {
    let Some(b) = Backend::postgres() else {
        return;
    };
    let Backend::Postgres { cluster, url } = &b else {
        unreachable!()
    };
    let password = cluster.password();
    let store = PostgresStore::open(url).expect("open");
    assert!(!store.describe().contains(password));
    assert!(store
        .describe()
        .starts_with("PostgreSQL taskyard@127.0.0.1:"));

    let wrong = url.replace(password, "not-the-password-at-all");
    let err = PostgresStore::open(&wrong).err().expect("wrong password");
    assert!(
        !err.to_string().contains("not-the-password-at-all"),
        "{err}"
    );
    assert!(err.to_string().contains("127.0.0.1"), "{err}");

    let port = cluster.addr().port();
    let unreachable = url.replace(&format!(":{port}/"), ":1/");
    let err = PostgresStore::open(&unreachable)
        .err()
        .expect("unreachable");
    assert!(!err.to_string().contains(password), "{err}");
    assert!(err.to_string().contains("127.0.0.1:1"), "{err}");

    let bad = url.replace(&format!(":{port}/"), ":notaport/");
    let err = PostgresStore::open(&bad).err().expect("bad URL");
    assert!(!err.to_string().contains(password), "{err}");
    assert!(err.to_string().contains("postgres-url"), "{err}");

    let target = PgTarget::parse(url).expect("url");
    assert!(!format!("{target:?}").contains(password));
    let config_url = taskyard::config::PostgresUrl::new(url.clone());
    assert!(!format!("{config_url:?}").contains(password));
}

/// Coordinators starting together on a fresh database migrate it once
/// (the advisory lock): every one opens, and the schema is whole.
#[test]
fn postgres_coordinators_starting_together_migrate_once() {
    let Some(b) = Backend::postgres() else {
        return;
    };
    let Backend::Postgres { url, .. } = &b else {
        unreachable!()
    };
    let opened: Vec<Result<(), String>> = std::thread::scope(|scope| {
        let opening: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    PostgresStore::open(url)
                        .map(drop)
                        .map_err(|e| e.to_string())
                })
            })
            .collect();
        opening
            .into_iter()
            .map(|t| t.join().expect("thread"))
            .collect()
    });
    assert!(opened.iter().all(Result::is_ok), "{opened:?}");
    assert_eq!(b.schema_version(), b.current_version());
    assert_eq!(
        b.number("", "SELECT count(*) FROM taskyard.schema_version"),
        1,
        "one version row"
    );
    assert_eq!(
        b.number("", "SELECT count(*) FROM taskyard.leader"),
        1,
        "one lease row"
    );
}

/// A page read whole (the default budget is never reached here).
fn page(reader: &mut dyn StoredJobReader, filter: &PageFilter) -> Result<Vec<Job>, StoreError> {
    let walked = reader.page(filter, Some(&ReadBudget::default()))?;
    assert_eq!(walked.stopped_at, None, "a tiny page is read whole");
    Ok(walked.rows)
}

fn summaries(
    reader: &mut dyn StoredJobReader,
    filter: &PageFilter,
) -> Result<Vec<StoredSummary>, StoreError> {
    let walked = reader.summaries(filter, Some(&ReadBudget::default()))?;
    assert_eq!(walked.stopped_at, None, "a tiny page is read whole");
    Ok(walked.rows)
}
