//! Requests about jobs the coordinator no longer holds: sent to the
//! `StoredReads` reader pool, and answered through the outbox when the read
//! comes back. The handler that sends a read returns at once; the answer
//! is a step of its own.
//!
//! What is read from the database, and why it is safe:
//! - `status` (and `cancel`, `requeue`, `read_chunk`) of a job not in memory: memory holds every
//!   non-terminal job and evicts a finished one only once its last change
//!   is durable, so a job not in memory is either a finished job whose
//!   stored row is final, or no job the database still has (it expired
//!   or never existed). Nothing but a requeue can change such a job, and
//!   a requeue brings it back into memory in the step that answers it, so
//!   an answer read from the database may overtake answers to later
//!   requests of the same client without showing anything stale; every
//!   answer carries its request id, so clients match them anyway.
//! - `RequeueFailed`: the newest `MAX_REQUEUE_JOBS` FAILED jobs the
//!   database holds (of the task type, if given) are brought back into
//!   memory, then up to `MAX_REQUEUE_JOBS` FAILED jobs in memory are
//!   requeued there, oldest first; failed jobs that had been evicted are
//!   retried like recent ones, a bounded number per request.
//! - `list` (summaries) and HTTP pages (views) that may show finished jobs
//!   (no state filter, or a terminal one), both resumed after a cursor:
//!   the database, newest submission first, which
//!   holds every job acknowledged to anyone before the request arrived
//!   (acknowledgements wait for their commit). A job the page shows that
//!   is still in memory is shown as memory has it, and dropped if that no
//!   longer matches the filter; the answer is held until what memory
//!   shows is durable. Footers are the in-memory counters. Pages of a
//!   non-terminal state come from memory, which holds all such jobs, and
//!   so do pages of no jobs (`limit` 0: the footer alone, which is how
//!   `taskyard bench` and dashboards poll the counts).
//!
//! An answer from the database is held in the outbox like any other
//! (behind the newest batch sent), so it never overtakes what is durable.

use super::handlers::chunk_response;
use super::Coordinator;
use crate::actors::outbox::{ClientAnswer, Delivery, Unheld};
use crate::actors::stored_reads::{
    Found, ReadShares, ReadStoredJobs, StoredJobQuery, StoredReadLink,
};
use crate::scheduler::bulk::resolved;
use crate::scheduler::fair_queue::FairQueue;
use crate::scheduler::stored_read::StoredRead;
use crate::scheduler::Job;
use crate::store::PageFilter;
use actix::{ActorFutureExt, AsyncContext, Context, Recipient, WrapFuture};
use std::collections::HashMap;
use std::net::IpAddr;
use taskyard_protocol::id_prefix::MAX_CANDIDATES;
use taskyard_protocol::{ClientResponse, JobId, JobList};

/// Where the answer to a request goes.
pub(super) struct Reply {
    pub(super) to: Recipient<ClientAnswer>,
    pub(super) request_id: u64,
}

impl Reply {
    /// The answer `response`, to be held or sent.
    fn with(self, response: ClientResponse) -> Delivery {
        Delivery::client(self.to, self.request_id, response)
    }
}

/// Who a history read is for, as the readers are shared (`FairQueue`):
/// an HTTP peer address, else the connection its answer goes to.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(super) enum ReadSource {
    Peer(IpAddr),
    Client(Recipient<ClientAnswer>),
}

/// The history readers and the reads waiting for one.
pub(super) struct StoredReadPool {
    link: StoredReadLink,
    queue: FairQueue<ReadSource, (StoredRead, Reply)>,
}

impl StoredReadPool {
    pub(super) fn new(link: StoredReadLink, shares: ReadShares) -> StoredReadPool {
        let queue = FairQueue::new(shares.readers, shares.per_connection, shares.waiting);
        StoredReadPool { link, queue }
    }
}

/// The read of the reader pool a stored read needs.
fn query_of(read: &StoredRead) -> StoredJobQuery {
    match read {
        StoredRead::Status(id)
        | StoredRead::Cancel(id)
        | StoredRead::Requeue(id)
        | StoredRead::Chunk { job_id: id, .. } => StoredJobQuery::Job(*id),
        StoredRead::List { filter, .. } => StoredJobQuery::Summaries {
            filter: filter.clone(),
            budgeted: true,
        },
        StoredRead::DeleteFinished(filter) => StoredJobQuery::Summaries {
            filter: filter.clone(),
            budgeted: false,
        },
        StoredRead::Resolve(prefix) => StoredJobQuery::Summaries {
            filter: PageFilter {
                id_prefix: Some(prefix.clone()),
                limit: MAX_CANDIDATES + 1,
                ..PageFilter::default()
            },
            budgeted: false,
        },
        StoredRead::RequeueJobs(ids) => StoredJobQuery::Jobs(ids.clone()),
        StoredRead::RequeueFailed(filter) => StoredJobQuery::Page {
            filter: filter.clone(),
            budgeted: false,
        },
    }
}

impl Coordinator {
    /// Queues the read for the pool behind those of the same source
    /// (`peer`, else the connection `reply` goes to); its answer is
    /// delivered through the outbox when it comes back. A source with too
    /// many reads waiting or running is answered "overloaded" at once.
    /// Never waits.
    pub(super) fn read_stored(
        &mut self,
        read: StoredRead,
        reply: Reply,
        peer: Option<IpAddr>,
        ctx: &mut Context<Self>,
    ) {
        let Some(pool) = self.history.as_mut() else {
            return;
        };
        let source = match peer {
            Some(ip) => ReadSource::Peer(ip),
            None => ReadSource::Client(reply.to.clone()),
        };
        if let Err((refused, (_, reply))) = pool.queue.push(source, (read, reply)) {
            let reason = format!(
                "history reads: {refused} (history-reads-per-connection, history-reads-waiting)"
            );
            let refusal = reply.with(ClientResponse::Overloaded { reason });
            return refusal.deliver_unheld(Unheld::Refusal);
        }
        self.start_reads(ctx);
    }

    /// Sends queued reads to the pool while a reader is free.
    fn start_reads(&mut self, ctx: &mut Context<Self>) {
        loop {
            let Some(pool) = self.history.as_mut() else {
                return;
            };
            let Some((source, (read, reply))) = pool.queue.take() else {
                return;
            };
            let sent = pool.link.send(ReadStoredJobs {
                query: query_of(&read),
            });
            ctx.spawn(sent.into_actor(self).map(move |answer, act, ctx| {
                if let Some(pool) = act.history.as_mut() {
                    pool.queue.done(&source);
                }
                let found = match answer {
                    Ok(Ok(found)) => Ok(found),
                    Ok(Err(e)) => Err(format!("reading history: {e}")),
                    Err(e) => Err(format!("history readers unavailable: {e}")),
                };
                act.stored_read_arrived(read, found, reply, ctx);
                act.start_reads(ctx);
            }));
        }
    }

    /// Answers a request whose read came back; a deletion by filter goes
    /// on to the database first.
    fn stored_read_arrived(
        &mut self,
        read: StoredRead,
        found: Result<Found, String>,
        reply: Reply,
        ctx: &mut Context<Self>,
    ) {
        if let (StoredRead::DeleteFinished(filter), Ok(Found::Summaries(walked))) = (&read, &found)
        {
            let rows = &walked.rows;
            let more = rows.len() >= filter.limit || walked.stopped_at.is_some();
            // A job memory holds in another state now (requeued) is not
            // deleted: its stored row is about to change.
            let ids = rows
                .iter()
                .map(|row| row.job.id)
                .filter(|id| {
                    self.state
                        .job(*id)
                        .is_none_or(|held| held.state.is_terminal())
                })
                .collect();
            return self.delete_named(ids, more, reply.to, reply.request_id, ctx);
        }
        let delivery = self.stored_read_answer(read, found, reply);
        self.finish(Some(delivery), ctx);
    }

    fn stored_read_answer(
        &mut self,
        read: StoredRead,
        found: Result<Found, String>,
        reply: Reply,
    ) -> Delivery {
        let response = match (read, found) {
            (StoredRead::Requeue(job_id), Ok(Found::Job(job))) => self.requeue_stored(job_id, job),
            // A page the budget stopped short requeues what it found.
            (StoredRead::RequeueFailed(filter), Ok(Found::Page(walked))) => {
                self.requeue_failed_stored(&filter, walked.rows)
            }
            (StoredRead::RequeueJobs(ids), Ok(Found::Jobs(jobs))) => {
                let now = self.now();
                for job in jobs {
                    self.state.restore(job, now);
                }
                ClientResponse::Bulk(self.requeue_each(&ids, now))
            }
            (StoredRead::Resolve(prefix), Ok(Found::Summaries(walked))) => {
                let mut ids = self.state.ids_with_prefix(&prefix, MAX_CANDIDATES + 1);
                ids.extend(walked.rows.iter().map(|row| row.job.id));
                resolved(prefix, ids)
            }
            (read, Ok(found)) => self.client_response(read, found),
            (_, Err(reason)) => ClientResponse::Overloaded { reason },
        };
        reply.with(response)
    }

    fn client_response(&self, read: StoredRead, found: Found) -> ClientResponse {
        let now = self.now();
        match (read, found) {
            (StoredRead::Status(job_id), Found::Job(job)) => match self.state.fresh(job, job_id) {
                Some(job) => ClientResponse::Job(Box::new(self.state.view(&job, now))),
                None => ClientResponse::NotFound { job_id },
            },
            (StoredRead::Cancel(job_id), Found::Job(job)) => match self.state.fresh(job, job_id) {
                Some(job) => ClientResponse::CancelRefused {
                    job_id,
                    state: job.state,
                },
                None => ClientResponse::NotFound { job_id },
            },
            (StoredRead::List { filter, limit }, Found::Summaries(stored)) => {
                let mut sizes = HashMap::with_capacity(stored.rows.len());
                let jobs = stored.map(|s| {
                    sizes.insert(s.job.id, (s.payload_bytes, s.result_bytes));
                    s.job
                });
                // A job memory holds is shown as memory has it; one read
                // without its bytes gets the stored lengths.
                let (jobs, next) = self.state.page_of(&filter, jobs, limit, |job| {
                    let mut summary = self.state.summary(job, now);
                    if !self.state.holds(job.id) {
                        if let Some(&(payload, result)) = sizes.get(&job.id) {
                            (summary.payload_bytes, summary.result_bytes) = (payload, result);
                        }
                    }
                    summary
                });
                ClientResponse::Jobs(JobList {
                    jobs,
                    next,
                    counts: self.state.state_counts(filter.task_type.as_deref()),
                })
            }
            (
                StoredRead::Chunk {
                    job_id,
                    field,
                    offset,
                    max_bytes,
                },
                Found::Job(job),
            ) => {
                let job = self.state.fresh(job, job_id);
                chunk_response(job_id, job.as_ref(), field, offset, max_bytes)
            }
            _ => ClientResponse::Overloaded {
                reason: "history read answered the wrong query".into(),
            },
        }
    }

    /// Requeues a job read back from the database. The single writer
    /// decides at this step, with what memory holds now: if the job came
    /// back meanwhile (another requeue of it was answered first), the
    /// requeue applies to memory's copy like any other, so a job is never
    /// brought back twice.
    fn requeue_stored(&mut self, job_id: JobId, job: Option<Box<Job>>) -> ClientResponse {
        let now = self.now();
        match job {
            Some(job) if !self.state.holds(job_id) => self.state.restore(*job, now),
            None if !self.state.holds(job_id) => return ClientResponse::NotFound { job_id },
            _ => {}
        }
        self.requeue(job_id, now)
    }

    /// Brings the FAILED jobs read back into memory (those not there
    /// already), then requeues FAILED jobs in memory as `RequeueFailed`
    /// does. A job brought back but not requeued (the admission limit
    /// stopped it) is a finished job in memory, evicted again in time.
    fn requeue_failed_stored(&mut self, filter: &PageFilter, jobs: Vec<Job>) -> ClientResponse {
        let now = self.now();
        for job in jobs {
            self.state.restore(job, now);
        }
        self.requeue_failed(
            filter.state,
            filter.task_type.as_deref(),
            filter.finished_by,
            now,
        )
    }
}
