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
    let assets = taskyard::http::dashboard::ASSETS;
    for (name, content_type, _) in assets {
        let asset = http.get(&format!("/assets/{name}"));
        assert_eq!(asset.status, 200, "{name}");
        assert_eq!(asset.header("content-type"), Some(content_type), "{name}");
        // Every module a file imports is served too.
        for import in asset.body.split("from \"./").skip(1) {
            let target = import.split('"').next().unwrap_or_default();
            assert!(
                assets.iter().any(|(n, _, _)| *n == target),
                "{name} imports {target}, which is not served"
            );
        }
    }
    assert!(page.body.contains("assets/app.js") && page.body.contains("assets/style.css"));
    assert!(http.get("/assets/app.js").body.contains("REFRESH_MS"));
    assert!(http.get("/assets/style.css").body.contains("@media"));
    let missing = http.get("/assets/secret.txt");
    assert_eq!(missing.status, 404);
    assert_eq!(missing.json()["code"], "not_found");
    assert!(http
        .get("/metrics")
        .body
        .contains("taskyard_jobs_succeeded_total{task_type=\"echo\"} 1"));
    assert!(
        page.body.contains("id=\"cluster-line\""),
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
    let huge = json!({ "task_type": "echo", "payload": { "message": "x".repeat(1 << 20) } });
    let too_large = http.post("/api/jobs", &huge);
    assert_error(&too_large, 413, "body_too_large");
    assert!(too_large.json()["error"]
        .as_str()
        .unwrap()
        .contains("1048576 bytes"));

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
fn a_configured_token_is_required_everywhere_but_healthz_and_the_dashboard_files() {
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
    ] {
        assert_error(&anonymous.get(path), 401, "unauthorized");
    }
    // The dashboard's page and files hold no data: a browser opens them
    // and the page asks for the token the API needs.
    assert_eq!(anonymous.get("/").status, 200);
    assert_eq!(anonymous.get("/assets/app.js").status, 200);
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

/// The sum of every sample of `name` (with `label`, if given): a counter
/// or gauge's value over all its task types, a histogram's count.
fn value(scrape: &prometheus_parse::Scrape, name: &str, label: Option<(&str, &str)>) -> f64 {
    let samples: Vec<_> = scrape
        .samples
        .iter()
        .filter(|s| s.metric == name && label.is_none_or(|(k, v)| s.labels.get(k) == Some(v)))
        .collect();
    assert!(
        !samples.is_empty() || label.is_none(),
        "metric {name} {label:?} missing"
    );
    samples
        .iter()
        .map(|sample| match sample.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            prometheus_parse::Value::Histogram(ref buckets) => {
                buckets.last().map_or(0.0, |b| b.count)
            }
            prometheus_parse::Value::Summary(_) => panic!("no summaries exported"),
        })
        .sum()
}

/// The value of the one sample written exactly as `series` in `body`.
fn sample(body: &str, series: &str) -> f64 {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{series} missing"))
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
    let process = taskyard::http::process_metrics::PROCESS_FAMILIES;
    for family in taskyard::http::metrics::FAMILIES.iter().chain(&process) {
        assert!(
            before.docs.contains_key(*family),
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
    for (counter, task_type, n) in [
        ("taskyard_jobs_submitted_total", "echo", 1.0),
        ("taskyard_jobs_submitted_total", "fail", 1.0),
        ("taskyard_jobs_failed_total", "fail", 1.0),
        ("taskyard_jobs_failed_total", "echo", 0.0),
    ] {
        let label = Some(("task_type", task_type));
        assert_eq!(value(&after, counter, label), n, "{counter} {task_type}");
    }
    let body = http.get("/metrics").body;
    let run = r#"taskyard_job_run_seconds_sum{task_type="echo"}"#;
    assert!(
        sample(&body, run) > 0.0,
        "microseconds, not whole ms: {run}"
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

fn sum(series: &Value, field: &str) -> u64 {
    series[field]
        .as_array()
        .map_or(0, |v| v.iter().filter_map(Value::as_u64).sum())
}

#[test]
fn the_timeline_counts_the_hour_per_task_type_and_folds_types_past_its_bound() {
    let mut cluster = Cluster::start_configured(|c| c.timeline_task_types = 1);
    cluster.add_worker("worker-0", 2);
    cluster.wait_for_workers(1);
    let http = cluster.http();
    let ok = submit(
        &http,
        json!({ "task_type": "echo", "payload": { "message": "a" } }),
    );
    wait_for_state(&http, &ok, "SUCCEEDED");
    let body = json!({ "task_type": "fail", "payload": { "message": "b" }, "max_attempts": 1 });
    let failed = submit(&http, body);
    wait_for_state(&http, &failed, "FAILED");

    let timeline = http.get("/api/timeline");
    assert_eq!(timeline.status, 200, "{timeline:?}");
    let t = timeline.json();
    assert_eq!(t["minute_starts"].as_array().map(Vec::len), Some(60));
    let names: Vec<&str> = t["series"]
        .as_array()
        .expect("series")
        .iter()
        .filter_map(|s| s["task_type"].as_str())
        .collect();
    assert_eq!(
        names,
        ["echo", "other"],
        "one type tracked, the next folded: {t}"
    );
    assert_eq!(sum(&t["series"][0], "succeeded"), 1);
    assert_eq!(sum(&t["series"][1], "failed"), 1);
    assert_eq!(
        sum(&t["total"], "succeeded") + sum(&t["total"], "failed"),
        2
    );
    let runs = t["total"]["run_p95_ms"].as_array().expect("run times");
    assert!(runs.iter().any(Value::is_f64), "an attempt's run time: {t}");
    assert!(
        runs.iter().any(Value::is_null),
        "minutes with none are null"
    );
}

#[test]
fn head_metrics_answers_like_get_without_a_body() {
    let cluster = Cluster::start(0, 1);
    let http = cluster.http();
    let head = http.send("HEAD", "/metrics", None);
    assert_eq!(head.status, 200);
    assert!(head
        .header("content-type")
        .is_some_and(|t| t.starts_with("text/plain; version=0.0.4")));
    assert!(head.body.is_empty(), "{}", head.body);
    assert_eq!(http.send("HEAD", "/api/nothing", None).status, 404);
}

#[test]
fn queue_gauges_name_the_task_type_no_worker_runs() {
    let cluster = Cluster::start(1, 1);
    let http = cluster.http();
    submit(
        &http,
        json!({ "task_type": "nobody-runs-this", "payload": {} }),
    );
    let scrape = scrape(&http);
    let unserved = |t| {
        value(
            &scrape,
            "taskyard_queue_unserved_jobs",
            Some(("task_type", t)),
        )
    };
    assert_eq!(unserved("nobody-runs-this"), 1.0);
    assert_eq!(unserved("echo"), 0.0);
    let depth = value(
        &scrape,
        "taskyard_queue_depth",
        Some(("task_type", "nobody-runs-this")),
    );
    assert_eq!(depth, 1.0);
    assert!(
        value(
            &scrape,
            "taskyard_queue_oldest_age_seconds",
            Some(("task_type", "nobody-runs-this"))
        ) >= 0.0
    );
}
