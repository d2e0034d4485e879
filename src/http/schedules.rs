//! Schedules over HTTP: list, show, pause, resume, trigger and delete,
//! each the TCP protocol's request, answered once durable like every
//! other, in the CLI's `--json` shape of a schedule
//! (`cli::schedule::view_json`: the definition with its payload as JSON,
//! times as unix milliseconds, and what the coordinator knows of its
//! firing). Creating and changing a definition is the CLI's and the
//! protocol's (`taskyard schedule create|update`, `[[schedule]]`).

use crate::cli::schedule::view_json;
use crate::http::api::{empty_object, ApiResult, Link};
use crate::http::body::Body;
use crate::http::error::ApiError;
use crate::protocol::{ClientRequest, ClientResponse, ScheduleRefusal, SubmitAnswer};
use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use serde::Deserialize;
use serde_json::json;

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
            "schedules": schedules.iter().map(view_json).collect::<Vec<_>>(),
            "more": more,
        }))),
        other => Err(ApiError::unexpected(other)),
    }
}

pub async fn show(link: Link, name: web::Path<String>) -> ApiResult {
    let name = name.into_inner();
    view_answer(
        link.request(ClientRequest::ShowSchedule { name }).await?,
        StatusCode::OK,
    )
}

pub async fn pause(link: Link, name: web::Path<String>, body: Body) -> ApiResult {
    empty_object(&body)?;
    let name = name.into_inner();
    view_answer(
        link.request(ClientRequest::PauseSchedule { name }).await?,
        StatusCode::OK,
    )
}

pub async fn resume(link: Link, name: web::Path<String>, body: Body) -> ApiResult {
    empty_object(&body)?;
    let name = name.into_inner();
    view_answer(
        link.request(ClientRequest::ResumeSchedule { name }).await?,
        StatusCode::OK,
    )
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

fn view_answer(answer: ClientResponse, status: StatusCode) -> ApiResult {
    match answer {
        ClientResponse::Schedule(view) => Ok(HttpResponse::build(status).json(view_json(&view))),
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
