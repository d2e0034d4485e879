//! A job says where it came from, wherever it is viewed: a scheduled job's
//! `status` (text and `--json`) and its HTTP JSON name its schedule, slot
//! and idempotency key, its list row the schedule and slot; a plain keyed
//! job shows its key; and the OpenAPI document names every field the job
//! JSON has.

mod common;

use common::cli::taskyard;
use common::{wait_until, Cluster};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::Duration;
use taskyard::protocol::payloads::encode_json;
use taskyard::protocol::ScheduleSpec;
use taskyard::scheduler::schedule::slot_label;

fn stdout(output: &std::process::Output) -> String {
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    String::from_utf8_lossy(&output.stdout)
        .trim_end()
        .to_string()
}

fn status_json(addr: &str, id: &str) -> Value {
    serde_json::from_str(&stdout(&taskyard(addr, &["status", id, "--json"]))).expect("JSON")
}

/// The first job the schedule `name` fired for a slot (not a trigger).
fn first_slot_job(http: &common::http::Http, name: &str) -> String {
    let mut job = None;
    wait_until(
        "the every-second schedule to fire a slot",
        Duration::from_secs(15),
        || {
            let runs = http.get(&format!("/api/schedules/{name}")).json()["recent_runs"].clone();
            job = runs.as_array().and_then(|runs| {
                runs.iter()
                    .find(|r| r["slot"].is_i64())
                    .and_then(|r| Some((r["job_id"].as_str()?.to_string(), r["slot"].as_i64()?)))
            });
            job.is_some()
        },
    );
    job.map(|(id, _)| id).unwrap_or_default()
}

#[test]
fn a_scheduled_job_names_its_schedule_slot_and_key_in_cli_http_and_list() {
    let cluster = Cluster::start(1, 2);
    let addr = cluster.client_addr();
    let http = cluster.http();
    let spec = ScheduleSpec {
        every_ms: Some(1_000),
        ..ScheduleSpec::new("tick", "echo", encode_json(&json!({ "message": "hi" })))
    };
    cluster
        .client()
        .create_schedule(spec)
        .expect("answered")
        .expect("created");
    let id = first_slot_job(&http, "tick");

    let cli = status_json(&addr, &id);
    let slot = cli["schedule_slot"].as_i64().expect("a slot");
    let key = format!("schedule:tick:{}", slot_label(slot));
    assert_eq!(cli["schedule"], "tick", "{cli}");
    assert_eq!(cli["idempotency_key"], key.as_str(), "{cli}");
    let api = http.get(&format!("/api/jobs/{id}")).json();
    for field in ["schedule", "schedule_slot", "idempotency_key"] {
        assert_eq!(api[field], cli[field], "HTTP and CLI agree on {field}");
    }

    let text = stdout(&taskyard(&addr, &["status", &id]));
    let slot_shown = taskyard::clock::text::format_millis(slot);
    assert!(text.contains(&format!("key        {key}\n")), "{text}");
    assert!(
        text.contains(&format!("schedule   tick, slot {slot_shown}\n")),
        "{text}"
    );

    let listed: Value =
        serde_json::from_str(&stdout(&taskyard(&addr, &["list", "--json"]))).expect("JSON");
    let row = listed["jobs"]
        .as_array()
        .and_then(|jobs| jobs.iter().find(|j| j["job_id"] == id.as_str()))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (&row["schedule"], &row["schedule_slot"]),
        (&json!("tick"), &json!(slot)),
        "{listed}"
    );
}

#[test]
fn a_triggered_job_names_its_schedule_without_a_slot() {
    let cluster = Cluster::start(1, 1);
    let http = cluster.http();
    let spec = ScheduleSpec {
        cron: Some("0 3 * * *".into()),
        ..ScheduleSpec::new("nightly", "echo", encode_json(&json!({ "message": "hi" })))
    };
    cluster
        .client()
        .create_schedule(spec)
        .expect("answered")
        .expect("created");
    let triggered = http.post("/api/schedules/nightly/trigger", &json!({}));
    assert_eq!(triggered.status, 201, "{:?}", triggered.json());
    let id = triggered.json()["job_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let job = http.get(&format!("/api/jobs/{id}")).json();
    assert_eq!(job["schedule"], "nightly", "{job}");
    assert_eq!(job["schedule_slot"], Value::Null, "{job}");
    let key = job["idempotency_key"].as_str().unwrap_or_default();
    assert!(key.starts_with("schedule:nightly:trigger:"), "{job}");
    let text = stdout(&taskyard(&cluster.client_addr(), &["status", &id]));
    assert!(
        text.contains("schedule   nightly, triggered by hand\n"),
        "{text}"
    );
}

#[test]
fn a_plain_keyed_job_shows_its_key_and_no_schedule() {
    let cluster = Cluster::start(1, 1);
    let addr = cluster.client_addr();
    let submitted = taskyard(
        &addr,
        &[
            "submit",
            "echo",
            "--payload",
            r#"{"message":"hi"}"#,
            "--idempotency-key",
            "order-42",
            "--wait",
        ],
    );
    let id = stdout(&submitted)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    let cli = status_json(&addr, &id);
    assert_eq!(cli["idempotency_key"], "order-42", "{cli}");
    assert_eq!(
        (&cli["schedule"], &cli["schedule_slot"]),
        (&Value::Null, &Value::Null)
    );
    let text = stdout(&taskyard(&addr, &["status", &id]));
    assert!(text.contains("key        order-42\n"), "{text}");
    assert!(!text.contains("schedule"), "{text}");
    let api = cluster.http().get(&format!("/api/jobs/{id}")).json();
    assert_eq!(api["idempotency_key"], "order-42", "{api}");
}

fn keys(value: &Value) -> BTreeSet<String> {
    value
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default()
}

fn schema_fields(openapi: &Value, schema: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let schema = &openapi["components"]["schemas"][schema];
    let required = schema["required"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter_map(|k| Some(k.as_str()?.to_string()))
                .collect()
        })
        .unwrap_or_default();
    (required, keys(&schema["properties"]))
}

/// Every field a job and a list row carry is required and described in
/// the OpenAPI document, and it names no field they lack.
#[test]
fn the_openapi_job_schemas_name_exactly_the_fields_served() {
    let cluster = Cluster::start(1, 1);
    let http = cluster.http();
    let id = http.submit(
        &json!({ "task_type": "echo", "payload": { "message": "hi" }, "idempotency_key": "k-1" }),
    );
    let document = taskyard::http::openapi::document(true)
        .to_json()
        .expect("JSON");
    let openapi: Value = serde_json::from_str(&document).expect("valid JSON");
    let job = keys(&http.get(&format!("/api/jobs/{id}")).json());
    let row = keys(&http.get("/api/jobs").json()["jobs"][0]);
    assert_eq!(schema_fields(&openapi, "Job"), (job.clone(), job));
    assert_eq!(schema_fields(&openapi, "JobSummary"), (row.clone(), row));
}
