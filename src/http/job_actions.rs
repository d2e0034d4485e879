//! What operators do to finished jobs over HTTP: retry one or many, delete
//! one or many, and look at the queues. Each is the TCP protocol's request
//! (`Requeue`, `RequeueJobs`, `RequeueFailed`, `Delete`, `DeleteFinished`,
//! `Queues`), answered once durable like every other.

use crate::http::api::{empty_object, job_answer, resolve, ApiResult, Link};
use crate::http::body::Body;
use crate::http::error::ApiError;
use crate::protocol::payloads::validate_task_type;
use crate::protocol::{
    BulkAnswer, ClientRequest, ClientResponse, JobId, JobState, MAX_BULK_JOBS, MAX_REQUEUE_JOBS,
};
use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use serde::Deserialize;
use serde_json::Value;

/// Most rounds (of `MAX_BULK_JOBS` jobs each) one filter-form call runs;
/// `more` in the answer says when it stopped there.
pub const MAX_FILTER_ROUNDS: usize = 10;

/// Which finished jobs a filter-form call acts on: the `filter` of the
/// body of `POST /api/jobs/retry` and `POST /api/jobs/delete`, whose other
/// form is `job_ids` (whole ids); exactly one of the two is given.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BulkFilter {
    #[serde(default)]
    state: Option<String>,
    #[serde(default, rename = "type")]
    task_type: Option<String>,
    /// Unix milliseconds; read as any JSON value and checked here.
    #[serde(default)]
    finished_before: Option<Value>,
}

/// What a bulk body asks for, checked.
enum Selection {
    Ids(Vec<JobId>),
    Filter {
        state: Option<JobState>,
        task_type: Option<String>,
        finished_before: Option<i64>,
    },
}

fn parse_body(body: &[u8]) -> Result<Selection, ApiError> {
    let bad = |why: String| ApiError::bad_request(format!("body: {why}"));
    let body: serde_json::Map<String, Value> =
        serde_json::from_slice(body).map_err(|e| bad(e.to_string()))?;
    if let Some(key) = body
        .keys()
        .find(|k| !matches!(k.as_str(), "job_ids" | "filter"))
    {
        return Err(bad(format!(
            "unknown field {key:?}; give job_ids or filter"
        )));
    }
    match (body.get("job_ids"), body.get("filter")) {
        (Some(ids), None) => {
            let ids: Vec<String> =
                serde_json::from_value(ids.clone()).map_err(|e| bad(format!("job_ids: {e}")))?;
            parse_ids(&ids).map(Selection::Ids)
        }
        (None, Some(filter)) if !filter.is_object() => Err(bad("filter: not an object".into())),
        (None, Some(filter)) => {
            let filter: BulkFilter =
                serde_json::from_value(filter.clone()).map_err(|e| bad(format!("filter: {e}")))?;
            parse_filter(filter)
        }
        _ => Err(bad("give exactly one of job_ids and filter".into())),
    }
}

fn parse_ids(ids: &[String]) -> Result<Vec<JobId>, ApiError> {
    if ids.is_empty() || ids.len() > MAX_BULK_JOBS {
        return Err(ApiError::bad_request(format!(
            "job_ids: {} ids; give 1 to {MAX_BULK_JOBS}",
            ids.len()
        )));
    }
    ids.iter()
        .map(|text| {
            text.parse::<JobId>().map_err(|_| {
                ApiError::bad_request(format!("job_ids: {text:?} is not a whole job id"))
            })
        })
        .collect()
}

fn parse_filter(filter: BulkFilter) -> Result<Selection, ApiError> {
    let state = filter
        .state
        .map(|s| s.parse::<JobState>())
        .transpose()
        .map_err(|e| ApiError::bad_request(format!("filter.state: {e}")))?;
    if let Some(t) = &filter.task_type {
        validate_task_type(t).map_err(|e| ApiError::bad_request(format!("filter.type: {e}")))?;
    }
    let finished_before = match filter.finished_before {
        None | Some(Value::Null) => None,
        Some(value) => Some(value.as_i64().filter(|n| *n >= 0).ok_or_else(|| {
            ApiError::bad_request(format!(
                "filter.finished_before: {value} is not unix milliseconds (an integer from 0)"
            ))
        })?),
    };
    Ok(Selection::Filter {
        state,
        task_type: filter.task_type,
        finished_before,
    })
}

/// `POST /api/jobs/{id}/retry`: one FAILED or CANCELLED job back to QUEUED.
pub async fn retry_job(link: Link, id: web::Path<String>, body: Body) -> ApiResult {
    empty_object(&body)?;
    let job_id = resolve(&link, &id).await?;
    match link.request(ClientRequest::Requeue { job_id }).await? {
        ClientResponse::Requeued { .. } => {
            job_answer(link.request(ClientRequest::Status { job_id }).await?)
        }
        ClientResponse::RequeueRefused { reason, .. } if reason.starts_with("max-active-jobs") => {
            Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "admission_limit",
                reason,
            ))
        }
        ClientResponse::RequeueRefused { job_id, reason } => Err(ApiError::new(
            StatusCode::CONFLICT,
            "not_retryable",
            format!("job {job_id}: {reason}"),
        )),
        other => job_answer(other),
    }
}

/// `DELETE /api/jobs/{id}`: one finished job and its attempts, durably.
pub async fn delete_job(link: Link, id: web::Path<String>) -> ApiResult {
    let job_id = resolve(&link, &id).await?;
    let answer = bulk(
        link.request(ClientRequest::Delete {
            job_ids: vec![job_id],
        })
        .await?,
    )?;
    if answer.done.contains(&job_id) {
        return Ok(HttpResponse::NoContent().finish());
    }
    let reason = answer
        .refused
        .into_iter()
        .next()
        .map_or_else(|| "not deleted".to_string(), |r| r.reason);
    if reason.starts_with("not found") {
        return Err(ApiError::not_found(format!("job {job_id} {reason}")));
    }
    Err(ApiError::new(
        StatusCode::CONFLICT,
        "not_finished",
        format!("job {job_id}: {reason}"),
    ))
}

/// `POST /api/jobs/retry`: named jobs, or the FAILED (or CANCELLED) jobs
/// of a filter that finished before the call (at most
/// `MAX_FILTER_ROUNDS` × `MAX_REQUEUE_JOBS` of them).
pub async fn retry_jobs(link: Link, body: Body) -> ApiResult {
    let answer = match parse_body(&body)? {
        Selection::Ids(job_ids) => {
            bulk(link.request(ClientRequest::RequeueJobs { job_ids }).await?)?
        }
        Selection::Filter {
            state,
            task_type,
            finished_before,
        } => {
            if state.is_some_and(|s| !matches!(s, JobState::Failed | JobState::Cancelled)) {
                return Err(ApiError::bad_request(
                    "filter.state: only FAILED or CANCELLED jobs can be retried",
                ));
            }
            let before = finished_before.unwrap_or_else(|| link.clock.now_millis());
            retry_filtered(&link, state, task_type, before).await?
        }
    };
    Ok(HttpResponse::Ok().json(answer))
}

async fn retry_filtered(
    link: &Link,
    state: Option<JobState>,
    task_type: Option<String>,
    before: i64,
) -> Result<BulkAnswer, ApiError> {
    let mut all = BulkAnswer::default();
    for _ in 0..MAX_FILTER_ROUNDS {
        let request = ClientRequest::RequeueFailed {
            task_type: task_type.clone(),
            failed_before: Some(before),
            state,
        };
        let (job_ids, refused) = match link.request(request).await? {
            ClientResponse::Requeued { job_ids, refused } => (job_ids, refused),
            other => return Err(ApiError::refused(other)),
        };
        let last = job_ids.len() < MAX_REQUEUE_JOBS;
        all.done.extend(job_ids);
        if let Some(reason) = refused {
            if all.done.is_empty() {
                return Err(ApiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "admission_limit",
                    reason,
                ));
            }
            all.more = true;
            return Ok(all);
        }
        if last {
            return Ok(all);
        }
    }
    all.more = true;
    Ok(all)
}

/// `POST /api/jobs/delete`: named finished jobs, or the finished jobs of a
/// filter (at most `MAX_FILTER_ROUNDS` × `MAX_BULK_JOBS` of them).
pub async fn delete_jobs(link: Link, body: Body) -> ApiResult {
    let answer = match parse_body(&body)? {
        Selection::Ids(job_ids) => bulk(link.request(ClientRequest::Delete { job_ids }).await?)?,
        Selection::Filter {
            state,
            task_type,
            finished_before,
        } => {
            if state.is_some_and(|s| !s.is_terminal()) {
                return Err(ApiError::bad_request(
                    "filter.state: only SUCCEEDED, FAILED or CANCELLED jobs can be deleted",
                ));
            }
            let before = finished_before.unwrap_or_else(|| link.clock.now_millis());
            let mut all = BulkAnswer::default();
            for _ in 0..MAX_FILTER_ROUNDS {
                let request = ClientRequest::DeleteFinished {
                    state,
                    task_type: task_type.clone(),
                    finished_before: Some(before),
                };
                let round = bulk(link.request(request).await?)?;
                let progressed = !round.done.is_empty();
                all.done.extend(round.done);
                all.refused.extend(round.refused);
                all.more = round.more;
                if !round.more || !progressed {
                    break;
                }
            }
            all
        }
    };
    Ok(HttpResponse::Ok().json(answer))
}

/// `GET /api/queues`.
pub async fn queues(link: Link) -> ApiResult {
    match link.request(ClientRequest::Queues).await? {
        ClientResponse::Queues(stats) => Ok(HttpResponse::Ok().json(stats)),
        other => Err(ApiError::unexpected(other)),
    }
}

/// The `Bulk` answer, or the error a refusal of the whole request is.
fn bulk(response: ClientResponse) -> Result<BulkAnswer, ApiError> {
    match response {
        ClientResponse::Bulk(answer) => Ok(answer),
        other => Err(ApiError::refused(other)),
    }
}
