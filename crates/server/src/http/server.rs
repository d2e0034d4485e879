//! The HTTP listener: routes, shared data and starting actix-web on the
//! coordinator's actix system (its one worker is an arbiter of that system,
//! so it stops with it).

use crate::config::authority::Authority;
use crate::http::auth::{require_token, AuthToken};
use crate::http::bridge::CoordinatorLink;
use crate::http::browser_rules::{self, ListenerHosts};
use crate::http::openapi::OpenApiDoc;
use crate::http::{api, dashboard, health, job_actions, metrics, openapi, schedules};
use actix_web::body::MessageBody;
use actix_web::dev::{Server, ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::middleware::from_fn;
use actix_web::{web, App, HttpServer};
use std::net::TcpListener;
use taskyard_client::security::Secret;
use utoipa_actix_web::service_config::ServiceConfig;
use utoipa_actix_web::AppExt;

/// `(method, path)` of every route the app registered, read off its
/// OpenAPI document (which utoipa-actix-web builds from the same
/// registrations): what `no_route` answers 405 for, and the POSTs the
/// browser rules ask a JSON content type of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routes(Vec<(&'static str, String)>);

impl Routes {
    pub fn of(doc: &utoipa::openapi::OpenApi) -> Routes {
        Routes(openapi::routes(doc))
    }

    /// Every route, in the order registered.
    pub fn all(&self) -> &[(&'static str, String)] {
        &self.0
    }

    /// True when a route serves `method` at `path` (a request path; `{id}`
    /// in a route matches any one segment).
    pub fn serves(&self, method: &str, path: &str) -> bool {
        self.0
            .iter()
            .any(|(m, route)| *m == method && matches(route, path))
    }

    /// The first route whose path matches `path` (registration order, as
    /// actix-web routes), and the methods it serves as `Allow` lists them.
    pub fn allowed(&self, path: &str) -> Option<(&str, String)> {
        let (_, pattern) = self.0.iter().find(|(_, route)| matches(route, path))?;
        let methods: Vec<&str> = self
            .0
            .iter()
            .filter(|(_, p)| p == pattern)
            .map(|(m, _)| *m)
            .collect();
        Some((pattern.as_str(), methods.join(", ")))
    }
}

/// True when the request path `path` is one `pattern` (a route) matches.
fn matches(pattern: &str, path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').collect();
    let pattern: Vec<&str> = pattern.split('/').collect();
    pattern.len() == segments.len()
        && pattern
            .iter()
            .zip(&segments)
            .all(|(p, s)| p == s || (p.starts_with('{') && !s.is_empty()))
}

/// Every route, each a handler with its `#[utoipa::path]`: registering it
/// here documents it (utoipa-actix-web's `service` takes nothing else).
/// `/api/jobs/retry` and `/api/jobs/delete` come before `/api/jobs/{id}`,
/// so they are never taken for an id.
pub fn routes(cfg: &mut ServiceConfig) {
    cfg.service(dashboard::index)
        .service(dashboard::asset)
        .service(health::healthz)
        .service(health::readyz)
        .service(metrics::metrics)
        .service(metrics::metrics_head)
        .service(openapi::openapi_json)
        .service(api::list_jobs)
        .service(api::submit_job)
        .service(job_actions::retry_jobs)
        .service(job_actions::delete_jobs)
        .service(api::get_job)
        .service(job_actions::delete_job)
        .service(api::cancel_job)
        .service(job_actions::retry_job)
        .service(api::list_workers)
        .service(api::stats)
        .service(api::timeline)
        .service(job_actions::queues)
        .service(api::cluster)
        .service(schedules::list)
        .service(schedules::create)
        .service(schedules::show)
        .service(schedules::update)
        .service(schedules::delete)
        .service(schedules::pause)
        .service(schedules::resume)
        .service(schedules::trigger);
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
    let (app, doc) = App::new()
        .into_utoipa_app()
        .openapi(openapi::base())
        .configure(routes)
        .split_for_parts();
    let doc = openapi::finish(doc, token.is_some());
    app.app_data(web::Data::new(Routes::of(&doc)))
        .app_data(web::Data::new(OpenApiDoc::of(&doc)))
        .app_data(web::Data::new(link))
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
        let routes = Routes::of(&openapi::document(false));
        assert!(routes.serves("POST", "/api/jobs"));
        assert!(routes.serves("POST", "/api/jobs/0193ab/cancel"));
        assert!(routes.serves("DELETE", "/api/jobs/0193ab"));
        assert!(!routes.serves("POST", "/api/jobs/0193ab"));
        assert!(!routes.serves("POST", "/api/queues"));
        assert!(!routes.serves("GET", "/api/jobs//cancel"));
        assert!(routes.serves("HEAD", "/metrics"));
        let allow = |path| routes.allowed(path).map(|(_, allow)| allow);
        assert_eq!(allow("/api/jobs/0193ab").as_deref(), Some("GET, DELETE"));
        assert_eq!(allow("/api/jobs/retry").as_deref(), Some("POST"));
        assert_eq!(allow("/metrics").as_deref(), Some("GET, HEAD"));
        assert_eq!(allow("/api/nothing"), None);
    }
}
