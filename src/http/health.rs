//! Probes. `/healthz`: the process serves HTTP (no coordinator round trip,
//! no token). `/readyz`: the coordinator answers a `Ready` query, which the
//! outbox releases only once every batch sent to SQLite is committed — so a
//! 200 means recovery finished (the listener opens after it), the actor is
//! processing messages and the database accepts writes.

use crate::actors::coordinator::QueryKind;
use crate::http::bridge::CoordinatorLink;
use actix_web::{web, HttpResponse};
use serde_json::json;
use std::time::Duration;

/// How long `/readyz` waits before answering 503.
pub const READY_TIMEOUT: Duration = Duration::from_secs(2);

pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({ "status": "ok" }))
}

pub async fn readyz(link: web::Data<CoordinatorLink>) -> HttpResponse {
    match link.query(QueryKind::Ready, READY_TIMEOUT).await {
        Ok(_) => HttpResponse::Ok().json(json!({ "status": "ready" })),
        Err(e) => HttpResponse::ServiceUnavailable()
            .json(json!({ "error": e.to_string(), "code": "not_ready" })),
    }
}
