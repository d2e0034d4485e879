//! Schedules over HTTP: list, show, pause, resume, trigger and delete,
//! each the TCP protocol's request, answered once durable like every
//! other, in the CLI's `--json` shape of a schedule
//! (`ScheduleView::to_json`: the definition with its payload as JSON,
//! times as unix milliseconds, and what the coordinator knows of its
//! firing); and create (`POST /api/schedules`) and replace
//! (`PUT /api/schedules/{name}`) a definition, with the CLI's options
//! under their wire names.

use crate::http::api::{empty_object, ApiResult, Link};
use crate::http::body::Body;
use crate::http::error::ApiError;
use crate::protocol::limits;
use crate::protocol::payloads::encode_json;
use crate::protocol::ScheduleView;
use crate::protocol::{
    ClientRequest, ClientResponse, Overlap, Priority, ScheduleRefusal, ScheduleSpec, SubmitAnswer,
};
use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use serde::Deserialize;
use serde_json::{json, Value};

/// `GET /api/schedules` query string.
#[derive(Debug, Deserialize)]
pub struct ListParams {
    /// Schedules whose names sort after this one (the last of a page).
    after: Option<String>,
}

/// `GET /api/schedules`: a page of schedules by name (at most
/// `MAX_LIST_SCHEDULES`); `more`: ask again with `after`.
pub async fn list(link: Link, params: web::Query<ListParams>) -> ApiResult {
    let after = params.into_inner().after.filter(|a| !a.is_empty());
    match link.request(ClientRequest::ListSchedules { after }).await? {
        ClientResponse::Schedules { schedules, more } => Ok(HttpResponse::Ok().json(json!({
            "schedules": schedules.iter().map(ScheduleView::to_json).collect::<Vec<_>>(),
            "more": more,
        }))),
        other => Err(ApiError::unexpected(other)),
    }
}

/// The body of `POST /api/schedules` (and, `name` optional, of
/// `PUT /api/schedules/{name}`). Numbers are read as any JSON value and
/// checked here, so a refusal names the field.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleBody {
    #[serde(default)]
    name: Option<String>,
    task_type: String,
    #[serde(default)]
    cron: Option<String>,
    #[serde(default)]
    tz: Option<String>,
    #[serde(default)]
    every_ms: Option<Value>,
    #[serde(default)]
    payload: Option<Value>,
    #[serde(default)]
    priority: Option<Priority>,
    #[serde(default)]
    max_attempts: Option<Value>,
    #[serde(default)]
    timeout_ms: Option<Value>,
    #[serde(default)]
    overlap: Option<String>,
    #[serde(default)]
    catchup_window_ms: Option<Value>,
    #[serde(default)]
    jitter_ms: Option<Value>,
    #[serde(default)]
    paused: Option<bool>,
    #[serde(default)]
    start_at: Option<Value>,
    #[serde(default)]
    end_at: Option<Value>,
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
pub async fn update(link: Link, name: web::Path<String>, body: Body) -> ApiResult {
    let body = parse_body(&body)?;
    let name = name.into_inner();
    if body.name.as_ref().is_some_and(|n| *n != name) {
        return Err(ApiError::bad_request(
            "name: differs from the path's (a schedule cannot be renamed)",
        ));
    }
    let spec = body.into_spec(name)?;
    let request = ClientRequest::UpdateSchedule(Box::new(spec));
    request_view(&link, request, StatusCode::OK).await
}

pub async fn show(link: Link, name: web::Path<String>) -> ApiResult {
    let name = name.into_inner();
    request_view(&link, ClientRequest::ShowSchedule { name }, StatusCode::OK).await
}

pub async fn pause(link: Link, name: web::Path<String>, body: Body) -> ApiResult {
    empty_object(&body)?;
    let name = name.into_inner();
    request_view(&link, ClientRequest::PauseSchedule { name }, StatusCode::OK).await
}

pub async fn resume(link: Link, name: web::Path<String>, body: Body) -> ApiResult {
    empty_object(&body)?;
    let name = name.into_inner();
    request_view(
        &link,
        ClientRequest::ResumeSchedule { name },
        StatusCode::OK,
    )
    .await
}

/// `POST /api/schedules/{name}/trigger`: the schedule's job, now.
pub async fn trigger(link: Link, name: web::Path<String>, body: Body) -> ApiResult {
    empty_object(&body)?;
    let name = name.into_inner();
    match link
        .request(ClientRequest::TriggerSchedule { name })
        .await?
    {
        ClientResponse::Submitted(SubmitAnswer::Accepted { job_id, no_worker }) => {
            Ok(HttpResponse::Created().json(json!({ "job_id": job_id, "no_worker": no_worker })))
        }
        ClientResponse::Submitted(SubmitAnswer::Rejected(r)) => Err(ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "admission_limit",
            r.reason,
        )),
        other => refused(other),
    }
}

pub async fn delete(link: Link, name: web::Path<String>) -> ApiResult {
    let name = name.into_inner();
    match link
        .request(ClientRequest::DeleteSchedule { name: name.clone() })
        .await?
    {
        ClientResponse::ScheduleDeleted { .. } => {
            Ok(HttpResponse::Ok().json(json!({ "deleted": name })))
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
        ScheduleRefusal::Invalid => {
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_schedule", reason)
        }
        ScheduleRefusal::Exists => ApiError::new(StatusCode::CONFLICT, "schedule_exists", reason),
        ScheduleRefusal::Unknown => ApiError::not_found(reason),
        ScheduleRefusal::Limit => {
            ApiError::new(StatusCode::TOO_MANY_REQUESTS, "schedule_limit", reason)
        }
        ScheduleRefusal::Store => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", reason)
        }
    })
}
