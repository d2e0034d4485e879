//! The client calls operators use on many jobs at once: filtered listing,
//! id prefixes, bulk retry and delete, and the queues. Each is one request
//! (the filter forms repeat theirs until nothing more matches).

use super::{unexpected, Client, ClientError};
use taskyard_protocol::{
    BulkAnswer, ClientRequest, ClientResponse, IdPrefix, JobId, JobList, JobState, ListQuery,
    QueueStats, MAX_BULK_JOBS,
};

/// Unix milliseconds now, by this machine's clock.
fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(i64::MAX, |d| {
            i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
        })
}

impl Client {
    /// One page of job summaries matching `query` (filters, order, cursor).
    pub fn list_query(&mut self, query: ListQuery) -> Result<JobList, ClientError> {
        match self.request(ClientRequest::ListJobs(query))? {
            ClientResponse::Jobs(page) => Ok(page),
            other => Err(unexpected("Jobs", &other)),
        }
    }

    /// The one job whose id starts with `prefix` (a whole id is returned as
    /// is, without a request). `NoMatch` and `Ambiguous` are errors.
    pub fn resolve(&mut self, prefix: &IdPrefix) -> Result<JobId, ClientError> {
        if let Some(id) = prefix.whole() {
            return Ok(id);
        }
        let request = ClientRequest::Resolve {
            prefix: prefix.clone(),
        };
        match self.request(request)? {
            ClientResponse::Resolved { job_id } => Ok(job_id),
            ClientResponse::NoMatch { prefix } => Err(ClientError::NoMatch(prefix)),
            ClientResponse::Ambiguous { prefix, candidates } => {
                Err(ClientError::Ambiguous { prefix, candidates })
            }
            other => Err(unexpected("Resolved", &other)),
        }
    }

    /// Requeues the named FAILED or CANCELLED jobs, `MAX_BULK_JOBS` per
    /// request; the answers put together.
    pub fn retry_jobs(&mut self, ids: &[JobId]) -> Result<BulkAnswer, ClientError> {
        self.bulk_by_ids(ids, |job_ids| ClientRequest::RequeueJobs { job_ids })
    }

    /// Deletes the named finished jobs (with their attempts), `MAX_BULK_JOBS`
    /// per request; the answers put together. Durable when it returns.
    pub fn delete_jobs(&mut self, ids: &[JobId]) -> Result<BulkAnswer, ClientError> {
        self.bulk_by_ids(ids, |job_ids| ClientRequest::Delete { job_ids })
    }

    /// Deletes every finished job (of `state` if given, of `task_type` if
    /// given) that finished at or before `finished_before` (default: now),
    /// repeating `DeleteFinished` until it says nothing more matches or a
    /// round deletes nothing.
    pub fn delete_finished(
        &mut self,
        state: Option<JobState>,
        task_type: Option<String>,
        finished_before: Option<i64>,
    ) -> Result<BulkAnswer, ClientError> {
        let finished_before = Some(finished_before.unwrap_or_else(now_millis));
        let mut all = BulkAnswer::default();
        loop {
            let request = ClientRequest::DeleteFinished {
                state,
                task_type: task_type.clone(),
                finished_before,
            };
            let round = bulk(self.request(request)?)?;
            let progressed = !round.done.is_empty();
            all.done.extend(round.done);
            all.refused.extend(round.refused);
            if !round.more || !progressed {
                all.more = round.more;
                return Ok(all);
            }
        }
    }

    /// Depth, age and latency per ready queue and per task type.
    pub fn queues(&mut self) -> Result<QueueStats, ClientError> {
        match self.request(ClientRequest::Queues)? {
            ClientResponse::Queues(stats) => Ok(stats),
            other => Err(unexpected("Queues", &other)),
        }
    }

    fn bulk_by_ids(
        &mut self,
        ids: &[JobId],
        request: impl Fn(Vec<JobId>) -> ClientRequest,
    ) -> Result<BulkAnswer, ClientError> {
        let mut all = BulkAnswer::default();
        for chunk in ids.chunks(MAX_BULK_JOBS) {
            let round = bulk(self.request(request(chunk.to_vec()))?)?;
            all.done.extend(round.done);
            all.refused.extend(round.refused);
        }
        Ok(all)
    }
}

/// The `Bulk` answer, or the error a refusal of the whole request is.
fn bulk(response: ClientResponse) -> Result<BulkAnswer, ClientError> {
    match response {
        ClientResponse::Bulk(answer) => Ok(answer),
        ClientResponse::Invalid { reason } => Err(ClientError::Invalid(reason)),
        ClientResponse::Overloaded { reason } => Err(ClientError::Overloaded(reason)),
        other => Err(unexpected("Bulk", &other)),
    }
}
