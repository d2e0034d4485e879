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
//! 3. Any method but GET, HEAD and OPTIONS must send `Content-Type:
//!    application/json` (parameters allowed), body or not; otherwise 415
//!    `unsupported_media_type`. A page can only send that type to another
//!    origin after a CORS preflight, which this server never grants.

use crate::http::authority::{Authority, HostName, Origin};
use crate::http::error::ApiError;
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

    pub fn code(&self) -> &'static str {
        match self {
            Refusal::MisdirectedHost { .. } => "misdirected_host",
            Refusal::ForeignOrigin { .. } | Refusal::CrossSiteFetch { .. } => "cross_origin",
            Refusal::NotJson { .. } => "unsupported_media_type",
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
    let host = check_host(headers, hosts)?;
    check_origin(headers, host.as_ref())?;
    check_fetch_site(method, headers)?;
    if !is_safe(method) {
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

/// Middleware: refuses what [`check`] refuses with its status and the
/// usual JSON error body, before the token check and any handler.
pub async fn enforce(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, Error> {
    let verdict = match req.app_data::<web::Data<ListenerHosts>>() {
        Some(hosts) => check(req.method(), req.headers(), hosts),
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
