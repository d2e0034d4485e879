//! Reads of jobs the coordinator no longer holds in memory: what to read
//! from the database for a request, as plain data. The actor sends them to
//! its reader threads and answers when they come back.

use crate::scheduler::OrderKey;
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
