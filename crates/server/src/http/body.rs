//! The body of a POST: at most `MAX_BODY_BYTES`, and a bigger one is
//! answered 413 `body_too_large` in the API's JSON error shape (actix's own
//! answer would be plain text).

use crate::http::error::{ApiError, ErrorCode};
use crate::http::openapi::{add_response, error_response, operations_mut};
use actix_web::dev::Payload;
use actix_web::http::StatusCode;
use actix_web::{web, FromRequest, HttpRequest};
use std::future::Future;
use std::pin::Pin;

/// Largest request body the API reads: room for a submission whose payload
/// is the largest `max-payload-bytes` allows, written as JSON.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// Every operation that reads a body (`Body`) says so with its request
/// body; in the OpenAPI document each then answers 413 too.
pub fn document(doc: &mut utoipa::openapi::OpenApi) {
    let description = format!("`body_too_large`: the request body exceeds {MAX_BODY_BYTES} bytes");
    for (_, _, op) in operations_mut(doc) {
        if op.request_body.is_some() {
            add_response(op, 413, error_response(&description).into());
        }
    }
}

/// A request body of at most `MAX_BODY_BYTES`.
pub struct Body(pub web::Bytes);

impl std::ops::Deref for Body {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl FromRequest for Body {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Body, ApiError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let bytes = web::Bytes::from_request(req, payload);
        Box::pin(async move {
            bytes
                .await
                .map(Body)
                .map_err(|e| match e.as_response_error().status_code() {
                    StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        ErrorCode::BodyTooLarge,
                        format!("request body exceeds {MAX_BODY_BYTES} bytes"),
                    ),
                    _ => ApiError::bad_request(format!("body: {e}")),
                })
        })
    }
}
