//! The client-port rule, applied to HTTP: when `client-token` is set, every
//! request but those `is_open` allows must carry `Authorization: Bearer
//! TOKEN`.

use crate::http::error::ApiError;
use crate::http::openapi::{add_response, operations_mut, response_ref, Unauthorized};
use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{web, Error, ResponseError};
use taskyard_client::security::Secret;
use utoipa::openapi::security::SecurityRequirement;
use utoipa::openapi::OpenApi;

/// The configured token, if any; shared by every worker thread.
#[derive(Debug, Clone, Default)]
pub struct AuthToken(pub Option<Secret>);

/// Paths anyone may call: liveness must work for probes that hold no
/// secret, and the dashboard's page and files (`/`, `/assets/...`) hold no
/// data — all it shows comes from the API, which needs the token — so a
/// browser can open it and be asked for the token.
pub fn is_open(path: &str) -> bool {
    path == "/healthz" || path == "/" || path.starts_with("/assets/")
}

/// What the token asks of each route, in the OpenAPI document: with a
/// token, the `bearer` requirement, `security: []` on the open routes and
/// a 401 on every other; without one, no route can answer 401 and the
/// document says nothing of tokens.
pub fn document(doc: &mut OpenApi, token_configured: bool) {
    if !token_configured {
        return;
    }
    doc.security = Some(vec![SecurityRequirement::new(
        "bearer",
        Vec::<String>::new(),
    )]);
    for (path, _, op) in operations_mut(doc) {
        if is_open(&path) {
            op.security = Some(Vec::new());
        } else {
            add_response(op, 401, response_ref::<Unauthorized>());
        }
    }
}

/// Middleware: refuses a request without the right token with 401 and the
/// usual JSON error body.
pub async fn require_token(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, Error> {
    let expected = req
        .app_data::<web::Data<AuthToken>>()
        .and_then(|t| t.0.clone());
    let allowed = match expected {
        None => true,
        Some(token) => is_open(req.path()) || presented(&req, &token),
    };
    if !allowed {
        let response = ApiError::unauthorized().error_response();
        return Ok(req.into_response(response).map_into_right_body());
    }
    Ok(next.call(req).await?.map_into_left_body())
}

/// True when the request carries `Authorization: Bearer <token>`; the
/// comparison is constant-time (`Secret::matches`).
fn presented(req: &ServiceRequest, token: &Secret) -> bool {
    let given = req
        .headers()
        .get(actix_web::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    token.matches(given)
}
