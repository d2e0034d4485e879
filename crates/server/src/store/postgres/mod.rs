//! The PostgreSQL backend of `Store`: the same rows and semantics as the
//! SQLite store, in schema `taskyard` (`schema`), written a batch per
//! transaction as a few multi-row statements (`write`), read back at
//! start-up (`read`), expired (`expiry`), read for history on connections
//! of their own (`history`), and fenced by the leader lease's epoch
//! (`fence`). Also a throwaway cluster for tests and benchmarks
//! (`throwaway`).
//!
//! PostgreSQL-specific SQL, each where it matters: `unnest` of array
//! parameters (one statement writes a whole batch), `ON CONFLICT` upserts
//! (attempts and counts), `FOR SHARE` (the fence), `pg_advisory_xact_lock`
//! and `to_regclass` (migrations), `GREATEST` (expiry).

mod connect;
mod expiry;
mod fence;
mod lease;
mod read;
mod schedules;
pub mod schema;
pub mod stored_jobs;
pub mod throwaway;
mod write;

pub(crate) use connect::error_text;
pub use connect::PgTarget;
pub use lease::PostgresLease;
pub use stored_jobs::PostgresReader;

use super::{ExpiredJob, ExpiryCutoffs, Store, StoreError};
use crate::scheduler::schedule::{ScheduleWrite, StoredSchedule};
use crate::scheduler::{JobRow, Stored};
use postgres::Client;
use std::collections::HashMap;
use std::time::Duration;
use taskyard_protocol::{JobId, JobState};

/// See `PostgresStore::set_idle_limit`.
pub const DEFAULT_IDLE_LIMIT: Duration = Duration::from_secs(5);

/// The open PostgreSQL store, owned by the persistence thread: a write
/// connection of its own and, with several writers, the others (each a
/// `PostgresStore` of one connection). A lost connection is opened again
/// by the next operation (a transaction open when it broke failed with it).
///
/// With several writers a batch is split between them by job (by
/// idempotency key when the job has one, so that two jobs with one key
/// always meet in one transaction), and the parts are written in parallel,
/// a transaction each. Only once every part is written are they committed,
/// together; if any part fails, every part is rolled back. A batch can
/// therefore be partly durable only when a `COMMIT` itself fails after
/// another part's succeeded (the connection lost, the server stopping):
/// like a commit whose answer was lost, the batch is reported failed, its
/// rows are written again by a later batch, and writing a row again is
/// harmless (a job's row ends as its latest state says; the counts move by
/// what is stored).
pub struct PostgresStore {
    target: PgTarget,
    conn: Option<Connection>,
    /// A transaction is open on `conn` (rows written, not committed).
    in_transaction: bool,
    /// Rows staged for the next commit, written by it: each statement is
    /// a round trip, so a batch is written at once, in one set of
    /// multi-row statements, however many times it was staged. Bounded by
    /// what one batch holds.
    staged: Vec<JobRow>,
    /// The epoch every write transaction checks first (`set_fence`).
    fence: Option<u64>,
    /// Longest a write transaction may sit idle (rows staged, no commit
    /// yet) before PostgreSQL ends it (`set_idle_limit`).
    idle_limit: Duration,
    /// Like SQLite's (`JobStore::unfinished`): the stored state of jobs
    /// written or loaded by this store that are not finished, as the open
    /// transaction has them. Emptied on rollback; holds unfinished jobs
    /// only, so it is bounded by `max-active-jobs`.
    unfinished: HashMap<JobId, JobState>,
    /// This writer's rows of `terminal_counts`.
    shard: i16,
    /// The other writers (see the type's documentation).
    others: Vec<PostgresStore>,
}

/// A connection with the statements the write path prepared on it.
struct Connection {
    client: Client,
    statements: write::Statements,
}

impl PostgresStore {
    /// Connects to `url`, migrates schema `taskyard` and prepares the write
    /// path. The error names the database (never the password).
    pub fn open(url: &str) -> Result<PostgresStore, StoreError> {
        PostgresStore::open_writers(url, crate::config::defaults::POSTGRES_WRITE_CONNECTIONS)
    }

    /// `open` with `writers` write connections (at least one).
    pub fn open_writers(url: &str, writers: usize) -> Result<PostgresStore, StoreError> {
        let mut store = PostgresStore::open_shard(url, 0)?;
        for shard in 1..writers.clamp(1, i16::MAX as usize) {
            let other = PostgresStore::open_shard(url, shard as i16)?;
            store.others.push(other);
        }
        Ok(store)
    }

    fn open_shard(url: &str, shard: i16) -> Result<PostgresStore, StoreError> {
        let target =
            PgTarget::parse(url).map_err(|reason| StoreError::new("postgres-url", reason))?;
        let mut store = PostgresStore {
            target,
            conn: None,
            in_transaction: false,
            staged: Vec::new(),
            fence: None,
            idle_limit: DEFAULT_IDLE_LIMIT,
            unfinished: HashMap::new(),
            shard,
            others: Vec::new(),
        };
        let conn = store.connect()?;
        store.conn = Some(conn);
        Ok(store)
    }

    /// How long a write transaction may sit idle between its statements
    /// (rows staged, the batch's commit not sent yet) before PostgreSQL
    /// ends the session, rolling it back and releasing the lease row it
    /// holds under the fence's lock. Keep it well under the leader lease,
    /// so a coordinator stopped mid-batch cannot keep a standby from
    /// taking over. Default 5 s. The next write connects again.
    pub fn set_idle_limit(&mut self, limit: Duration) {
        self.idle_limit = limit;
        for other in &mut self.others {
            other.set_idle_limit(limit);
        }
    }

    /// Write connections: this store's and the others'.
    pub fn writers(&self) -> usize {
        1 + self.others.len()
    }

    /// The writer `row` goes to: always the same for a job, and for jobs
    /// of one idempotency key. All jobs of one schedule go to one writer:
    /// each moves the schedule's row (`schedules::write_progress`), and two
    /// writers holding that row's lock at once would wait on each other.
    fn writer_of(&self, id: JobId, idempotency_key: Option<&str>) -> usize {
        let writers = self.writers() as u64;
        let routed = idempotency_key
            .map(|key| crate::scheduler::schedule::keys::schedule_of(key).unwrap_or(key));
        let hash = match routed {
            Some(key) => {
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                std::hash::Hash::hash(key, &mut hasher);
                std::hash::Hasher::finish(&hasher)
            }
            // Version 7 ids end in random bits.
            None => id.0.as_u128() as u64,
        };
        (hash % writers) as usize
    }

    /// Writes `batch` split between the writers, each part in parallel,
    /// then commits every part, or rolls every part back if one failed
    /// (see the type's documentation).
    fn commit_split(&mut self, batch: Vec<JobRow>) -> Result<(), StoreError> {
        let mut parts: Vec<Vec<JobRow>> = vec![Vec::new(); self.writers()];
        for row in batch {
            let writer = self.writer_of(row.id, row.idempotency_key.as_deref());
            parts[writer].push(row);
        }
        let mut others = std::mem::take(&mut self.others);
        let mine = std::mem::take(&mut parts[0]);
        let written = on_writers(self, &mut others, &parts[1..], |store, part| {
            store.write_rows(part.unwrap_or(&mine))
        });
        let result = match first_error(written) {
            Some(e) => {
                self.rollback();
                others.iter_mut().for_each(PostgresStore::rollback);
                Err(e)
            }
            None => first_error(on_writers(self, &mut others, &parts[1..], |store, _| {
                store.finish_commit()
            }))
            .map_or(Ok(()), Err),
        };
        self.others = others;
        result
    }

    /// Commits the open transaction, if any.
    fn finish_commit(&mut self) -> Result<(), StoreError> {
        if !self.in_transaction {
            return Ok(());
        }
        let committed = self.conn()?.client.batch_execute("COMMIT");
        self.in_transaction = false;
        if let Err(e) = committed {
            let error = self.driver(&e);
            self.unfinished.clear();
            return Err(error);
        }
        Ok(())
    }

    /// Where the data lives and how to reach it again (history readers
    /// connect with it).
    pub fn target(&self) -> &PgTarget {
        &self.target
    }

    fn connect(&self) -> Result<Connection, StoreError> {
        let mut client = self.target.connect().map_err(|e| self.fail(e))?;
        schema::migrate(&mut client).map_err(|e| self.fail(self.target.redact(&e.to_string())))?;
        let statements = write::Statements::prepare(&mut client).map_err(|e| self.driver(&e))?;
        Ok(Connection { client, statements })
    }

    /// The connection, opened again first if it was lost. A connection
    /// lost with a transaction open took that transaction with it: that is
    /// an error (its rows must not be reported durable, nor the rest of
    /// the batch written outside it); the next call connects again.
    fn conn(&mut self) -> Result<&mut Connection, StoreError> {
        if self.conn.as_ref().is_none_or(|c| c.client.is_closed()) {
            self.conn = None;
            self.unfinished.clear();
            if std::mem::take(&mut self.in_transaction) {
                return Err(self.fail(
                    "the connection was lost with a transaction open: nothing of it was committed"
                        .to_string(),
                ));
            }
            let conn = self.connect()?;
            self.conn = Some(conn);
        }
        self.conn
            .as_mut()
            .ok_or_else(|| StoreError::new(self.target.describe(), "not connected"))
    }

    /// A failure of this store, with `reason` (already free of the
    /// password).
    fn fail(&self, reason: String) -> StoreError {
        StoreError::new(self.target.describe(), reason)
    }

    /// A driver error as a `StoreError`, redacted; `Refused` when the
    /// server says retrying cannot help (an integrity constraint violated,
    /// SQLSTATE class 23; data or an index corrupted, XX001/XX002).
    fn driver(&self, e: &postgres::Error) -> StoreError {
        let error = self.fail(self.target.redact(&connect::error_text(e)));
        match e.code().map(|state| state.code()) {
            Some(code) if code.starts_with("23") || code == "XX001" || code == "XX002" => {
                StoreError {
                    kind: crate::store::StoreErrorKind::Refused,
                    ..error
                }
            }
            _ => error,
        }
    }

    /// Abandons the open transaction, if any, and what was staged.
    fn rollback(&mut self) {
        self.staged.clear();
        self.unfinished.clear();
        if std::mem::take(&mut self.in_transaction) {
            if let Some(conn) = self.conn.as_mut() {
                // A failed rollback leaves the connection broken or idle:
                // either way nothing of the transaction commits.
                if conn.client.batch_execute("ROLLBACK").is_err() {
                    self.conn = None;
                }
            }
        }
    }
}

impl Store for PostgresStore {
    /// Keeps `rows` for the commit, which writes them (see `staged`):
    /// an error in them shows at the commit.
    fn stage(&mut self, rows: &[JobRow]) -> Result<(), StoreError> {
        self.staged.extend_from_slice(rows);
        Ok(())
    }

    fn commit(&mut self, rows: &[JobRow]) -> Result<(), StoreError> {
        let mut batch = std::mem::take(&mut self.staged);
        batch.extend_from_slice(rows);
        if !self.others.is_empty() {
            return self.commit_split(batch);
        }
        if let Err(e) = self.write_rows(&batch) {
            self.rollback();
            return Err(e);
        }
        self.finish_commit()
    }

    fn expire(
        &mut self,
        cutoffs: ExpiryCutoffs,
        limit: usize,
    ) -> Result<Option<Vec<ExpiredJob>>, StoreError> {
        if self.in_transaction || !self.staged.is_empty() {
            return Ok(None);
        }
        self.delete_expired(cutoffs, limit).map(Some)
    }

    fn delete_finished(
        &mut self,
        ids: &[taskyard_protocol::JobId],
    ) -> Result<Option<Vec<ExpiredJob>>, StoreError> {
        if self.in_transaction || !self.staged.is_empty() {
            return Ok(None);
        }
        self.delete_finished_ids(ids).map(Some)
    }

    fn load_for_recovery(&mut self, window: usize) -> Result<Stored, StoreError> {
        let stored = self.load(window)?;
        // The loaded active jobs are what the first batches update: knowing
        // their states spares those batches a read.
        let mut caches: Vec<HashMap<JobId, JobState>> = vec![HashMap::new(); self.writers()];
        for job in stored.jobs.iter().filter(|j| !j.state.is_terminal()) {
            let writer = self.writer_of(job.id, job.idempotency_key.as_deref());
            caches[writer].insert(job.id, job.state);
        }
        for (other, cache) in self.others.iter_mut().zip(caches.drain(1..)) {
            other.unfinished = cache;
        }
        self.unfinished = caches.pop().unwrap_or_default();
        Ok(stored)
    }

    fn write_schedule(&mut self, write: &ScheduleWrite) -> Result<(), StoreError> {
        self.write_schedule_row(write)
    }

    fn load_schedules(&mut self) -> Result<Vec<StoredSchedule>, StoreError> {
        self.load_schedule_rows()
    }

    fn set_fence(&mut self, epoch: Option<u64>) {
        self.fence = epoch;
        for other in &mut self.others {
            other.fence = epoch;
        }
    }

    fn describe(&self) -> String {
        self.target.describe().to_string()
    }
}

/// Runs `work` on `first` (with `None`) and on each of `others` (with its
/// part), those with rows in parallel on threads of their own; a writer
/// with an empty part is skipped (`Ok`), and one part runs on this thread.
fn on_writers<F>(
    first: &mut PostgresStore,
    others: &mut [PostgresStore],
    parts: &[Vec<JobRow>],
    work: F,
) -> Vec<Result<(), StoreError>>
where
    F: Fn(&mut PostgresStore, Option<&Vec<JobRow>>) -> Result<(), StoreError> + Sync,
{
    let busy: Vec<(&mut PostgresStore, &Vec<JobRow>)> = others
        .iter_mut()
        .zip(parts)
        .filter(|(store, part)| !part.is_empty() || store.in_transaction)
        .collect();
    if busy.is_empty() {
        return vec![work(first, None)];
    }
    std::thread::scope(|scope| {
        let work = &work;
        let handles: Vec<_> = busy
            .into_iter()
            .map(|(store, part)| scope.spawn(move || work(store, Some(part))))
            .collect();
        let mut results = vec![work(first, None)];
        for handle in handles {
            results.push(handle.join().unwrap_or_else(|_| {
                Err(StoreError::new(
                    "postgres",
                    "a write connection's thread panicked",
                ))
            }));
        }
        results
    })
}

/// The error to report of a batch's parts: a fenced one first (the
/// coordinator must step down), else the first.
fn first_error(results: Vec<Result<(), StoreError>>) -> Option<StoreError> {
    let mut errors: Vec<StoreError> = results.into_iter().filter_map(Result::err).collect();
    let fenced = errors.iter().position(StoreError::is_fenced);
    match fenced {
        Some(i) => Some(errors.swap_remove(i)),
        None => errors.into_iter().next(),
    }
}
