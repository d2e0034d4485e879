//! Schedules through the real `taskyard` binary and a running coordinator:
//! the README's walkthrough (create, list, show, trigger, pause, resume,
//! delete), bad definitions refused with the field named (exit 3, nothing
//! stored), schedules kept across a restart, and `[[schedule]]` reconciled
//! at start-up (one removed from the config is paused, not deleted).

mod common;

use common::cli::taskyard;
use common::*;
use serde_json::Value;
use std::time::Duration;
use taskyard::config::schedule::DeclaredSchedule;

fn json_of(output: &std::process::Output) -> Value {
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    serde_json::from_slice(&output.stdout).expect("JSON on stdout")
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

const NIGHTLY: &[&str] = &[
    "schedule",
    "create",
    "nightly",
    "--cron",
    "0 3 * * *",
    "--tz",
    "Europe/Berlin",
    "echo",
    "--payload",
    r#"{"message":"hi"}"#,
];

#[test]
fn the_walkthrough_creates_lists_triggers_pauses_and_deletes() {
    let cluster = Cluster::start(1, 2);
    let addr = cluster.client_addr();
    let created = taskyard(&addr, NIGHTLY);
    assert_eq!(created.status.code(), Some(0), "{created:?}");
    let text = String::from_utf8_lossy(&created.stdout);
    assert!(text.contains("0 3 * * * (Europe/Berlin)"), "{text}");

    let listed = taskyard(&addr, &["schedule", "list"]);
    let table = String::from_utf8_lossy(&listed.stdout);
    assert!(
        table.contains("nightly") && table.contains("active"),
        "{table}"
    );

    let shown = json_of(&taskyard(&addr, &["--json", "schedule", "show", "nightly"]));
    let next = shown["next_fires"].as_array().expect("next fires");
    assert_eq!(next.len(), 5);
    for pair in next.windows(2) {
        let gap = pair[1].as_i64().expect("ms") - pair[0].as_i64().expect("ms");
        assert!(
            (23..=25).contains(&(gap / 3_600_000)),
            "about a day apart: {gap}"
        );
    }
    assert_eq!(shown["spec"]["payload"]["message"], "hi");

    let triggered = json_of(&taskyard(
        &addr,
        &["--json", "schedule", "trigger", "nightly"],
    ));
    let job_id = triggered["job_id"].as_str().expect("job id").to_string();
    wait_until(
        "the triggered job succeeds",
        Duration::from_secs(10),
        || {
            let shown = json_of(&taskyard(&addr, &["--json", "schedule", "show", "nightly"]));
            shown["recent_runs"][0]["state"] == "SUCCEEDED"
                && shown["recent_runs"][0]["job_id"] == job_id.as_str()
        },
    );
    let sql = format!("SELECT idempotency_key FROM jobs WHERE id = '{job_id}'");
    let keys: Vec<String> = db::rows(&cluster.db_path(), &sql, |r| r.get(0));
    assert_eq!(keys.len(), 1, "the job is stored");
    assert!(keys[0].starts_with("schedule:nightly:trigger:"), "{keys:?}");

    let paused = json_of(&taskyard(
        &addr,
        &["--json", "schedule", "pause", "nightly"],
    ));
    assert_eq!(paused["spec"]["paused"], true);
    assert_eq!(paused["next_fires"].as_array().map(Vec::len), Some(0));
    let resumed = json_of(&taskyard(
        &addr,
        &["--json", "schedule", "resume", "nightly"],
    ));
    assert_eq!(resumed["next_fires"].as_array().map(Vec::len), Some(5));

    let deleted = taskyard(&addr, &["schedule", "delete", "nightly"]);
    assert_eq!(deleted.status.code(), Some(0), "{deleted:?}");
    let gone = taskyard(&addr, &["schedule", "show", "nightly"]);
    assert_eq!(gone.status.code(), Some(5), "{gone:?}");
    assert!(stderr(&gone).contains("does not exist"), "{gone:?}");
}

#[test]
fn bad_definitions_are_refused_naming_the_field_and_nothing_is_stored() {
    let cluster = Cluster::start(0, 1);
    let addr = cluster.client_addr();
    let payload = r#"{"message":"hi"}"#;
    let cases: [(&[&str], &str); 4] = [
        (
            &["--cron", "0 25 * * *", "echo", "--payload", payload],
            "cron:",
        ),
        (
            &[
                "--cron",
                "0 3 * * *",
                "--tz",
                "Mars/Base",
                "echo",
                "--payload",
                payload,
            ],
            "tz:",
        ),
        (&["--every", "0s", "echo", "--payload", payload], "every:"),
        (
            &["--every", "30s", "echo", "--payload", r#"{"nope":1}"#],
            "payload:",
        ),
    ];
    for (args, field) in cases {
        let mut all = vec!["schedule", "create", "bad"];
        all.extend_from_slice(args);
        let refused = taskyard(&addr, &all);
        assert_eq!(refused.status.code(), Some(3), "{args:?}: {refused:?}");
        let line = stderr(&refused);
        assert!(line.contains(field), "{args:?} names {field}: {line}");
    }
    let listed = json_of(&taskyard(&addr, &["--json", "schedule", "list"]));
    assert_eq!(listed, Value::Array(Vec::new()), "nothing stored");
    let twice = taskyard(&addr, NIGHTLY);
    assert_eq!(twice.status.code(), Some(0));
    let again = taskyard(&addr, NIGHTLY);
    assert_eq!(again.status.code(), Some(3), "a name is unique: {again:?}");
}

fn declared(text: &str) -> DeclaredSchedule {
    text.parse().expect("a schedule table")
}

#[test]
fn schedules_survive_a_restart_and_one_dropped_from_the_config_is_paused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = coordinator_config(dir.path());
    config.schedule = vec![
        declared(r#"{name = "kept", every = "1h", task-type = "echo", payload = {message = "k"}}"#),
        declared(
            r#"{name = "dropped", cron = "0 4 * * *", task-type = "echo", payload = {message = "d"}}"#,
        ),
    ];
    let first = start_coordinator(config.clone());
    let addr = first.client_addr.to_string();
    assert_eq!(taskyard(&addr, NIGHTLY).status.code(), Some(0));
    first.stop();

    config.schedule.truncate(1);
    let second = start_coordinator(config);
    let addr = second.client_addr.to_string();
    let listed = json_of(&taskyard(&addr, &["--json", "schedule", "list"]));
    let by_name = |name: &str| {
        listed
            .as_array()
            .and_then(|all| all.iter().find(|v| v["spec"]["name"] == name).cloned())
            .unwrap_or_else(|| panic!("{name} listed: {listed}"))
    };
    assert_eq!(by_name("kept")["spec"]["paused"], false);
    assert_eq!(
        by_name("dropped")["spec"]["paused"],
        true,
        "paused, not deleted"
    );
    assert_eq!(
        by_name("nightly")["spec"]["paused"],
        false,
        "made by the CLI: untouched"
    );
    second.stop();
}

/// Fired and skipped counts survive a restart: an every-second schedule
/// whose first job never runs (no worker) skips the slots after it
/// (overlap `skip`); after a restart `schedule show` counts on from what
/// was stored instead of from 0.
#[test]
fn fired_and_skipped_counts_survive_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = coordinator_config(dir.path());
    config.sweep_interval_millis = 50;
    config.schedule = vec![declared(
        r#"{name = "tick", every = "1s", task-type = "echo", payload = {message = "t"}, overlap = "skip"}"#,
    )];
    let first = start_coordinator(config.clone());
    let addr = first.client_addr.to_string();
    let show = |addr: &str| json_of(&taskyard(addr, &["--json", "schedule", "show", "tick"]));
    let mut before = Value::Null;
    wait_until("two slots skipped", Duration::from_secs(20), || {
        before = show(&addr);
        before["skipped"].as_u64().unwrap_or(0) >= 2
    });
    first.stop();
    let (fired, skipped) = (
        before["fired"].as_u64().expect("fired"),
        before["skipped"].as_u64().expect("skipped"),
    );
    assert_eq!(fired, 1, "the first slot's job never ran: {before}");

    let second = start_coordinator(config);
    let after = show(&second.client_addr.to_string());
    assert!(
        after["fired"].as_u64() >= Some(fired) && after["skipped"].as_u64() >= Some(skipped),
        "before the restart {before}, after {after}"
    );
    second.stop();
}
