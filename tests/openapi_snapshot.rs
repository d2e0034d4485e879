//! The OpenAPI document is generated from the route registrations
//! (`http::server::routes`, each handler's `#[utoipa::path]`); this test
//! keeps a snapshot of it, `tests/golden/openapi.json` (as a server with a
//! client token serves it), so that a change to the API shows in review:
//! it fails when the generated document differs, naming the command that
//! rewrites the snapshot (`TASKYARD_BLESS=1`). It also checks that the
//! routes the app registers and the document's operations are the same.

use actix_web::test::{call_service, init_service, read_body, TestRequest};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use taskyard::clock::SystemClock;
use taskyard::http::openapi::document;
use taskyard::http::server::Routes;
use taskyard::http::{app, CoordinatorLink, ListenerHosts};
use taskyard::process::CoordinatorServer;

mod common;

const SNAPSHOT: &str = "tests/golden/openapi.json";

#[test]
fn the_openapi_snapshot_is_current() {
    let generated = document(true).to_pretty_json().expect("JSON") + "\n";
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(SNAPSHOT);
    if std::env::var_os("TASKYARD_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write the snapshot");
        return;
    }
    let stored = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        stored == generated,
        "{SNAPSHOT} is out of date: the API changed. Check the change is meant, then run \
         `TASKYARD_BLESS=1 cargo test --test openapi_snapshot` and commit the snapshot"
    );
}

/// The text of `server::routes`, the one place routes are registered.
fn routes_source() -> String {
    let source = include_str!("../crates/server/src/http/server.rs");
    let start = source.find("pub fn routes(").expect("routes()");
    let end = start + source[start..].find("\n}\n").expect("end of routes()");
    source[start..end].to_string()
}

/// Every registration in `routes` is a utoipa-actix-web `service` of a
/// handler (which takes only a handler with its `#[utoipa::path]`), never
/// an undocumented `route`, `resource` or `scope`; and there are as many
/// as the document has operations.
#[test]
fn every_registered_route_is_in_the_document_and_nothing_else_is() {
    let source = routes_source();
    for bypass in [
        ".route(",
        "web::resource",
        "web::scope",
        ".map(",
        "web::to(",
    ] {
        assert!(
            !source.contains(bypass),
            "routes() registers through {bypass}, which the document does not see"
        );
    }
    let registered: Vec<&str> = source
        .split(".service(")
        .skip(1)
        .map(|rest| rest.split(')').next().unwrap_or_default().trim())
        .collect();
    let doc: Value = serde_json::from_str(&document(true).to_json().expect("JSON")).expect("JSON");
    let mut ids = BTreeSet::new();
    for (method, path) in Routes::of(&document(true)).all() {
        let op = &doc["paths"][path][method.to_ascii_lowercase()];
        let id = op["operationId"].as_str().expect("an operationId");
        assert!(ids.insert(id.to_string()), "{id} is one operation's id");
    }
    assert_eq!(registered.len(), ids.len(), "{registered:?} vs {ids:?}");
}

/// Each `{name}` of a documented path is a documented path parameter,
/// and every operation says what it answers when it succeeds.
#[test]
fn every_operation_documents_its_path_parameters_and_a_success() {
    let doc: Value = serde_json::from_str(&document(true).to_json().expect("JSON")).expect("JSON");
    for (method, path) in Routes::of(&document(true)).all() {
        let op = &doc["paths"][path][method.to_ascii_lowercase()];
        let named: BTreeSet<&str> = path
            .split('/')
            .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
            .collect();
        let documented: BTreeSet<&str> = op["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["in"] == "path" && p["required"] == true)
            .filter_map(|p| p["name"].as_str())
            .collect();
        assert_eq!(named, documented, "{method} {path}");
        let responses = op["responses"].as_object().expect("responses");
        assert!(
            responses.keys().any(|status| status.starts_with('2')),
            "{method} {path} documents its success"
        );
    }
}

/// What `/api/openapi.json` serves is the generated document, with and
/// without a token.
#[actix_rt::test]
async fn the_served_document_is_the_generated_one() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = common::coordinator_config(dir.path());
    let server = CoordinatorServer::start(&config, Arc::new(SystemClock), common::quiet_log())
        .await
        .expect("coordinator starts");
    let hosts = ListenerHosts {
        bound: std::net::SocketAddr::from(([127, 0, 0, 1], 7480)),
        allowed: Vec::new(),
    };
    for token in [None, Some("tok")] {
        let link = CoordinatorLink::start(server.coordinator.clone(), Arc::new(SystemClock));
        let secret = token.map(taskyard::security::Secret::new);
        let service = init_service(app(link, secret, hosts.clone())).await;
        let mut request = TestRequest::get().uri("/api/openapi.json");
        if let Some(token) = token {
            request = request.insert_header(("Authorization", format!("Bearer {token}")));
        }
        let served = read_body(call_service(&service, request.to_request()).await).await;
        let generated = document(token.is_some()).to_json().expect("JSON");
        assert_eq!(served, generated.as_bytes(), "token {token:?}");
    }
}
