//! The HTTP listener against what a browser can be made to send, over a
//! real socket to a real coordinator: cross-site submissions (simple
//! `text/plain` POSTs, a foreign `Origin`, `Sec-Fetch-Site: cross-site`) and
//! DNS rebinding (a foreign `Host`) are refused and store nothing, while the
//! dashboard's own same-origin requests, curl-like clients and Prometheus
//! scrapes by IP are served.

mod common;

use common::http::{Http, Response};
use common::Cluster;
use serde_json::json;
use std::io::Write;
use taskyard::config::{load, CoordinatorOptions};

const SUBMIT: &[u8] = br#"{"task_type":"echo","payload":{"message":"hi"}}"#;

fn assert_refused(response: &Response, status: u16, code: &str, names: &[&str]) {
    assert_eq!(response.status, status, "{response:?}");
    let body = response.json();
    assert_eq!(body["code"], code, "{body}");
    let error = body["error"].as_str().expect("error text");
    for name in names {
        assert!(error.contains(name), "{error:?} names {name:?}");
    }
}

/// Jobs the coordinator holds, read over HTTP the way curl would.
fn job_count(http: &Http) -> usize {
    let page = http.get("/api/jobs");
    assert_eq!(page.status, 200, "{page:?}");
    page.json()["jobs"].as_array().expect("jobs").len()
}

fn origin_of(http: &Http) -> String {
    format!("http://{}", http.addr)
}

#[test]
fn a_cross_site_text_plain_submit_is_refused_and_stores_nothing() {
    let cluster = Cluster::start(0, 1);
    let http = cluster.http();
    for content_type in [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        let response = http.request(
            "POST",
            "/api/jobs",
            &[("Content-Type", content_type)],
            SUBMIT,
        );
        assert_refused(
            &response,
            415,
            "unsupported_media_type",
            &["Content-Type", "application/json", content_type],
        );
    }
    let response = http.request("POST", "/api/jobs", &[], SUBMIT);
    assert_refused(&response, 415, "unsupported_media_type", &["Content-Type"]);
    assert_eq!(job_count(&http), 0, "nothing was stored");
}

#[test]
fn a_submit_from_another_origin_is_refused() {
    let cluster = Cluster::start(0, 1);
    let http = cluster.http();
    for origin in ["http://evil.example", "null", "http://localhost:1"] {
        let headers = [("Content-Type", "application/json"), ("Origin", origin)];
        let response = http.request("POST", "/api/jobs", &headers, SUBMIT);
        assert_refused(&response, 403, "cross_origin", &["Origin", origin]);
    }
    assert_eq!(job_count(&http), 0, "nothing was stored");
}

#[test]
fn a_cross_site_fetch_is_refused_by_sec_fetch_site() {
    let cluster = Cluster::start(0, 1);
    let http = cluster.http();
    for site in ["cross-site", "same-site"] {
        let headers = [
            ("Content-Type", "application/json"),
            ("Sec-Fetch-Site", site),
        ];
        let response = http.request("POST", "/api/jobs", &headers, SUBMIT);
        assert_refused(&response, 403, "cross_origin", &["Sec-Fetch-Site", site]);
    }
    let headers = [("Sec-Fetch-Site", "cross-site"), ("Sec-Fetch-Mode", "cors")];
    let read = http.request("GET", "/api/jobs", &headers, b"");
    assert_refused(&read, 403, "cross_origin", &["Sec-Fetch-Site"]);
    assert_eq!(job_count(&http), 0, "nothing was stored");
}

#[test]
fn a_link_from_another_site_still_opens_the_dashboard() {
    let cluster = Cluster::start(0, 1);
    let http = cluster.http();
    let headers = [
        ("Sec-Fetch-Site", "cross-site"),
        ("Sec-Fetch-Mode", "navigate"),
    ];
    let page = http.request("GET", "/", &headers, b"");
    assert_eq!(page.status, 200, "{page:?}");
}

#[test]
fn a_cancel_without_the_json_content_type_is_refused_and_cancels_nothing() {
    let cluster = Cluster::start(0, 1);
    let http = cluster.http();
    let submitted = http.post(
        "/api/jobs",
        &json!({ "task_type": "echo", "payload": { "message": "hi" } }),
    );
    assert_eq!(submitted.status, 201, "{submitted:?}");
    let id = submitted.json()["job_id"].as_str().expect("id").to_string();
    let path = format!("/api/jobs/{id}/cancel");
    let response = http.request("POST", &path, &[("Content-Type", "text/plain")], b"");
    assert_refused(&response, 415, "unsupported_media_type", &["Content-Type"]);
    let job = http.get(&format!("/api/jobs/{id}")).json();
    assert_eq!(job["state"], "QUEUED", "{job}");
}

#[test]
fn a_rebound_host_name_is_refused_until_it_is_allowed() {
    let cluster = Cluster::start(0, 1);
    let http = cluster.http();
    let port = http.addr.port();
    let host = format!("evil.example:{port}");
    let origin = format!("http://{host}");
    let headers = [
        ("Host", host.as_str()),
        ("Origin", origin.as_str()),
        ("Content-Type", "application/json"),
    ];
    let response = http.request("POST", "/api/jobs", &headers, SUBMIT);
    assert_refused(
        &response,
        421,
        "misdirected_host",
        &["Host", &host, "http-allowed-hosts"],
    );
    let read = http.request("GET", "/api/jobs", &headers[..1], b"");
    assert_refused(&read, 421, "misdirected_host", &[&host]);
    assert_eq!(job_count(&http), 0, "nothing was stored");

    let allowed = Cluster::start_configured(|c| {
        c.http_allowed_hosts = vec!["evil.example".to_string()];
    });
    let http = allowed.http();
    let host = format!("evil.example:{}", http.addr.port());
    let origin = format!("http://{host}");
    let headers = [
        ("Host", host.as_str()),
        ("Origin", origin.as_str()),
        ("Content-Type", "application/json"),
    ];
    let response = http.request("POST", "/api/jobs", &headers, SUBMIT);
    assert_eq!(response.status, 201, "{response:?}");
    assert_eq!(job_count(&http), 1);
}

#[test]
fn the_dashboards_own_json_post_is_accepted() {
    let cluster = Cluster::start(0, 1);
    let http = cluster.http();
    let origin = origin_of(&http);
    let headers = [
        ("Content-Type", "application/json; charset=utf-8"),
        ("Origin", origin.as_str()),
        ("Sec-Fetch-Site", "same-origin"),
    ];
    let response = http.request("POST", "/api/jobs", &headers, SUBMIT);
    assert_eq!(response.status, 201, "{response:?}");
    let id = response.json()["job_id"].as_str().expect("id").to_string();
    let cancel = http.request("POST", &format!("/api/jobs/{id}/cancel"), &headers, b"");
    assert_eq!(cancel.status, 200, "{cancel:?}");
    let localhost = format!("localhost:{}", http.addr.port());
    let origin = format!("http://{localhost}");
    let by_name = [
        ("Host", localhost.as_str()),
        ("Origin", origin.as_str()),
        ("Content-Type", "application/json"),
    ];
    let response = http.request("POST", "/api/jobs", &by_name, SUBMIT);
    assert_eq!(response.status, 201, "{response:?}");
    assert_eq!(job_count(&http), 2);
}

#[test]
fn a_client_without_origin_is_accepted() {
    let cluster = Cluster::start(0, 1);
    let http = cluster.http();
    let headers = [
        ("Content-Type", "application/json"),
        ("User-Agent", "curl/8.5.0"),
    ];
    let response = http.request("POST", "/api/jobs", &headers, SUBMIT);
    assert_eq!(response.status, 201, "{response:?}");
    assert_eq!(job_count(&http), 1);
}

#[test]
fn prometheus_scraping_by_ip_is_served() {
    let cluster = Cluster::start(0, 1);
    let http = cluster.http();
    let host = format!("127.0.0.1:{}", http.addr.port());
    let headers = [("Host", host.as_str()), ("Accept", "text/plain")];
    for path in ["/metrics", "/healthz", "/readyz", "/api/stats"] {
        let response = http.request("GET", path, &headers, b"");
        assert_eq!(response.status, 200, "{path}: {response:?}");
    }
}

#[test]
fn a_bad_http_allowed_hosts_entry_is_a_config_error_naming_the_key() {
    for entry in [
        "http://evil.example",
        "evil.example/path",
        "host:99999",
        "",
        "a b",
    ] {
        let mut file = tempfile::NamedTempFile::new().expect("temp file");
        writeln!(
            file,
            "http-allowed-hosts = [\"taskyard.example\", {entry:?}]"
        )
        .expect("write");
        let err = load::<CoordinatorOptions>(Some(file.path()), Default::default())
            .expect_err("a bad entry is refused");
        assert_eq!(err.key.as_deref(), Some("http-allowed-hosts"), "{err}");
        assert_eq!(err.source_name, file.path().display().to_string());
        assert!(err.reason.contains(&format!("{entry:?}")), "{err}");
    }
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    writeln!(
        file,
        "http-allowed-hosts = [\"taskyard.example\", \"ci.example:8080\", \"10.0.0.5\", \"[::1]:7480\"]"
    )
    .expect("write");
    let config = load::<CoordinatorOptions>(Some(file.path()), Default::default()).expect("valid");
    assert_eq!(config.http_allowed_hosts.len(), 4);

    let readme_example = r#"http-allowed-hosts = ["taskyard.example", "coord.example:7480"]"#;
    let readme = include_str!("../docs/guide/security.md");
    assert!(
        readme.contains(readme_example),
        "the security guide shows {readme_example}"
    );
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    writeln!(file, "{readme_example}").expect("write");
    load::<CoordinatorOptions>(Some(file.path()), Default::default()).expect("README example");
}

#[test]
fn openapi_documents_the_browser_rules_on_every_route() {
    let document = taskyard::http::openapi::document(true);
    let openapi: serde_json::Value =
        serde_json::from_str(&document.to_json().expect("JSON")).expect("valid JSON");
    for (method, path) in taskyard::http::server::Routes::of(&document).all() {
        let path = path.as_str();
        let responses = &openapi["paths"][path][method.to_ascii_lowercase()]["responses"];
        let mut expected = vec!["403", "421"];
        if *method == "POST" {
            expected.push("415");
            let body = &openapi["paths"][path]["post"]["requestBody"]["content"];
            assert!(body["application/json"].is_object(), "{method} {path} body");
        }
        for status in expected {
            assert!(
                responses[status].is_object(),
                "{method} {path} documents {status}"
            );
        }
    }
    let codes = openapi["components"]["schemas"]["Error"]["properties"]["code"]["enum"]
        .as_array()
        .expect("codes")
        .clone();
    for code in ["cross_origin", "misdirected_host", "unsupported_media_type"] {
        assert!(codes.contains(&json!(code)), "{code} listed");
    }
    let description = openapi["info"]["description"]
        .as_str()
        .expect("description");
    for word in [
        "http-allowed-hosts",
        "Origin",
        "Sec-Fetch-Site",
        "application/json",
    ] {
        assert!(
            description.contains(word),
            "the description explains {word}"
        );
    }
}
