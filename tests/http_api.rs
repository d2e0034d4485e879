//! The HTTP API over a real socket against a real coordinator and workers:
//! every endpoint, paging, errors, auth, and `/metrics` as jobs run.

mod common;

use common::http::{Http, Response};
use common::{wait_until, Cluster};
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(15);

fn submit(http: &Http, body: Value) -> String {
    http.submit(&body)
}

fn job(http: &Http, id: &str) -> Value {
    let response = http.get(&format!("/api/jobs/{id}"));
    assert_eq!(response.status, 200, "{response:?}");
    response.json()
}

fn wait_for_state(http: &Http, id: &str, state: &str) -> Value {
    let mut last = Value::Null;
    wait_until(&format!("job {id} {state} over HTTP"), WAIT, || {
        last = job(http, id);
        last["state"] == state
    });
    last
}

fn assert_error(response: &Response, status: u16, code: &str) {
    assert_eq!(response.status, status, "{response:?}");
    let body = response.json();
    assert_eq!(body["code"], code, "{body}");
    assert!(
        body["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{body}"
    );
}

#[test]
fn every_endpoint_answers_over_a_real_socket() {
    let cluster = Cluster::start(1, 2);
    let http = cluster.http();
    assert_eq!(http.get("/healthz").status, 200);
    assert_eq!(http.get("/readyz").json()["status"], "ready");

    let id = submit(
        &http,
        json!({ "task_type": "echo", "payload": { "message": "hi" }, "priority": "high" }),
    );
    let done = wait_for_state(&http, &id, "SUCCEEDED");
    assert_eq!(done["result"], "hi");
    assert_eq!(done["payload"]["message"], "hi");
    assert_eq!(done["history"].as_array().expect("history").len(), 1);
    assert_eq!(done["history"][0]["outcome"]["kind"], "succeeded");

    let page = http.get("/api/jobs").json();
    assert_eq!(page["jobs"][0]["job_id"], id.as_str());
    assert!(
        page["jobs"][0].get("history").is_none(),
        "lists omit history"
    );
    assert_eq!(page["counts"]["SUCCEEDED"], 1);

    let workers = http.get("/api/workers").json();
    assert_eq!(workers[0]["worker_id"], "worker-0");
    assert_eq!(workers[0]["capacity"], 2);
    assert_eq!(workers[0]["free"], 2);

    let stats = http.get("/api/stats").json();
    assert_eq!(stats["jobs"]["SUCCEEDED"], 1);
    assert_eq!(stats["throughput"]["last_minute"], 1);
    assert_eq!(
        stats["throughput"]["per_second"].as_array().map(Vec::len),
        Some(60)
    );
    assert_eq!(stats["workers"]["connected"], 1);
    assert_eq!(stats["queue_depth"]["by_priority"]["high"], 0);

    let openapi = http.get("/api/openapi.json").json();
    assert!(openapi["paths"]["/api/jobs"].is_object());
    let page = http.get("/");
    assert!(page.body.contains("<title>taskyard</title>"));
    assert!(page
        .header("content-type")
        .is_some_and(|t| t.starts_with("text/html")));
    assert!(http.get("/dashboard.js").body.contains("REFRESH_MS"));
    assert!(http.get("/dashboard.css").body.contains("@media"));
    assert!(http
        .get("/metrics")
        .body
        .contains("taskyard_jobs_succeeded_total 1"));
    assert!(
        page.body.contains("id=\"cluster\""),
        "the dashboard's cluster panel"
    );
}

#[test]
fn on_sqlite_the_cluster_is_this_coordinator_leading_at_epoch_zero() {
    let cluster = Cluster::start(0, 1);
    let http = cluster.http();
    let answer = http.get("/api/cluster");
    assert_eq!(answer.status, 200, "{}", answer.body);
    let info = answer.json();
    assert_eq!(info["role"], "leader");
    assert_eq!(info["store"], "sqlite");
    assert_eq!(info["epoch"], 0);
    assert_eq!(info["leader"]["epoch"], 0);
    assert_eq!(info["leader"]["node"], info["node"]);
    assert_eq!(info["members"][0]["role"], "leader");
    let metrics = http.get("/metrics").body;
    for line in [
        "taskyard_leader 1",
        "taskyard_leader_epoch 0",
        "taskyard_leader_changes_total 0",
    ] {
        assert!(metrics.contains(line), "{line} in {metrics}");
    }
}

#[test]
fn job_pages_follow_the_cursor_without_gaps_or_repeats() {
    let cluster = Cluster::start(0, 1);
    let http = cluster.http();
    let mut submitted = Vec::new();
    for i in 0..7 {
        let task_type = if i % 2 == 0 { "echo" } else { "fail" };
        let payload = json!({ "message": format!("m{i}") });
        submitted.push(submit(
            &http,
            json!({ "task_type": task_type, "payload": payload }),
        ));
    }
    let mut seen = Vec::new();
    let mut path = "/api/jobs?limit=3".to_string();
    loop {
        let page = http.get(&path).json();
        let jobs = page["jobs"].as_array().expect("jobs").clone();
        assert!(jobs.len() <= 3);
        seen.extend(
            jobs.iter()
                .map(|j| j["job_id"].as_str().unwrap().to_string()),
        );
        match page["next_cursor"].as_str() {
            Some(cursor) => path = format!("/api/jobs?limit=3&cursor={cursor}"),
            None => break,
        }
    }
    submitted.reverse();
    assert_eq!(seen, submitted, "newest first, every job once");

    let echo = http.get("/api/jobs?type=echo&state=queued").json();
    assert_eq!(echo["jobs"].as_array().map(Vec::len), Some(4));
    assert_eq!(echo["counts"]["QUEUED"], 4);
    assert!(echo["next_cursor"].is_null());
    let none = http.get("/api/jobs?state=succeeded").json();
    assert_eq!(none["jobs"].as_array().map(Vec::len), Some(0));
    let stats = http.get("/api/stats").json();
    assert_eq!(stats["queue_depth"]["by_priority"]["normal"], 7);
    assert_eq!(stats["queue_depth"]["by_task_type"]["echo"]["normal"], 4);
}

#[test]
fn errors_have_one_json_shape_and_a_fitting_status() {
    let cluster = Cluster::start_configured(|c| c.max_active_jobs = 1);
    let http = cluster.http();
    assert_error(&http.get("/api/jobs/not-a-uuid"), 400, "bad_request");
    let unknown = "00000000-0000-4000-8000-000000000000";
    let missing = http.get(&format!("/api/jobs/{unknown}"));
    assert_error(&missing, 404, "not_found");
    assert_eq!(
        missing.json()["error"],
        format!("job {unknown} not found (expired or never existed)"),
        "worded as the CLI words it"
    );
    assert_error(
        &http.post(&format!("/api/jobs/{unknown}/cancel"), &json!({})),
        404,
        "not_found",
    );
    assert_error(&http.get("/api/jobs?limit=0"), 400, "bad_request");
    assert_error(&http.get("/api/jobs?limit=lots"), 400, "bad_request");
    assert_error(&http.get("/api/jobs?state=sleeping"), 400, "bad_request");
    assert_error(&http.get("/api/jobs?cursor=xyz"), 400, "bad_request");
    assert_error(&http.get("/nowhere"), 404, "not_found");
    assert_error(
        &http.send("POST", "/api/jobs", Some(b"{not json")),
        400,
        "bad_request",
    );
    assert_error(
        &http.post("/api/jobs", &json!({ "task_type": "echo", "surprise": 1 })),
        400,
        "bad_request",
    );
    let invalid = http.post(
        "/api/jobs",
        &json!({ "task_type": "sleep", "payload": { "millis": "soon" } }),
    );
    assert_error(&invalid, 422, "invalid_submission");
    assert!(invalid.json()["error"].as_str().unwrap().contains("millis"));

    let first = submit(
        &http,
        json!({ "task_type": "sleep", "payload": { "millis": 1 } }),
    );
    let over = http.post(
        "/api/jobs",
        &json!({ "task_type": "sleep", "payload": { "millis": 1 } }),
    );
    assert_error(&over, 429, "admission_limit");
    let cancelled = http.post(&format!("/api/jobs/{first}/cancel"), &json!({}));
    assert_eq!(cancelled.json()["state"], "CANCELLED");
    let again = http.post(&format!("/api/jobs/{first}/cancel"), &json!({}));
    assert_error(&again, 409, "already_finished");
}

#[test]
fn a_configured_token_is_required_everywhere_but_healthz() {
    let cluster = Cluster::start_configured(|c| c.client_token = "s3cret".into());
    let addr = cluster.coordinator().http_addr.expect("http on");
    let anonymous = Http::new(addr);
    assert_eq!(anonymous.get("/healthz").status, 200);
    for path in [
        "/api/jobs",
        "/api/workers",
        "/api/stats",
        "/metrics",
        "/readyz",
        "/",
    ] {
        assert_error(&anonymous.get(path), 401, "unauthorized");
    }
    assert_error(
        &Http::with_token(addr, "wrong").get("/api/jobs"),
        401,
        "unauthorized",
    );
    let authorized = Http::with_token(addr, "s3cret");
    assert_eq!(authorized.get("/api/jobs").status, 200);
    assert_eq!(authorized.get("/metrics").status, 200);
    let id = submit(
        &authorized,
        json!({ "task_type": "echo", "payload": { "message": "x" } }),
    );
    assert_eq!(job(&authorized, &id)["state"], "QUEUED");
}

#[test]
fn cancel_over_http_stops_a_running_job() {
    let cluster = Cluster::start(1, 1);
    let http = cluster.http();
    let id = submit(
        &http,
        json!({ "task_type": "sleep", "payload": { "millis": 60000 } }),
    );
    wait_for_state(&http, &id, "RUNNING");
    let cancelled = http
        .post(&format!("/api/jobs/{id}/cancel"), &json!({}))
        .json();
    assert_eq!(cancelled["state"], "CANCELLED");
    assert_eq!(cancelled["history"][0]["outcome"]["kind"], "cancelled");
    wait_until("the worker's slot is free again", WAIT, || {
        http.get("/api/workers").json()[0]["active"] == 0
    });
}

#[test]
fn an_empty_http_listen_turns_the_listener_off() {
    let cluster = Cluster::start_configured(|c| c.http_listen = String::new());
    assert!(cluster.coordinator().http_addr.is_none());
}

fn scrape(http: &Http) -> prometheus_parse::Scrape {
    let response = http.get("/metrics");
    assert_eq!(response.status, 200);
    assert!(response
        .header("content-type")
        .is_some_and(|t| t.starts_with("text/plain; version=0.0.4")));
    let lines = response.body.lines().map(|l| Ok(l.to_string()));
    prometheus_parse::Scrape::parse(lines).expect("valid Prometheus text format")
}

fn value(scrape: &prometheus_parse::Scrape, name: &str, label: Option<(&str, &str)>) -> f64 {
    let sample = scrape
        .samples
        .iter()
        .find(|s| s.metric == name && label.is_none_or(|(k, v)| s.labels.get(k) == Some(v)))
        .unwrap_or_else(|| panic!("metric {name} {label:?} missing"));
    match sample.value {
        prometheus_parse::Value::Counter(v)
        | prometheus_parse::Value::Gauge(v)
        | prometheus_parse::Value::Untyped(v) => v,
        prometheus_parse::Value::Histogram(ref buckets) => buckets.last().map_or(0.0, |b| b.count),
        prometheus_parse::Value::Summary(_) => panic!("no summaries exported"),
    }
}

#[test]
fn metrics_parse_and_counters_move_as_jobs_run() {
    let cluster = Cluster::start_configured(|c| {
        c.retry_base_millis = 10;
        c.retry_cap_millis = 10;
    });
    let mut cluster = cluster;
    cluster.add_worker("metrics-worker", 2);
    cluster.wait_for_workers(1);
    let http = cluster.http();
    let before = scrape(&http);
    for family in taskyard::http::metrics::FAMILIES {
        assert!(
            before.docs.contains_key(family),
            "{family} has HELP text in the scrape"
        );
    }
    assert_eq!(value(&before, "taskyard_jobs_submitted_total", None), 0.0);
    assert_eq!(value(&before, "taskyard_workers_connected", None), 1.0);
    assert_eq!(value(&before, "taskyard_workers_free_capacity", None), 2.0);

    let ok = submit(
        &http,
        json!({ "task_type": "echo", "payload": { "message": "a" } }),
    );
    let bad = submit(
        &http,
        json!({ "task_type": "fail", "payload": { "message": "no" }, "max_attempts": 2 }),
    );
    let _ = http.post("/api/jobs", &json!({ "task_type": "sleep", "payload": {} }));
    wait_for_state(&http, &ok, "SUCCEEDED");
    wait_for_state(&http, &bad, "FAILED");

    let after = scrape(&http);
    assert_eq!(value(&after, "taskyard_jobs_submitted_total", None), 2.0);
    assert_eq!(value(&after, "taskyard_jobs_succeeded_total", None), 1.0);
    assert_eq!(value(&after, "taskyard_jobs_failed_total", None), 1.0);
    assert_eq!(value(&after, "taskyard_jobs_retried_total", None), 1.0);
    assert_eq!(value(&after, "taskyard_jobs_rejected_total", None), 1.0);
    assert_eq!(
        value(&after, "taskyard_jobs", Some(("state", "succeeded"))),
        1.0
    );
    assert_eq!(
        value(&after, "taskyard_jobs", Some(("state", "failed"))),
        1.0
    );
    assert_eq!(
        value(&after, "taskyard_job_run_seconds", None),
        3.0,
        "three attempts ended"
    );
    assert_eq!(
        value(&after, "taskyard_job_submit_to_start_seconds", None),
        2.0
    );
    assert!(value(&after, "taskyard_persistence_batch_rows", None) >= 1.0);
    assert!(value(&after, "taskyard_persistence_commit_seconds", None) >= 1.0);
    assert_eq!(
        value(
            &after,
            "taskyard_build_info",
            Some(("version", env!("CARGO_PKG_VERSION")))
        ),
        1.0
    );
}
