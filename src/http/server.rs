//! The HTTP listener: routes, shared data and starting actix-web on the
//! coordinator's actix system (its one worker is an arbiter of that system,
//! so it stops with it).

use crate::http::auth::{require_token, AuthToken};
use crate::http::authority::Authority;
use crate::http::bridge::CoordinatorLink;
use crate::http::browser_rules::{self, ListenerHosts};
use crate::http::{api, dashboard, health, job_actions, metrics, schedules};
use crate::security::Secret;
use actix_web::body::MessageBody;
use actix_web::dev::{Server, ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::middleware::from_fn;
use actix_web::{web, App, HttpServer};
use std::net::TcpListener;

/// (method, path) of every route `routes` registers; tests check each is
/// served and described in the OpenAPI document.
pub const ROUTES: [(&str, &str); 28] = [
    ("GET", "/"),
    ("GET", "/assets/{name}"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("HEAD", "/metrics"),
    ("GET", "/api/openapi.json"),
    ("GET", "/api/jobs"),
    ("POST", "/api/jobs"),
    ("POST", "/api/jobs/retry"),
    ("POST", "/api/jobs/delete"),
    ("GET", "/api/jobs/{id}"),
    ("DELETE", "/api/jobs/{id}"),
    ("POST", "/api/jobs/{id}/cancel"),
    ("POST", "/api/jobs/{id}/retry"),
    ("GET", "/api/workers"),
    ("GET", "/api/stats"),
    ("GET", "/api/timeline"),
    ("GET", "/api/queues"),
    ("GET", "/api/cluster"),
    ("GET", "/api/schedules"),
    ("POST", "/api/schedules"),
    ("GET", "/api/schedules/{name}"),
    ("PUT", "/api/schedules/{name}"),
    ("POST", "/api/schedules/{name}/pause"),
    ("POST", "/api/schedules/{name}/resume"),
    ("POST", "/api/schedules/{name}/trigger"),
    ("DELETE", "/api/schedules/{name}"),
];

/// True when a route serves `method` at `path` (a request path; `{id}`
/// in a route matches any one segment).
pub fn serves(method: &str, path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').collect();
    ROUTES.iter().any(|(m, route)| {
        let pattern: Vec<&str> = route.split('/').collect();
        *m == method
            && pattern.len() == segments.len()
            && pattern
                .iter()
                .zip(&segments)
                .all(|(p, s)| p == s || (p.starts_with('{') && !s.is_empty()))
    })
}

/// The methods `path` serves, as an `Allow` header lists them.
pub fn allowed_methods(path: &str) -> String {
    let mut methods: Vec<&str> = ROUTES
        .iter()
        .filter(|(_, p)| *p == path)
        .map(|(m, _)| *m)
        .collect();
    methods.dedup();
    methods.join(", ")
}

/// A path whose other methods are answered 405 with `Allow`.
fn resource(path: &'static str) -> actix_web::Resource {
    web::resource(path).default_service(web::to(api::method_not_allowed))
}

/// Every route, for `App::configure`. The OpenAPI document lists the same
/// paths (a test checks it). `/api/jobs/retry` and `/api/jobs/delete` come
/// before `/api/jobs/{id}`, so they are never taken for an id.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(resource("/").route(web::get().to(dashboard::index)))
        .service(resource("/assets/{name}").route(web::get().to(dashboard::asset)))
        .service(resource("/healthz").route(web::get().to(health::healthz)))
        .service(resource("/readyz").route(web::get().to(health::readyz)))
        .service(
            resource("/metrics")
                .route(web::get().to(metrics::metrics))
                .route(web::head().to(metrics::metrics)),
        )
        .service(resource("/api/openapi.json").route(web::get().to(api::openapi)))
        .service(
            resource("/api/jobs")
                .route(web::get().to(api::list_jobs))
                .route(web::post().to(api::submit_job)),
        )
        .service(resource("/api/jobs/retry").route(web::post().to(job_actions::retry_jobs)))
        .service(resource("/api/jobs/delete").route(web::post().to(job_actions::delete_jobs)))
        .service(
            resource("/api/jobs/{id}")
                .route(web::get().to(api::get_job))
                .route(web::delete().to(job_actions::delete_job)),
        )
        .service(resource("/api/jobs/{id}/cancel").route(web::post().to(api::cancel_job)))
        .service(resource("/api/jobs/{id}/retry").route(web::post().to(job_actions::retry_job)))
        .service(resource("/api/workers").route(web::get().to(api::list_workers)))
        .service(resource("/api/stats").route(web::get().to(api::stats)))
        .service(resource("/api/timeline").route(web::get().to(api::timeline)))
        .service(resource("/api/queues").route(web::get().to(job_actions::queues)))
        .service(resource("/api/cluster").route(web::get().to(api::cluster)))
        .service(
            resource("/api/schedules")
                .route(web::get().to(schedules::list))
                .route(web::post().to(schedules::create)),
        )
        .service(
            resource("/api/schedules/{name}")
                .route(web::get().to(schedules::show))
                .route(web::put().to(schedules::update))
                .route(web::delete().to(schedules::delete)),
        )
        .service(resource("/api/schedules/{name}/pause").route(web::post().to(schedules::pause)))
        .service(resource("/api/schedules/{name}/resume").route(web::post().to(schedules::resume)))
        .service(
            resource("/api/schedules/{name}/trigger").route(web::post().to(schedules::trigger)),
        );
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
        .app_data(web::Data::new(api::OpenApiDoc::served(token.is_some())))
        .app_data(web::Data::new(AuthToken(token)))
        .app_data(web::Data::new(hosts))
        .app_data(web::PayloadConfig::new(crate::http::body::MAX_BODY_BYTES))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_matches_routes_with_their_id_segment() {
        assert!(serves("POST", "/api/jobs"));
        assert!(serves("POST", "/api/jobs/0193ab/cancel"));
        assert!(serves("DELETE", "/api/jobs/0193ab"));
        assert!(!serves("POST", "/api/jobs/0193ab"));
        assert!(!serves("POST", "/api/queues"));
        assert!(!serves("GET", "/api/jobs//cancel"));
        assert_eq!(allowed_methods("/api/jobs/{id}"), "GET, DELETE");
        assert!(serves("HEAD", "/metrics"));
        assert_eq!(allowed_methods("/metrics"), "GET, HEAD");
    }
}
