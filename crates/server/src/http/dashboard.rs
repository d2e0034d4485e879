//! The dashboard: plain HTML, CSS and JavaScript modules compiled into the
//! binary (no build step, nothing fetched from elsewhere). The page polls
//! the JSON API every 2 s; it has no state of its own on the server.

use crate::http::error::ApiError;
use crate::http::openapi::NotFound;
use actix_web::{get, web, HttpResponse};

const INDEX: &str = include_str!("assets/index.html");
const JS: &str = "text/javascript; charset=utf-8";

/// Every file under `/assets/`: name, content type, contents.
pub const ASSETS: [(&str, &str, &str); 14] = [
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("assets/style.css"),
    ),
    ("app.js", JS, include_str!("assets/app.js")),
    ("api.js", JS, include_str!("assets/api.js")),
    ("dom.js", JS, include_str!("assets/dom.js")),
    ("rows.js", JS, include_str!("assets/rows.js")),
    ("charts.js", JS, include_str!("assets/charts.js")),
    ("confirm.js", JS, include_str!("assets/confirm.js")),
    ("overview.js", JS, include_str!("assets/overview.js")),
    ("jobs.js", JS, include_str!("assets/jobs.js")),
    ("detail.js", JS, include_str!("assets/detail.js")),
    ("queues.js", JS, include_str!("assets/queues.js")),
    ("workers.js", JS, include_str!("assets/workers.js")),
    ("failed.js", JS, include_str!("assets/failed.js")),
    ("schedules.js", JS, include_str!("assets/schedules.js")),
];

#[utoipa::path(
    summary = "The dashboard (HTML). Never needs a token (it holds no data; the page asks for the token the API needs).",
    responses((status = 200, description = "HTML page", content_type = "text/html"))
)]
#[get("/")]
pub async fn index() -> HttpResponse {
    respond("text/html; charset=utf-8", INDEX)
}

/// `GET /assets/{name}`: one of `ASSETS`, else 404.
#[utoipa::path(
    summary = "A dashboard file: `style.css` or one of its JavaScript modules (`app.js`, `api.js`, ...); any other name is 404. Never needs a token (it holds no data; the page asks for the token the API needs).",
    responses(
        (status = 200, description = "CSS or JavaScript", content(
            (String = "text/css"),
            (String = "text/javascript"),
        )),
        (status = 404, response = NotFound),
    )
)]
#[get("/assets/{name}")]
pub async fn asset(name: web::Path<String>) -> Result<HttpResponse, ApiError> {
    ASSETS
        .iter()
        .find(|(n, _, _)| *n == name.as_str())
        .map(|(_, content_type, body)| respond(content_type, body))
        .ok_or_else(|| ApiError::not_found(format!("no dashboard asset {:?}", name.as_str())))
}

fn respond(content_type: &str, body: &'static str) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(content_type)
        .insert_header(("cache-control", "no-cache"))
        .insert_header(("x-content-type-options", "nosniff"))
        .body(body)
}
