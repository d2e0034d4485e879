//! The body of a POST: at most `MAX_BODY_BYTES`, and a bigger one is
//! answered 413 `body_too_large` in the API's JSON error shape (actix's own
//! answer would be plain text).

use crate::http::error::ApiError;
use actix_web::dev::Payload;
use actix_web::http::StatusCode;
use actix_web::{web, FromRequest, HttpRequest};
use std::future::Future;
use std::pin::Pin;

/// Largest request body the API reads: room for a submission whose payload
/// is the largest `max-payload-bytes` allows, written as JSON.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

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
                        "body_too_large",
                        format!("request body exceeds {MAX_BODY_BYTES} bytes"),
                    ),
                    _ => ApiError::bad_request(format!("body: {e}")),
                })
        })
    }
}
