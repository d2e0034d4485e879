//! Schedules over HTTP against a real coordinator and worker over a real
//! socket: one made with the client library is listed, shown, paused,
//! resumed, triggered (its job runs) and deleted; an unknown name is 404;
//! one is created and replaced over HTTP, and a bad field is refused by
//! name with nothing stored.

mod common;

use common::{wait_until, Cluster};
use serde_json::json;
use std::time::Duration;
use taskyard::protocol::payloads::encode_json;
use taskyard::protocol::ScheduleSpec;

#[test]
fn a_schedule_is_listed_shown_paused_resumed_triggered_and_deleted_over_http() {
    let cluster = Cluster::start(1, 2);
    let http = cluster.http();
    let spec = ScheduleSpec {
        cron: Some("0 3 * * *".into()),
        tz: Some("Europe/Berlin".into()),
        ..ScheduleSpec::new("nightly", "echo", encode_json(&json!({ "message": "hi" })))
    };
    cluster
        .client()
        .create_schedule(spec)
        .expect("answered")
        .expect("created");

    let page = http.get("/api/schedules").json();
    assert_eq!(page["more"], false);
    assert_eq!(page["schedules"][0]["spec"]["name"], "nightly");
    let shown = http.get("/api/schedules/nightly");
    assert_eq!(shown.status, 200);
    let view = shown.json();
    assert_eq!(view["spec"]["payload"], json!({ "message": "hi" }));
    assert_eq!(view["spec"]["tz"], "Europe/Berlin");
    assert_eq!(view["next_fires"].as_array().map(Vec::len), Some(5));

    let paused = http.post("/api/schedules/nightly/pause", &json!({}));
    assert_eq!(paused.status, 200);
    assert_eq!(paused.json()["spec"]["paused"], true);
    assert_eq!(paused.json()["next_fires"], json!([]));
    let resumed = http.post("/api/schedules/nightly/resume", &json!({}));
    assert_eq!(resumed.json()["spec"]["paused"], false);

    let triggered = http.post("/api/schedules/nightly/trigger", &json!({}));
    assert_eq!(triggered.status, 201, "{:?}", triggered.json());
    let job = triggered.json()["job_id"]
        .as_str()
        .expect("a job id")
        .to_string();
    wait_until(
        "the triggered job succeeds",
        Duration::from_secs(15),
        || http.get(&format!("/api/jobs/{job}")).json()["state"] == "SUCCEEDED",
    );
    let runs = http.get("/api/schedules/nightly").json()["recent_runs"].clone();
    assert_eq!(runs[0]["job_id"], job.as_str());
    assert_eq!(
        runs[0]["slot"],
        serde_json::Value::Null,
        "a trigger uses no slot"
    );

    let deleted = http.send("DELETE", "/api/schedules/nightly", None);
    assert_eq!(deleted.status, 200);
    assert_eq!(deleted.json()["deleted"], "nightly");
    let gone = http.get("/api/schedules/nightly");
    assert_eq!(gone.status, 404);
    assert_eq!(gone.json()["code"], "not_found");
    assert_eq!(
        http.post("/api/schedules/nightly/trigger", &json!({}))
            .status,
        404
    );
    assert_eq!(http.get("/api/schedules").json()["schedules"], json!([]));
    let wrong = http.send("PATCH", "/api/schedules/nightly", Some(b"{}"));
    assert_eq!(wrong.status, 405);
    assert_eq!(wrong.header("allow"), Some("GET, PUT, DELETE"));
}

#[test]
fn a_schedule_is_created_and_replaced_over_http_and_a_bad_field_is_named() {
    let cluster = Cluster::start(1, 2);
    let http = cluster.http();
    let body = json!({
        "name": "poll", "task_type": "echo", "every_ms": 30_000,
        "payload": { "message": "poll" }, "overlap": "buffer-one", "jitter_ms": 500
    });
    let created = http.post("/api/schedules", &body);
    assert_eq!(created.status, 201, "{:?}", created.json());
    assert_eq!(created.json()["spec"]["overlap"], "buffer-one");
    assert_eq!(
        created.json()["spec"]["payload"],
        json!({ "message": "poll" })
    );
    assert_eq!(
        http.post("/api/schedules", &body).status,
        409,
        "the name is taken"
    );

    let bad = http.post(
        "/api/schedules",
        &json!({ "name": "bad", "task_type": "echo", "cron": "61 * * * *" }),
    );
    assert_eq!(bad.status, 422);
    assert_eq!(bad.json()["code"], "invalid_schedule");
    let reason = bad.json()["error"].as_str().unwrap_or_default().to_string();
    assert!(reason.starts_with("cron"), "names the field: {reason}");
    assert_eq!(http.get("/api/schedules/bad").status, 404, "nothing stored");
    let typo = http.post(
        "/api/schedules",
        &json!({ "name": "t", "task_type": "echo", "every_ms": -5 }),
    );
    assert_eq!(typo.status, 400);
    assert!(
        typo.json()["error"]
            .as_str()
            .unwrap_or_default()
            .starts_with("every_ms"),
        "{:?}",
        typo.json()
    );

    let replaced = http.send(
        "PUT",
        "/api/schedules/poll",
        Some(
            json!({ "task_type": "echo", "cron": "*/5 * * * *", "tz": "America/New_York",
                    "payload": { "message": "five" } })
            .to_string()
            .as_bytes(),
        ),
    );
    assert_eq!(replaced.status, 200, "{:?}", replaced.json());
    let spec = &replaced.json()["spec"];
    assert_eq!(spec["cron"], "*/5 * * * *");
    assert_eq!(spec["every_ms"], serde_json::Value::Null);
    assert_eq!(spec["overlap"], "skip", "left out: the default again");
    let renamed = http.send(
        "PUT",
        "/api/schedules/poll",
        Some(br#"{"name": "other", "task_type": "echo", "every_ms": 60000}"#),
    );
    assert_eq!(renamed.status, 400);
    let unknown = http.send(
        "PUT",
        "/api/schedules/nope",
        Some(br#"{"task_type": "echo", "every_ms": 60000, "payload": {"message": "x"}}"#),
    );
    assert_eq!(unknown.status, 404, "{:?}", unknown.json());
}
