//! What retention reads from the database: the start-up load of the
//! active set and a finished window, history reads beside the writer, and
//! the version 3 → 4 migration that indexes them.

use super::tests::{attempt_rows, commit_to_old_schema, job};
use super::*;
use crate::config::Synchronous;
use crate::scheduler::{Job, JobRow};
use rusqlite::Connection;
use taskyard_protocol::JobState;

/// A finished job: SUCCEEDED at `finished_at`.
fn finished(sequence: u64, finished_at: i64) -> Job {
    let mut job = job(sequence, JobState::Succeeded);
    job.finished_at = Some(finished_at);
    job
}

fn commit(store: &mut JobStore, jobs: &[Job]) {
    let rows: Vec<JobRow> = jobs.iter().map(JobRow::whole).collect();
    store.commit(&rows).expect("commit");
}

/// 3 active jobs (sequences 1–3) and 50 finished ones (4–53, finished
/// in that order).
fn stocked(path: &std::path::Path) -> (JobStore, Vec<Job>) {
    let mut store = JobStore::open(path, Synchronous::Full).expect("open");
    let mut jobs = vec![
        job(1, JobState::Queued),
        job(2, JobState::Running),
        job(3, JobState::RetryWait),
    ];
    jobs.extend((4..54).map(|n| finished(n, 100 + n as i64)));
    commit(&mut store, &jobs);
    (store, jobs)
}

#[test]
fn recovery_loads_the_active_set_and_the_newest_finished_window_only() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (store, _) = stocked(&dir.path().join("t.db"));
    let stored = store.load_for_recovery(5).expect("load");
    let mut active: Vec<u64> = stored.jobs[..3].iter().map(|j| j.sequence).collect();
    active.sort_unstable();
    assert_eq!(active, vec![1, 2, 3], "every active job, in any order");
    let window: Vec<u64> = stored.jobs[3..].iter().map(|j| j.sequence).collect();
    assert_eq!(
        window,
        vec![49, 50, 51, 52, 53],
        "the newest finished, oldest first"
    );
    assert!(
        stored.jobs.iter().all(|j| !j.history.is_empty()),
        "with history"
    );
    assert_eq!(stored.idempotency.len(), 53, "every stored key");
    let succeeded: u64 = stored
        .counts
        .iter()
        .filter(|(_, s, _)| *s == JobState::Succeeded)
        .map(|(_, _, n)| n)
        .sum();
    assert_eq!(succeeded, 50, "counted, not loaded");
    assert_eq!(stored.newest, Some((53, 10)));
}

#[test]
fn the_active_set_and_the_window_are_read_through_their_indexes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (store, _) = stocked(&dir.path().join("t.db"));
    let plan = |sql: &str| -> String {
        let mut stmt = store
            .conn
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .expect("plan");
        let rows = stmt.query_map([], |r| r.get::<_, String>(3)).expect("rows");
        rows.map(|r| r.expect("row")).collect::<Vec<_>>().join("; ")
    };
    let active = plan("SELECT id FROM jobs WHERE finished_at IS NULL");
    assert!(active.contains("jobs_active"), "{active}");
    let window =
        plan("SELECT id FROM jobs WHERE finished_at IS NOT NULL ORDER BY finished_at DESC LIMIT 5");
    assert!(window.contains("jobs_finished_at"), "{window}");
}

#[test]
fn history_reads_a_job_with_its_attempts_and_pages_newest_first() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("t.db");
    let (_store, jobs) = stocked(&path);
    let reader = JobReader::open(&path).expect("reader");
    assert_eq!(
        reader.job(jobs[10].id).expect("read"),
        Some(jobs[10].clone())
    );
    assert_eq!(
        reader.job(taskyard_protocol::JobId::mint()).expect("read"),
        None
    );
    let page = |state, before| {
        let filter = PageFilter {
            finished_by: None,
            state,
            task_type: Some("echo".into()),
            before,
            limit: 3,
            ..PageFilter::default()
        };
        let found = reader.page_unbudgeted(&filter).expect("page");
        found.iter().map(|j| j.sequence).collect::<Vec<_>>()
    };
    assert_eq!(page(None, None), vec![53, 52, 51]);
    assert_eq!(page(None, Some(jobs[51].order_key())), vec![51, 50, 49]);
    assert_eq!(page(Some(JobState::RetryWait), None), vec![3]);

    // Summaries: the same rows, without their bytes, with their lengths.
    let filter = PageFilter {
        finished_by: None,
        state: None,
        task_type: None,
        before: None,
        limit: 100,
        ..PageFilter::default()
    };
    let whole = reader.page_unbudgeted(&filter).expect("page");
    let summaries = reader.summaries_unbudgeted(&filter).expect("summaries");
    assert_eq!(summaries.len(), whole.len());
    for (summary, job) in summaries.iter().zip(&whole) {
        assert_eq!(summary.job.id, job.id);
        assert_eq!(summary.job.state, job.state);
        assert_eq!(summary.job.error, job.error);
        assert_eq!(summary.payload_bytes, job.payload.len() as u64);
        assert_eq!(
            summary.result_bytes,
            job.result.as_ref().map(|r| r.len() as u64)
        );
        assert!(summary.job.payload.is_empty(), "no payload read");
        assert!(summary.job.result.as_ref().is_none_or(|r| r.is_empty()));
    }
    assert!(
        whole
            .iter()
            .any(|j| j.result.as_ref().is_some_and(|r| !r.is_empty())),
        "some stocked job has a result to measure"
    );
}

#[test]
fn a_version_3_database_migrates_to_4_keeping_its_rows() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("t.db");
    let jobs = vec![job(1, JobState::Queued), finished(2, 30)];
    {
        let mut conn = Connection::open(&path).expect("create");
        schema::migrate_to(&mut conn, 3).expect("v3");
        let mut v3 = JobStore {
            conn,
            path: path.clone(),
            unfinished: Default::default(),
            checkpointer: None,
            staged_lost: None,
            _owner: None,
        };
        commit_to_old_schema(&mut v3, &jobs);
    }
    let store = JobStore::open(&path, Synchronous::Full).expect("migrates");
    let version: i64 = store
        .conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .expect("version");
    assert_eq!(version, schema::SCHEMA_VERSION);
    let indexes: Vec<String> = store
        .conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'jobs_%' ORDER BY name")
        .expect("prepare")
        .query_map([], |r| r.get(0))
        .expect("query")
        .map(|r| r.expect("row"))
        .collect();
    assert_eq!(
        indexes,
        vec![
            "jobs_active",
            "jobs_cancelled",
            "jobs_failed",
            "jobs_finished_at",
            "jobs_high",
            "jobs_idempotency_key",
            "jobs_low",
            "jobs_order",
            "jobs_type_order"
        ]
    );
    let mut loaded = store.load_all().expect("load");
    loaded.sort_by_key(|j| j.sequence);
    assert_eq!(loaded, jobs);
}

#[test]
fn expiry_deletes_in_batches_oldest_first_keeping_failed_jobs_longer() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut store = JobStore::open(&dir.path().join("t.db"), Synchronous::Full).expect("open");
    let mut jobs: Vec<Job> = (1..=12).map(|n| finished(n, 100 + n as i64)).collect();
    let retried = &mut jobs[0];
    retried.history.push(taskyard_protocol::Attempt {
        number: 2,
        ..retried.history[0].clone()
    });
    let mut failed = job(13, JobState::Failed);
    failed.finished_at = Some(100);
    jobs.push(failed.clone());
    jobs.push(job(14, JobState::Queued));
    commit(&mut store, &jobs);
    assert_eq!(attempt_rows(&store), 1, "the retried job's first attempt");
    let cutoffs = ExpiryCutoffs {
        finished_before: 1_000,
        failed_before: 50,
    };
    let mut batches = Vec::new();
    loop {
        let expired = store.expire(cutoffs, 5).expect("expire").expect("not busy");
        batches.push(expired.len());
        if expired.len() < 5 {
            break;
        }
    }
    assert_eq!(batches, vec![5, 5, 2]);
    assert_eq!(attempt_rows(&store), 0, "attempts expire with their job");
    let mut left: Vec<u64> = store
        .load_all()
        .expect("load")
        .iter()
        .map(|j| j.sequence)
        .collect();
    left.sort_unstable();
    assert_eq!(
        left,
        vec![13, 14],
        "the FAILED job is kept longer, active jobs always"
    );
    let later = ExpiryCutoffs {
        failed_before: 101,
        ..cutoffs
    };
    let expired = store.expire(later, 5).expect("expire").expect("not busy");
    assert_eq!(
        expired,
        vec![ExpiredJob {
            id: failed.id,
            idempotency_key: Some("key-13".into()),
            task_type: "echo".into(),
            state: JobState::Failed,
        }]
    );
}

#[test]
fn expiry_waits_while_a_batch_is_staged() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut store = JobStore::open(&dir.path().join("t.db"), Synchronous::Full).expect("open");
    commit(&mut store, &[finished(1, 10)]);
    store
        .stage(&[JobRow::whole(&job(2, JobState::Queued))])
        .expect("stage");
    let cutoffs = ExpiryCutoffs {
        finished_before: 1_000,
        failed_before: 1_000,
    };
    assert_eq!(store.expire(cutoffs, 5).expect("expire"), None);
    store.commit(&[]).expect("commit");
    assert_eq!(
        store.expire(cutoffs, 5).expect("expire").map(|e| e.len()),
        Some(1)
    );
}
