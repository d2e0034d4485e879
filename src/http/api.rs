//! The JSON API handlers. Each one parses its input, asks the coordinator
//! through the bridge (writes reuse the TCP protocol's requests, so
//! validation is the same), and maps the durable answer to JSON.

use crate::actors::coordinator::QueryKind;
use crate::actors::outbox::QueryResult;
use crate::http::body::Body;
use crate::http::bridge::{CoordinatorLink, ANSWER_TIMEOUT};
use crate::http::dto::{stats_json, ApiWorker, SubmitBody};
use crate::http::error::ApiError;
use crate::protocol::job_json::{JobJson, JobPageJson};
use crate::protocol::limits;
use crate::protocol::payloads::validate_task_type;
use crate::protocol::{
    ClientRequest, ClientResponse, IdPrefix, JobId, JobState, ListOrder, ListQuery, Priority,
    SubmitAnswer,
};
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

pub use crate::http::link::Link;
pub type ApiResult = Result<HttpResponse, ApiError>;

/// `GET /api/jobs` query string. Every value is text, checked here so
/// that a refusal names the parameter and what it takes.
#[derive(Debug, Deserialize)]
pub struct ListParams {
    state: Option<String>,
    #[serde(rename = "type")]
    task_type: Option<String>,
    priority: Option<String>,
    /// A job id or id prefix.
    q: Option<String>,
    /// `newest` (the default) or `oldest`.
    order: Option<String>,
    /// Checked by `limits::LIST_LIMIT` so any refusal names the range.
    limit: Option<String>,
    cursor: Option<String>,
}

/// A query parameter given and not empty.
fn given(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.is_empty())
}

impl ListParams {
    /// The `ListJobs` these parameters ask for, or a 400 naming the first
    /// bad one.
    pub fn into_query(self) -> Result<ListQuery, ApiError> {
        let bad =
            |name: &str, e: &dyn std::fmt::Display| ApiError::bad_request(format!("{name}: {e}"));
        let state = given(self.state)
            .map(|s| s.parse::<JobState>())
            .transpose()
            .map_err(|e| bad("state", &e))?;
        let task_type = given(self.task_type);
        if let Some(t) = &task_type {
            validate_task_type(t).map_err(|e| ApiError::bad_request(format!("type: {e}")))?;
        }
        let priority = given(self.priority)
            .map(|p| p.parse::<Priority>())
            .transpose()
            .map_err(|e| bad("priority", &e))?;
        let id_prefix = given(self.q)
            .map(|q| IdPrefix::parse(&q))
            .transpose()
            .map_err(|e| bad("q", &e))?;
        let order = match given(self.order).as_deref() {
            None | Some("newest") => ListOrder::NewestFirst,
            Some("oldest") => ListOrder::OldestFirst,
            Some(other) => return Err(bad("order", &format!("{other:?} is not newest or oldest"))),
        };
        let limit = match self.limit {
            Some(text) => limits::LIST_LIMIT
                .parse(&text)
                .map_err(|e| ApiError::bad_request(e.to_string()))?
                as u32,
            None => DEFAULT_PAGE as u32,
        };
        let cursor = given(self.cursor)
            .map(|c| c.parse::<PageCursor>())
            .transpose()
            .map_err(ApiError::bad_request)?;
        Ok(ListQuery {
            state,
            task_type,
            priority,
            id_prefix,
            order,
            limit,
            cursor,
        })
    }
}

pub async fn list_jobs(link: Link, params: web::Query<ListParams>) -> ApiResult {
    let query = params.into_inner().into_query()?;
    match link.request(ClientRequest::ListJobs(query)).await? {
        ClientResponse::Jobs(page) => Ok(HttpResponse::Ok().json(JobPageJson::of(&page))),
        other => Err(ApiError::refused(other)),
    }
}

pub async fn get_job(link: Link, id: web::Path<String>) -> ApiResult {
    let job_id = resolve(&link, &id).await?;
    job_answer(link.request(ClientRequest::Status { job_id }).await?)
}

pub async fn cancel_job(link: Link, id: web::Path<String>, body: Body) -> ApiResult {
    empty_object(&body)?;
    let job_id = resolve(&link, &id).await?;
    job_answer(link.request(ClientRequest::Cancel { job_id }).await?)
}

pub async fn submit_job(link: Link, body: Body) -> ApiResult {
    // serde would also read a struct from a JSON array.
    if !body.trim_ascii_start().starts_with(b"{") {
        return Err(ApiError::bad_request("body: expected a JSON object"));
    }
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

/// The OpenAPI document as this server serves it: `OPENAPI_JSON` as
/// written (every route that can answer 401 says so) when a client token is
/// configured; without one, no route can answer 401, so the `security`
/// requirements and every 401 response are taken out.
#[derive(Debug, Clone)]
pub struct OpenApiDoc(pub String);

impl OpenApiDoc {
    pub fn served(token_configured: bool) -> OpenApiDoc {
        if token_configured {
            return OpenApiDoc(OPENAPI_JSON.to_string());
        }
        let Ok(mut doc) = serde_json::from_str::<serde_json::Value>(OPENAPI_JSON) else {
            return OpenApiDoc(OPENAPI_JSON.to_string());
        };
        if let Some(root) = doc.as_object_mut() {
            root.remove("security");
        }
        let operations = doc["paths"]
            .as_object_mut()
            .into_iter()
            .flat_map(|paths| paths.values_mut())
            .filter_map(|path| path.as_object_mut())
            .flat_map(|path| path.values_mut());
        for operation in operations {
            if let Some(op) = operation.as_object_mut() {
                op.remove("security");
            }
            if let Some(responses) = operation["responses"].as_object_mut() {
                responses.remove("401");
            }
        }
        OpenApiDoc(doc.to_string())
    }
}

pub async fn openapi(doc: web::Data<OpenApiDoc>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(doc.0.clone())
}

/// A method the path does not serve: 405 with `Allow`.
pub async fn method_not_allowed(req: actix_web::HttpRequest) -> HttpResponse {
    use actix_web::ResponseError;
    let pattern = req
        .match_pattern()
        .unwrap_or_else(|| req.path().to_string());
    let allow = crate::http::server::allowed_methods(&pattern);
    ApiError::method_not_allowed(req.method().as_str(), &pattern, allow).error_response()
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

/// The body of an action that takes none: nothing, or `{}`.
pub fn empty_object(body: &[u8]) -> Result<(), ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(serde_json::Value::Object(map)) if map.is_empty() => Ok(()),
        _ => Err(ApiError::bad_request(
            "body: this action takes no body, or {}",
        )),
    }
}

/// The job a path's `{id}` names: a whole id, or a prefix of at least
/// `MIN_RESOLVE_DIGITS` hex digits that only one job's id starts with.
/// 400 for text that is no id prefix, 404 when no job matches, 409
/// `ambiguous_id` (with `candidates`) when several do.
pub async fn resolve(link: &CoordinatorLink, text: &str) -> Result<JobId, ApiError> {
    let prefix =
        IdPrefix::parse_to_resolve(text).map_err(|e| ApiError::bad_request(e.to_string()))?;
    if let Some(id) = prefix.whole() {
        return Ok(id);
    }
    match link.request(ClientRequest::Resolve { prefix }).await? {
        ClientResponse::Resolved { job_id } => Ok(job_id),
        ClientResponse::NoMatch { prefix } => Err(ApiError::not_found(format!(
            "no job id starts with {prefix} (expired or never existed)"
        ))),
        ClientResponse::Ambiguous { prefix, candidates } => {
            Err(ApiError::ambiguous(&prefix, candidates))
        }
        other => Err(ApiError::unexpected(other)),
    }
}

/// The answer carrying one job: 200 with it, or the refusal as an error.
pub fn job_answer(response: ClientResponse) -> ApiResult {
    match response {
        ClientResponse::Job(view) => Ok(HttpResponse::Ok().json(JobJson::of(&view))),
        ClientResponse::NotFound { job_id } => Err(ApiError::not_found(format!(
            "job {job_id} not found (expired or never existed)"
        ))),
        ClientResponse::CancelRefused { job_id, state } => Err(ApiError::new(
            StatusCode::CONFLICT,
            "already_finished",
            format!("job {job_id} is already {state}"),
        )),
        other => Err(ApiError::refused(other)),
    }
}

/// Anything unrouted: the JSON error shape, not actix-web's empty 404.
pub async fn no_route(req: actix_web::HttpRequest) -> HttpResponse {
    use actix_web::ResponseError;
    ApiError::not_found(format!("no route for {} {}", req.method(), req.path())).error_response()
}
