//! Probes. `/healthz`: the process serves HTTP (no coordinator round trip,
//! no token). `/readyz`: the coordinator answers a `Ready` query, which the
//! outbox releases only once every batch sent to SQLite is committed — so a
//! 200 means recovery finished (the listener opens after it), the actor is
//! processing messages and the database accepts writes. While commits fail
//! (or the coordinator stops) it answers at once with the reason: 503.

use crate::actors::coordinator::QueryKind;
use crate::actors::outbox::QueryResult;
use crate::http::bridge::CoordinatorLink;
use actix_web::{web, HttpResponse};
use serde_json::json;
use std::time::Duration;

/// How long `/readyz` waits before answering 503.
pub const READY_TIMEOUT: Duration = Duration::from_secs(2);

pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({ "status": "ok" }))
}

/// 200 when ready; 503 with the reason otherwise (commits failing, the
/// coordinator stopping, or no answer within `READY_TIMEOUT`).
pub async fn readyz(link: web::Data<CoordinatorLink>) -> HttpResponse {
    let reason = match link.query(QueryKind::Ready, READY_TIMEOUT).await {
        Ok(QueryResult::NotReady { reason }) => reason,
        Ok(_) => return HttpResponse::Ok().json(json!({ "status": "ready" })),
        Err(e) => e.to_string(),
    };
    HttpResponse::ServiceUnavailable().json(json!({ "error": reason, "code": "not_ready" }))
}
