//! `StoredReads`: the read path for jobs the coordinator no longer holds in
//! memory. A small pool of threads (a `SyncArbiter`), each with its own
//! read-only connection, answering by message, so neither the coordinator
//! nor the writer ever waits for a history read.

use crate::scheduler::Job;
use crate::store::{PageFilter, ReadBudget, StoreError, StoredJobReader, StoredSummary, Walked};
use actix::{Actor, Addr, Handler, Message, Recipient, SyncArbiter, SyncContext};
use std::sync::Mutex;
use taskyard_protocol::JobId;

/// Reader threads in the pool unless configured otherwise.
pub const DEFAULT_READERS: usize = 2;

/// Name of each history reader thread.
pub const STORED_READS_THREAD: &str = "taskyard-history";

/// How the coordinator shares the readers among the connections asking:
/// in turn (see `FairQueue`), `readers` reads at once, at most
/// `per_connection` waiting or running per client connection or HTTP peer
/// address, `waiting` waiting in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadShares {
    pub readers: usize,
    pub per_connection: usize,
    pub waiting: usize,
}

/// What to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredJobQuery {
    /// One job with its whole history; answered with `Found::Job`.
    Job(JobId),
    /// Several jobs (at most `MAX_BULK_JOBS`), each with its whole
    /// history; answered with `Found::Jobs` holding those the database has.
    Jobs(Vec<JobId>),
    /// A page of jobs, newest first; answered with `Found::Page`. Within
    /// the pool's budget when `budgeted` (a page a client pages through
    /// with cursors), else however long it takes (a read with no cursor
    /// to go on: a prefix to resolve, jobs to delete or retry).
    Page { filter: PageFilter, budgeted: bool },
    /// The same page without payloads, results and older attempts;
    /// answered with `Found::Summaries`.
    Summaries { filter: PageFilter, budgeted: bool },
}

/// What the database holds for a `StoredJobQuery`, as committed when the
/// read began: durable by definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// `None`: no such job (it expired, or never existed).
    Job(Option<Box<Job>>),
    Jobs(Vec<Job>),
    /// A page, short with where it stopped if the read's budget ran out.
    Page(Walked<Job>),
    Summaries(Walked<StoredSummary>),
}

/// Coordinator → history pool: read what `query` asks for. One message
/// for both kinds of read, so the coordinator holds one recipient and one
/// answer path; the query says which.
#[derive(Message)]
#[rtype(result = "Result<Found, StoreError>")]
pub struct ReadStoredJobs {
    pub query: StoredJobQuery,
}

/// Where the coordinator sends history reads.
pub type StoredReadLink = Recipient<ReadStoredJobs>;

/// One reader of the pool.
pub struct StoredReads {
    reader: Box<dyn StoredJobReader>,
    budget: ReadBudget,
}

impl StoredReads {
    /// Starts one thread per reader of `opened` (at least one), whatever
    /// its backend; each page read stops within `budget`.
    pub fn start_with(
        opened: Vec<Box<dyn StoredJobReader>>,
        budget: ReadBudget,
    ) -> Addr<StoredReads> {
        let readers = opened.len().max(1);
        // The factory runs once per thread; each takes one connection.
        let pool = Mutex::new(opened);
        let named = || std::thread::Builder::new().name(STORED_READS_THREAD.into());
        SyncArbiter::start_with_thread_builder(readers, named, move || {
            let reader = pool
                .lock()
                .ok()
                .and_then(|mut p| p.pop())
                .expect("one connection was opened per reader thread");
            StoredReads { reader, budget }
        })
    }
}

impl Actor for StoredReads {
    type Context = SyncContext<Self>;
}

impl Handler<ReadStoredJobs> for StoredReads {
    type Result = Result<Found, StoreError>;

    fn handle(&mut self, m: ReadStoredJobs, _: &mut SyncContext<Self>) -> Self::Result {
        match m.query {
            StoredJobQuery::Job(id) => Ok(Found::Job(self.reader.job(id)?.map(Box::new))),
            StoredJobQuery::Jobs(ids) => {
                let mut found = Vec::with_capacity(ids.len());
                for id in ids {
                    found.extend(self.reader.job(id)?);
                }
                Ok(Found::Jobs(found))
            }
            StoredJobQuery::Page { filter, budgeted } => {
                let budget = budgeted.then_some(&self.budget);
                Ok(Found::Page(self.reader.page(&filter, budget)?))
            }
            StoredJobQuery::Summaries { filter, budgeted } => {
                let budget = budgeted.then_some(&self.budget);
                Ok(Found::Summaries(self.reader.summaries(&filter, budget)?))
            }
        }
    }
}
