//! The JSON API handlers. Each one parses its input, asks the coordinator
//! through the bridge (writes reuse the TCP protocol's requests, so
//! validation is the same), and maps the durable answer to JSON.

use crate::actors::coordinator::QueryKind;
use crate::actors::outbox::QueryResult;
use crate::http::bridge::{CoordinatorLink, ANSWER_TIMEOUT};
use crate::http::dto::{counts_object, stats_json, ApiJob, ApiJobPage, ApiWorker, SubmitBody};
use crate::http::error::ApiError;
use crate::protocol::limits;
use crate::protocol::{ClientRequest, ClientResponse, JobId, JobState, SubmitAnswer};
use crate::scheduler::{PageCursor, StatsSnapshot};
use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use serde::Deserialize;
use serde_json::json;

/// Page size when `limit` is not given, and the largest allowed.
pub const DEFAULT_PAGE: usize = 50;
pub const MAX_PAGE: usize = crate::protocol::MAX_LIST_JOBS as usize;

/// The hand-written OpenAPI 3 description of every route.
pub const OPENAPI_JSON: &str = include_str!("openapi.json");

type Link = web::Data<CoordinatorLink>;
type ApiResult = Result<HttpResponse, ApiError>;

/// `GET /api/jobs` query string.
#[derive(Debug, Deserialize)]
pub struct ListParams {
    state: Option<String>,
    #[serde(rename = "type")]
    task_type: Option<String>,
    /// Text, checked by `limits::LIST_LIMIT` so any refusal names the range.
    limit: Option<String>,
    cursor: Option<String>,
}

pub async fn list_jobs(link: Link, params: web::Query<ListParams>) -> ApiResult {
    let p = params.into_inner();
    let state = p
        .state
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<JobState>())
        .transpose()
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let limit = match p.limit.as_deref().filter(|l| !l.is_empty()) {
        Some(text) => limits::LIST_LIMIT
            .parse(text)
            .map_err(|e| ApiError::bad_request(e.to_string()))? as usize,
        None => DEFAULT_PAGE,
    };
    let cursor = p
        .cursor
        .filter(|c| !c.is_empty())
        .map(|c| c.parse::<PageCursor>())
        .transpose()
        .map_err(ApiError::bad_request)?;
    let query = QueryKind::Jobs {
        state,
        task_type: p.task_type.filter(|t| !t.is_empty()),
        cursor,
        limit,
    };
    let QueryResult::Jobs(page) = link.query(query, ANSWER_TIMEOUT).await? else {
        return Err(ApiError::unexpected("not a page"));
    };
    Ok(HttpResponse::Ok().json(ApiJobPage {
        counts: counts_object(&page.counts),
        next_cursor: page.next.map(|c| c.to_string()),
        jobs: page
            .jobs
            .into_iter()
            .map(|j| ApiJob::from_view(j, false))
            .collect(),
    }))
}

pub async fn get_job(link: Link, id: web::Path<String>) -> ApiResult {
    let job_id = parse_id(&id)?;
    job_answer(link.request(ClientRequest::Status { job_id }).await?)
}

pub async fn cancel_job(link: Link, id: web::Path<String>) -> ApiResult {
    let job_id = parse_id(&id)?;
    job_answer(link.request(ClientRequest::Cancel { job_id }).await?)
}

pub async fn submit_job(link: Link, body: web::Bytes) -> ApiResult {
    let body: SubmitBody =
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("body: {e}")))?;
    let request = body
        .into_request()
        .map_err(|e| invalid_submission(e.to_string()))?;
    let request = ClientRequest::Submit(request);
    match link.request(request).await? {
        ClientResponse::Submitted(SubmitAnswer::Accepted { job_id, no_worker }) => {
            Ok(HttpResponse::Created().json(json!({ "job_id": job_id, "no_worker": no_worker })))
        }
        ClientResponse::Submitted(SubmitAnswer::Rejected(r))
            if r.reason.starts_with("max-active-jobs") =>
        {
            Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "admission_limit",
                r.reason,
            ))
        }
        ClientResponse::Submitted(SubmitAnswer::Rejected(r)) => Err(invalid_submission(r.reason)),
        other => Err(ApiError::unexpected(other)),
    }
}

pub async fn list_workers(link: Link) -> ApiResult {
    let now = link.clock.now_millis();
    match link.request(ClientRequest::Workers).await? {
        ClientResponse::Workers(workers) => Ok(HttpResponse::Ok().json(
            workers
                .into_iter()
                .map(|w| ApiWorker::from_view(w, now))
                .collect::<Vec<_>>(),
        )),
        other => Err(ApiError::unexpected(other)),
    }
}

pub async fn stats(link: Link) -> ApiResult {
    let snapshot = fetch_stats(&link).await?;
    Ok(HttpResponse::Ok().json(stats_json(&snapshot)))
}

/// `GET /api/timeline`: the last hour per task type and minute (jobs
/// finished, queue wait, run time), for the dashboard's charts.
pub async fn timeline(link: Link) -> ApiResult {
    match link.query(QueryKind::Timeline, ANSWER_TIMEOUT).await? {
        QueryResult::Timeline(snapshot) => Ok(HttpResponse::Ok().json(*snapshot)),
        _ => Err(ApiError::unexpected("not a timeline")),
    }
}

/// Who leads, the lease, and the members that checked in: answered by a
/// standby as by the leader (from what this process last read of the
/// lease, no coordinator round trip).
pub async fn cluster(link: Link) -> HttpResponse {
    HttpResponse::Ok().json(link.view.cluster())
}

pub async fn openapi() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(OPENAPI_JSON)
}

/// The stats snapshot, durable like every other answer.
pub async fn fetch_stats(link: &CoordinatorLink) -> Result<StatsSnapshot, ApiError> {
    match link.query(QueryKind::Stats, ANSWER_TIMEOUT).await? {
        QueryResult::Stats(snapshot) => Ok(*snapshot),
        _ => Err(ApiError::unexpected("not stats")),
    }
}

/// 422: the submission names a value no job may have.
fn invalid_submission(reason: String) -> ApiError {
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_submission",
        reason,
    )
}

fn parse_id(text: &str) -> Result<JobId, ApiError> {
    text.parse()
        .map_err(|_| ApiError::bad_request(format!("{text:?} is not a job id")))
}

fn job_answer(response: ClientResponse) -> ApiResult {
    match response {
        ClientResponse::Job(view) => Ok(HttpResponse::Ok().json(ApiJob::from_view(*view, true))),
        ClientResponse::NotFound { job_id } => Err(ApiError::not_found(format!(
            "job {job_id} not found (expired or never existed)"
        ))),
        ClientResponse::CancelRefused { job_id, state } => Err(ApiError::new(
            StatusCode::CONFLICT,
            "already_finished",
            format!("job {job_id} is already {state}"),
        )),
        other => Err(ApiError::unexpected(other)),
    }
}

/// Anything unrouted: the JSON error shape, not actix-web's empty 404.
pub async fn no_route(req: actix_web::HttpRequest) -> HttpResponse {
    use actix_web::ResponseError;
    ApiError::not_found(format!("no route for {} {}", req.method(), req.path())).error_response()
}
