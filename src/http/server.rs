//! The HTTP listener: routes, shared data and starting actix-web on the
//! coordinator's actix system (its one worker is an arbiter of that system,
//! so it stops with it).

use crate::http::auth::{require_token, AuthToken};
use crate::http::authority::Authority;
use crate::http::bridge::CoordinatorLink;
use crate::http::browser_rules::{self, ListenerHosts};
use crate::http::{api, dashboard, health, metrics};
use crate::security::Secret;
use actix_web::body::MessageBody;
use actix_web::dev::{Server, ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::middleware::from_fn;
use actix_web::{web, App, HttpServer};
use std::net::TcpListener;

/// (method, path) of every route `routes` registers; tests check each is
/// served and described in the OpenAPI document.
pub const ROUTES: [(&str, &str); 15] = [
    ("GET", "/"),
    ("GET", "/dashboard.css"),
    ("GET", "/dashboard.js"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("HEAD", "/metrics"),
    ("GET", "/api/openapi.json"),
    ("GET", "/api/jobs"),
    ("POST", "/api/jobs"),
    ("GET", "/api/jobs/{id}"),
    ("POST", "/api/jobs/{id}/cancel"),
    ("GET", "/api/workers"),
    ("GET", "/api/stats"),
    ("GET", "/api/cluster"),
];

/// Every route, for `App::configure`. The OpenAPI document lists the same
/// paths (a test checks it).
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/", web::get().to(dashboard::index))
        .route("/dashboard.css", web::get().to(dashboard::css))
        .route("/dashboard.js", web::get().to(dashboard::js))
        .route("/healthz", web::get().to(health::healthz))
        .route("/readyz", web::get().to(health::readyz))
        .route("/metrics", web::get().to(metrics::metrics))
        .route("/metrics", web::head().to(metrics::metrics))
        .route("/api/openapi.json", web::get().to(api::openapi))
        .route("/api/jobs", web::get().to(api::list_jobs))
        .route("/api/jobs", web::post().to(api::submit_job))
        .route("/api/jobs/{id}", web::get().to(api::get_job))
        .route("/api/jobs/{id}/cancel", web::post().to(api::cancel_job))
        .route("/api/workers", web::get().to(api::list_workers))
        .route("/api/stats", web::get().to(api::stats))
        .route("/api/cluster", web::get().to(api::cluster));
}

/// The application: routes behind the browser rules (`browser_rules`, for
/// the Host names in `hosts`) and then the token check. Also what tests
/// mount with `actix_web::test::init_service`.
pub fn app(
    link: CoordinatorLink,
    token: Option<Secret>,
    hosts: ListenerHosts,
) -> App<
    impl ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    App::new()
        .app_data(web::Data::new(link))
        .app_data(web::Data::new(AuthToken(token)))
        .app_data(web::Data::new(hosts))
        .app_data(
            web::PathConfig::default().error_handler(|e, _| {
                crate::http::error::ApiError::bad_request(e.to_string()).into()
            }),
        )
        .app_data(
            web::QueryConfig::default().error_handler(|e, _| {
                crate::http::error::ApiError::bad_request(e.to_string()).into()
            }),
        )
        .wrap(from_fn(require_token))
        .wrap(from_fn(browser_rules::enforce))
        .configure(routes)
        .default_service(web::to(api::no_route))
}

/// Serves `app` on an already-bound listener with one worker, answering
/// to the listener's own addresses and the `allowed_hosts` names. Signals
/// are left to the coordinator process, which stops the whole actix system.
pub fn serve(
    listener: TcpListener,
    link: CoordinatorLink,
    token: Option<Secret>,
    allowed_hosts: Vec<Authority>,
) -> std::io::Result<Server> {
    let hosts = ListenerHosts {
        bound: listener.local_addr()?,
        allowed: allowed_hosts,
    };
    let server = HttpServer::new(move || app(link.clone(), token.clone(), hosts.clone()))
        .workers(1)
        .disable_signals()
        .shutdown_timeout(1)
        .listen(listener)?
        .run();
    Ok(server)
}
