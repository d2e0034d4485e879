//! What a web page in someone's browser must not be able to do to the
//! coordinator: submit or cancel jobs by a cross-site request (a form or a
//! `fetch` without preflight can only send `text/plain`, form or multipart
//! bodies), read the API from another origin, or reach the listener under
//! a DNS name an attacker controls (DNS rebinding). Clients that are not
//! browsers send no `Origin` and no `Sec-Fetch-*` and are unaffected.
//!
//! The rules, checked in this order on every request:
//! 1. `Host`, when present, names this listener (see [`ListenerHosts`]) or
//!    an `http-allowed-hosts` entry; otherwise 421 `misdirected_host`.
//! 2. An `Origin` header must be the origin the request was addressed to
//!    (`http(s)://` + its `Host`); otherwise 403 `cross_origin`.
//!    `Sec-Fetch-Site: cross-site` or `same-site` is refused the same way,
//!    except for a safe-method navigation (following a link to the
//!    dashboard from another site still opens it).
//! 3. A POST must send `Content-Type: application/json` (parameters
//!    allowed), body or not; otherwise 415 `unsupported_media_type`. A page
//!    can only send that type to another origin after a CORS preflight,
//!    which this server never grants. POST is the only method besides the
//!    safe ones that a form or a fetch can send cross-site without one: a
//!    DELETE (or PUT, PATCH) from another site always needs the preflight,
//!    so it needs no content type here (and an unserved method gets its 405;
//!    so does a POST to a path that serves none).

use crate::config::authority::{Authority, HostName, Origin};
use crate::http::error::{ApiError, ErrorCode};
use crate::http::openapi::{
    add_response, operations_mut, response_ref, CrossOrigin, MisdirectedHost, UnsupportedMediaType,
};
use crate::http::server::Routes;
use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderMap, HeaderName, CONTENT_TYPE, HOST, ORIGIN};
use actix_web::http::{Method, StatusCode};
use actix_web::middleware::Next;
use actix_web::{web, Error, ResponseError};
use std::net::SocketAddr;

const SEC_FETCH_SITE: HeaderName = HeaderName::from_static("sec-fetch-site");
const SEC_FETCH_MODE: HeaderName = HeaderName::from_static("sec-fetch-mode");

/// The `Host` values this listener answers to.
///
/// Its own addresses, always with its bound port: bound to a loopback
/// address, any loopback IP and `localhost`; bound to 0.0.0.0 or `::`, any
/// IP literal and `localhost` (an IP literal cannot be rebound; a DNS name
/// can, so names need `http-allowed-hosts`); bound to one address, that
/// address. Plus every `http-allowed-hosts` entry: `host` matches that
/// host on any port, `host:port` only that port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerHosts {
    pub bound: SocketAddr,
    pub allowed: Vec<Authority>,
}

/// Why a request was refused; the message names the header, the value
/// received and what would be accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("Host {host:?} is not an address of this listener ({bound}): if clients reach it by that name, add it to http-allowed-hosts")]
    MisdirectedHost { host: String, bound: SocketAddr },
    #[error("Origin {origin:?} is not this listener's origin (http://{host}): requests from other sites' pages are refused")]
    ForeignOrigin { origin: String, host: String },
    #[error("Sec-Fetch-Site: {site}: the browser says this request comes from another site's page; such requests are refused")]
    CrossSiteFetch { site: String },
    #[error("{method} needs the header Content-Type: application/json, got {}", got.as_deref().map_or("none".to_string(), |t| format!("{t:?}")))]
    NotJson { method: String, got: Option<String> },
}

impl Refusal {
    pub fn status(&self) -> StatusCode {
        match self {
            Refusal::MisdirectedHost { .. } => StatusCode::MISDIRECTED_REQUEST,
            Refusal::ForeignOrigin { .. } | Refusal::CrossSiteFetch { .. } => StatusCode::FORBIDDEN,
            Refusal::NotJson { .. } => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        }
    }

    pub fn code(&self) -> ErrorCode {
        match self {
            Refusal::MisdirectedHost { .. } => ErrorCode::MisdirectedHost,
            Refusal::ForeignOrigin { .. } | Refusal::CrossSiteFetch { .. } => {
                ErrorCode::CrossOrigin
            }
            Refusal::NotJson { .. } => ErrorCode::UnsupportedMediaType,
        }
    }
}

impl From<Refusal> for ApiError {
    fn from(r: Refusal) -> Self {
        ApiError::new(r.status(), r.code(), r.to_string())
    }
}

impl ListenerHosts {
    /// True when `host` names this listener or an allowed entry.
    pub fn serves(&self, host: &Authority) -> bool {
        self.allowed
            .iter()
            .any(|a| a.host == host.host && a.port.is_none_or(|p| p == host.port_or_default()))
            || (host.port_or_default() == self.bound.port() && self.is_own(&host.host))
    }

    fn is_own(&self, host: &HostName) -> bool {
        let bound = self.bound.ip();
        match host {
            _ if host.is_localhost() => bound.is_loopback() || bound.is_unspecified(),
            HostName::Ip(_) if bound.is_unspecified() => true,
            HostName::Ip(ip) => *ip == bound || (ip.is_loopback() && bound.is_loopback()),
            HostName::Name(_) => false,
        }
    }
}

/// Applies the rules in the module doc to one request. Pure: no I/O.
pub fn check(method: &Method, headers: &HeaderMap, hosts: &ListenerHosts) -> Result<(), Refusal> {
    check_served(method, headers, hosts, *method == Method::POST)
}

/// `check`, with rule 3 applied only when `json_rule` says so: a POST to a
/// path that serves POST (any other POST is answered 405 and runs nothing).
pub fn check_served(
    method: &Method,
    headers: &HeaderMap,
    hosts: &ListenerHosts,
    json_rule: bool,
) -> Result<(), Refusal> {
    let host = check_host(headers, hosts)?;
    check_origin(headers, host.as_ref())?;
    check_fetch_site(method, headers)?;
    if json_rule {
        check_json(method, headers)?;
    }
    Ok(())
}

fn is_safe(method: &Method) -> bool {
    [Method::GET, Method::HEAD, Method::OPTIONS].contains(method)
}

/// The request's `Host`, if it sent one that this listener serves. No
/// browser omits `Host`, so a request without one is not a rebinding.
fn check_host(headers: &HeaderMap, hosts: &ListenerHosts) -> Result<Option<Authority>, Refusal> {
    let mut values = headers.get_all(HOST);
    let Some(value) = values.next() else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(value.as_bytes());
    let refused = || Refusal::MisdirectedHost {
        host: text.to_string(),
        bound: hosts.bound,
    };
    let host = text.parse::<Authority>().map_err(|_| refused())?;
    if values.next().is_some() || !hosts.serves(&host) {
        return Err(refused());
    }
    Ok(Some(host))
}

fn check_origin(headers: &HeaderMap, host: Option<&Authority>) -> Result<(), Refusal> {
    for value in headers.get_all(ORIGIN) {
        let text = String::from_utf8_lossy(value.as_bytes());
        let same = text
            .parse::<Origin>()
            .ok()
            .zip(host)
            .is_some_and(|(origin, host)| host.is_origin(&origin));
        if !same {
            return Err(Refusal::ForeignOrigin {
                origin: text.into_owned(),
                host: host.map_or("(no Host header)".to_string(), Authority::to_string),
            });
        }
    }
    Ok(())
}

fn check_fetch_site(method: &Method, headers: &HeaderMap) -> Result<(), Refusal> {
    let header = |name| headers.get(name).and_then(|v| v.to_str().ok());
    let Some(site @ ("cross-site" | "same-site")) = header(SEC_FETCH_SITE) else {
        return Ok(());
    };
    if is_safe(method) && header(SEC_FETCH_MODE) == Some("navigate") {
        return Ok(());
    }
    Err(Refusal::CrossSiteFetch { site: site.into() })
}

fn check_json(method: &Method, headers: &HeaderMap) -> Result<(), Refusal> {
    let mut values = headers.get_all(CONTENT_TYPE);
    let first = values.next().map(|v| String::from_utf8_lossy(v.as_bytes()));
    let essence = first
        .as_deref()
        .and_then(|t| t.split(';').next())
        .map(str::trim);
    if values.next().is_none()
        && essence.is_some_and(|e| e.eq_ignore_ascii_case("application/json"))
    {
        return Ok(());
    }
    Err(Refusal::NotJson {
        method: method.to_string(),
        got: first.map(|t| t.into_owned()),
    })
}

/// The rules in the OpenAPI document: every operation can answer 403 and
/// 421, and every POST 415 (`enforce` checks them before any handler).
pub fn document(doc: &mut utoipa::openapi::OpenApi) {
    for (_, method, op) in operations_mut(doc) {
        add_response(op, 403, response_ref::<CrossOrigin>());
        add_response(op, 421, response_ref::<MisdirectedHost>());
        if method == "POST" {
            add_response(op, 415, response_ref::<UnsupportedMediaType>());
        }
    }
}

/// Middleware: refuses what [`check`] refuses with its status and the
/// usual JSON error body, before the token check and any handler.
pub async fn enforce(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, Error> {
    let routes = req.app_data::<web::Data<Routes>>();
    let verdict = match req.app_data::<web::Data<ListenerHosts>>() {
        Some(hosts) => {
            let json_rule = *req.method() == Method::POST
                && routes.is_some_and(|r| r.serves("POST", req.path()));
            check_served(req.method(), req.headers(), hosts, json_rule)
        }
        None => Err(Refusal::MisdirectedHost {
            host: "(listener addresses not configured)".into(),
            bound: SocketAddr::from(([0, 0, 0, 0], 0)),
        }),
    };
    if let Err(refusal) = verdict {
        let response = ApiError::from(refusal).error_response();
        return Ok(req.into_response(response).map_into_right_body());
    }
    Ok(next.call(req).await?.map_into_left_body())
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::http::header::HeaderValue;

    fn listener(bound: &str, allowed: &[&str]) -> ListenerHosts {
        ListenerHosts {
            bound: bound.parse().expect("socket address"),
            allowed: allowed.iter().map(|a| a.parse().expect("entry")).collect(),
        }
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        map
    }

    const LOOPBACK: &str = "127.0.0.1:7480";
    const JSON: (&str, &str) = ("content-type", "application/json");

    fn post(pairs: &[(&'static str, &'static str)]) -> Result<(), Refusal> {
        check(&Method::POST, &headers(pairs), &listener(LOOPBACK, &[]))
    }

    fn host_served(bound: &str, allowed: &[&str], host: &str) -> bool {
        listener(bound, allowed).serves(&host.parse().expect("host"))
    }

    #[test]
    fn a_loopback_listener_answers_to_loopback_ips_and_localhost_on_its_port() {
        for host in [
            "127.0.0.1:7480",
            "localhost:7480",
            "[::1]:7480",
            "127.0.0.2:7480",
        ] {
            assert!(host_served(LOOPBACK, &[], host), "{host}");
        }
        for host in [
            "127.0.0.1:7481",
            "127.0.0.1",
            "10.0.0.5:7480",
            "evil.example:7480",
        ] {
            assert!(!host_served(LOOPBACK, &[], host), "{host}");
        }
        assert!(
            host_served("127.0.0.1:80", &[], "localhost"),
            "80 is HTTP's default"
        );
    }

    #[test]
    fn an_unspecified_listener_answers_to_any_ip_but_names_need_the_allowed_list() {
        for bound in ["0.0.0.0:7480", "[::]:7480"] {
            assert!(host_served(bound, &[], "10.0.0.5:7480"));
            assert!(host_served(bound, &[], "[fe80::1]:7480"));
            assert!(host_served(bound, &[], "localhost:7480"));
            assert!(!host_served(bound, &[], "10.0.0.5:7481"));
            assert!(!host_served(bound, &[], "taskyard.example:7480"));
        }
    }

    #[test]
    fn a_listener_on_one_address_answers_to_that_address_only() {
        assert!(host_served("10.0.0.5:7480", &[], "10.0.0.5:7480"));
        assert!(!host_served("10.0.0.5:7480", &[], "10.0.0.6:7480"));
        assert!(!host_served("10.0.0.5:7480", &[], "localhost:7480"));
        assert!(!host_served("10.0.0.5:7480", &[], "127.0.0.1:7480"));
    }

    #[test]
    fn allowed_entries_match_any_port_unless_they_name_one() {
        let allowed = ["taskyard.example", "ci.example:8443"];
        assert!(host_served(LOOPBACK, &allowed, "taskyard.example"));
        assert!(host_served(LOOPBACK, &allowed, "TASKYARD.example:9999"));
        assert!(host_served(LOOPBACK, &allowed, "ci.example:8443"));
        assert!(!host_served(LOOPBACK, &allowed, "ci.example"));
        assert!(!host_served(LOOPBACK, &allowed, "sub.taskyard.example"));
    }

    #[test]
    fn a_foreign_or_unparseable_host_is_misdirected_and_named() {
        for host in ["evil.example:7480", "127.0.0.1:7480/x", "", "a b"] {
            let mut map = headers(&[JSON]);
            map.insert(HOST, HeaderValue::from_str(host).expect("value"));
            let err = check(&Method::GET, &map, &listener(LOOPBACK, &[])).expect_err(host);
            assert_eq!(err.status(), StatusCode::MISDIRECTED_REQUEST);
            assert!(err.to_string().contains(&format!("{host:?}")), "{err}");
            assert!(err.to_string().contains("http-allowed-hosts"), "{err}");
        }
        let twice = headers(&[("host", "127.0.0.1:7480"), ("host", "evil.example")]);
        let err = check(&Method::GET, &twice, &listener(LOOPBACK, &[]));
        assert!(
            matches!(err, Err(Refusal::MisdirectedHost { .. })),
            "{err:?}"
        );
    }

    #[test]
    fn a_request_without_host_or_origin_is_a_plain_client() {
        assert_eq!(post(&[JSON]), Ok(()));
        let get = check(&Method::GET, &HeaderMap::new(), &listener(LOOPBACK, &[]));
        assert_eq!(get, Ok(()));
    }

    #[test]
    fn the_pages_own_origin_passes_and_any_other_is_forbidden() {
        let own = [
            ("host", "127.0.0.1:7480"),
            ("origin", "http://127.0.0.1:7480"),
            JSON,
        ];
        assert_eq!(post(&own), Ok(()));
        let proxied = [
            ("host", "taskyard.example"),
            ("origin", "https://taskyard.example"),
            JSON,
        ];
        let behind_proxy = listener(LOOPBACK, &["taskyard.example"]);
        assert_eq!(
            check(&Method::POST, &headers(&proxied), &behind_proxy),
            Ok(())
        );
        for origin in [
            "http://evil.example",
            "null",
            "http://localhost:7480",
            "http://127.0.0.1:7481",
        ] {
            let mut map = headers(&[("host", "127.0.0.1:7480"), JSON]);
            map.insert(ORIGIN, HeaderValue::from_str(origin).expect("value"));
            for method in [Method::POST, Method::GET, Method::DELETE] {
                let err = check(&method, &map, &listener(LOOPBACK, &[])).expect_err(origin);
                assert_eq!(err.status(), StatusCode::FORBIDDEN);
                assert!(err.to_string().starts_with("Origin"), "{err}");
                assert!(err.to_string().contains(origin), "{err}");
            }
        }
        let no_host = post(&[("origin", "http://127.0.0.1:7480"), JSON]);
        assert!(
            matches!(no_host, Err(Refusal::ForeignOrigin { .. })),
            "{no_host:?}"
        );
    }

    #[test]
    fn sec_fetch_site_from_another_site_is_forbidden_except_navigating_to_a_page() {
        for site in ["cross-site", "same-site"] {
            let err = post(&[("sec-fetch-site", site), JSON]).expect_err(site);
            assert_eq!(err.status(), StatusCode::FORBIDDEN);
            assert!(
                err.to_string().contains(&format!("Sec-Fetch-Site: {site}")),
                "{err}"
            );
        }
        for site in ["same-origin", "none"] {
            assert_eq!(post(&[("sec-fetch-site", site), JSON]), Ok(()), "{site}");
        }
        let hosts = listener(LOOPBACK, &[]);
        let link = headers(&[
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "navigate"),
        ]);
        assert_eq!(check(&Method::GET, &link, &hosts), Ok(()));
        let form = headers(&[
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "navigate"),
            JSON,
        ]);
        assert!(
            check(&Method::POST, &form, &hosts).is_err(),
            "a form post navigates too"
        );
        let script = headers(&[
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "no-cors"),
        ]);
        assert!(check(&Method::GET, &script, &hosts).is_err());
    }

    #[test]
    fn state_changing_methods_need_the_json_content_type() {
        for content_type in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON ;charset=UTF-8",
        ] {
            let mut map = HeaderMap::new();
            map.insert(
                CONTENT_TYPE,
                HeaderValue::from_str(content_type).expect("value"),
            );
            for method in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
                assert_eq!(check(&method, &map, &listener(LOOPBACK, &[])), Ok(()));
            }
        }
        for content_type in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "application/jsonp",
            "text/plain; application/json",
        ] {
            let mut map = HeaderMap::new();
            map.insert(
                CONTENT_TYPE,
                HeaderValue::from_str(content_type).expect("value"),
            );
            let err = check(&Method::POST, &map, &listener(LOOPBACK, &[])).expect_err(content_type);
            assert_eq!(err.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
            assert!(
                err.to_string().contains("Content-Type: application/json"),
                "{err}"
            );
            assert!(err.to_string().contains(content_type), "{err}");
        }
        let err = post(&[]).expect_err("no content type");
        assert_eq!(
            err.to_string(),
            "POST needs the header Content-Type: application/json, got none"
        );
        let twice = post(&[JSON, ("content-type", "text/plain")]);
        assert!(matches!(twice, Err(Refusal::NotJson { .. })), "{twice:?}");
        let get = check(&Method::GET, &HeaderMap::new(), &listener(LOOPBACK, &[]));
        assert_eq!(get, Ok(()), "reads need no content type");
        for method in [Method::DELETE, Method::PUT, Method::PATCH] {
            let bare = check(&method, &HeaderMap::new(), &listener(LOOPBACK, &[]));
            assert_eq!(bare, Ok(()), "{method} always needs a preflight cross-site");
        }
    }

    #[test]
    fn the_security_guide_quotes_the_refusals_as_they_are_written() {
        let readme = include_str!("../../../../docs/guide/security.md");
        let flat = readme.split_whitespace().collect::<Vec<_>>().join(" ");
        let misdirected = Refusal::MisdirectedHost {
            host: "evil.example:7480".into(),
            bound: LOOPBACK.parse().expect("address"),
        };
        let not_json = Refusal::NotJson {
            method: "POST".into(),
            got: Some("text/plain".into()),
        };
        for refusal in [misdirected, not_json] {
            let text = refusal.to_string();
            assert!(flat.contains(&text), "the security guide quotes {text:?}");
        }
    }

    #[test]
    fn refusals_become_the_api_error_shape() {
        let e = ApiError::from(post(&[]).expect_err("refused"));
        assert_eq!(
            (e.status.as_u16(), e.code),
            (415, ErrorCode::UnsupportedMediaType)
        );
    }
}
