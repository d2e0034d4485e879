//! The JSON API handlers. Each one parses its input, asks the coordinator
//! through the bridge (writes reuse the TCP protocol's requests, so
//! validation is the same), and maps the durable answer to JSON.

use crate::actors::coordinator::QueryKind;
use crate::actors::node_view::ClusterInfo;
use crate::actors::outbox::QueryResult;
use crate::http::body::Body;
use crate::http::bridge::{CoordinatorLink, ANSWER_TIMEOUT};
use crate::http::dto::{ApiWorker, Stats, Submit, SubmitBody, Submitted};
use crate::http::error::{ApiError, ErrorBody, ErrorCode};
use crate::http::openapi::{BadRequest, NotFound, Unavailable};
use crate::http::server::Routes;
use crate::scheduler::timeline::TimelineSnapshot;
use crate::scheduler::{PageCursor, StatsSnapshot};
use actix_web::http::StatusCode;
use actix_web::{get, post, web, HttpResponse};
use serde::Deserialize;
use taskyard_protocol::job_json::{JobJson, JobPageJson};
use taskyard_protocol::limits;
use taskyard_protocol::payloads::validate_task_type;
use taskyard_protocol::{
    ClientRequest, ClientResponse, IdPrefix, JobId, JobState, ListOrder, ListQuery, Priority,
    SubmitAnswer,
};
use utoipa::openapi::schema::{Object, ObjectBuilder, Type};
use utoipa::{IntoParams, ToSchema};

/// Page size when `limit` is not given, and the largest allowed.
pub const DEFAULT_PAGE: usize = 50;
pub const MAX_PAGE: usize = taskyard_protocol::MAX_LIST_JOBS as usize;

pub use crate::http::link::Link;
pub type ApiResult = Result<HttpResponse, ApiError>;

/// `GET /api/jobs` query string. Every value is text, checked here so
/// that a refusal names the parameter and what it takes; the document
/// says what each takes (the `schema_with` functions below, which also
/// carry the description: utoipa takes nothing else with `schema_with`).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    #[param(schema_with = state_filter)]
    state: Option<String>,
    #[serde(rename = "type")]
    #[param(schema_with = task_type_filter)]
    task_type: Option<String>,
    #[param(schema_with = priority_filter)]
    priority: Option<String>,
    /// Only jobs whose id starts with this: 1 to 32 hex digits, single
    /// dashes between digits allowed (empty: any).
    #[param(pattern = "^((?:[0-9a-fA-F]-?){0,31}[0-9a-fA-F])?$")]
    q: Option<String>,
    #[param(schema_with = order_schema)]
    order: Option<String>,
    /// Checked by `limits::LIST_LIMIT` so any refusal names the range.
    #[param(schema_with = limit_schema)]
    limit: Option<String>,
    /// `next_cursor` of the previous page (same filters and order; empty:
    /// the first page).
    #[param(
        pattern = r"^([0-9]{1,19}\.-?[0-9]{1,18}\.[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})?$"
    )]
    cursor: Option<String>,
}

/// A string that is one of `words` or empty (a filter not given).
fn word_or_empty(words: impl IntoIterator<Item = String>) -> ObjectBuilder {
    let words: Vec<String> = words.into_iter().chain([String::new()]).collect();
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(words))
}

fn state_filter() -> Object {
    word_or_empty(JobState::ALL.map(|s| s.to_string()))
        .description(Some("Only jobs in this state (empty: any)."))
        .build()
}

fn priority_filter() -> Object {
    word_or_empty(Priority::ALL.into_iter().rev().map(|p| p.to_string()))
        .description(Some("Only jobs of this base priority (empty: any)."))
        .build()
}

fn task_type_filter() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .max_length(Some(taskyard_protocol::payloads::MAX_TASK_TYPE_LEN))
        .pattern(Some("^[A-Za-z0-9_.:-]*$"))
        .description(Some("Only jobs of this task type (empty: any)."))
        .build()
}

fn order_schema() -> Object {
    word_or_empty(["newest".to_string(), "oldest".to_string()])
        .default(Some("newest".into()))
        .description(Some("Submission order the page starts from."))
        .build()
}

fn limit_schema() -> Object {
    let mut schema = limits::LIST_LIMIT.schema(false);
    schema.default = Some(DEFAULT_PAGE.into());
    schema
}

/// The `{id}` of the job routes.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct JobRef {
    /// A job id, or a prefix of one with 4 to 32 hex digits (single dashes
    /// between digits allowed, anywhere) that only one job's id starts
    /// with.
    #[param(min_length = 4, pattern = "^(?:[0-9a-fA-F]-?){3,31}[0-9a-fA-F]$")]
    pub id: String,
}

/// Guard of the `{id}` routes: the path is not one a route of its own
/// serves (`/api/jobs/retry` is never a job id, whatever the method: a GET
/// of it is answered 405, as for any path with its own route).
pub fn names_a_job(ctx: &actix_web::guard::GuardContext<'_>) -> bool {
    let path = ctx.head().uri.path();
    let routes = ctx.app_data::<web::Data<Routes>>();
    routes.is_some_and(|r| {
        r.allowed(path)
            .is_some_and(|(pattern, _)| pattern.contains('{'))
    })
}

/// The body of an action that takes none: `{}`, or nothing at all.
#[derive(ToSchema)]
#[schema(
    max_properties = 0,
    description = "`{}` (an empty body is accepted too)."
)]
pub struct EmptyObject {}

/// The description of an action that takes no body.
pub const EMPTY_BODY: &str = "Send `{}` (or no body) as `Content-Type: application/json` \
    (415 otherwise), so that no cross-site form can run it; any other body is 400.";

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

#[utoipa::path(
    summary = "Job summaries, newest (or oldest) submission first, one page at a time, filtered on the server.",
    params(ListParams),
    responses(
        (status = 200, description = "A page", body = JobPageJson),
        (status = 400, response = BadRequest),
        (status = 503, response = Unavailable),
    )
)]
#[get("/api/jobs")]
pub async fn list_jobs(link: Link, params: web::Query<ListParams>) -> ApiResult {
    let query = params.into_inner().into_query()?;
    match link.request(ClientRequest::ListJobs(query)).await? {
        ClientResponse::Jobs(page) => Ok(HttpResponse::Ok().json(JobPageJson::of(&page))),
        other => Err(ApiError::refused(other)),
    }
}

#[utoipa::path(
    summary = "One job with its attempt history.",
    params(JobRef),
    responses(
        (status = 200, description = "The job", body = JobJson),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        (status = 409, description = "`ambiguous_id`: several jobs' ids start with the prefix (`candidates` lists up to 10)", body = ErrorBody),
        (status = 503, response = Unavailable),
    )
)]
#[get("/api/jobs/{id}", guard = "names_a_job")]
pub async fn get_job(link: Link, id: web::Path<JobRef>) -> ApiResult {
    let job_id = resolve(&link, &id.id).await?;
    job_answer(link.request(ClientRequest::Status { job_id }).await?)
}

#[utoipa::path(
    summary = "Cancel a QUEUED, RETRY_WAIT or RUNNING job.",
    description = EMPTY_BODY,
    params(JobRef),
    request_body = inline(EmptyObject),
    responses(
        (status = 200, description = "The cancelled job", body = JobJson),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        (status = 409, description = "`already_finished` or `ambiguous_id`", body = ErrorBody),
        (status = 503, response = Unavailable),
    )
)]
#[post("/api/jobs/{id}/cancel")]
pub async fn cancel_job(link: Link, id: web::Path<JobRef>, body: Body) -> ApiResult {
    empty_object(&body)?;
    let job_id = resolve(&link, &id.id).await?;
    job_answer(link.request(ClientRequest::Cancel { job_id }).await?)
}

#[utoipa::path(
    summary = "Submit a job (same validation as the TCP protocol).",
    description = "The body must be sent as `Content-Type: application/json` (415 otherwise).",
    request_body = Submit,
    responses(
        (status = 201, description = "Admitted and durable", body = inline(Submitted)),
        (status = 400, response = BadRequest),
        (status = 422, description = "`invalid_submission`: a value no job may have (the reason names the field)", body = ErrorBody),
        (status = 429, description = "`admission_limit`: `max-active-jobs` reached", body = ErrorBody),
        (status = 503, response = Unavailable),
    )
)]
#[post("/api/jobs")]
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
            Ok(HttpResponse::Created().json(Submitted { job_id, no_worker }))
        }
        ClientResponse::Submitted(SubmitAnswer::Rejected(r))
            if r.reason.starts_with("max-active-jobs") =>
        {
            Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                ErrorCode::AdmissionLimit,
                r.reason,
            ))
        }
        ClientResponse::Submitted(SubmitAnswer::Rejected(r)) => Err(invalid_submission(r.reason)),
        other => Err(ApiError::unexpected(other)),
    }
}

#[utoipa::path(
    summary = "Connected workers.",
    responses(
        (status = 200, description = "Workers", body = Vec<ApiWorker>),
        (status = 503, response = Unavailable),
    )
)]
#[get("/api/workers")]
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

#[utoipa::path(
    summary = "Counts per state, queue depth per priority and task type, throughput over the last minute, worker capacity.",
    responses(
        (status = 200, description = "Stats", body = inline(Stats)),
        (status = 503, response = Unavailable),
    )
)]
#[get("/api/stats")]
pub async fn stats(link: Link) -> ApiResult {
    let snapshot = fetch_stats(&link).await?;
    Ok(HttpResponse::Ok().json(Stats::of(&snapshot)))
}

/// `GET /api/timeline`: the last hour per task type and minute (jobs
/// finished, queue wait, run time), for the dashboard's charts.
#[utoipa::path(
    summary = "The last hour minute by minute (oldest first, the current minute last), per task type and for all together: jobs succeeded and failed, queue wait before the first attempt and attempt run time (mean and p95 in ms, null in a minute with none). At most `timeline-task-types` types by name; jobs of others count as `other`.",
    responses(
        (status = 200, description = "Timeline", body = inline(TimelineSnapshot)),
        (status = 503, response = Unavailable),
    )
)]
#[get("/api/timeline")]
pub async fn timeline(link: Link) -> ApiResult {
    match link.query(QueryKind::Timeline, ANSWER_TIMEOUT).await? {
        QueryResult::Timeline(snapshot) => Ok(HttpResponse::Ok().json(*snapshot)),
        _ => Err(ApiError::unexpected("not a timeline")),
    }
}

/// Who leads, the lease, and the members that checked in: answered by a
/// standby as by the leader (from what this process last read of the
/// lease, no coordinator round trip).
#[utoipa::path(
    summary = "Who leads (node, epoch, advertised addresses, lease age) and the coordinators that checked in. Answered by a standby as by the leader, from what it last read of the lease.",
    responses((status = 200, description = "Cluster", body = ClusterInfo))
)]
#[get("/api/cluster")]
pub async fn cluster(link: Link) -> HttpResponse {
    HttpResponse::Ok().json(link.view.cluster())
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
        ErrorCode::InvalidSubmission,
        reason,
    )
}

/// The body of an action that takes none: nothing, or `{}`.
pub fn empty_object(body: &[u8]) -> Result<(), ApiError> {
    // JSON's whitespace only: a form feed, which ASCII counts, is no JSON.
    if body
        .iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
    {
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
pub async fn resolve(link: &Link, text: &str) -> Result<JobId, ApiError> {
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
        other => Err(ApiError::refused(other)),
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
            ErrorCode::AlreadyFinished,
            format!("job {job_id} is already {state}"),
        )),
        other => Err(ApiError::refused(other)),
    }
}

/// Anything unrouted: 405 with `Allow` for a path served with other
/// methods, else 404; both in the JSON error shape, not actix-web's empty
/// answers.
pub async fn no_route(req: actix_web::HttpRequest, routes: web::Data<Routes>) -> HttpResponse {
    use actix_web::ResponseError;
    let (method, path) = (req.method().as_str(), req.path());
    let error = match routes.allowed(path) {
        Some((pattern, allow)) => ApiError::method_not_allowed(method, pattern, allow),
        None => ApiError::not_found(format!("no route for {method} {path}")),
    };
    error.error_response()
}

#[cfg(test)]
mod tests {
    use super::empty_object;

    #[test]
    fn an_action_takes_no_body_or_an_empty_object_and_nothing_else() {
        for fine in [&b""[..], b" \t\r\n", b"{}", b" { } "] {
            assert!(empty_object(fine).is_ok(), "{fine:?}");
        }
        for refused in [&b"\x0c"[..], b"[]", b"{\"a\":1}", b"x", b"\x0b"] {
            assert!(empty_object(refused).is_err(), "{refused:?}");
        }
    }
}
