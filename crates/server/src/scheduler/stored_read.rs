//! Reads of jobs the coordinator no longer holds in memory: what to read
//! from the database for a request, as plain data. The actor sends them to
//! its reader threads and answers when they come back.

use crate::scheduler::PageCursor;
use crate::scheduler::{CoordinatorState, Job, OrderKey};
use taskyard_protocol::{ByteField, IdPrefix, JobId, JobState, Priority};

/// Which jobs a page of stored jobs holds: newest submission first
/// (oldest first with `oldest_first`), after `before` (exclusive) in that
/// order, of one state, task type, base priority and id prefix if given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageFilter {
    pub state: Option<JobState>,
    pub task_type: Option<String>,
    /// The cursor: the order key the page resumes after.
    pub before: Option<OrderKey>,
    /// The last order key the page may reach (inclusive), in its order: a
    /// read out of time walks a bounded stretch (see `store::read_budget`).
    pub until: Option<OrderKey>,
    /// Only jobs that finished at or before this time (unix milliseconds).
    pub finished_by: Option<i64>,
    pub limit: usize,
    pub priority: Option<Priority>,
    pub id_prefix: Option<IdPrefix>,
    pub oldest_first: bool,
}

/// A request answered from the database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredRead {
    Status(JobId),
    /// A cancel of a job not in memory: refused with its stored state.
    Cancel(JobId),
    /// A requeue of a job not in memory: the stored job is brought back
    /// into memory and requeued there, as if it had never left.
    Requeue(JobId),
    /// FAILED jobs read back into memory, then requeued there.
    RequeueFailed(PageFilter),
    /// A TCP `List` or `ListJobs`: summaries of `limit` jobs after the
    /// cursor in `filter.before`.
    List {
        filter: PageFilter,
        limit: usize,
    },
    /// The ids starting with a prefix the database has (memory's are added).
    Resolve(IdPrefix),
    /// Named jobs read back (those memory does not hold), then requeued.
    RequeueJobs(Vec<JobId>),
    /// Finished jobs of a filter, then deleted like named ones.
    DeleteFinished(PageFilter),
    /// A `ReadChunk` of a job not in memory.
    Chunk {
        job_id: JobId,
        field: ByteField,
        offset: u64,
        max_bytes: u32,
    },
}

/// A page as read. `rows`: the matches in the page's order, at most the
/// filter's limit. `stopped_at`: set when the budget ran out before the
/// page was full; `rows` then holds every match up to and including this
/// order key, none after it, and the next page resumes after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Walked<T> {
    pub rows: Vec<T>,
    pub stopped_at: Option<OrderKey>,
}

impl<T> Walked<T> {
    /// Every match up to the limit: the read was not stopped.
    pub fn whole(rows: Vec<T>) -> Walked<T> {
        Walked {
            rows,
            stopped_at: None,
        }
    }

    /// The same page with each row turned into another.
    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Walked<U> {
        Walked {
            rows: self.rows.into_iter().map(f).collect(),
            stopped_at: self.stopped_at,
        }
    }
}

/// Answers from what a stored read found, decided with what memory holds
/// now (a job may have come back, or changed, since the read began).
impl CoordinatorState {
    /// The job as memory has it if it is there, else as read.
    pub fn fresh(&self, read: Option<Box<Job>>, id: JobId) -> Option<Job> {
        match self.job(id) {
            Some(job) => Some(job.clone()),
            None => read.map(|job| *job),
        }
    }

    /// The stored jobs as clients see them now (each shown by `show`):
    /// memory's version of each job still held, dropped if it no longer
    /// matches the filter (or, defensively, if its order key changed: no
    /// transition changes it today). At most `limit` of them, and the cursor of the
    /// next page when the read found more, or stopped short of the end
    /// (its budget ran out: the page may hold fewer than `limit`, even none).
    pub fn page_of<T>(
        &self,
        filter: &PageFilter,
        walked: Walked<Job>,
        limit: usize,
        show: impl Fn(&Job) -> T,
    ) -> (Vec<T>, Option<PageCursor>) {
        let mut jobs = walked.rows;
        let more = jobs.len() > limit;
        jobs.truncate(limit);
        let next = match more {
            true => jobs.last().map(|job| PageCursor(job.order_key())),
            false => walked.stopped_at.map(PageCursor),
        };
        let shown = jobs
            .into_iter()
            .filter_map(|job| match self.job(job.id) {
                Some(held) => (filter.state.is_none_or(|s| held.state == s)
                    && held.order_key() == job.order_key())
                .then(|| show(held)),
                None => Some(show(&job)),
            })
            .collect();
        (shown, next)
    }
}
