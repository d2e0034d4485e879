//! The OpenAPI document, generated, never written by hand. Its paths come
//! from the routes `server::routes` registers: each handler's
//! `#[utoipa::path]`, collected by utoipa-actix-web as the route is
//! registered, so no route is served undocumented and none documented
//! that is not served. Its schemas come from the types the handlers read
//! and write (`ToSchema`). What every route shares comes from the code
//! that enforces it: the browser rules (`browser_rules::document`), the
//! body limit (`body::document`) and the token (`auth::document`).

use crate::http::error::ErrorBody;
use crate::http::{auth, body, browser_rules, server};
use actix_web::{get, web, App, HttpResponse};
use utoipa::openapi::path::{Operation, PathItem};
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi as Document, Ref, RefOr};
use utoipa::{Modify, OpenApi, ToResponse};
use utoipa_actix_web::AppExt;

/// The document's introduction: what every route shares.
const DESCRIPTION: &str = "Jobs, workers, stats, metrics and health of one taskyard \
coordinator. Every answer is as durable as the database: nothing shown is ahead of SQLite. \
When `client-token` is configured, every request except /healthz and the dashboard's page \
and files (`/`, `/assets/{name}`: they hold no data) needs `Authorization: Bearer TOKEN` \
(401 `unauthorized` otherwise); the document this server serves then lists the `bearer` \
security requirement and the 401 responses, and without a token it lists neither. A method \
a path does not serve is answered 405 `method_not_allowed` with an `Allow` header naming \
those it does.\n\nBrowser rules (against cross-site requests and DNS rebinding; checked \
before the token, on every route): (1) a `Host` header must name the listener itself (its \
bound address and port; bound to loopback: any loopback IP or `localhost`; bound to 0.0.0.0 \
or `::`: any IP literal or `localhost`) or an entry of the coordinator key \
`http-allowed-hosts` (`host` for any port, `host:port`), otherwise 421 `misdirected_host`; \
(2) an `Origin` header must be the origin the request was addressed to (`http://` or \
`https://` plus its Host), and `Sec-Fetch-Site: cross-site` or `same-site` is refused \
except for GET/HEAD navigations (`Sec-Fetch-Mode: navigate`), otherwise 403 \
`cross_origin`; (3) a POST needs `Content-Type: application/json` (parameters such as \
`; charset=utf-8` allowed), with or without a body, otherwise 415 `unsupported_media_type` \
(other methods cannot be sent cross-site without a CORS preflight, which is never granted). \
Clients that send no `Origin` (curl, the CLI, scripts, Prometheus) only meet rules 1 and 3. \
No CORS headers are ever sent.";

/// What the document holds besides the paths and the schemas they use.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "taskyard coordinator HTTP API",
        version = "0.2.0",
        description = DESCRIPTION
    ),
    components(
        schemas(ErrorBody),
        responses(
            Failure,
            CrossOrigin,
            MisdirectedHost,
            UnsupportedMediaType,
            Unauthorized,
            Unavailable,
            BadRequest,
            NotFound
        )
    ),
    modifiers(&BearerScheme)
)]
struct Base;

/// The `bearer` security scheme (`auth::document` says which operations
/// need it).
struct BearerScheme;

impl Modify for BearerScheme {
    fn modify(&self, doc: &mut Document) {
        let bearer = HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build();
        if let Some(components) = doc.components.as_mut() {
            components.add_security_scheme("bearer", SecurityScheme::Http(bearer));
        }
    }
}

/// A response in the error shape (`ErrorBody`, the `Error` schema).
pub fn error_response(description: &str) -> Response {
    let json = ContentBuilder::new()
        .schema(Some(Ref::from_schema_name("Error")))
        .build();
    ResponseBuilder::new()
        .description(description)
        .content("application/json", json)
        .build()
}

/// Reusable error responses (`components/responses`), named as the types.
macro_rules! error_responses {
    ($($(#[$doc:meta])* $name:ident $component:literal: $description:literal;)*) => {$(
        $(#[$doc])*
        pub struct $name;

        impl<'r> ToResponse<'r> for $name {
            fn response() -> (&'r str, RefOr<Response>) {
                ($component, error_response($description).into())
            }
        }
    )*};
}

error_responses! {
    /// Any failure (`/readyz`'s `not_ready`).
    Failure "Error": "Failure";
    CrossOrigin "CrossOrigin": "`cross_origin`: the `Origin` is not this listener's own, or `Sec-Fetch-Site` says another site's page sent the request (the message names the header and value).";
    MisdirectedHost "MisdirectedHost": "`misdirected_host`: the `Host` is not an address of this listener nor in `http-allowed-hosts` (the message names the value and the key).";
    UnsupportedMediaType "UnsupportedMediaType": "`unsupported_media_type`: the request did not say `Content-Type: application/json` (the message names what it sent).";
    Unauthorized "Unauthorized": "`unauthorized`: `client-token` is set and the request lacks `Authorization: Bearer TOKEN` (only listed when a token is configured).";
    Unavailable "Unavailable": "`unavailable` (the coordinator did not answer in time, or is stopping) or `not_leader` (a standby; `leader` says who leads).";
    BadRequest "BadRequest": "`bad_request`: a malformed id, query parameter or body (the message names it).";
    NotFound "NotFound": "`not_found`: no such job (expired or never existed), or no job id starts with the prefix.";
}

/// A `$ref` to the response component `T`.
pub fn response_ref<'r, T: ToResponse<'r>>() -> RefOr<Response> {
    RefOr::Ref(Ref::from_response_name(T::response().0))
}

/// Adds to `doc` (the paths of the routes `server::routes` registered)
/// what every route shares, as a server with or without a client token
/// serves it.
pub fn finish(mut doc: Document, token_configured: bool) -> Document {
    browser_rules::document(&mut doc);
    body::document(&mut doc);
    auth::document(&mut doc, token_configured);
    doc
}

/// The base the app's document starts from (`UtoipaApp::openapi`).
pub fn base() -> Document {
    Base::openapi()
}

/// The document a server with (or without) a client token serves, built
/// from the same route registrations as the server's own app.
pub fn document(token_configured: bool) -> Document {
    let (_, doc) = App::new()
        .into_utoipa_app()
        .openapi(base())
        .configure(server::routes)
        .split_for_parts();
    finish(doc, token_configured)
}

/// Every operation of the document with its path and method (upper case).
pub fn operations_mut(doc: &mut Document) -> Vec<(String, &'static str, &mut Operation)> {
    doc.paths
        .paths
        .iter_mut()
        .flat_map(|(path, item)| {
            methods_mut(item)
                .into_iter()
                .filter_map(move |(method, op)| Some((path.clone(), method, op.as_mut()?)))
        })
        .collect()
}

/// The operations of a path item, by method.
fn methods_mut(item: &mut PathItem) -> [(&'static str, &mut Option<Operation>); 8] {
    [
        ("GET", &mut item.get),
        ("PUT", &mut item.put),
        ("POST", &mut item.post),
        ("DELETE", &mut item.delete),
        ("OPTIONS", &mut item.options),
        ("HEAD", &mut item.head),
        ("PATCH", &mut item.patch),
        ("TRACE", &mut item.trace),
    ]
}

/// `(method, path)` of every operation, in the document's order (the
/// order the routes are registered; methods in `PathItem` order).
pub fn routes(doc: &Document) -> Vec<(&'static str, String)> {
    let mut routes = Vec::new();
    for (path, item) in &doc.paths.paths {
        let methods = [
            ("GET", &item.get),
            ("PUT", &item.put),
            ("POST", &item.post),
            ("DELETE", &item.delete),
            ("OPTIONS", &item.options),
            ("HEAD", &item.head),
            ("PATCH", &item.patch),
            ("TRACE", &item.trace),
        ];
        let served = methods.into_iter().filter(|(_, op)| op.is_some());
        routes.extend(served.map(|(method, _)| (method, path.clone())));
    }
    routes
}

/// Adds `response` as the answer with `status` to `op`.
pub fn add_response(op: &mut Operation, status: u16, response: RefOr<Response>) {
    op.responses.responses.insert(status.to_string(), response);
}

/// The document as this server serves it, written once.
#[derive(Debug, Clone)]
pub struct OpenApiDoc(pub String);

impl OpenApiDoc {
    pub fn of(doc: &Document) -> OpenApiDoc {
        // Serializing plain data to JSON cannot fail.
        OpenApiDoc(doc.to_json().unwrap_or_default())
    }
}

#[utoipa::path(
    summary = "This document, as this server serves it.",
    responses((status = 200, description = "OpenAPI 3 JSON", body = Object))
)]
#[get("/api/openapi.json")]
pub async fn openapi_json(doc: web::Data<OpenApiDoc>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(doc.0.clone())
}
