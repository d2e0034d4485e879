//! `terminal_counts` (schema version 5): the finished jobs per task type
//! and state that start-up reads instead of counting the table, kept
//! exact by every write and deletion, and computed once by the migration.

use super::tests::{commit_to_old_schema, job};
use super::*;
use crate::config::Synchronous;
use crate::scheduler::{Job, JobRow};
use rusqlite::Connection;
use taskyard_protocol::JobState;

fn commit(store: &mut JobStore, jobs: &[Job]) {
    let rows: Vec<JobRow> = jobs.iter().map(JobRow::whole).collect();
    store.commit(&rows).expect("commit");
}

/// The finished rows counted the slow way, sorted.
fn counted(store: &JobStore) -> Vec<(String, JobState, u64)> {
    let mut stmt = store
        .conn
        .prepare(
            "SELECT task_type, state, count(*) FROM jobs \
             WHERE state IN ('SUCCEEDED', 'FAILED', 'CANCELLED') GROUP BY task_type, state",
        )
        .expect("prepare");
    let rows = stmt
        .query_map([], |r| {
            let state: String = r.get(1)?;
            Ok((
                r.get::<_, String>(0)?,
                state.parse::<JobState>().expect("state"),
                r.get::<_, i64>(2)? as u64,
            ))
        })
        .expect("query");
    let mut rows: Vec<_> = rows.map(|r| r.expect("row")).collect();
    rows.sort();
    rows
}

fn kept(store: &JobStore) -> Vec<(String, JobState, u64)> {
    let mut rows = store.terminal_counts().expect("counts");
    rows.sort();
    rows
}

fn finished(sequence: u64, state: JobState, task_type: &str) -> Job {
    let mut job = job(sequence, state);
    job.task_type = task_type.into();
    job.finished_at = Some(100 + sequence as i64);
    job
}

#[test]
fn the_counters_follow_finishes_retries_and_expiry_in_the_same_commit() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut store = JobStore::open(&dir.path().join("t.db"), Synchronous::Full).expect("open");
    let mut queued = job(1, JobState::Queued);
    let mut running = job(2, JobState::Running);
    let failed = finished(3, JobState::Failed, "mail");
    let cancelled = finished(4, JobState::Cancelled, "echo");
    commit(
        &mut store,
        &[queued.clone(), running.clone(), failed.clone(), cancelled],
    );
    let expect = |rows: &[(&str, JobState, u64)]| -> Vec<(String, JobState, u64)> {
        let mut rows: Vec<_> = rows
            .iter()
            .map(|(t, s, n)| (t.to_string(), *s, *n))
            .collect();
        rows.sort();
        rows
    };
    assert_eq!(
        kept(&store),
        expect(&[
            ("echo", JobState::Cancelled, 1),
            ("mail", JobState::Failed, 1)
        ]),
        "inserted finished rows count, active ones do not"
    );
    // Two finish in one batch; the FAILED job is retried (leaves FAILED).
    queued.state = JobState::Succeeded;
    queued.finished_at = Some(200);
    running.state = JobState::Succeeded;
    running.finished_at = Some(201);
    let mut retried = failed.clone();
    retried.state = JobState::Queued;
    retried.finished_at = None;
    commit(&mut store, &[queued.clone(), running, retried]);
    assert_eq!(kept(&store), counted(&store));
    assert_eq!(
        kept(&store),
        expect(&[
            ("echo", JobState::Cancelled, 1),
            ("echo", JobState::Succeeded, 2)
        ])
    );
    // A row written twice with the same state counts once.
    commit(&mut store, &[queued]);
    assert_eq!(kept(&store), counted(&store));
    // A staged batch that rolls back takes its counts with it.
    let mut never = job(9, JobState::Succeeded);
    never.finished_at = Some(300);
    store.stage(&[JobRow::whole(&never)]).expect("stage");
    store.rollback();
    assert_eq!(kept(&store), counted(&store));
    let cutoffs = ExpiryCutoffs {
        finished_before: 1_000,
        failed_before: 1_000,
    };
    let expired = store.expire(cutoffs, 2).expect("expire").expect("not busy");
    assert_eq!(expired.len(), 2);
    assert_eq!(kept(&store), counted(&store), "expiry takes its jobs away");
    store
        .expire(cutoffs, 10)
        .expect("expire")
        .expect("not busy");
    assert_eq!(kept(&store), Vec::new(), "emptied entries are left out");
}

#[test]
fn a_version_4_database_migrates_to_5_counting_its_finished_rows_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("t.db");
    let jobs = vec![
        job(1, JobState::Queued),
        finished(2, JobState::Succeeded, "echo"),
        finished(3, JobState::Succeeded, "echo"),
        finished(4, JobState::Failed, "mail"),
    ];
    {
        let mut conn = Connection::open(&path).expect("create");
        schema::migrate_to(&mut conn, 4).expect("v4");
        let mut v4 = JobStore {
            conn,
            path: path.clone(),
            unfinished: Default::default(),
            checkpointer: None,
            staged_lost: None,
            _owner: None,
        };
        commit_to_old_schema(&mut v4, &jobs);
    }
    let mut store = JobStore::open(&path, Synchronous::Full).expect("migrates");
    assert_eq!(
        kept(&store),
        vec![
            ("echo".to_string(), JobState::Succeeded, 2),
            ("mail".to_string(), JobState::Failed, 1)
        ]
    );
    let mut done = jobs[0].clone();
    done.state = JobState::Succeeded;
    done.finished_at = Some(500);
    commit(&mut store, &[done]);
    assert_eq!(kept(&store), counted(&store), "and keeps them from then on");
    let stored = store.load_for_recovery(0).expect("load");
    let total: u64 = stored.counts.iter().map(|(_, _, n)| n).sum();
    assert_eq!(total, 4, "every stored job counted, none loaded");
    assert!(stored.jobs.is_empty());
}

#[test]
fn start_up_reads_idempotency_keys_through_their_partial_index() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = JobStore::open(&dir.path().join("t.db"), Synchronous::Full).expect("open");
    let mut stmt = store
        .conn
        .prepare(&format!("EXPLAIN QUERY PLAN {}", startup::KEYS))
        .expect("plan");
    let plan: Vec<String> = stmt
        .query_map([], |r| r.get::<_, String>(3))
        .expect("rows")
        .map(|r| r.expect("row"))
        .collect();
    let plan = plan.join("; ");
    assert!(plan.contains("jobs_idempotency_key"), "{plan}");
}
