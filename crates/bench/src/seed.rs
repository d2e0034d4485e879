//! Filling a database quickly with jobs a long-running coordinator would
//! have left behind: finished rows (one attempt each, SUCCEEDED) and
//! active ones (QUEUED), written through the store's own write path in
//! one transaction, so they have the real schema, indexes and counters.

use crate::BenchError;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;
use taskyard_protocol::{Attempt, AttemptOutcome, JobId, JobState, LeaseId, Priority, WorkerId};
use taskyard_server::config::Synchronous;
use taskyard_server::scheduler::JobRow;
use taskyard_server::store::postgres::PostgresStore;
use taskyard_server::store::{JobStore, Store};

/// What to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedPlan {
    pub finished: u64,
    pub active: u64,
    /// Give every job an idempotency key (`seed-<sequence>`).
    pub keyed: bool,
    /// Unix milliseconds at which the first finished job finished; the
    /// others follow a millisecond apart, so the newest finished at
    /// `finished_from + finished - 1`.
    pub finished_from: i64,
    /// The finished jobs' and the active jobs' task type.
    pub task_type: String,
}

/// What was written, and how long it took.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Seeded {
    pub rows: u64,
    pub secs: f64,
}

/// The worker every seeded attempt ran on: tells seeded rows apart.
pub const SEED_WORKER: &str = "seed";

/// Rows handed to the store at a time (all in the one transaction).
const CHUNK: u64 = 10_000;

/// Writes `plan`'s jobs into the database at `path` (created or migrated
/// as the coordinator would) in one transaction: sequences 1.. for the
/// finished jobs, then the active ones. Durable once it returns.
pub fn seed(path: &Path, plan: &SeedPlan) -> Result<Seeded, BenchError> {
    let started = Instant::now();
    let mut store = JobStore::open(path, Synchronous::Off).map_err(seed_failed)?;
    store.widen_cache_for_bulk_load().map_err(seed_failed)?;
    seed_into(&mut store, plan, started)
}

/// Like `seed`, into the PostgreSQL database at `url` (schema `taskyard`
/// created or migrated as the coordinator would), in one transaction.
pub fn seed_postgres(url: &str, plan: &SeedPlan) -> Result<Seeded, BenchError> {
    let started = Instant::now();
    let mut store = PostgresStore::open(url).map_err(seed_failed)?;
    seed_into(&mut store, plan, started)
}

fn seed_failed(e: taskyard_server::store::StoreError) -> BenchError {
    BenchError::Failed(format!("seeding: {e}"))
}

/// Writes `plan`'s jobs through `store` in one transaction.
fn seed_into(
    store: &mut dyn Store,
    plan: &SeedPlan,
    started: Instant,
) -> Result<Seeded, BenchError> {
    let fail = seed_failed;
    let total = plan.finished + plan.active;
    let payload: Arc<[u8]> = Arc::from(&b"\xa4seed"[..]);
    let result: Arc<[u8]> = Arc::from(&b"\xc0"[..]);
    let mut rows = Vec::with_capacity(CHUNK as usize);
    for sequence in 1..=total {
        rows.push(row(plan, sequence, &payload, &result));
        if rows.len() as u64 == CHUNK || sequence == total {
            store.stage(&rows).map_err(fail)?;
            rows.clear();
        }
    }
    store.commit(&[]).map_err(fail)?;
    Ok(Seeded {
        rows: total,
        secs: started.elapsed().as_secs_f64(),
    })
}

/// Job `sequence` of `plan`: finished while `sequence <= plan.finished`.
fn row(plan: &SeedPlan, sequence: u64, payload: &Arc<[u8]>, result: &Arc<[u8]>) -> JobRow {
    let finished = sequence <= plan.finished;
    let at = plan.finished_from + sequence as i64 - 1;
    let attempt = Attempt {
        number: 1,
        worker_id: WorkerId(SEED_WORKER.into()),
        lease: LeaseId::new_random(),
        started_at: at,
        ended_at: Some(at),
        outcome: Some(AttemptOutcome::Succeeded),
    };
    JobRow {
        id: JobId::mint(),
        state: if finished {
            JobState::Succeeded
        } else {
            JobState::Queued
        },
        attempts: u32::from(finished),
        max_attempts: 3,
        lease: None,
        worker_id: finished.then(|| attempt.worker_id.clone()),
        assigned_at: finished.then_some(at),
        next_retry_at: None,
        result: finished.then(|| Arc::clone(result)),
        error: None,
        updated_at: at,
        finished_at: finished.then_some(at),
        not_before: None,
        task_type: plan.task_type.clone(),
        payload: Arc::clone(payload),
        priority: Priority::Normal,
        sequence,
        submitted_at: at,
        timeout_ms: 60_000,
        idempotency_key: plan.keyed.then(|| format!("seed-{sequence}")),
        changed_attempts: if finished { vec![attempt] } else { Vec::new() },
        concurrency_key: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_rows_load_back_as_the_active_set_and_counted_finished_jobs() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("seed.db");
        let plan = SeedPlan {
            finished: 25_000,
            active: 7,
            keyed: true,
            finished_from: 1_000,
            task_type: "bench.noop".into(),
        };
        let seeded = seed(&path, &plan).expect("seed");
        assert_eq!(seeded.rows, 25_007);
        let store = JobStore::open(&path, Synchronous::Full).expect("open");
        let stored = store.load_for_recovery(10).expect("load");
        assert_eq!(stored.jobs.len(), 17, "7 active and a window of 10");
        let count = |state| -> u64 {
            let counts = stored.counts.iter().filter(|(_, s, _)| *s == state);
            counts.map(|(_, _, n)| n).sum()
        };
        assert_eq!(count(JobState::Succeeded), 25_000);
        assert_eq!(count(JobState::Queued), 7);
        assert_eq!(stored.idempotency.len(), 25_007);
        assert_eq!(stored.newest.map(|(s, _)| s), Some(25_007));
    }
}
