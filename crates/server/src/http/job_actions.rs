//! What operators do to finished jobs over HTTP: retry one or many, delete
//! one or many, and look at the queues. Each is the TCP protocol's request
//! (`Requeue`, `RequeueJobs`, `RequeueFailed`, `Delete`, `DeleteFinished`,
//! `Queues`), answered once durable like every other.

use crate::http::api::{
    empty_object, job_answer, resolve, ApiResult, EmptyObject, JobRef, Link, EMPTY_BODY,
};
use crate::http::body::Body;
use crate::http::dto::task_type_schema;
use crate::http::error::{ApiError, ErrorBody, ErrorCode};
use crate::http::openapi::{BadRequest, NotFound, Unavailable};
use actix_web::http::StatusCode;
use actix_web::{delete, get, post, web, HttpResponse};
use serde::Deserialize;
use serde_json::{json, Value};
use std::borrow::Cow;
use taskyard_protocol::job_json::JobJson;
use taskyard_protocol::payloads::validate_task_type;
use taskyard_protocol::{
    BulkAnswer, ClientRequest, ClientResponse, JobId, JobState, QueueStats, MAX_BULK_JOBS,
    MAX_REQUEUE_JOBS,
};
use utoipa::openapi::schema::{
    AdditionalProperties, AllOfBuilder, ArrayBuilder, Object, ObjectBuilder, OneOfBuilder, Schema,
    SchemaType, Type,
};
use utoipa::openapi::{KnownFormat, RefOr, SchemaFormat};
use utoipa::{PartialSchema, ToSchema};

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

/// The body of `POST /api/jobs/retry` (the `RetryRequest` schema); read
/// by `parse_body`, so that a refusal names the field.
pub struct RetryRequest;

impl PartialSchema for RetryRequest {
    fn schema() -> RefOr<Schema> {
        bulk_request(retry_filter())
    }
}

impl ToSchema for RetryRequest {
    fn name() -> Cow<'static, str> {
        "RetryRequest".into()
    }
}

/// The body of `POST /api/jobs/delete` (the `DeleteRequest` schema).
pub struct DeleteRequest;

impl PartialSchema for DeleteRequest {
    fn schema() -> RefOr<Schema> {
        bulk_request(delete_filter())
    }
}

impl ToSchema for DeleteRequest {
    fn name() -> Cow<'static, str> {
        "DeleteRequest".into()
    }
}

/// `job_ids` or `filter`, exactly one of them.
fn bulk_request(filter: Object) -> RefOr<Schema> {
    let fields = ObjectBuilder::new()
        .schema_type(Type::Object)
        .property("job_ids", job_ids())
        .property("filter", filter)
        .additional_properties(Some(AdditionalProperties::FreeForm(false)));
    let exactly_one = OneOfBuilder::new()
        .item(ObjectBuilder::new().required("job_ids"))
        .item(ObjectBuilder::new().required("filter"));
    AllOfBuilder::new()
        .item(fields)
        .item(exactly_one)
        .description(Some("Exactly one of `job_ids` and `filter`."))
        .into()
}

/// 1 to `MAX_BULK_JOBS` whole job ids.
fn job_ids() -> utoipa::openapi::schema::Array {
    let id = ObjectBuilder::new()
        .schema_type(Type::String)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Uuid)));
    ArrayBuilder::new()
        .items(id)
        .min_items(Some(1))
        .max_items(Some(MAX_BULK_JOBS))
        .build()
}

/// A `filter` whose `state` is one of `states` (null: `default`).
fn filter(states: &[JobState], default: &str) -> Object {
    let state = ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .enum_values(Some(
            states
                .iter()
                .map(|s| json!(s.to_string()))
                .chain([Value::Null]),
        ))
        .description(Some(default));
    let mut task_type = task_type_schema();
    task_type.schema_type = SchemaType::from_iter([Type::String, Type::Null]);
    task_type.description = None;
    let finished_before = ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
        .minimum(Some(0))
        .maximum(Some(i64::MAX))
        .description(Some("Unix ms; default: the time of the call."));
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .property("state", state)
        .property("type", task_type)
        .property("finished_before", finished_before)
        .additional_properties(Some(AdditionalProperties::FreeForm(false)))
        .build()
}

fn retry_filter() -> Object {
    filter(
        &[JobState::Failed, JobState::Cancelled],
        "FAILED (default) or CANCELLED.",
    )
}

fn delete_filter() -> Object {
    let finished = JobState::ALL.into_iter().filter(|s| s.is_terminal());
    filter(
        &finished.collect::<Vec<_>>(),
        "Default: any finished state.",
    )
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
#[utoipa::path(
    summary = "Retry a FAILED or CANCELLED job: back to QUEUED with a fresh attempt budget, its history kept.",
    description = EMPTY_BODY,
    params(JobRef),
    request_body = inline(EmptyObject),
    responses(
        (status = 200, description = "The job, QUEUED", body = JobJson),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        (status = 409, description = "`not_retryable` (the job is not FAILED or CANCELLED) or `ambiguous_id`", body = ErrorBody),
        (status = 429, description = "`admission_limit`: `max-active-jobs` reached", body = ErrorBody),
        (status = 503, response = Unavailable),
    )
)]
#[post("/api/jobs/{id}/retry")]
pub async fn retry_job(link: Link, id: web::Path<JobRef>, body: Body) -> ApiResult {
    empty_object(&body)?;
    let job_id = resolve(&link, &id.id).await?;
    match link.request(ClientRequest::Requeue { job_id }).await? {
        ClientResponse::Requeued { .. } => {
            job_answer(link.request(ClientRequest::Status { job_id }).await?)
        }
        ClientResponse::RequeueRefused { reason, .. } if reason.starts_with("max-active-jobs") => {
            Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                ErrorCode::AdmissionLimit,
                reason,
            ))
        }
        ClientResponse::RequeueRefused { job_id, reason } => Err(ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::NotRetryable,
            format!("job {job_id}: {reason}"),
        )),
        other => job_answer(other),
    }
}

/// `DELETE /api/jobs/{id}`: one finished job and its attempts, durably.
#[utoipa::path(
    summary = "Delete a finished (SUCCEEDED, FAILED or CANCELLED) job with its attempts, durably.",
    params(JobRef),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        (status = 409, description = "`not_finished` (the job has not finished, or its last change is not stored yet) or `ambiguous_id`", body = ErrorBody),
        (status = 503, response = Unavailable),
    )
)]
#[delete("/api/jobs/{id}", guard = "crate::http::api::names_a_job")]
pub async fn delete_job(link: Link, id: web::Path<JobRef>) -> ApiResult {
    let job_id = resolve(&link, &id.id).await?;
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
        ErrorCode::NotFinished,
        format!("job {job_id}: {reason}"),
    ))
}

/// `POST /api/jobs/retry`: named jobs, or the FAILED (or CANCELLED) jobs
/// of a filter that finished before the call (at most
/// `MAX_FILTER_ROUNDS` × `MAX_REQUEUE_JOBS` of them).
#[utoipa::path(
    summary = "Retry many jobs: named ones, or the FAILED (or CANCELLED) jobs of a filter.",
    description = "`job_ids`: each FAILED or CANCELLED job back to QUEUED with a fresh attempt budget, keeping its history (others refused with the reason). `filter`: `state` FAILED (default) or CANCELLED, optionally of one `type`, that finished at or before `finished_before` (default: now), at most 1000 per call (`more`). The request must say `Content-Type: application/json` (415 otherwise).",
    request_body = RetryRequest,
    responses(
        (status = 200, description = "What was done", body = BulkAnswer),
        (status = 400, response = BadRequest),
        (status = 429, description = "`admission_limit`: `max-active-jobs` reached before any job was retried", body = ErrorBody),
        (status = 503, response = Unavailable),
    )
)]
#[post("/api/jobs/retry")]
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
                    ErrorCode::AdmissionLimit,
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
#[utoipa::path(
    summary = "Delete many finished jobs: named ones, or those of a filter.",
    description = "Deleted with their attempts, durably, before the answer. Only SUCCEEDED, FAILED and CANCELLED jobs; others refused with the reason. `filter`: a finished `state` (default: any), optionally of one `type`, that finished at or before `finished_before` (default: now), at most 1000 per call (`more`). The request must say `Content-Type: application/json` (415 otherwise).",
    request_body = DeleteRequest,
    responses(
        (status = 200, description = "What was done", body = BulkAnswer),
        (status = 400, response = BadRequest),
        (status = 503, response = Unavailable),
    )
)]
#[post("/api/jobs/delete")]
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
#[utoipa::path(
    summary = "Per ready queue (task type × base priority): depth, age and latency of its head; per task type: ready, delayed, retry-wait and running jobs, the workers that run it and their free slots, and whether no worker runs it.",
    responses(
        (status = 200, description = "The queues", body = QueueStats),
        (status = 503, response = Unavailable),
    )
)]
#[get("/api/queues")]
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
