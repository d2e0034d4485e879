//! The dashboard: one page of plain HTML, CSS and JavaScript compiled into
//! the binary. The page polls the JSON API every 2 s; it has no state of its
//! own on the server.

use actix_web::HttpResponse;

const INDEX: &str = include_str!("assets/index.html");
const CSS: &str = include_str!("assets/dashboard.css");
const JS: &str = include_str!("assets/dashboard.js");

pub async fn index() -> HttpResponse {
    asset("text/html; charset=utf-8", INDEX)
}

pub async fn css() -> HttpResponse {
    asset("text/css; charset=utf-8", CSS)
}

pub async fn js() -> HttpResponse {
    asset("text/javascript; charset=utf-8", JS)
}

fn asset(content_type: &str, body: &'static str) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(content_type)
        .insert_header(("cache-control", "no-cache"))
        .body(body)
}
