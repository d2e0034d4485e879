//! Probes. `/healthz`: the process serves HTTP (no coordinator round trip,
//! no token). `/readyz`: the coordinator answers a `Ready` query, which the
//! outbox releases only once every batch sent to SQLite is committed — so a
//! 200 means recovery finished (the listener opens after it), the actor is
//! processing messages and the database accepts writes. While commits fail
//! (or the coordinator stops) it answers at once with the reason: 503.

use crate::actors::coordinator::QueryKind;
use crate::actors::outbox::QueryResult;
use crate::http::bridge::CoordinatorLink;
use crate::http::error::{ApiError, ErrorCode};
use crate::http::openapi::Failure;
use actix_web::http::StatusCode;
use actix_web::{get, web, HttpResponse, ResponseError};
use serde::Serialize;
use std::time::Duration;
use utoipa::ToSchema;

/// How long `/readyz` waits before answering 503.
pub const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// What a probe answers when all is well.
#[derive(Debug, Serialize, ToSchema)]
pub struct Status {
    status: &'static str,
}

#[utoipa::path(
    summary = "Liveness: the process serves HTTP. Never needs a token.",
    responses((status = 200, description = "ok", body = inline(Status)))
)]
#[get("/healthz")]
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(Status { status: "ok" })
}

/// 200 when ready; 503 with the reason otherwise (commits failing, the
/// coordinator stopping, or no answer within `READY_TIMEOUT`).
#[utoipa::path(
    summary = "Readiness: recovery finished, coordinator answering, database writable.",
    responses(
        (status = 200, description = "ready", body = inline(Status)),
        (status = 503, response = Failure),
    )
)]
#[get("/readyz")]
pub async fn readyz(link: web::Data<CoordinatorLink>) -> HttpResponse {
    let reason = match link.query(QueryKind::Ready, READY_TIMEOUT).await {
        Ok(QueryResult::NotReady { reason }) => reason,
        Ok(_) => return HttpResponse::Ok().json(Status { status: "ready" }),
        Err(e) => e.to_string(),
    };
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, ErrorCode::NotReady, reason).error_response()
}
