//! Opening the store a coordinator's config names: the one place that
//! matches on the store kind. What comes back says what the store can do:
//! open its writer and readers (once for a single coordinator, once per
//! term for a node of a cluster), and, for a database several coordinators
//! share, open the leader lease they take turns under. SQLite has no
//! lease: its coordinator is a single node that leads without one.

use crate::config::{CoordinatorConfig, StoreKind};
use crate::store::lease::LeaseStore;
use crate::store::postgres::{PgTarget, PostgresLease, PostgresReader, PostgresStore};
use crate::store::{JobReader, JobStore, Store, StoreError, StoredJobReader};
use slog::{info, warn, Logger};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An opened store: the writer, and readers of jobs no longer in memory.
pub struct OpenedStore {
    pub store: Box<dyn Store>,
    /// `None`: every finished job stays in memory until it expires.
    pub history: Option<Vec<Box<dyn StoredJobReader>>>,
}

/// Opens an `OpenedStore`; each call opens connections of its own.
pub type StoreOpener = Arc<dyn Fn() -> Result<OpenedStore, StoreError> + Send + Sync>;

type LeaseOpener = Box<dyn FnOnce() -> Result<Box<dyn LeaseStore>, StoreError> + Send>;

/// The store a config names, not yet connected.
pub struct Backend {
    /// Opens the writer and its readers.
    pub open: StoreOpener,
    lease: Option<LeaseOpener>,
}

impl Backend {
    /// True when coordinators share the database and lead in turns under
    /// a lease (`open_lease`).
    pub fn is_shared(&self) -> bool {
        self.lease.is_some()
    }

    /// Connects the leader lease (and checks it can be read), for a shared
    /// database; `None` for a store only one coordinator opens.
    pub fn open_lease(self) -> Option<Result<Box<dyn LeaseStore>, StoreError>> {
        self.lease.map(|open| open())
    }
}

/// The store `config` names. Nothing is connected yet: a database that
/// cannot be reached is an error of the first `open` (or `open_lease`),
/// naming `postgres-url` and the address, never the password.
pub fn open(config: &CoordinatorConfig, log: &Logger) -> Backend {
    match config.store {
        StoreKind::Sqlite => Backend {
            open: sqlite_opener(config, log),
            lease: None,
        },
        StoreKind::Postgres => {
            let url = config.postgres_url.expose().to_string();
            let ttl = config.leader_lease();
            Backend {
                open: postgres_opener(config, log),
                lease: Some(Box::new(move || {
                    let unusable = |e: crate::store::lease::LeaseError| {
                        StoreError::new("postgres-url", e.to_string())
                    };
                    let mut lease = PostgresLease::new(&url, ttl).map_err(unusable)?;
                    // This first call also migrates the schema.
                    lease.leader().map_err(unusable)?;
                    Ok(Box::new(lease) as Box<dyn LeaseStore>)
                })),
            }
        }
    }
}

/// SQLite at `db-path`: the writer (WAL preallocated and checkpointed in
/// the background if configured) and `history-readers` readers.
fn sqlite_opener(config: &CoordinatorConfig, log: &Logger) -> StoreOpener {
    let config = config.clone();
    let log = log.clone();
    Arc::new(move || {
        let mut store = JobStore::open(&config.db_path, config.sqlite_synchronous)?;
        if config.sqlite_preallocate_wal {
            preallocate_wal(&store, &log);
        }
        if let Err(e) = store.checkpoint_in_background(config.sqlite_synchronous) {
            warn!(log, "WAL checkpointed by commits, not in the background"; "error" => %e);
        }
        let history = (0..config.history_readers.max(1))
            .map(|_| {
                JobReader::open(&config.db_path).map(|r| Box::new(r) as Box<dyn StoredJobReader>)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(OpenedStore {
            store: Box::new(store),
            history: Some(history),
        })
    })
}

/// PostgreSQL at `postgres-url`: `postgres-write-connections` writers and
/// `history-readers` readers, each a connection of its own.
fn postgres_opener(config: &CoordinatorConfig, log: &Logger) -> StoreOpener {
    let config = config.clone();
    let log = log.clone();
    // A leader paused or cut off with a batch staged holds the lease row
    // under the fence's lock until PostgreSQL ends its idle transaction:
    // that must happen well within the lease, or a standby could not take
    // over when the lease expires.
    let idle_limit = crate::store::postgres::DEFAULT_IDLE_LIMIT
        .min(Duration::from_millis(config.leader_lease_millis / 2))
        .max(Duration::from_millis(100));
    Arc::new(move || {
        let url = config.postgres_url.expose();
        let mut store = PostgresStore::open_writers(url, config.postgres_write_connections)
            .map_err(|e| StoreError::new("postgres-url", e.to_string()))?;
        store.set_idle_limit(idle_limit);
        info!(log, "store opened"; "store" => store.describe());
        let history = postgres_readers(store.target(), config.history_readers)?;
        Ok(OpenedStore {
            store: Box::new(store),
            history: Some(history),
        })
    })
}

/// `readers` connections of their own (at least one) to the PostgreSQL
/// store at `target`.
fn postgres_readers(
    target: &PgTarget,
    readers: usize,
) -> Result<Vec<Box<dyn StoredJobReader>>, StoreError> {
    (0..readers.max(1))
        .map(|_| {
            PostgresReader::open(target.clone())
                .map(|r| Box::new(r) as Box<dyn StoredJobReader>)
                .map_err(|e| StoreError::new("postgres-url", e.to_string()))
        })
        .collect()
}

/// A WAL that cannot be preallocated (a full disk, say) only makes commits
/// slower, so it is a warning, not a reason to refuse to start.
fn preallocate_wal(store: &JobStore, log: &Logger) {
    let started = Instant::now();
    match store.preallocate_wal() {
        Ok(bytes) => info!(log, "WAL preallocated"; "bytes" => bytes,
                           "millis" => started.elapsed().as_millis() as u64),
        Err(e) => warn!(log, "WAL not preallocated; commits will grow it"; "error" => %e),
    }
}
