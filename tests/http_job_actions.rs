//! What an operator does over HTTP, against a real coordinator and worker
//! over a real socket: find jobs by id prefix and filters, retry failed
//! jobs one by one and in bulk, delete finished ones, read the queues, and
//! the answers to wrong methods.

mod common;

use common::http::{Http, Response};
use common::{wait_until, Cluster};
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(15);

fn submit(http: &Http, body: Value) -> String {
    http.submit(&body)
}

fn failing(http: &Http) -> String {
    submit(
        http,
        json!({ "task_type": "fail", "payload": { "message": "boom" }, "max_attempts": 1 }),
    )
}

fn wait_for_state(http: &Http, id: &str, state: &str) {
    wait_until(&format!("job {id} {state} over HTTP"), WAIT, || {
        http.get(&format!("/api/jobs/{id}")).json()["state"] == state
    });
}

fn code(response: &Response) -> String {
    response.json()["code"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn ids(list: &Value) -> Vec<String> {
    list.as_array()
        .expect("an array")
        .iter()
        .map(|v| {
            v.as_str()
                .or_else(|| v["job_id"].as_str())
                .expect("id")
                .to_string()
        })
        .collect()
}

#[test]
fn failed_jobs_are_found_by_prefix_retried_and_deleted() {
    let cluster = Cluster::start(1, 2);
    let http = cluster.http();
    let (a, b, c) = (failing(&http), failing(&http), failing(&http));
    for id in [&a, &b, &c] {
        wait_for_state(&http, id, "FAILED");
    }

    // A unique prefix names the job; a short shared one lists candidates.
    let unique = &a[..30];
    let found = http.get(&format!("/api/jobs/{unique}"));
    assert_eq!(found.status, 200, "{found:?}");
    assert_eq!(found.json()["job_id"], a.as_str());
    assert_eq!(found.json()["history"][0]["outcome"]["kind"], "failed");
    let shared = &a[..4];
    let ambiguous = http.get(&format!("/api/jobs/{shared}"));
    assert_eq!(
        (ambiguous.status, code(&ambiguous)),
        (409, "ambiguous_id".into())
    );
    let candidates = ids(&ambiguous.json()["candidates"]);
    assert!(
        candidates.contains(&c) && candidates.len() >= 3,
        "{candidates:?}"
    );
    let malformed = http.get("/api/jobs/not-hex!");
    assert_eq!(
        (malformed.status, code(&malformed)),
        (400, "bad_request".into())
    );
    let none = http.get("/api/jobs/ffffffff");
    assert_eq!((none.status, code(&none)), (404, "not_found".into()));

    // The list filters on the server: state, id prefix, order.
    let failed = http.get("/api/jobs?state=FAILED&order=oldest").json();
    assert_eq!(ids(&failed["jobs"]), vec![a.clone(), b.clone(), c.clone()]);
    assert_eq!(failed["counts"]["FAILED"], 3);
    let by_prefix = http.get(&format!("/api/jobs?q={}", &b[..30])).json();
    assert_eq!(ids(&by_prefix["jobs"]), vec![b.clone()]);
    let bad_order = http.get("/api/jobs?order=sideways");
    assert_eq!(bad_order.status, 400, "{bad_order:?}");

    // Retry one: QUEUED again with a fresh budget, then FAILED again.
    let retried = http.post(&format!("/api/jobs/{}/retry", &a[..30]), &json!({}));
    assert_eq!(retried.status, 200, "{retried:?}");
    assert_eq!(retried.json()["job_id"], a.as_str());
    wait_for_state(&http, &a, "FAILED");
    let job = http.get(&format!("/api/jobs/{a}")).json();
    assert_eq!(
        job["history"].as_array().map(Vec::len),
        Some(2),
        "history kept"
    );

    // Retry in bulk by filter: every FAILED job.
    let bulk = http.post(
        "/api/jobs/retry",
        &json!({ "filter": { "state": "FAILED" } }),
    );
    assert_eq!(bulk.status, 200, "{bulk:?}");
    let mut done = ids(&bulk.json()["done"]);
    done.sort();
    let mut all = vec![a.clone(), b.clone(), c.clone()];
    all.sort();
    assert_eq!(done, all);
    assert_eq!(bulk.json()["more"], false);
    for id in [&a, &b, &c] {
        wait_for_state(&http, id, "FAILED");
    }

    // Delete one, then the rest in bulk; a deleted job is gone.
    let deleted = http.send("DELETE", &format!("/api/jobs/{a}"), None);
    assert_eq!(deleted.status, 204, "{deleted:?}");
    let gone = http.get(&format!("/api/jobs/{a}"));
    assert_eq!(gone.status, 404, "{gone:?}");
    let again = http.send("DELETE", &format!("/api/jobs/{a}"), None);
    assert_eq!(again.status, 404, "{again:?}");
    let rest = http.post("/api/jobs/delete", &json!({ "job_ids": [b, c, a] }));
    assert_eq!(rest.status, 200, "{rest:?}");
    assert_eq!(ids(&rest.json()["done"]).len(), 2);
    assert_eq!(ids(&rest.json()["refused"]), vec![a.clone()]);
    let counts = http.get("/api/jobs?limit=1").json()["counts"].clone();
    assert_eq!(counts["FAILED"], 0, "{counts}");
}

#[test]
fn jobs_not_finished_are_neither_retried_nor_deleted() {
    let cluster = Cluster::start(1, 1);
    let http = cluster.http();
    let waiting = submit(&http, json!({ "task_type": "resize", "payload": {} }));
    let retry = http.post(&format!("/api/jobs/{waiting}/retry"), &json!({}));
    assert_eq!((retry.status, code(&retry)), (409, "not_retryable".into()));
    let delete = http.send("DELETE", &format!("/api/jobs/{waiting}"), None);
    assert_eq!((delete.status, code(&delete)), (409, "not_finished".into()));
    let bulk = http.post("/api/jobs/delete", &json!({ "job_ids": [waiting] }));
    assert!(bulk.json()["refused"][0]["reason"]
        .as_str()
        .is_some_and(|r| r.contains("QUEUED")));
    let neither = http.post("/api/jobs/delete", &json!({}));
    assert_eq!(neither.status, 400, "{neither:?}");
    let too_many: Vec<String> = (0..101).map(|_| waiting.clone()).collect();
    let over = http.post("/api/jobs/retry", &json!({ "job_ids": too_many }));
    assert_eq!(over.status, 400, "{over:?}");
    let running_filter = http.post(
        "/api/jobs/delete",
        &json!({ "filter": { "state": "RUNNING" } }),
    );
    assert_eq!(running_filter.status, 400, "{running_filter:?}");
}

#[test]
fn queues_show_depth_latency_and_task_types_no_worker_runs() {
    let cluster = Cluster::start(1, 1);
    let http = cluster.http();
    for priority in ["high", "low", "low"] {
        submit(
            &http,
            json!({ "task_type": "resize", "payload": {}, "priority": priority }),
        );
    }
    submit(
        &http,
        json!({ "task_type": "resize", "payload": {}, "delay_ms": 60_000 }),
    );
    let queues = http.get("/api/queues").json();
    let rows: Vec<(String, String, u64)> = queues["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .map(|q| {
            let text = |k: &str| q[k].as_str().unwrap_or_default().to_string();
            (
                text("task_type"),
                text("priority"),
                q["depth"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            ("resize".into(), "high".into(), 1),
            ("resize".into(), "low".into(), 2)
        ]
    );
    let resize = queues["task_types"]
        .as_array()
        .expect("task types")
        .iter()
        .find(|t| t["task_type"] == "resize")
        .expect("resize")
        .clone();
    assert_eq!(
        (resize["ready"].as_u64(), resize["delayed"].as_u64()),
        (Some(3), Some(1))
    );
    assert_eq!(resize["no_worker"], true, "{resize}");
    assert_eq!(resize["workers"], 0);
    let echo = queues["task_types"]
        .as_array()
        .expect("task types")
        .iter()
        .find(|t| t["task_type"] == "echo")
        .expect("echo: a worker runs it")
        .clone();
    assert_eq!(
        (echo["workers"].as_u64(), echo["free_slots"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(echo["no_worker"], false);
}

#[test]
fn wrong_methods_get_405_with_allow_and_the_spec_says_how_auth_is_configured() {
    let cluster = Cluster::start(0, 1);
    let http = cluster.http();
    let put = http.send("PUT", "/api/jobs", Some(b"{}"));
    assert_eq!((put.status, code(&put)), (405, "method_not_allowed".into()));
    assert_eq!(put.header("allow"), Some("GET, POST"));
    let patch = http.send("PATCH", "/api/jobs/0193abcd", Some(b"{}"));
    assert_eq!(patch.header("allow"), Some("GET, DELETE"));
    let post_queues = http.post("/api/queues", &json!({}));
    assert_eq!(post_queues.status, 405, "{post_queues:?}");
    let unknown = http.get("/api/nothing");
    assert_eq!(unknown.status, 404, "{unknown:?}");

    let served = http.get("/api/openapi.json").json();
    assert!(served.get("security").is_none(), "no token: no security");
    let text = served.to_string();
    assert!(
        !text.contains("\"401\""),
        "no token: no 401 response documented"
    );
}
