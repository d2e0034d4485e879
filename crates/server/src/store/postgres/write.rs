//! Writing batches of changed rows: each call is a handful of statements
//! whatever the number of rows, every one a multi-row statement over array
//! parameters (`unnest`): the stored states of jobs the store does not
//! know yet (one SELECT), the updates (one UPDATE … FROM unnest), the new
//! jobs (one INSERT … SELECT FROM unnest), the earlier attempts (one
//! upsert) and the finished-job counts (one upsert).

use super::PostgresStore;
use crate::scheduler::JobRow;
use crate::store::write::{outcome_text, CountChanges};
use crate::store::StoreError;
use postgres::types::ToSql;
use postgres::{Client, Statement};
use std::collections::HashMap;
use taskyard_protocol::{Attempt, JobId, JobState};
use uuid::Uuid;

/// The stored states of jobs not in the cache.
const STORED_STATES: &str = "SELECT id, state FROM taskyard.jobs WHERE id = ANY($1::uuid[])";

/// The columns a transition can change (submission fields never do).
const UPDATE: &str = "UPDATE taskyard.jobs AS j SET state = u.state, attempts = u.attempts, \
    max_attempts = u.max_attempts, lease = u.lease, worker_id = u.worker_id, \
    assigned_at = u.assigned_at, next_retry_at = u.next_retry_at, result = u.result, \
    error = u.error, updated_at = u.updated_at, finished_at = u.finished_at, \
    not_before = u.not_before, last_attempt_number = u.n, last_attempt_worker = u.w, \
    last_attempt_lease = u.l, last_attempt_started_at = u.s, last_attempt_ended_at = u.e, \
    last_attempt_outcome = u.o \
    FROM unnest($1::uuid[], $2::text[], $3::int[], $4::int[], $5::uuid[], $6::text[], \
        $7::bigint[], $8::bigint[], $9::bytea[], $10::text[], $11::bigint[], $12::bigint[], \
        $13::bigint[], $14::int[], $15::text[], $16::uuid[], $17::bigint[], $18::bigint[], \
        $19::text[]) \
    AS u(id, state, attempts, max_attempts, lease, worker_id, assigned_at, next_retry_at, \
        result, error, updated_at, finished_at, not_before, n, w, l, s, e, o) \
    WHERE j.id = u.id";

/// The columns of `UPDATE` (same numbers), then those fixed at submission.
const INSERT: &str = "INSERT INTO taskyard.jobs (id, state, attempts, max_attempts, lease, \
    worker_id, assigned_at, next_retry_at, result, error, updated_at, finished_at, not_before, \
    last_attempt_number, last_attempt_worker, last_attempt_lease, last_attempt_started_at, \
    last_attempt_ended_at, last_attempt_outcome, task_type, payload, priority, sequence, \
    submitted_at, timeout_ms, idempotency_key, concurrency_key) \
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::int[], $4::int[], $5::uuid[], $6::text[], \
        $7::bigint[], $8::bigint[], $9::bytea[], $10::text[], $11::bigint[], $12::bigint[], \
        $13::bigint[], $14::int[], $15::text[], $16::uuid[], $17::bigint[], $18::bigint[], \
        $19::text[], $20::text[], $21::bytea[], $22::smallint[], $23::bigint[], $24::bigint[], \
        $25::bigint[], $26::text[], $27::text[])";

/// Attempts before a job's last one (closed for good), a row each.
const UPSERT_ATTEMPTS: &str = "INSERT INTO taskyard.attempts (job_id, number, worker_id, lease, \
    started_at, ended_at, outcome) \
    SELECT * FROM unnest($1::uuid[], $2::int[], $3::text[], $4::uuid[], $5::bigint[], \
        $6::bigint[], $7::text[]) \
    ON CONFLICT (job_id, number) DO UPDATE SET ended_at = excluded.ended_at, \
        outcome = excluded.outcome";

/// Moves the counts of finished jobs per task type and state.
/// Each write connection keeps rows of its own (`$4`, its shard).
pub(super) const ADD_TO_COUNTS: &str =
    "INSERT INTO taskyard.terminal_counts (task_type, state, jobs, shard) \
    SELECT t, s, n, $4 FROM unnest($1::text[], $2::text[], $3::bigint[]) AS u(t, s, n) \
    ON CONFLICT (task_type, state, shard) DO UPDATE \
    SET jobs = taskyard.terminal_counts.jobs + excluded.jobs";

/// The write path's statements, prepared once per connection.
pub(super) struct Statements {
    stored_states: Statement,
    update: Statement,
    insert: Statement,
    attempts: Statement,
    pub(super) counts: Statement,
}

impl Statements {
    pub(super) fn prepare(client: &mut Client) -> Result<Statements, postgres::Error> {
        Ok(Statements {
            stored_states: client.prepare(STORED_STATES)?,
            update: client.prepare(UPDATE)?,
            insert: client.prepare(INSERT)?,
            attempts: client.prepare(UPSERT_ATTEMPTS)?,
            counts: client.prepare(ADD_TO_COUNTS)?,
        })
    }
}

impl PostgresStore {
    /// Writes `rows` into the open write transaction, beginning one (and
    /// checking the fence) if none is open. A job written twice in `rows`
    /// is written once, as its later row says.
    pub(super) fn write_rows(&mut self, rows: &[JobRow]) -> Result<(), StoreError> {
        if rows.is_empty() {
            return Ok(());
        }
        self.begin_write()?;
        let stored = self.stored_states(rows)?;
        // Walk the rows in order, as SQLite writes them one by one: the
        // counts move with each, and each id ends with its last row,
        // inserted if the job had no row before this call.
        let mut counts = CountChanges::default();
        let mut now: HashMap<JobId, (usize, bool)> = HashMap::with_capacity(rows.len());
        for (index, row) in rows.iter().enumerate() {
            let before = match now.get(&row.id) {
                Some(&(earlier, _)) => Some(rows[earlier].state),
                None => self
                    .unfinished
                    .get(&row.id)
                    .copied()
                    .or_else(|| stored.get(&row.id).copied()),
            };
            counts.moved(&row.task_type, before, row.state);
            let new = match now.get(&row.id) {
                Some(&(_, new)) => new,
                None => before.is_none(),
            };
            now.insert(row.id, (index, new));
        }
        let mut updates = Columns::default();
        let mut inserts = Columns::default();
        let mut attempts = AttemptColumns::default();
        for (index, row) in rows.iter().enumerate() {
            // The attempts before the last go to `attempts` from every row
            // (a later row of the same job may leave them out).
            let earlier = row.changed_attempts.len().saturating_sub(1);
            for attempt in &row.changed_attempts[..earlier] {
                attempts.push(row.id, attempt);
            }
            match now.get(&row.id) {
                Some(&(last, true)) if last == index => inserts.push(row, true),
                Some(&(last, false)) if last == index => updates.push(row, false),
                _ => {}
            }
        }
        let shard = self.shard;
        let conn = self.conn()?;
        let client = &mut conn.client;
        let statements = &conn.statements;
        let mut failed: Option<(String, postgres::Error)> = None;
        if !updates.is_empty() {
            match client.execute(&statements.update, &updates.params()) {
                Ok(n) if n as usize == updates.len() => {}
                Ok(n) => {
                    let reason = format!(
                        "updating {} jobs: {n} rows found (a job's row vanished)",
                        updates.len()
                    );
                    return Err(self.fail(reason));
                }
                Err(e) => failed = Some(("updating jobs".into(), e)),
            }
        }
        if failed.is_none() && !inserts.is_empty() {
            if let Err(e) = client.execute(&statements.insert, &inserts.params()) {
                failed = Some(("inserting jobs".into(), e));
            }
        }
        if failed.is_none() && !attempts.is_empty() {
            if let Err(e) = client.execute(&statements.attempts, &attempts.params()) {
                failed = Some(("writing attempts".into(), e));
            }
        }
        if failed.is_none() {
            if let Err(e) = write_counts(client, &statements.counts, shard, counts) {
                failed = Some(("counting finished jobs".into(), e));
            }
        }
        if failed.is_none() {
            let inserted = rows
                .iter()
                .filter(|row| now.get(&row.id).is_some_and(|&(_, new)| new));
            if let Err(e) = super::schedules::write_progress(client, inserted) {
                failed = Some(("recording schedule slots".into(), e));
            }
        }
        if let Some((what, e)) = failed {
            let described = self.driver(&e);
            return Err(StoreError {
                reason: format!("{what}: {}", described.reason),
                ..described
            });
        }
        for row in rows {
            match row.state.is_terminal() {
                true => self.unfinished.remove(&row.id),
                false => self.unfinished.insert(row.id, row.state),
            };
        }
        Ok(())
    }

    /// The stored states of the jobs of `rows` the cache does not know:
    /// one SELECT, none when the cache knows them all.
    fn stored_states(&mut self, rows: &[JobRow]) -> Result<HashMap<JobId, JobState>, StoreError> {
        let unknown: Vec<Uuid> = rows
            .iter()
            .filter(|r| !self.unfinished.contains_key(&r.id))
            .map(|r| r.id.0)
            .collect();
        if unknown.is_empty() {
            return Ok(HashMap::new());
        }
        let conn = self.conn()?;
        let found = conn
            .client
            .query(&conn.statements.stored_states, &[&unknown])
            .map_err(|e| self.driver(&e))?;
        found
            .iter()
            .map(|row| {
                let id: Uuid = row.get(0);
                let state: &str = row.get(1);
                let state = state
                    .parse::<JobState>()
                    .map_err(|e| self.fail(format!("job {id}: stored state: {e}")))?;
                Ok((JobId(id), state))
            })
            .collect()
    }
}

/// Writes the count changes into `shard`'s rows as one statement (none
/// when nothing moved).
pub(super) fn write_counts(
    client: &mut Client,
    statement: &Statement,
    shard: i16,
    counts: CountChanges,
) -> Result<(), postgres::Error> {
    let (mut types, mut states, mut by) = (Vec::new(), Vec::new(), Vec::new());
    for (task_type, state, n) in counts.changes() {
        types.push(task_type);
        states.push(state.as_str());
        by.push(n);
    }
    if !types.is_empty() {
        client.execute(statement, &[&types, &states, &by, &shard])?;
    }
    Ok(())
}

/// The columns of job rows, one array each (`UPDATE`'s 19, then for new
/// jobs the 7 fixed at submission).
#[derive(Default)]
struct Columns<'a> {
    id: Vec<Uuid>,
    state: Vec<&'static str>,
    attempts: Vec<i32>,
    max_attempts: Vec<i32>,
    lease: Vec<Option<Uuid>>,
    worker_id: Vec<Option<&'a str>>,
    assigned_at: Vec<Option<i64>>,
    next_retry_at: Vec<Option<i64>>,
    result: Vec<Option<&'a [u8]>>,
    error: Vec<Option<&'a str>>,
    updated_at: Vec<i64>,
    finished_at: Vec<Option<i64>>,
    not_before: Vec<Option<i64>>,
    last_number: Vec<Option<i32>>,
    last_worker: Vec<Option<&'a str>>,
    last_lease: Vec<Option<Uuid>>,
    last_started: Vec<Option<i64>>,
    last_ended: Vec<Option<i64>>,
    last_outcome: Vec<Option<String>>,
    task_type: Vec<&'a str>,
    payload: Vec<&'a [u8]>,
    priority: Vec<i16>,
    sequence: Vec<i64>,
    submitted_at: Vec<i64>,
    timeout_ms: Vec<i64>,
    idempotency_key: Vec<Option<&'a str>>,
    concurrency_key: Vec<Option<&'a str>>,
}

impl<'a> Columns<'a> {
    fn push(&mut self, job: &'a JobRow, submission: bool) {
        let last = job.changed_attempts.last();
        self.id.push(job.id.0);
        self.state.push(job.state.as_str());
        self.attempts.push(clamp(job.attempts));
        self.max_attempts.push(clamp(job.max_attempts));
        self.lease.push(job.lease.map(|l| l.0));
        self.worker_id
            .push(job.worker_id.as_ref().map(|w| w.0.as_str()));
        self.assigned_at.push(job.assigned_at);
        self.next_retry_at.push(job.next_retry_at);
        self.result.push(job.result.as_deref());
        self.error.push(job.error.as_deref());
        self.updated_at.push(job.updated_at);
        self.finished_at.push(job.finished_at);
        self.not_before.push(job.not_before);
        self.last_number.push(last.map(|a| clamp(a.number)));
        self.last_worker.push(last.map(|a| a.worker_id.0.as_str()));
        self.last_lease.push(last.map(|a| a.lease.0));
        self.last_started.push(last.map(|a| a.started_at));
        self.last_ended.push(last.and_then(|a| a.ended_at));
        self.last_outcome
            .push(last.and_then(|a| a.outcome.as_ref()).and_then(outcome_text));
        if submission {
            self.task_type.push(&job.task_type);
            self.payload.push(&job.payload);
            self.priority.push(i16::from(job.priority.level()));
            self.sequence.push(job.sequence.min(i64::MAX as u64) as i64);
            self.submitted_at.push(job.submitted_at);
            self.timeout_ms
                .push(job.timeout_ms.min(i64::MAX as u64) as i64);
            self.idempotency_key.push(job.idempotency_key.as_deref());
            self.concurrency_key.push(job.concurrency_key.as_deref());
        }
    }

    fn len(&self) -> usize {
        self.id.len()
    }

    fn is_empty(&self) -> bool {
        self.id.is_empty()
    }

    /// The parameters: `UPDATE`'s 19, and the submission's 7 when they
    /// were pushed.
    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![
            &self.id,
            &self.state,
            &self.attempts,
            &self.max_attempts,
            &self.lease,
            &self.worker_id,
            &self.assigned_at,
            &self.next_retry_at,
            &self.result,
            &self.error,
            &self.updated_at,
            &self.finished_at,
            &self.not_before,
            &self.last_number,
            &self.last_worker,
            &self.last_lease,
            &self.last_started,
            &self.last_ended,
            &self.last_outcome,
        ];
        if !self.task_type.is_empty() {
            params.extend([
                &self.task_type as &(dyn ToSql + Sync),
                &self.payload,
                &self.priority,
                &self.sequence,
                &self.submitted_at,
                &self.timeout_ms,
                &self.idempotency_key,
                &self.concurrency_key,
            ]);
        }
        params
    }
}

/// Attempt rows, one array per column; a (job, attempt) pushed twice is
/// written once, as pushed last (an upsert may not touch a row twice).
#[derive(Default)]
struct AttemptColumns<'a> {
    at: HashMap<(JobId, u32), usize>,
    job_id: Vec<Uuid>,
    number: Vec<i32>,
    worker_id: Vec<&'a str>,
    lease: Vec<Uuid>,
    started_at: Vec<i64>,
    ended_at: Vec<Option<i64>>,
    outcome: Vec<Option<String>>,
}

impl<'a> AttemptColumns<'a> {
    fn push(&mut self, job: JobId, attempt: &'a Attempt) {
        let outcome = attempt.outcome.as_ref().and_then(outcome_text);
        if let Some(&i) = self.at.get(&(job, attempt.number)) {
            self.worker_id[i] = &attempt.worker_id.0;
            self.lease[i] = attempt.lease.0;
            self.started_at[i] = attempt.started_at;
            self.ended_at[i] = attempt.ended_at;
            self.outcome[i] = outcome;
            return;
        }
        self.at.insert((job, attempt.number), self.job_id.len());
        self.job_id.push(job.0);
        self.number.push(clamp(attempt.number));
        self.worker_id.push(&attempt.worker_id.0);
        self.lease.push(attempt.lease.0);
        self.started_at.push(attempt.started_at);
        self.ended_at.push(attempt.ended_at);
        self.outcome.push(outcome);
    }

    fn is_empty(&self) -> bool {
        self.job_id.is_empty()
    }

    fn params(&self) -> [&(dyn ToSql + Sync); 7] {
        [
            &self.job_id,
            &self.number,
            &self.worker_id,
            &self.lease,
            &self.started_at,
            &self.ended_at,
            &self.outcome,
        ]
    }
}

/// A count as PostgreSQL's `integer` (counts past 2^31 do not occur: they
/// are bounded by config far below).
fn clamp(n: u32) -> i32 {
    n.min(i32::MAX as u32) as i32
}
