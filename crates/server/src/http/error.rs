//! Every API error has one JSON shape, `{ "error": text, "code": word }`,
//! and a status code chosen here, so handlers only say what went wrong.

use crate::http::bridge::BridgeError;
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;
use std::fmt;
use taskyard_protocol::{IdPrefix, JobId, LeaderAddresses};
use utoipa::ToSchema;

/// The stable, machine-readable reason of an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    BadRequest,
    NotFound,
    Unauthorized,
    CrossOrigin,
    MisdirectedHost,
    UnsupportedMediaType,
    MethodNotAllowed,
    AlreadyFinished,
    NotRetryable,
    NotFinished,
    AmbiguousId,
    InvalidSubmission,
    AdmissionLimit,
    Unavailable,
    NotLeader,
    NotReady,
    Internal,
    BodyTooLarge,
    InvalidSchedule,
    ScheduleExists,
    ScheduleLimit,
}

impl fmt::Display for ErrorCode {
    /// The word the JSON body carries.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match serde_json::to_value(self) {
            Ok(serde_json::Value::String(word)) => f.write_str(&word),
            _ => write!(f, "{self:?}"),
        }
    }
}

/// An API failure: HTTP status, a stable machine-readable `code` and a
/// human-readable message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: ErrorCode,
    pub message: String,
    /// Who leads instead, when this process is a standby (`not_leader`).
    pub leader: Option<Box<LeaderAddresses>>,
    /// Jobs an ambiguous id prefix names (`ambiguous_id`), newest first.
    pub candidates: Option<Vec<JobId>>,
    /// The methods the path serves (`method_not_allowed`), for `Allow`.
    pub allow: Option<String>,
}

/// The body of every error answer.
#[derive(Serialize, ToSchema)]
#[schema(as = Error)]
pub struct ErrorBody<'a> {
    /// Human-readable reason.
    error: &'a str,
    #[schema(inline)]
    code: ErrorCode,
    /// With `not_leader` (this coordinator is a standby): the leader to go to.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    leader: Option<&'a LeaderAddresses>,
    /// With `ambiguous_id`: up to 10 of the jobs the prefix names, newest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    candidates: Option<&'a [JobId]>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            leader: None,
            candidates: None,
            allow: None,
        }
    }

    /// 409 `ambiguous_id`: more than one job's id starts with `prefix`.
    pub fn ambiguous(prefix: &IdPrefix, candidates: Vec<JobId>) -> Self {
        let mut error = ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::AmbiguousId,
            format!("job id prefix {prefix} names more than one job; give more digits"),
        );
        error.candidates = Some(candidates);
        error
    }

    /// 405 `method_not_allowed`, with the `Allow` header listing `allow`.
    pub fn method_not_allowed(method: &str, path: &str, allow: String) -> Self {
        let mut error = ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::MethodNotAllowed,
            format!("{path} does not serve {method}; it serves {allow}"),
        );
        error.allow = Some(allow);
        error
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, ErrorCode::BadRequest, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, ErrorCode::NotFound, message)
    }

    pub fn unauthorized() -> Self {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            ErrorCode::Unauthorized,
            "missing or wrong `Authorization: Bearer` token",
        )
    }

    /// The coordinator gave no answer (or this process is a standby,
    /// `not_leader`, naming the leader): the caller may retry.
    pub fn unavailable(e: BridgeError) -> Self {
        if let BridgeError::NotLeader(leader) = &e {
            let mut error = ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::NotLeader,
                e.to_string(),
            );
            error.leader = leader.clone();
            return error;
        }
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::Unavailable,
            e.to_string(),
        )
    }

    /// A refusal of the whole request: invalid (400), overloaded (503),
    /// else an answer the handler did not expect (500).
    pub fn refused(response: taskyard_protocol::ClientResponse) -> Self {
        use taskyard_protocol::ClientResponse;
        match response {
            ClientResponse::Invalid { reason } => ApiError::bad_request(reason),
            ClientResponse::Overloaded { reason } => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::Unavailable,
                reason,
            ),
            other => ApiError::unexpected(other),
        }
    }

    /// The coordinator answered with something this endpoint never expects.
    pub fn unexpected(what: impl fmt::Debug) -> Self {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::Internal,
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
        let mut response = HttpResponse::build(self.status);
        if let Some(allow) = &self.allow {
            response.insert_header((actix_web::http::header::ALLOW, allow.as_str()));
        }
        response.json(ErrorBody {
            error: &self.message,
            code: self.code,
            leader: self.leader.as_deref(),
            candidates: self.candidates.as_deref(),
        })
    }
}

impl From<BridgeError> for ApiError {
    fn from(e: BridgeError) -> Self {
        ApiError::unavailable(e)
    }
}
