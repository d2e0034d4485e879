//! SQLite storage of job rows: open (with migration), load the active
//! set at start-up (`read`), commit batches of changed rows in one
//! transaction each (`write`), and read history beside the writer
//! (`history`).

mod backend;
mod expiry;
pub mod lease;
/// Only in tests: `cargo test` enables the `test-lease` feature for the
/// integration tests; a release build has no lease that is not shared.
#[cfg(any(test, feature = "test-lease"))]
pub mod memory_lease;
pub mod open;
pub mod owner_lock;
pub mod postgres;
mod read;
pub mod read_budget;
pub mod schedules;
pub mod schema;
mod startup;
pub mod stored_jobs;
pub mod wal_checkpointer;
pub mod wal_prealloc;
mod write;

pub use backend::Store;
pub use expiry::{ExpiredJob, ExpiryCutoffs};
pub use open::{open, Backend, OpenedStore, StoreOpener};
pub use postgres::PostgresStore;
pub use read_budget::{ReadBudget, Walked};
pub use stored_jobs::{JobReader, PageFilter, StoredJobReader, StoredSummary};

#[cfg(test)]
mod counts_tests;
#[cfg(test)]
mod retention_tests;
#[cfg(test)]
pub(crate) mod tests;

use crate::config::Synchronous;
use rusqlite::{Connection, ErrorCode, OpenFlags};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A storage failure, naming where the data lives (`database PATH` for
/// SQLite, `PostgreSQL USER@HOST:PORT/DB` without a password) and what the
/// database said.
#[derive(Debug, thiserror::Error)]
#[error("{store}: {reason}")]
pub struct StoreError {
    pub store: String,
    pub reason: String,
    pub kind: StoreErrorKind,
}

/// What kind of failure a `StoreError` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreErrorKind {
    /// The database refused or failed the operation; nothing of it is
    /// durable.
    Failed,
    /// The transaction was refused because the leader lease's epoch moved
    /// on: nothing was written, and this coordinator must step down.
    Fenced,
    /// Another live coordinator owns the SQLite database (holds its lock):
    /// nothing was read or written.
    InUse,
    /// The database refused the batch's contents for good (a constraint
    /// violated by a row written behind the coordinator's back, a corrupt
    /// or foreign file): nothing was written, and no retry can succeed.
    Refused,
}

impl StoreError {
    /// A failure of the SQLite database at `path`.
    pub fn sqlite(path: &Path, reason: impl Into<String>) -> StoreError {
        StoreError::new(format!("database {}", path.display()), reason)
    }

    /// A failure of the store described as `store`.
    pub fn new(store: impl Into<String>, reason: impl Into<String>) -> StoreError {
        StoreError {
            store: store.into(),
            reason: reason.into(),
            kind: StoreErrorKind::Failed,
        }
    }

    /// A transaction of the store `store` refused by the fence.
    pub fn fenced(store: impl Into<String>, reason: impl Into<String>) -> StoreError {
        StoreError {
            kind: StoreErrorKind::Fenced,
            ..StoreError::new(store, reason)
        }
    }

    /// A failure of the SQLite database at `path` while `doing` something,
    /// `Refused` when SQLite's code says retrying cannot help.
    pub fn sqlite_failed(path: &Path, doing: &str, e: &rusqlite::Error) -> StoreError {
        let kind = match e.sqlite_error_code() {
            Some(
                ErrorCode::ConstraintViolation
                | ErrorCode::DatabaseCorrupt
                | ErrorCode::NotADatabase
                | ErrorCode::TypeMismatch,
            ) => StoreErrorKind::Refused,
            _ => StoreErrorKind::Failed,
        };
        StoreError {
            kind,
            ..StoreError::sqlite(path, format!("{doing}: {e}"))
        }
    }

    /// The database refused the batch for good: retrying cannot succeed.
    pub fn is_refused(&self) -> bool {
        self.kind == StoreErrorKind::Refused
    }

    /// The SQLite database at `db` is owned by another coordinator, which
    /// `holder` describes (from the lock file at `lock`).
    pub fn in_use(db: &Path, lock: &Path, holder: &str) -> StoreError {
        StoreError {
            kind: StoreErrorKind::InUse,
            ..StoreError::sqlite(
                db,
                format!(
                    "in use by another coordinator ({holder}; lock file {}): \
                     stop it first, or use another database",
                    lock.display()
                ),
            )
        }
    }

    /// The transaction was refused because the leader lease's epoch moved
    /// on (another coordinator took over): nothing was written, and this
    /// coordinator must step down. SQLite stores are never fenced.
    pub fn is_fenced(&self) -> bool {
        self.kind == StoreErrorKind::Fenced
    }
}

/// The open database. Owned by exactly one thread (the `Persistence` actor
/// after start-up), so no locking is needed around it.
pub struct JobStore {
    conn: Connection,
    path: PathBuf,
    /// The stored state of jobs written since the store was opened that
    /// are not finished, as the open transaction has them: lets a write
    /// know whether a row leaves an unfinished state without reading it.
    /// Only a cache (a job missing is read), emptied on rollback; holds
    /// unfinished jobs only, so it is bounded by `max-active-jobs`.
    unfinished: std::collections::HashMap<taskyard_protocol::JobId, taskyard_protocol::JobState>,
    /// Checkpoints the WAL off the commit path, once started (see
    /// `checkpoint_in_background`).
    checkpointer: Option<wal_checkpointer::WalCheckpointer>,
    /// Why rows staged for the next batch were rolled back outside a
    /// commit (a failed schedule write): that batch's commit must fail.
    staged_lost: Option<String>,
    /// This store's ownership of the database file, released when the
    /// store is dropped (declared last: dropped after the connection).
    _owner: Option<owner_lock::OwnerLock>,
}

/// WAL pages after which a commit checkpoints (see `JobStore::open`).
const CHECKPOINT_PAGES: u64 = 8_000;

/// With a background checkpointer: WAL pages after which a commit
/// checkpoints anyway, should the checkpointer fall behind or fail.
const BACKSTOP_PAGES: u64 = 4 * CHECKPOINT_PAGES;

impl JobStore {
    /// Opens or creates the database (and its directory), checks it is
    /// readable, sets WAL mode and `synchronous`, and migrates the schema.
    /// First takes the database's owner lock (`owner_lock`): while another
    /// process has it open this fails at once with `StoreErrorKind::InUse`
    /// and reads nothing.
    pub fn open(path: &Path, synchronous: Synchronous) -> Result<JobStore, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                StoreError::sqlite(
                    path,
                    format!("cannot create directory {}: {e}", dir.display()),
                )
            })?;
        }
        let owner = owner_lock::OwnerLock::acquire(path)?;
        JobStore::open_owned(path, synchronous, Some(owner))
    }

    /// A second connection to a database this test's store owns, to look
    /// at what another connection sees.
    #[cfg(test)]
    pub(crate) fn open_beside_owner(path: &Path) -> Result<JobStore, StoreError> {
        JobStore::open_owned(path, Synchronous::Full, None)
    }

    fn open_owned(
        path: &Path,
        synchronous: Synchronous,
        owner: Option<owner_lock::OwnerLock>,
    ) -> Result<JobStore, StoreError> {
        let fail = |reason: String| StoreError::sqlite(path, reason);
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut conn = Connection::open_with_flags(path, flags).map_err(|e| fail(e.to_string()))?;
        // Reading the schema first makes a corrupt or foreign file fail here,
        // before any pragma or migration could write to it.
        conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
            r.get::<_, i64>(0)
        })
        .map_err(|e| fail(e.to_string()))?;
        schema::migrate(&mut conn).map_err(|e| fail(e.to_string()))?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(|e| fail(e.to_string()))?;
        conn.pragma_update(None, "synchronous", synchronous.to_string())
            .map_err(|e| fail(e.to_string()))?;
        // Neither setting changes what is durable when (every commit still
        // fsyncs the WAL under FULL); both cut work on the commit path.
        // The page cache stays at SQLite's default 2 MiB: every commit
        // walks the whole cache (a B-tree split renumbers pages through the
        // lock-byte page, 262145, which defeats SQLite's shortcut for
        // that), so a 32 MiB cache cost up to a fifth of the persistence
        // thread at 200,000 rows (docs/performance-log.md). Writes touch the newest
        // pages (ids are UUID v7), which a small cache holds.
        conn.pragma_update(None, "cache_size", -2_000)
            .map_err(|e| fail(e.to_string()))?;
        // Checkpoint the WAL every 8,000 pages (default 1,000, ~32 MiB
        // instead of 4 MiB): pages rewritten between checkpoints are copied
        // back to the database once, and the checkpoint's fsyncs are paid
        // 8 times less often. Costs at most that much WAL on disk.
        conn.pragma_update(None, "wal_autocheckpoint", CHECKPOINT_PAGES)
            .map_err(|e| fail(e.to_string()))?;
        check_writable(&conn).map_err(|e| fail(format!("cannot be written: {e}")))?;
        Ok(JobStore {
            conn,
            path: path.to_path_buf(),
            unfinished: Default::default(),
            checkpointer: None,
            staged_lost: None,
            _owner: owner,
        })
    }

    /// From now on the WAL is checkpointed on a thread of its own
    /// (`WalCheckpointer`) instead of by the commit that fills it; a commit
    /// still checkpoints past `BACKSTOP_PAGES`. On failure nothing changed:
    /// commits checkpoint as before.
    pub fn checkpoint_in_background(&mut self, synchronous: Synchronous) -> Result<(), StoreError> {
        let checkpointer = wal_checkpointer::WalCheckpointer::start(&self.path, synchronous)?;
        self.conn
            .pragma_update(None, "wal_autocheckpoint", BACKSTOP_PAGES)
            .map_err(|e| self.error(e))?;
        self.checkpointer = Some(checkpointer);
        Ok(())
    }

    /// A transaction was committed: the checkpointer, if any, is told.
    fn committed(&self) {
        if let Some(checkpointer) = &self.checkpointer {
            checkpointer.committed();
        }
    }

    /// Gives this connection a 256 MiB page cache, so one transaction
    /// writing millions of rows (the benchmarks' seeding) keeps its pages
    /// in memory instead of spilling them to the WAL as it goes. Changes
    /// nothing about what is durable; commits of small batches get slower
    /// (see `open`), so a coordinator never does this.
    pub fn widen_cache_for_bulk_load(&self) -> Result<(), StoreError> {
        self.conn
            .pragma_update(None, "cache_size", -262_144)
            .map_err(|e| self.error(e))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Fills the WAL with zeros up to the size it reaches between
    /// checkpoints, so commits overwrite it in place instead of growing it
    /// (see `wal_prealloc`). Returns the bytes added. Changes nothing a
    /// reader sees; on failure the WAL is as it was.
    pub fn preallocate_wal(&self) -> Result<u64, StoreError> {
        let page_size: u64 = self
            .conn
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .map_err(|e| self.error(e))?;
        let wal = wal_prealloc::wal_path(&self.path);
        let target = wal_prealloc::wal_bytes(page_size, CHECKPOINT_PAGES);
        wal_prealloc::preallocate(&wal, target).map_err(|e| {
            StoreError::sqlite(
                &self.path,
                format!("cannot preallocate {}: {e}", wal.display()),
            )
        })
    }

    fn error(&self, e: rusqlite::Error) -> StoreError {
        StoreError::sqlite(&self.path, e.to_string())
    }
}

/// Proves the database accepts a committed write before anyone is told it
/// does: rewrites the schema version with its own value in a transaction
/// of its own. A read-only file (SQLite then opens it read-only without a
/// word), a read-only directory or a full disk fails here, at start-up,
/// instead of at the first commit. Changes nothing a reader sees. A write
/// lock held by another connection right now is not a reason to refuse:
/// the check passes without waiting, and commits wait for the lock as
/// usual (a lock held for good is an outage at run time).
fn check_writable(conn: &Connection) -> rusqlite::Result<()> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    conn.busy_timeout(Duration::ZERO)?;
    let written = conn
        .execute_batch(&format!(
            "BEGIN IMMEDIATE; PRAGMA user_version = {version}; COMMIT;"
        ))
        .inspect_err(|_| {
            let _ = conn.execute_batch("ROLLBACK");
        });
    conn.busy_timeout(BUSY_TIMEOUT)?;
    match written {
        Err(rusqlite::Error::SqliteFailure(e, _))
            if matches!(e.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) =>
        {
            Ok(())
        }
        other => other,
    }
}

/// How long a statement waits for another connection's lock (rusqlite's
/// default, kept).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
