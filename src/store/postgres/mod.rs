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
pub mod history;
mod read;
mod schedules;
pub mod schema;
pub mod throwaway;
mod write;

pub(crate) use connect::error_text;
pub use connect::PgTarget;
pub use history::PostgresReader;

use super::{ExpiredJob, ExpiryCutoffs, Store, StoreError};
use crate::protocol::{JobId, JobState};
use crate::scheduler::schedule::{ScheduleWrite, StoredSchedule};
use crate::scheduler::{JobRow, Stored};
use postgres::Client;
use std::collections::HashMap;
use std::time::Duration;

/// See `PostgresStore::set_idle_limit`.
pub const DEFAULT_IDLE_LIMIT: Duration = Duration::from_secs(5);

/// The open PostgreSQL store: one connection, owned by the persistence
/// thread. A lost connection is opened again by the next operation (a
/// transaction open when it broke failed with it).
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

    /// A driver error as a `StoreError`, redacted.
    fn driver(&self, e: &postgres::Error) -> StoreError {
        self.fail(self.target.redact(&connect::error_text(e)))
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
        if let Err(e) = self.write_rows(&batch) {
            self.rollback();
            return Err(e);
        }
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
        ids: &[crate::protocol::JobId],
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
        self.unfinished = stored
            .jobs
            .iter()
            .filter(|j| !j.state.is_terminal())
            .map(|j| (j.id, j.state))
            .collect();
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
    }

    fn describe(&self) -> String {
        self.target.describe().to_string()
    }
}
