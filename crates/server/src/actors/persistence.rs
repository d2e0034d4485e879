//! `Persistence`: the only owner of the store (SQLite or PostgreSQL), on its own
//! thread (a one-thread `SyncArbiter`), so no coordinator handler ever
//! waits on disk.

use crate::scheduler::JobRow;
use crate::store::{ExpiredJob, ExpiryCutoffs, Store, StoreError};
use actix::dev::ToEnvelope;
use actix::{Actor, Addr, Handler, Message, Recipient, SyncArbiter, SyncContext};
use slog::{debug, Logger};
use std::sync::Mutex;
use std::time::Instant;

/// Name of the `Persistence` thread.
pub const PERSISTENCE_THREAD: &str = "taskyard-persist";

/// Coordinator → persistence: write these rows of the next batch into the
/// open transaction now, ahead of its `CommitBatch`, so the commit that
/// ends the batch has less left to do. Nothing staged is durable (or
/// answered) before that commit; if staging fails, the commit reports it.
#[derive(Message)]
#[rtype(result = "()")]
pub struct StageRows {
    pub rows: Vec<JobRow>,
}

/// Coordinator → persistence: write these rows and commit them, with every
/// row staged since the last commit, in one transaction. The answer says
/// batch `number` is durable (or why none of it is).
#[derive(Message)]
#[rtype(result = "Result<(), StoreError>")]
pub struct CommitBatch {
    pub number: u64,
    pub rows: Vec<JobRow>,
}

/// Coordinator → persistence: delete up to `limit` finished jobs past
/// `cutoffs`, with their attempts, in a transaction of their own. The
/// answer lists the deleted jobs (durable: committed before the answer),
/// or `None` when rows of the next batch are staged and expiry must wait.
#[derive(Message)]
#[rtype(result = "Result<Option<Vec<ExpiredJob>>, StoreError>")]
pub struct ExpireJobs {
    pub cutoffs: ExpiryCutoffs,
    pub limit: usize,
}

/// Coordinator → persistence: delete those of `ids` that are finished, in
/// a transaction of their own; answered with the deleted jobs (durable), or
/// `None` when rows of the next batch are staged and the deletion must wait.
#[derive(Message)]
#[rtype(result = "Result<Option<Vec<ExpiredJob>>, StoreError>")]
pub struct DeleteJobs {
    pub ids: Vec<taskyard_protocol::JobId>,
}

/// Coordinator → persistence: store a schedule change (see
/// `Store::write_schedule`); answered once it is durable.
#[derive(Message)]
#[rtype(result = "Result<(), StoreError>")]
pub struct WriteSchedule {
    pub write: crate::scheduler::schedule::ScheduleWrite,
}

/// Where the coordinator sends its rows.
#[derive(Clone)]
pub struct PersistenceLink {
    pub stage: Recipient<StageRows>,
    pub commit: Recipient<CommitBatch>,
}

impl PersistenceLink {
    /// Both messages to one actor.
    pub fn to<A>(addr: &Addr<A>) -> PersistenceLink
    where
        A: Actor + Handler<StageRows> + Handler<CommitBatch>,
        A::Context: ToEnvelope<A, StageRows> + ToEnvelope<A, CommitBatch>,
    {
        PersistenceLink {
            stage: addr.clone().recipient(),
            commit: addr.clone().recipient(),
        }
    }
}

/// Runs `StageRows` and `CommitBatch` against the real database.
pub struct Persistence {
    store: Box<dyn Store>,
    /// Why staging failed since the last commit: the transaction is rolled
    /// back, later rows of the batch are skipped, and its commit fails.
    failed: Option<StoreError>,
    log: Logger,
}

impl Persistence {
    pub fn new(store: Box<dyn Store>, log: Logger) -> Self {
        Persistence {
            store,
            failed: None,
            log,
        }
    }

    /// Starts the one `Persistence` on its own thread, named
    /// `PERSISTENCE_THREAD` so benchmarks can find its CPU time in /proc.
    /// `store` moves into that actor; nothing else ever touches it.
    pub fn start(store: Box<dyn Store>, log: Logger) -> Addr<Persistence> {
        // A SyncArbiter builds its actor with a factory; with one thread it
        // is called once, and the store moves into that one actor.
        let store = Mutex::new(Some(store));
        let named = || std::thread::Builder::new().name(PERSISTENCE_THREAD.into());
        SyncArbiter::start_with_thread_builder(1, named, move || {
            let store = store
                .lock()
                .ok()
                .and_then(|mut s| s.take())
                .expect("the persistence arbiter has exactly one thread");
            Persistence::new(store, log.clone())
        })
    }
}

impl Actor for Persistence {
    type Context = SyncContext<Self>;
}

impl Handler<StageRows> for Persistence {
    type Result = ();

    fn handle(&mut self, staged: StageRows, _: &mut SyncContext<Self>) {
        if self.failed.is_none() {
            self.failed = self.store.stage(&staged.rows).err();
        }
    }
}

impl Handler<CommitBatch> for Persistence {
    type Result = Result<(), StoreError>;

    fn handle(&mut self, batch: CommitBatch, _: &mut SyncContext<Self>) -> Self::Result {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let started = Instant::now();
        self.store.commit(&batch.rows)?;
        debug!(self.log, "batch committed"; "batch" => batch.number, "rows" => batch.rows.len(),
               "micros" => started.elapsed().as_micros() as u64);
        Ok(())
    }
}

impl Handler<ExpireJobs> for Persistence {
    type Result = Result<Option<Vec<ExpiredJob>>, StoreError>;

    fn handle(&mut self, m: ExpireJobs, _: &mut SyncContext<Self>) -> Self::Result {
        // A failed staging left nothing open, but its batch must fail
        // first; expiry waits for the next round.
        if self.failed.is_some() {
            return Ok(None);
        }
        self.store.expire(m.cutoffs, m.limit)
    }
}

impl Handler<DeleteJobs> for Persistence {
    type Result = Result<Option<Vec<ExpiredJob>>, StoreError>;

    fn handle(&mut self, m: DeleteJobs, _: &mut SyncContext<Self>) -> Self::Result {
        if self.failed.is_some() {
            return Ok(None);
        }
        self.store.delete_finished(&m.ids)
    }
}

impl Handler<WriteSchedule> for Persistence {
    type Result = Result<(), StoreError>;

    fn handle(&mut self, m: WriteSchedule, _: &mut SyncContext<Self>) -> Self::Result {
        self.store.write_schedule(&m.write)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Synchronous;
    use crate::store::tests::row;
    use crate::store::JobStore;
    use taskyard_protocol::JobState;

    #[actix_rt::test]
    async fn a_batch_whose_staging_failed_is_not_committed_and_the_next_one_is() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("t.db");
        let store = JobStore::open(&path, Synchronous::Full).expect("open");
        let log = Logger::root(slog::Discard, slog::o!());
        let persistence = Persistence::start(Box::new(store), log);
        let first = row(1, JobState::Queued);
        let mut clash = row(2, JobState::Queued);
        clash.idempotency_key = first.idempotency_key.clone();
        let staged = StageRows {
            rows: vec![first, clash],
        };
        persistence.do_send(staged);
        let failed = persistence.send(CommitBatch {
            number: 1,
            rows: vec![row(3, JobState::Queued)],
        });
        let err = failed.await.expect("answered").expect_err("staging failed");
        assert!(err.reason.contains("UNIQUE"), "{err}");
        let retried = persistence.send(CommitBatch {
            number: 2,
            rows: vec![row(4, JobState::Queued)],
        });
        retried
            .await
            .expect("answered")
            .expect("a fresh transaction");
        let stored = JobStore::open_beside_owner(&path)
            .expect("second connection")
            .load_all()
            .expect("load");
        let sequences: Vec<u64> = stored.iter().map(|j| j.sequence).collect();
        assert_eq!(sequences, vec![4], "nothing of the failed batch is stored");
    }
}
