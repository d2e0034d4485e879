//! `Persistence`: the only owner of the SQLite connection, on its own
//! thread (a one-thread `SyncArbiter`), so no coordinator handler ever
//! waits on disk.

use crate::scheduler::Job;
use crate::store::{JobStore, StoreError};
use actix::{Actor, Handler, Message, SyncContext};
use slog::{debug, Logger};
use std::time::Instant;

/// Coordinator → persistence: write these rows in one transaction. The
/// answer says batch `number` is durable (or why it is not).
#[derive(Message)]
#[rtype(result = "Result<(), StoreError>")]
pub struct CommitBatch {
    pub number: u64,
    pub rows: Vec<Job>,
}

/// Runs `CommitBatch` against the real database.
pub struct Persistence {
    store: JobStore,
    log: Logger,
}

impl Persistence {
    pub fn new(store: JobStore, log: Logger) -> Self {
        Persistence { store, log }
    }
}

impl Actor for Persistence {
    type Context = SyncContext<Self>;
}

impl Handler<CommitBatch> for Persistence {
    type Result = Result<(), StoreError>;

    fn handle(&mut self, batch: CommitBatch, _: &mut SyncContext<Self>) -> Self::Result {
        let started = Instant::now();
        self.store.commit(&batch.rows)?;
        debug!(self.log, "batch committed"; "batch" => batch.number, "rows" => batch.rows.len(),
               "micros" => started.elapsed().as_micros() as u64);
        Ok(())
    }
}
