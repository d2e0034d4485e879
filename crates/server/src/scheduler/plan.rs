//! `plan`: where a client request goes, decided in one match on the
//! request and what memory holds, before anything changes. The actor runs
//! the plan; this file is the whole routing.

use crate::scheduler::stored_read::{PageFilter, StoredRead};
use crate::scheduler::{CoordinatorState, PageCursor};
use taskyard_protocol::{
    ClientRequest, ClientResponse, JobState, ListOrder, ListQuery, MAX_BULK_JOBS, MAX_LIST_JOBS,
    MAX_REQUEUE_JOBS,
};

/// What the coordinator does with a client request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Refuse it before anything changes: the refusal reveals no job
    /// state, so it needs no commit.
    Refuse(ClientResponse),
    /// Read what it asks about from the database, then answer.
    ReadStored(StoredRead),
    /// Delete these finished jobs in the database, then answer.
    Delete(Vec<taskyard_protocol::JobId>),
    /// A request about schedules: decided on the state, a change stored,
    /// then answered.
    Schedule(ClientRequest),
    /// Apply it to the state; answer behind the batch carrying its changes.
    Apply(ClientRequest),
}

/// Where `request` goes. `reads_stored`: the coordinator has a database to
/// read jobs memory no longer holds (without one, memory holds them all);
/// `now_wall`: the wall clock, for filters relative to now.
pub fn plan(
    request: ClientRequest,
    state: &CoordinatorState,
    reads_stored: bool,
    now_wall: i64,
) -> Plan {
    let request = as_list_jobs(request);
    if let Some(reason) = invalid(&request) {
        return Plan::Refuse(ClientResponse::Invalid { reason });
    }
    if reads_stored {
        if let Some(read) = stored_read(&request, state, now_wall) {
            return Plan::ReadStored(read);
        }
    }
    match request {
        ClientRequest::Delete { job_ids } => Plan::Delete(job_ids),
        ClientRequest::CreateSchedule(_)
        | ClientRequest::UpdateSchedule(_)
        | ClientRequest::PauseSchedule { .. }
        | ClientRequest::ResumeSchedule { .. }
        | ClientRequest::DeleteSchedule { .. }
        | ClientRequest::ShowSchedule { .. }
        | ClientRequest::ListSchedules { .. }
        | ClientRequest::TriggerSchedule { .. } => Plan::Schedule(request),
        other => Plan::Apply(other),
    }
}

/// `List` as the `ListJobs` it is a case of, at most `MAX_LIST_JOBS` long;
/// anything else unchanged.
pub fn as_list_jobs(request: ClientRequest) -> ClientRequest {
    match request {
        ClientRequest::List {
            state,
            limit,
            task_type,
            cursor,
        } => as_list_jobs(ClientRequest::ListJobs(ListQuery {
            state,
            task_type,
            limit,
            cursor,
            ..ListQuery::default()
        })),
        ClientRequest::ListJobs(mut query) => {
            query.limit = query.limit.min(MAX_LIST_JOBS);
            ClientRequest::ListJobs(query)
        }
        other => other,
    }
}

/// Why a request cannot be run as asked, if it cannot.
pub fn invalid(request: &ClientRequest) -> Option<String> {
    let too_many = |what: &str, n: usize| {
        (n > MAX_BULK_JOBS).then(|| {
            format!("{what}: {n} job ids, more than the {MAX_BULK_JOBS} one request may name")
        })
    };
    match request {
        ClientRequest::RequeueJobs { job_ids } => too_many("retry", job_ids.len()),
        ClientRequest::Delete { job_ids } => too_many("delete", job_ids.len()),
        ClientRequest::RequeueFailed {
            state: Some(state), ..
        } if !matches!(state, JobState::Failed | JobState::Cancelled) => Some(format!(
            "state: {state} jobs cannot be retried; only FAILED or CANCELLED ones"
        )),
        ClientRequest::DeleteFinished {
            state: Some(state), ..
        } if !state.is_terminal() => Some(format!(
            "state: {state} jobs cannot be deleted; only SUCCEEDED, FAILED or CANCELLED ones"
        )),
        _ => None,
    }
}

/// The database read a request needs, if it needs one: it is about a job
/// memory does not hold, or about finished jobs that may have left memory.
fn stored_read(
    request: &ClientRequest,
    state: &CoordinatorState,
    now_wall: i64,
) -> Option<StoredRead> {
    let gone = |id| !state.holds(id);
    match request {
        ClientRequest::Status { job_id } if gone(*job_id) => Some(StoredRead::Status(*job_id)),
        ClientRequest::Cancel { job_id } if gone(*job_id) => Some(StoredRead::Cancel(*job_id)),
        ClientRequest::Requeue { job_id } if gone(*job_id) => Some(StoredRead::Requeue(*job_id)),
        ClientRequest::RequeueFailed {
            task_type,
            failed_before,
            state,
        } => Some(StoredRead::RequeueFailed(PageFilter {
            state: Some(state.unwrap_or(JobState::Failed)),
            task_type: task_type.clone(),
            finished_by: *failed_before,
            limit: MAX_REQUEUE_JOBS,
            ..PageFilter::default()
        })),
        ClientRequest::Resolve { prefix } => Some(StoredRead::Resolve(prefix.clone())),
        ClientRequest::RequeueJobs { job_ids } if job_ids.iter().any(|id| gone(*id)) => {
            Some(StoredRead::RequeueJobs(job_ids.clone()))
        }
        ClientRequest::DeleteFinished {
            state,
            task_type,
            finished_before,
        } => Some(StoredRead::DeleteFinished(PageFilter {
            state: *state,
            task_type: task_type.clone(),
            // Only finished jobs have a finish time.
            finished_by: Some(finished_before.unwrap_or(now_wall)),
            limit: MAX_BULK_JOBS,
            ..PageFilter::default()
        })),
        ClientRequest::ReadChunk {
            job_id,
            field,
            offset,
            max_bytes,
        } if gone(*job_id) => Some(StoredRead::Chunk {
            job_id: *job_id,
            field: *field,
            offset: *offset,
            max_bytes: *max_bytes,
        }),
        ClientRequest::ListJobs(query) if query.limit > 0 && may_be_stored(query.state) => {
            Some(StoredRead::List {
                filter: query_filter(query),
                limit: query.limit as usize,
            })
        }
        _ => None,
    }
}

/// The filter of a page of `limit` after `cursor`: one more than asked,
/// to know whether a next page exists.
pub fn page_filter(
    state: Option<JobState>,
    task_type: &Option<String>,
    cursor: Option<PageCursor>,
    limit: usize,
) -> PageFilter {
    PageFilter {
        state,
        task_type: task_type.clone(),
        before: cursor.map(|c| c.0),
        limit: limit.saturating_add(1),
        ..PageFilter::default()
    }
}

/// `page_filter` of a `ListJobs` query, with its other filters and order.
fn query_filter(query: &ListQuery) -> PageFilter {
    PageFilter {
        priority: query.priority,
        id_prefix: query.id_prefix.clone(),
        oldest_first: query.order == ListOrder::OldestFirst,
        ..page_filter(
            query.state,
            &query.task_type,
            query.cursor,
            query.limit as usize,
        )
    }
}

/// True when jobs of this state may have left memory (finished ones).
pub fn may_be_stored(state: Option<JobState>) -> bool {
    state.is_none_or(JobState::is_terminal)
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskyard_protocol::JobId;

    fn state() -> CoordinatorState {
        crate::scheduler::tests::state()
    }

    #[test]
    fn invalid_requests_are_refused_before_anything_else() {
        let ids = vec![JobId::mint(); MAX_BULK_JOBS + 1];
        let planned = plan(ClientRequest::Delete { job_ids: ids }, &state(), true, 0);
        let Plan::Refuse(ClientResponse::Invalid { reason }) = planned else {
            panic!("{planned:?}");
        };
        assert!(reason.contains("101 job ids"), "{reason}");
        let running = ClientRequest::DeleteFinished {
            state: Some(JobState::Running),
            task_type: None,
            finished_before: None,
        };
        assert!(matches!(plan(running, &state(), true, 0), Plan::Refuse(_)));
    }

    #[test]
    fn a_job_memory_does_not_hold_is_read_from_the_database_when_there_is_one() {
        let id = JobId::mint();
        let status = ClientRequest::Status { job_id: id };
        assert_eq!(
            plan(status.clone(), &state(), true, 0),
            Plan::ReadStored(StoredRead::Status(id))
        );
        assert_eq!(
            plan(status.clone(), &state(), false, 0),
            Plan::Apply(status)
        );
    }

    #[test]
    fn lists_of_finished_jobs_read_the_database_and_active_ones_memory() {
        let list = |state| ClientRequest::List {
            state,
            limit: 5_000,
            task_type: None,
            cursor: None,
        };
        let Plan::ReadStored(StoredRead::List { filter, limit }) =
            plan(list(Some(JobState::Failed)), &state(), true, 0)
        else {
            panic!("not read from the database");
        };
        assert_eq!(limit, MAX_LIST_JOBS as usize, "clamped");
        assert_eq!(filter.limit, limit + 1, "one more, to know of a next page");
        assert!(matches!(
            plan(list(Some(JobState::Queued)), &state(), true, 0),
            Plan::Apply(ClientRequest::ListJobs(_))
        ));
        let footer = ClientRequest::List {
            state: None,
            limit: 0,
            task_type: None,
            cursor: None,
        };
        assert!(matches!(plan(footer, &state(), true, 0), Plan::Apply(_)));
    }

    #[test]
    fn deletions_and_schedule_requests_have_paths_of_their_own() {
        let id = JobId::mint();
        assert_eq!(
            plan(
                ClientRequest::Delete { job_ids: vec![id] },
                &state(),
                true,
                0
            ),
            Plan::Delete(vec![id])
        );
        let delete_finished = ClientRequest::DeleteFinished {
            state: None,
            task_type: None,
            finished_before: None,
        };
        let Plan::ReadStored(StoredRead::DeleteFinished(filter)) =
            plan(delete_finished, &state(), true, 42)
        else {
            panic!("reads the finished jobs first");
        };
        assert_eq!(filter.finished_by, Some(42), "finished by now");
        let show = ClientRequest::ShowSchedule { name: "n".into() };
        assert_eq!(plan(show.clone(), &state(), true, 0), Plan::Schedule(show));
    }
}
