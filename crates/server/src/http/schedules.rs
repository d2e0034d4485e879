//! Schedules over HTTP: list, show, pause, resume, trigger and delete,
//! each the TCP protocol's request, answered once durable like every
//! other, in the CLI's `--json` shape of a schedule
//! (`ScheduleView::to_json`: the definition with its payload as JSON,
//! times as unix milliseconds, and what the coordinator knows of its
//! firing); and create (`POST /api/schedules`) and replace
//! (`PUT /api/schedules/{name}`) a definition, with the CLI's options
//! under their wire names.

use crate::http::api::{empty_object, ApiResult, EmptyObject, Link, EMPTY_BODY};
use crate::http::body::Body;
use crate::http::dto::{submit_priority_schema, Submitted};
use crate::http::error::{ApiError, ErrorBody, ErrorCode};
use crate::http::openapi::{BadRequest, Unavailable};
use actix_web::http::StatusCode;
use actix_web::{delete, get, post, put, web, HttpResponse};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use taskyard_protocol::limits;
use taskyard_protocol::payloads::encode_json;
use taskyard_protocol::{
    ClientRequest, ClientResponse, Overlap, Priority, ScheduleRefusal, ScheduleSpec, ScheduleView,
    SubmitAnswer,
};
use utoipa::openapi::schema::{Object, ObjectBuilder, SchemaType, Type};
use utoipa::{IntoParams, ToSchema};

/// `GET /api/schedules` query string.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Only schedules whose names sort after this one (empty: from the
    /// first).
    after: Option<String>,
}

/// The `{name}` of the schedule routes.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ScheduleRef {
    /// The schedule's name.
    #[param(min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9._-]+$")]
    name: String,
}

/// A page of schedules by name.
#[derive(Debug, Serialize, ToSchema)]
pub struct SchedulePage {
    #[schema(value_type = Vec<ScheduleView>)]
    schedules: Vec<Value>,
    more: bool,
}

/// What `DELETE /api/schedules/{name}` answers.
#[derive(Debug, Serialize, ToSchema)]
pub struct Deleted {
    deleted: String,
}

/// `422` of a definition: what the coordinator refused.
const INVALID: &str =
    "`invalid_schedule`: the coordinator refused a field (named in `error`); nothing is stored.";
/// `404` of the named routes.
const NO_SUCH: &str = "`not_found`: no schedule of that name.";

/// `GET /api/schedules`: a page of schedules by name (at most
/// `MAX_LIST_SCHEDULES`); `more`: ask again with `after`.
#[utoipa::path(
    operation_id = "list_schedules",
    summary = "Schedules by name, a page at a time (at most 200); `more`: ask again with `after` set to the last name.",
    description = "Create with POST; change with PUT /api/schedules/{name}; also `taskyard schedule` and `[[schedule]]` in the coordinator's config file.",
    params(ListParams),
    responses(
        (status = 200, description = "A page of schedules", body = inline(SchedulePage)),
        (status = 503, response = Unavailable),
    )
)]
#[get("/api/schedules")]
pub async fn list(link: Link, params: web::Query<ListParams>) -> ApiResult {
    let after = params.into_inner().after.filter(|a| !a.is_empty());
    match link.request(ClientRequest::ListSchedules { after }).await? {
        ClientResponse::Schedules { schedules, more } => {
            Ok(HttpResponse::Ok().json(SchedulePage {
                schedules: schedules.iter().map(ScheduleView::to_json).collect(),
                more,
            }))
        }
        other => Err(ApiError::unexpected(other)),
    }
}

/// The body of `POST /api/schedules` (and, `name` optional, of
/// `PUT /api/schedules/{name}`). Numbers are read as any JSON value and
/// checked here, so a refusal names the field.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(
    as = ScheduleDefinition,
    description = "A schedule's definition: the CLI's `schedule create` options under their wire names. Exactly one of `cron` and `every_ms`. What JSON Schema cannot say (the expression's syntax, the zone's name, whole seconds, the payload the task type takes, start before end) is checked by the coordinator: 422 `invalid_schedule` naming the field."
)]
pub struct ScheduleBody {
    /// Unique; 1 to 64 characters of `A-Z a-z 0-9 . _ -`. Required by
    /// POST; in PUT, the path's (if given, the same).
    #[serde(default)]
    name: Option<String>,
    task_type: String,
    /// Cron expression: 5 fields, or 6 with seconds first; L, W, #,
    /// MON..SUN, JAN..DEC.
    #[serde(default)]
    cron: Option<String>,
    /// IANA time zone the expression is read in; null: UTC.
    #[serde(default)]
    tz: Option<String>,
    /// A fixed interval in milliseconds (whole seconds, at least 1 s)
    /// instead of cron.
    #[serde(default)]
    #[schema(value_type = Option<u64>)]
    every_ms: Option<Value>,
    /// Each job's payload as JSON; absent: {}.
    #[serde(default)]
    payload: Option<Value>,
    #[serde(default)]
    #[schema(schema_with = definition_priority_schema)]
    priority: Option<Priority>,
    #[serde(default)]
    #[schema(schema_with = max_attempts_schema)]
    max_attempts: Option<Value>,
    /// Per-attempt timeout; null: the coordinator's task-timeout-millis.
    #[serde(default)]
    #[schema(value_type = Option<u64>)]
    timeout_ms: Option<Value>,
    #[serde(default)]
    #[schema(schema_with = overlap_schema)]
    overlap: Option<String>,
    /// How far back missed slots still fire after downtime; null: one
    /// slot.
    #[serde(default)]
    #[schema(value_type = Option<u64>)]
    catchup_window_ms: Option<Value>,
    /// Each job waits a fixed pseudo-random 0 to jitter_ms.
    #[serde(default)]
    #[schema(value_type = Option<u64>)]
    jitter_ms: Option<Value>,
    #[serde(default)]
    #[schema(default = false)]
    paused: Option<bool>,
    #[serde(default)]
    #[schema(schema_with = start_at_schema)]
    start_at: Option<Value>,
    #[serde(default)]
    #[schema(schema_with = end_at_schema)]
    end_at: Option<Value>,
}

fn definition_priority_schema() -> Object {
    let mut schema = submit_priority_schema();
    schema.description = None;
    schema
}

fn max_attempts_schema() -> Object {
    let mut schema = limits::MAX_ATTEMPTS_RANGE.schema(true);
    schema.description = Some("null: the coordinator's default-max-attempts.".into());
    schema
}

/// Unix milliseconds as `time` reads them (null: absent).
fn unix_ms(description: &str) -> Object {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
        .minimum(Some(0))
        .maximum(Some(i64::MAX))
        .description(Some(description))
        .build()
}

fn start_at_schema() -> Object {
    unix_ms("No slot before this time (unix ms); an interval counts from it.")
}

fn end_at_schema() -> Object {
    unix_ms("No slot after this time (unix ms).")
}

fn overlap_schema() -> Object {
    let names = Overlap::ALL.iter().map(|o| json!(o));
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .enum_values(Some(names.chain([Value::Null])))
        .default(Some(json!(Overlap::default())))
        .build()
}

/// A whole number ≥ 0 (null: absent), or a 400 naming `field`.
fn whole(field: &str, value: Option<&Value>) -> Result<Option<u64>, ApiError> {
    value
        .filter(|v| !v.is_null())
        .map(|v| {
            v.as_u64()
                .ok_or_else(|| ApiError::bad_request(format!("{field}: not a whole number ≥ 0")))
        })
        .transpose()
}

/// Unix milliseconds ≥ 0, or a 400 naming `field`.
fn time(field: &str, value: Option<&Value>) -> Result<Option<i64>, ApiError> {
    whole(field, value)?
        .map(|ms| {
            i64::try_from(ms).map_err(|_| ApiError::bad_request(format!("{field}: too large")))
        })
        .transpose()
}

impl ScheduleBody {
    /// The wire definition named `name`, or a 400 naming the field; what
    /// the coordinator then refuses (a bad expression, zone or payload)
    /// is a 422 naming it.
    fn into_spec(self, name: String) -> Result<ScheduleSpec, ApiError> {
        let max_attempts = whole("max_attempts", self.max_attempts.as_ref())?
            .map(|n| {
                limits::MAX_ATTEMPTS_RANGE
                    .check_u32(n)
                    .map_err(|e| ApiError::bad_request(e.to_string()))
            })
            .transpose()?;
        let overlap = self
            .overlap
            .map(|o| o.parse::<Overlap>())
            .transpose()
            .map_err(|e| ApiError::bad_request(format!("overlap: {e}")))?
            .unwrap_or_default();
        let payload = encode_json(&self.payload.unwrap_or_else(|| json!({})));
        Ok(ScheduleSpec {
            cron: self.cron,
            tz: self.tz,
            every_ms: whole("every_ms", self.every_ms.as_ref())?,
            priority: self.priority.unwrap_or_default(),
            max_attempts,
            timeout_ms: whole("timeout_ms", self.timeout_ms.as_ref())?,
            overlap,
            catchup_window_ms: whole("catchup_window_ms", self.catchup_window_ms.as_ref())?,
            jitter_ms: whole("jitter_ms", self.jitter_ms.as_ref())?.unwrap_or(0),
            paused: self.paused.unwrap_or(false),
            start_at: time("start_at", self.start_at.as_ref())?,
            end_at: time("end_at", self.end_at.as_ref())?,
            ..ScheduleSpec::new(name, self.task_type, payload)
        })
    }
}

fn parse_body(body: &[u8]) -> Result<ScheduleBody, ApiError> {
    // serde would also read a struct from a JSON array.
    if !body.trim_ascii_start().starts_with(b"{") {
        return Err(ApiError::bad_request("body: expected a JSON object"));
    }
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("body: {e}")))
}

/// `POST /api/schedules`: 201 with the schedule once stored.
#[utoipa::path(
    operation_id = "create_schedule",
    summary = "Create a schedule (`taskyard schedule create`).",
    description = "Send it as `Content-Type: application/json` (415 otherwise).",
    request_body = ScheduleBody,
    responses(
        (status = 201, description = "The schedule, stored", body = ScheduleView),
        (status = 400, response = BadRequest),
        (status = 409, description = "`schedule_exists`: a schedule of that name exists.", body = ErrorBody),
        (status = 422, description = INVALID, body = ErrorBody),
        (status = 429, description = "`schedule_limit`: `max-schedules` reached.", body = ErrorBody),
        (status = 503, response = Unavailable),
    )
)]
#[post("/api/schedules")]
pub async fn create(link: Link, body: Body) -> ApiResult {
    let body = parse_body(&body)?;
    let name = body
        .name
        .clone()
        .ok_or_else(|| ApiError::bad_request("body: missing field `name`"))?;
    let spec = body.into_spec(name)?;
    let request = ClientRequest::CreateSchedule(Box::new(spec));
    request_view(&link, request, StatusCode::CREATED).await
}

/// `PUT /api/schedules/{name}`: replaces the definition (every field;
/// those left out take their defaults).
#[utoipa::path(
    operation_id = "update_schedule",
    summary = "Replace a schedule's definition (`taskyard schedule update`): every field; those left out take their defaults. Slots before now are not fired for it.",
    params(ScheduleRef),
    request_body = ScheduleBody,
    responses(
        (status = 200, description = "The schedule, stored", body = ScheduleView),
        (status = 400, response = BadRequest),
        (status = 404, description = NO_SUCH, body = ErrorBody),
        (status = 422, description = INVALID, body = ErrorBody),
        (status = 503, response = Unavailable),
    )
)]
#[put("/api/schedules/{name}")]
pub async fn update(link: Link, name: web::Path<ScheduleRef>, body: Body) -> ApiResult {
    let body = parse_body(&body)?;
    let name = name.into_inner().name;
    if body.name.as_ref().is_some_and(|n| *n != name) {
        return Err(ApiError::bad_request(
            "name: differs from the path's (a schedule cannot be renamed)",
        ));
    }
    let spec = body.into_spec(name)?;
    let request = ClientRequest::UpdateSchedule(Box::new(spec));
    request_view(&link, request, StatusCode::OK).await
}

#[utoipa::path(
    operation_id = "show_schedule",
    summary = "One schedule: its definition, next 5 fire times and recent runs.",
    params(ScheduleRef),
    responses(
        (status = 200, description = "The schedule", body = ScheduleView),
        (status = 404, description = NO_SUCH, body = ErrorBody),
        (status = 503, response = Unavailable),
    )
)]
#[get("/api/schedules/{name}")]
pub async fn show(link: Link, name: web::Path<ScheduleRef>) -> ApiResult {
    let name = name.into_inner().name;
    request_view(&link, ClientRequest::ShowSchedule { name }, StatusCode::OK).await
}

#[utoipa::path(
    operation_id = "pause_schedule",
    summary = "Stop firing (slots while paused are never fired).",
    description = EMPTY_BODY,
    params(ScheduleRef),
    request_body = inline(EmptyObject),
    responses(
        (status = 200, description = "The schedule", body = ScheduleView),
        (status = 400, response = BadRequest),
        (status = 404, description = NO_SUCH, body = ErrorBody),
        (status = 503, response = Unavailable),
    )
)]
#[post("/api/schedules/{name}/pause")]
pub async fn pause(link: Link, name: web::Path<ScheduleRef>, body: Body) -> ApiResult {
    empty_object(&body)?;
    let name = name.into_inner().name;
    request_view(&link, ClientRequest::PauseSchedule { name }, StatusCode::OK).await
}

#[utoipa::path(
    operation_id = "resume_schedule",
    summary = "Fire again from the next slot after now.",
    description = EMPTY_BODY,
    params(ScheduleRef),
    request_body = inline(EmptyObject),
    responses(
        (status = 200, description = "The schedule", body = ScheduleView),
        (status = 400, response = BadRequest),
        (status = 404, description = NO_SUCH, body = ErrorBody),
        (status = 503, response = Unavailable),
    )
)]
#[post("/api/schedules/{name}/resume")]
pub async fn resume(link: Link, name: web::Path<ScheduleRef>, body: Body) -> ApiResult {
    empty_object(&body)?;
    let name = name.into_inner().name;
    request_view(
        &link,
        ClientRequest::ResumeSchedule { name },
        StatusCode::OK,
    )
    .await
}

/// `POST /api/schedules/{name}/trigger`: the schedule's job, now.
#[utoipa::path(
    operation_id = "trigger_schedule",
    summary = "Submit the schedule's job now, outside its cadence (idempotency key `schedule:NAME:trigger:TIME`; no slot is used up).",
    description = EMPTY_BODY,
    params(ScheduleRef),
    request_body = inline(EmptyObject),
    responses(
        (status = 201, description = "Submitted", body = inline(Submitted)),
        (status = 400, response = BadRequest),
        (status = 404, description = NO_SUCH, body = ErrorBody),
        (status = 429, description = "`admission_limit`: `max-active-jobs` reached", body = ErrorBody),
        (status = 503, response = Unavailable),
    )
)]
#[post("/api/schedules/{name}/trigger")]
pub async fn trigger(link: Link, name: web::Path<ScheduleRef>, body: Body) -> ApiResult {
    empty_object(&body)?;
    let name = name.into_inner().name;
    match link
        .request(ClientRequest::TriggerSchedule { name })
        .await?
    {
        ClientResponse::Submitted(SubmitAnswer::Accepted { job_id, no_worker }) => {
            Ok(HttpResponse::Created().json(Submitted { job_id, no_worker }))
        }
        ClientResponse::Submitted(SubmitAnswer::Rejected(r)) => Err(ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::AdmissionLimit,
            r.reason,
        )),
        other => refused(other),
    }
}

#[utoipa::path(
    operation_id = "delete_schedule",
    summary = "Remove a schedule (the jobs it fired stay).",
    params(ScheduleRef),
    responses(
        (status = 200, description = "Deleted", body = inline(Deleted)),
        (status = 404, description = NO_SUCH, body = ErrorBody),
        (status = 503, response = Unavailable),
    )
)]
#[delete("/api/schedules/{name}")]
pub async fn delete(link: Link, name: web::Path<ScheduleRef>) -> ApiResult {
    let name = name.into_inner().name;
    match link
        .request(ClientRequest::DeleteSchedule { name: name.clone() })
        .await?
    {
        ClientResponse::ScheduleDeleted { .. } => {
            Ok(HttpResponse::Ok().json(Deleted { deleted: name }))
        }
        other => refused(other),
    }
}

/// Asks `request`, answered with a schedule (`status`) or a refusal.
async fn request_view(link: &Link, request: ClientRequest, status: StatusCode) -> ApiResult {
    match link.request(request).await? {
        ClientResponse::Schedule(view) => Ok(HttpResponse::build(status).json(view.to_json())),
        other => refused(other),
    }
}

/// A refusal as its status: 422 for a bad field (the reason names it),
/// 409 for a name taken, 404 for an unknown one, 429 at `max-schedules`,
/// 503 when the database did not store it.
fn refused(answer: ClientResponse) -> ApiResult {
    let ClientResponse::ScheduleRefused { kind, reason, .. } = answer else {
        return Err(ApiError::unexpected(answer));
    };
    Err(match kind {
        ScheduleRefusal::Invalid => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidSchedule,
            reason,
        ),
        ScheduleRefusal::Exists => {
            ApiError::new(StatusCode::CONFLICT, ErrorCode::ScheduleExists, reason)
        }
        ScheduleRefusal::Unknown => ApiError::not_found(reason),
        ScheduleRefusal::Limit => ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::ScheduleLimit,
            reason,
        ),
        ScheduleRefusal::Store => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::Unavailable,
            reason,
        ),
    })
}
