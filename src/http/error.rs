//! Every API error has one JSON shape, `{ "error": text, "code": word }`,
//! and a status code chosen here, so handlers only say what went wrong.

use crate::http::bridge::BridgeError;
use crate::protocol::LeaderAddresses;
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;
use std::fmt;

/// An API failure: HTTP status, a stable machine-readable `code` and a
/// human-readable message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// Who leads instead, when this process is a standby (`not_leader`).
    pub leader: Option<Box<LeaderAddresses>>,
}

#[derive(Serialize)]
struct Body<'a> {
    error: &'a str,
    code: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    leader: Option<&'a LeaderAddresses>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            leader: None,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn unauthorized() -> Self {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing or wrong `Authorization: Bearer` token",
        )
    }

    /// The coordinator gave no answer (or this process is a standby,
    /// `not_leader`, naming the leader): the caller may retry.
    pub fn unavailable(e: BridgeError) -> Self {
        if let BridgeError::NotLeader(leader) = &e {
            let mut error =
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "not_leader", e.to_string());
            error.leader = leader.clone();
            return error;
        }
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            e.to_string(),
        )
    }

    /// The coordinator answered with something this endpoint never expects.
    pub fn unexpected(what: impl fmt::Debug) -> Self {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("unexpected coordinator answer: {what:?}"),
        )
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        HttpResponse::build(self.status).json(Body {
            error: &self.message,
            code: self.code,
            leader: self.leader.as_deref(),
        })
    }
}

impl From<BridgeError> for ApiError {
    fn from(e: BridgeError) -> Self {
        ApiError::unavailable(e)
    }
}
