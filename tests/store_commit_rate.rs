//! How fast each store commits batches of the drain's rows (ignored by
//! default; a figure, not a check): per batch size, new jobs inserted,
//! then assigned (RUNNING, attempt 1), then finished (SUCCEEDED), one
//! commit per batch, `synchronous_commit` and `fsync` on.
//!
//! `cargo test --release --test store_commit_rate -- --ignored --nocapture`

mod common;

use std::time::Instant;
use taskyard::config::Synchronous;
use taskyard::protocol::{Attempt, AttemptOutcome, JobId, JobState, LeaseId, Priority, WorkerId};
use taskyard::scheduler::{Job, JobRow};
use taskyard::store::postgres::PostgresStore;
use taskyard::store::{JobStore, Store};

fn new_job(sequence: u64) -> Job {
    Job {
        id: JobId::mint(),
        task_type: "noop".into(),
        payload: vec![0x80].into(),
        priority: Priority::Normal,
        sequence,
        submitted_at: 1,
        state: JobState::Queued,
        attempts: 0,
        max_attempts: 3,
        timeout_ms: 1000,
        lease: None,
        worker_id: None,
        assigned_at: None,
        next_retry_at: None,
        result: None,
        error: None,
        idempotency_key: None,
        not_before: None,
        updated_at: 1,
        finished_at: None,
        history: Vec::new(),
        progress: None,
        concurrency_key: None,
    }
}

/// Commits `total` jobs through their life in batches of `batch`; returns
/// rows written per second.
fn drain(store: &mut dyn Store, total: usize, batch: usize, first: u64) -> f64 {
    let mut jobs: Vec<Job> = (0..total as u64).map(|i| new_job(first + i)).collect();
    let started = Instant::now();
    for chunk in jobs.chunks_mut(batch) {
        store
            .commit(&chunk.iter().map(JobRow::whole).collect::<Vec<_>>())
            .expect("insert");
        for job in chunk.iter_mut() {
            let lease = LeaseId::new_random();
            job.state = JobState::Running;
            job.attempts = 1;
            job.lease = Some(lease);
            job.worker_id = Some(WorkerId("w".into()));
            job.assigned_at = Some(2);
            job.history.push(Attempt {
                number: 1,
                worker_id: WorkerId("w".into()),
                lease,
                started_at: 2,
                ended_at: None,
                outcome: None,
            });
        }
        store
            .commit(&chunk.iter().map(JobRow::whole).collect::<Vec<_>>())
            .expect("assign");
        for job in chunk.iter_mut() {
            job.state = JobState::Succeeded;
            job.finished_at = Some(3);
            job.end_attempt(AttemptOutcome::Succeeded, 3);
        }
        store
            .commit(&chunk.iter().map(JobRow::whole).collect::<Vec<_>>())
            .expect("finish");
    }
    (total * 3) as f64 / started.elapsed().as_secs_f64()
}

#[test]
#[ignore]
fn commit_rate_per_batch_size() {
    let Some(pg) = common::postgres::start() else {
        return;
    };
    let dir = tempfile::tempdir().expect("dir");
    let mut sqlite = JobStore::open(&dir.path().join("rate.db"), Synchronous::Full).expect("open");
    let mut postgres = PostgresStore::open(&pg.url()).expect("open");
    let mut first = 0;
    for batch in [1, 16, 64, 256, 1024, 4096] {
        let total = (batch * 40).clamp(400, 40_960);
        let pg_rate = drain(&mut postgres, total, batch, first);
        let sqlite_rate = drain(&mut sqlite, total, batch, first);
        first += total as u64;
        println!(
            "batch {batch:>5}: PostgreSQL {pg_rate:>9.0} rows/s ({:>6.0} commits/s), SQLite {sqlite_rate:>9.0} rows/s",
            pg_rate / batch as f64,
        );
    }
}
