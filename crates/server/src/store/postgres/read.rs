//! Reading jobs back: what recovery needs at start-up (in one consistent
//! snapshot), and decoding a row into a `Job` (shared with `history`).

use super::PostgresStore;
use crate::scheduler::{Job, Stored};
use crate::store::StoreError;
use postgres::{GenericClient, Row};
use std::collections::HashMap;
use taskyard_protocol::{Attempt, AttemptOutcome, JobId, JobState, LeaseId, Priority, WorkerId};
use uuid::Uuid;

/// A job row's columns, in the order `job_from` reads them.
pub(super) const COLUMNS: &str =
    "id, task_type, payload, priority, sequence, submitted_at, state, \
    attempts, max_attempts, timeout_ms, lease, worker_id, assigned_at, next_retry_at, result, \
    error, idempotency_key, updated_at, finished_at, not_before, last_attempt_number, \
    last_attempt_worker, last_attempt_lease, last_attempt_started_at, last_attempt_ended_at, \
    last_attempt_outcome, concurrency_key";

/// An attempt's columns, in the order `attempt_from` reads them.
pub(super) const ATTEMPT_COLUMNS: &str =
    "job_id, number, worker_id, lease, started_at, ended_at, outcome";

impl PostgresStore {
    /// Every non-terminal job and the `window` most recently finished ones
    /// (each with its whole history), every idempotency key, the counts
    /// and the newest sequence, read in one repeatable-read snapshot.
    pub(super) fn load(&mut self, window: usize) -> Result<Stored, StoreError> {
        let describe = self.target.describe().to_string();
        let target = self.target.clone();
        let fail = |e: String| StoreError::new(describe.clone(), target.redact(&e));
        let driver = |e: postgres::Error| fail(super::connect::error_text(&e));
        let conn = self.conn()?;
        let mut tx = conn
            .client
            .build_transaction()
            .isolation_level(postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(driver)?;
        let active = tx
            .query(
                &format!("SELECT {COLUMNS} FROM taskyard.jobs WHERE finished_at IS NULL"),
                &[],
            )
            .map_err(driver)?;
        let mut jobs = decode_jobs(&active).map_err(fail)?;
        let mut histories = attempts_of(
            &mut tx,
            "SELECT a.job_id, a.number, a.worker_id, a.lease, a.started_at, a.ended_at, \
             a.outcome FROM taskyard.attempts a JOIN taskyard.jobs j ON j.id = a.job_id \
             WHERE j.finished_at IS NULL ORDER BY a.job_id, a.number",
            &[],
        )
        .map_err(fail)?;
        let counts = state_counts(&mut tx, &jobs).map_err(fail)?;
        let window = window.min(i64::MAX as usize) as i64;
        let finished = tx
            .query(
                &format!(
                    "SELECT {COLUMNS} FROM taskyard.jobs WHERE finished_at IS NOT NULL \
                     AND state NOT IN ('QUEUED', 'RUNNING', 'RETRY_WAIT') \
                     ORDER BY finished_at DESC LIMIT $1"
                ),
                &[&window],
            )
            .map_err(driver)?;
        let mut finished = decode_jobs(&finished).map_err(fail)?;
        let ids: Vec<Uuid> = finished.iter().map(|j| j.id.0).collect();
        histories.extend(
            attempts_of(
                &mut tx,
                &format!(
                    "SELECT {ATTEMPT_COLUMNS} FROM taskyard.attempts \
                     WHERE job_id = ANY($1) ORDER BY job_id, number"
                ),
                &[&ids],
            )
            .map_err(fail)?,
        );
        // Oldest finish first: the order the in-memory window evicts in.
        finished.reverse();
        jobs.extend(finished);
        for job in &mut jobs {
            let stored = histories.remove(&job.id).unwrap_or_default();
            job.history = with_last_attempt(stored, job.history.pop());
        }
        let idempotency = tx
            .query(
                "SELECT idempotency_key, id FROM taskyard.jobs WHERE idempotency_key IS NOT NULL",
                &[],
            )
            .map_err(driver)?
            .iter()
            .map(|r| (r.get::<_, String>(0), JobId(r.get(1))))
            .collect();
        let newest = tx
            .query_opt(
                "SELECT sequence, submitted_at FROM taskyard.jobs \
                 ORDER BY sequence DESC, submitted_at DESC LIMIT 1",
                &[],
            )
            .map_err(driver)?
            .map(|r| (r.get::<_, i64>(0).max(0) as u64, r.get::<_, i64>(1)));
        tx.commit().map_err(driver)?;
        Ok(Stored {
            jobs,
            idempotency,
            counts,
            newest,
        })
    }
}

/// Stored jobs per (task type, state): the loaded active ones counted,
/// finished ones from `terminal_counts`.
fn state_counts(
    client: &mut impl GenericClient,
    active: &[Job],
) -> Result<Vec<(String, JobState, u64)>, String> {
    let mut counts: HashMap<(String, JobState), u64> = HashMap::new();
    for job in active.iter().filter(|j| !j.state.is_terminal()) {
        *counts
            .entry((job.task_type.clone(), job.state))
            .or_default() += 1;
    }
    for (task_type, state, n) in terminal_counts(client)? {
        *counts.entry((task_type, state)).or_default() += n;
    }
    Ok(counts.into_iter().map(|((t, s), n)| (t, s, n)).collect())
}

/// The finished jobs stored per (task type, state); emptied entries left
/// out.
pub(super) fn terminal_counts(
    client: &mut impl GenericClient,
) -> Result<Vec<(String, JobState, u64)>, String> {
    let rows = client
        .query(
            "SELECT task_type, state, sum(jobs)::bigint FROM taskyard.terminal_counts \
             GROUP BY task_type, state HAVING sum(jobs) > 0",
            &[],
        )
        .map_err(|e| super::connect::error_text(&e))?;
    rows.iter()
        .map(|r| {
            let state: &str = r.get(1);
            let state = state
                .parse::<JobState>()
                .map_err(|e| format!("stored state {state:?}: {e}"))?;
            Ok((r.get(0), state, r.get::<_, i64>(2).max(0) as u64))
        })
        .collect()
}

/// Attempts read by `sql` (`ATTEMPT_COLUMNS`), per job, oldest first.
pub(super) fn attempts_of(
    client: &mut impl GenericClient,
    sql: &str,
    params: &[&(dyn postgres::types::ToSql + Sync)],
) -> Result<HashMap<JobId, Vec<Attempt>>, String> {
    let rows = client
        .query(sql, params)
        .map_err(|e| super::connect::error_text(&e))?;
    let mut histories: HashMap<JobId, Vec<Attempt>> = HashMap::new();
    for row in &rows {
        let job = JobId(row.try_get(0).map_err(|e| e.to_string())?);
        let attempt = attempt_at(row, 1, job)?;
        histories.entry(job).or_default().push(attempt);
    }
    Ok(histories)
}

fn decode_jobs(rows: &[Row]) -> Result<Vec<Job>, String> {
    rows.iter().map(job_from).collect()
}

/// A job's history: the attempts stored on their own, then the last one
/// from the job row.
pub(super) fn with_last_attempt(mut history: Vec<Attempt>, last: Option<Attempt>) -> Vec<Attempt> {
    if let Some(last) = last {
        history.retain(|a| a.number != last.number);
        history.push(last);
    }
    history
}

/// An attempt stored in six columns from `first`: number, worker, lease,
/// started, ended, outcome.
fn attempt_at(row: &Row, first: usize, job: JobId) -> Result<Attempt, String> {
    let bad = |what: &str, e: &dyn std::fmt::Display| format!("attempt of job {job}: {what}: {e}");
    let number: i32 = row.try_get(first).map_err(|e| bad("number", &e))?;
    let outcome: Option<String> = row.try_get(first + 5).map_err(|e| bad("outcome", &e))?;
    Ok(Attempt {
        number: number.max(0) as u32,
        worker_id: WorkerId(row.try_get(first + 1).map_err(|e| bad("worker", &e))?),
        lease: LeaseId(row.try_get(first + 2).map_err(|e| bad("lease", &e))?),
        started_at: row.try_get(first + 3).map_err(|e| bad("started_at", &e))?,
        ended_at: row.try_get(first + 4).map_err(|e| bad("ended_at", &e))?,
        outcome: outcome
            .map(|o| serde_json::from_str::<AttemptOutcome>(&o))
            .transpose()
            .map_err(|e| bad("outcome", &e))?,
    })
}

/// A job from a row of `COLUMNS`, with only the last attempt (from the
/// row) in its history.
pub(super) fn job_from(row: &Row) -> Result<Job, String> {
    let id = JobId(row.try_get(0).map_err(|e| format!("job id: {e}"))?);
    let bad = |column: &str, e: &dyn std::fmt::Display| format!("job {id}: {column}: {e}");
    macro_rules! get {
        ($i:expr, $name:expr) => {
            row.try_get($i).map_err(|e| bad($name, &e))?
        };
    }
    let state: &str = get!(6, "state");
    let priority: i16 = get!(3, "priority");
    let payload: Vec<u8> = get!(2, "payload");
    let result: Option<Vec<u8>> = get!(14, "result");
    let attempts: i32 = get!(7, "attempts");
    let max_attempts: i32 = get!(8, "max_attempts");
    let lease: Option<Uuid> = get!(10, "lease");
    let last_number: Option<i32> = get!(20, "last_attempt_number");
    let sequence: i64 = get!(4, "sequence");
    let timeout_ms: i64 = get!(9, "timeout_ms");
    Ok(Job {
        id,
        task_type: get!(1, "task_type"),
        payload: payload.into(),
        priority: Priority::from_level(i64::from(priority))
            .ok_or_else(|| format!("job {id}: priority {priority}"))?,
        sequence: sequence.max(0) as u64,
        submitted_at: get!(5, "submitted_at"),
        state: state.parse::<JobState>().map_err(|e| bad("state", &e))?,
        attempts: attempts.max(0) as u32,
        max_attempts: max_attempts.max(0) as u32,
        timeout_ms: timeout_ms.max(0) as u64,
        lease: lease.map(LeaseId),
        worker_id: row
            .try_get::<_, Option<String>>(11)
            .map_err(|e| bad("worker_id", &e))?
            .map(WorkerId),
        assigned_at: get!(12, "assigned_at"),
        next_retry_at: get!(13, "next_retry_at"),
        result: result.map(Into::into),
        error: get!(15, "error"),
        idempotency_key: get!(16, "idempotency_key"),
        updated_at: get!(17, "updated_at"),
        finished_at: get!(18, "finished_at"),
        not_before: get!(19, "not_before"),
        history: match last_number {
            Some(_) => vec![attempt_at(row, 20, id)?],
            None => Vec::new(),
        },
        progress: None,
        concurrency_key: get!(26, "concurrency_key"),
    })
}
