//! The HTTP application mounted with actix-web's test utilities (no socket)
//! over a real coordinator actor and database: every route is served and
//! documented, auth on and off, and error shapes.

mod common;

use actix_web::http::StatusCode;
use actix_web::test::{call_service, init_service, read_body_json, TestRequest};
use serde_json::{json, Value};
use std::sync::Arc;
use taskyard::clock::SystemClock;
use taskyard::http::openapi::document;
use taskyard::http::server::Routes;
use taskyard::http::{app, CoordinatorLink, ListenerHosts};
use taskyard::process::CoordinatorServer;
use taskyard::protocol::payloads::encode_json;

async fn coordinator(dir: &std::path::Path) -> CoordinatorServer {
    let config = common::coordinator_config(dir);
    CoordinatorServer::start(&config, Arc::new(SystemClock), common::quiet_log())
        .await
        .expect("coordinator starts")
}

/// What a listener on 127.0.0.1:7480 answers to (requests built by
/// `TestRequest` carry no Host header, so only the other rules apply).
fn hosts() -> ListenerHosts {
    ListenerHosts {
        bound: std::net::SocketAddr::from(([127, 0, 0, 1], 7480)),
        allowed: Vec::new(),
    }
}

fn link(server: &CoordinatorServer) -> CoordinatorLink {
    CoordinatorLink::start(server.coordinator.clone(), Arc::new(SystemClock))
}

#[actix_rt::test]
async fn every_route_is_served_and_described_in_openapi() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = coordinator(dir.path()).await;
    let service = init_service(app(link(&server), None, hosts())).await;
    let submitted = TestRequest::post()
        .uri("/api/jobs")
        .set_json(json!({ "task_type": "echo", "payload": { "message": "hi" } }))
        .to_request();
    let response = call_service(&service, submitted).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let body: Value = read_body_json(response).await;
    let id = body["job_id"].as_str().expect("id").to_string();

    // A schedule for the `{name}` routes (named as the asset they share
    // `{name}` with); deleting it comes last.
    let spec = taskyard::protocol::ScheduleSpec {
        every_ms: Some(60_000),
        ..taskyard::protocol::ScheduleSpec::new(
            "app.js",
            "echo",
            encode_json(&json!({"message": "x"})),
        )
    };
    let created = link(&server)
        .request(taskyard::protocol::ClientRequest::CreateSchedule(Box::new(
            spec,
        )))
        .await
        .expect("answered");
    assert!(
        matches!(created, taskyard::protocol::ClientResponse::Schedule(_)),
        "{created:?}"
    );

    let openapi: Value =
        serde_json::from_str(&document(false).to_json().expect("JSON")).expect("JSON");
    let routes = Routes::of(&document(false));
    // The schedule is deleted last, after the routes that need it.
    let mut ordered = routes.all().to_vec();
    ordered
        .sort_by_key(|(method, path)| *method == "DELETE" && path.starts_with("/api/schedules/"));
    for (method, path) in ordered {
        let path = path.as_str();
        let documented = &openapi["paths"][path][method.to_ascii_lowercase()];
        assert!(
            documented.is_object(),
            "{method} {path} missing from openapi.json"
        );
        let uri = path.replace("{id}", &id).replace("{name}", "app.js");
        let definition =
            json!({ "task_type": "echo", "every_ms": 60_000, "payload": { "message": "x" } });
        let request = match method {
            "GET" => TestRequest::get(),
            "HEAD" => TestRequest::default().method(actix_web::http::Method::HEAD),
            "DELETE" => TestRequest::delete(),
            "PUT" => TestRequest::put().set_json(definition),
            _ if path == "/api/schedules" => {
                let mut named = definition;
                named["name"] = json!("created");
                TestRequest::post().set_json(named)
            }
            _ if path.ends_with("{id}/cancel")
                || path.ends_with("{id}/retry")
                || path.starts_with("/api/schedules/") =>
            {
                TestRequest::post().set_json(json!({}))
            }
            _ if path.ends_with("/retry") || path.ends_with("/delete") => {
                TestRequest::post().set_json(json!({ "job_ids": [id] }))
            }
            _ => TestRequest::post()
                .set_json(json!({ "task_type": "echo", "payload": { "message": "x" } })),
        };
        let response = call_service(&service, request.uri(&uri).to_request()).await;
        let status = response.status();
        // Served (not 404 or 405), and with a status the document lists:
        // retry and delete of the QUEUED job are refused, as documented.
        assert!(
            documented["responses"][status.as_str()].is_object(),
            "{method} {uri}: {status} is not documented"
        );
        assert!(
            status.is_success() || status == StatusCode::CONFLICT,
            "{method} {uri}: {status}"
        );
    }
    // The routes come from the document (utoipa-actix-web builds it from
    // the registrations): a route documented but not served would have
    // failed above; `openapi_snapshot` checks that nothing is registered
    // past the document.
    assert_eq!(routes.all().len(), 28, "{:?}", routes.all());
}

#[actix_rt::test]
async fn a_token_guards_every_route_but_healthz_and_the_dashboard_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = coordinator(dir.path()).await;
    let service = init_service(app(
        link(&server),
        Some(taskyard::security::Secret::new("tok")),
        hosts(),
    ))
    .await;
    let routes = Routes::of(&document(true));
    for (method, path) in routes.all() {
        let (method, path) = (*method, path.as_str());
        let request = match method {
            "GET" => TestRequest::get(),
            "HEAD" => TestRequest::default().method(actix_web::http::Method::HEAD),
            _ => TestRequest::post().set_json(json!({})),
        };
        let response = call_service(&service, request.uri(path).to_request()).await;
        if taskyard::http::auth::is_open(path) {
            assert_ne!(
                response.status(),
                StatusCode::UNAUTHORIZED,
                "{method} {path}"
            );
        } else {
            assert_eq!(
                response.status(),
                StatusCode::UNAUTHORIZED,
                "{method} {path}"
            );
        }
        if !taskyard::http::auth::is_open(path) && method != "HEAD" {
            let body: Value = read_body_json(response).await;
            assert_eq!(body["code"], "unauthorized");
        }
    }
    let ok = TestRequest::get()
        .uri("/api/stats")
        .insert_header(("Authorization", "Bearer tok"))
        .to_request();
    assert_eq!(call_service(&service, ok).await.status(), StatusCode::OK);
    // The document served with a token documents the 401 of every route
    // that can give it, and the bearer requirement.
    let spec = TestRequest::get()
        .uri("/api/openapi.json")
        .insert_header(("Authorization", "Bearer tok"))
        .to_request();
    let served: Value = read_body_json(call_service(&service, spec).await).await;
    assert_eq!(served["security"], json!([{ "bearer": [] }]));
    for (method, path) in routes.all() {
        let responses = &served["paths"][path][method.to_ascii_lowercase()]["responses"];
        assert_eq!(
            responses["401"].is_object(),
            !taskyard::http::auth::is_open(path),
            "{method} {path}: 401 documented exactly where it can happen"
        );
    }
}

#[actix_rt::test]
async fn without_a_token_nothing_asks_for_one_and_errors_are_json() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = coordinator(dir.path()).await;
    let service = init_service(app(link(&server), None, hosts())).await;
    let cases = [
        (
            "/api/jobs?limit=9999",
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        ("/api/jobs/123", StatusCode::BAD_REQUEST, "bad_request"),
        (
            "/api/jobs/00000000-0000-4000-8000-000000000000",
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        ("/no/such/route", StatusCode::NOT_FOUND, "not_found"),
    ];
    for (uri, status, code) in cases {
        let response = call_service(&service, TestRequest::get().uri(uri).to_request()).await;
        assert_eq!(response.status(), status, "{uri}");
        let body: Value = read_body_json(response).await;
        assert_eq!(body["code"], code, "{uri}: {body}");
        assert!(body["error"].is_string());
    }
    let rejected = TestRequest::post()
        .uri("/api/jobs")
        .set_json(json!({ "task_type": "bad type!", "payload": {} }))
        .to_request();
    let response = call_service(&service, rejected).await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let ready = call_service(&service, TestRequest::get().uri("/readyz").to_request()).await;
    assert_eq!(ready.status(), StatusCode::OK);
}
