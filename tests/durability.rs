//! Durability across restarts: schema migration, refusal of unusable
//! databases, idempotent submission, and a graceful stop leaving the same
//! database shape as a crash.

mod common;

use common::*;
use serde_json::json;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use taskyard::client::Client;
use taskyard::protocol::payloads::encode_json;
use taskyard::protocol::*;
use taskyard::worker::{TaskContext, TaskRegistry, WorkerHandle};

fn coordinator_binary(db: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_taskyard-coordinator"))
        .arg("--db-path")
        .arg(db)
        .args([
            "--client-listen",
            "127.0.0.1:0",
            "--worker-listen",
            "127.0.0.1:0",
            "--http-listen=127.0.0.1:0",
        ])
        .output()
        .expect("run taskyard-coordinator")
}

#[test]
fn corrupt_database_is_refused_naming_the_file_and_left_untouched() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("broken.db");
    let garbage: Vec<u8> = (0..16384u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&db, &garbage).expect("write garbage");
    let output = coordinator_binary(&db);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&db.display().to_string()), "{stderr}");
    assert!(
        stderr.contains("not a database"),
        "SQLite's words: {stderr}"
    );
    assert_eq!(std::fs::read(&db).expect("read"), garbage, "file unchanged");
}

#[test]
fn database_newer_than_the_binary_is_refused_untouched() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("future.db");
    let conn = db::open(&db);
    conn.pragma_update(None, "user_version", 1000)
        .expect("version");
    drop(conn);
    let before = std::fs::read(&db).expect("read");
    let output = coordinator_binary(&db);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("schema version 1000 is newer"), "{stderr}");
    assert_eq!(std::fs::read(&db).expect("read"), before);
}

/// Version 1 is the schema before priorities: no `priority`, no `sequence`.
fn write_version_1_database(db: &std::path::Path) -> Vec<JobId> {
    let conn = db::open(db);
    conn.execute_batch(
        "CREATE TABLE jobs (id TEXT PRIMARY KEY NOT NULL, task_type TEXT NOT NULL,
            payload BLOB NOT NULL, submitted_at INTEGER NOT NULL, state TEXT NOT NULL,
            attempts INTEGER NOT NULL, max_attempts INTEGER NOT NULL, timeout_ms INTEGER NOT NULL,
            lease TEXT, worker_id TEXT, assigned_at INTEGER, next_retry_at INTEGER, result BLOB,
            error TEXT, idempotency_key TEXT, updated_at INTEGER NOT NULL, finished_at INTEGER);
         PRAGMA user_version = 1;",
    )
    .expect("v1 schema");
    let ids: Vec<JobId> = (0..4).map(|_| JobId::mint()).collect();
    let payload = encode_json(&json!({ "message": "legacy" }));
    // Dated a minute ago, not near 1970: retention expiry would delete a
    // SUCCEEDED row finished decades ago as soon as its first look ran,
    // racing the listing below.
    let minute_ago = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
        - 60_000;
    // (id, submitted_at, state, attempts): inserted out of submission order.
    let rows = [
        (ids[2], 3000, "QUEUED", 0),
        (ids[0], 1000, "QUEUED", 0),
        (ids[3], 500, "SUCCEEDED", 1),
        (ids[1], 2000, "RUNNING", 1),
    ]
    .map(|(id, offset, state, attempts)| (id, minute_ago + offset, state, attempts));
    for (id, at, state, attempts) in rows {
        conn.execute(
            "INSERT INTO jobs (id, task_type, payload, submitted_at, state, attempts, max_attempts,
                timeout_ms, updated_at) VALUES (?1, 'echo', ?2, ?3, ?4, ?5, 3, 60000, ?3)",
            rusqlite::params![id.to_string(), payload, at, state, attempts],
        )
        .expect("insert");
    }
    ids
}

#[test]
fn version_1_database_migrates_to_normal_priority_keeping_creation_order() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = coordinator_config(dir.path());
    let ids = write_version_1_database(&config.db_path);
    let coordinator = start_coordinator(config.clone());
    assert_eq!(coordinator.recovery.loaded, 4);
    assert_eq!(
        coordinator.recovery.unclaimable, 1,
        "the RUNNING row, without a lease to claim it by"
    );
    let mut client = Client::connect(&coordinator.client_addr.to_string()).expect("connect");
    let fresh = client
        .submit(SubmitRequest::new(
            "echo",
            encode_json(&json!({ "message": "new" })),
        ))
        .expect("submit");
    let SubmitAnswer::Accepted { job_id: fresh, .. } = fresh else {
        panic!("rejected: {fresh:?}");
    };
    let listed = client.list(None, 10).expect("list");
    let order: Vec<JobId> = listed.iter().map(|v| v.job_id).collect();
    // Newest first: the new job, then legacy rows by creation time.
    assert_eq!(order, vec![fresh, ids[2], ids[1], ids[0], ids[3]]);
    let legacy = &listed[1..];
    assert!(legacy
        .iter()
        .all(|v| v.priority == Priority::Normal && v.sequence == 0));
    assert!(
        listed[0].sequence >= 1,
        "new submissions get a real sequence"
    );
    let states: Vec<JobState> = legacy.iter().map(|v| v.state).collect();
    use JobState::*;
    assert_eq!(states, vec![Queued, Queued, Queued, Succeeded]);
    coordinator.stop();

    assert_eq!(
        db::schema_version(&config.db_path),
        taskyard::store::schema::SCHEMA_VERSION
    );
}

fn submit_with_key(addr: &str, key: &str) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_taskyard"))
        .args(["--coordinator", addr, "submit", "echo"])
        .args([
            "--payload",
            r#"{"message":"once"}"#,
            "--idempotency-key",
            key,
        ])
        .output()
        .expect("run taskyard");
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

#[test]
fn idempotency_key_gives_one_job_before_and_after_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = coordinator_config(dir.path());
    let coordinator = start_coordinator(config.clone());
    let addr = coordinator.client_addr.to_string();
    let first = submit_with_key(&addr, "invoice-2026-001");
    assert_eq!(submit_with_key(&addr, "invoice-2026-001"), first);
    assert_ne!(submit_with_key(&addr, "invoice-2026-002"), first);
    coordinator.stop();

    let coordinator = start_coordinator(config);
    let addr = coordinator.client_addr.to_string();
    assert_eq!(submit_with_key(&addr, "invoice-2026-001"), first);
    let mut client = Client::connect(&addr).expect("connect");
    assert_eq!(client.list(None, 10).expect("list").len(), 2);
    coordinator.stop();
}

/// The rows of a database, without ids and timestamps that differ between
/// two runs: (sequence, state, attempts, has lease, worker).
fn shape(db: &std::path::Path) -> Vec<(i64, String, i64, bool, Option<String>)> {
    let sql = "SELECT sequence, state, attempts, lease IS NOT NULL, worker_id FROM jobs \
               ORDER BY sequence";
    db::rows(db, sql, |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
    })
}

/// Runs the same scenario and ends it with `end`: two sleeps running on a
/// worker of capacity 2, one queued behind them, one finished echo.
fn scenario_database(
    end: impl FnOnce(taskyard::process::CoordinatorHandle),
) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = coordinator_config(dir.path());
    let db = config.db_path.clone();
    let coordinator = start_coordinator(config);
    let worker = taskyard::worker::WorkerHandle::spawn(
        worker_config(coordinator.worker_addr, "shape-worker", 2),
        quiet_log(),
    );
    let mut client = Client::connect(&coordinator.client_addr.to_string()).expect("connect");
    let echo = SubmitRequest::new("echo", encode_json(&json!({ "message": "done" })));
    let SubmitAnswer::Accepted { job_id, .. } = client.submit(echo).expect("submit") else {
        panic!("rejected");
    };
    client
        .wait(job_id, Duration::from_secs(10), Duration::from_millis(5))
        .expect("echo finishes");
    for _ in 0..3 {
        let sleep = SubmitRequest::new("sleep", encode_json(&json!({ "millis": 60_000 })));
        client.submit(sleep).expect("submit");
    }
    wait_until("two sleeps running", Duration::from_secs(10), || {
        let running = client.list(Some(JobState::Running), 10).expect("list");
        running.len() == 2
    });
    end(coordinator);
    worker.stop();
    (dir, db)
}

#[test]
fn graceful_stop_leaves_the_same_database_shape_as_a_crash() {
    let (_graceful_dir, graceful) =
        scenario_database(|c| assert_eq!(c.stop(), taskyard::process::StopOutcome::Durable));
    let (_killed_dir, killed) = scenario_database(|c| c.kill());
    let shape_after_stop = shape(&graceful);
    assert_eq!(shape_after_stop, shape(&killed));
    let states: Vec<&str> = shape_after_stop.iter().map(|r| r.1.as_str()).collect();
    assert_eq!(
        states,
        vec!["SUCCEEDED", "RUNNING", "RUNNING", "QUEUED"],
        "RUNNING rows are not rewritten"
    );
}

/// A worker whose only task type, `record`, notes the order jobs arrive in.
fn recording_worker(addr: std::net::SocketAddr, order: &Arc<Mutex<Vec<JobId>>>) -> WorkerHandle {
    let order = Arc::clone(order);
    let mut registry = TaskRegistry::empty();
    registry
        .register("record", move |ctx: TaskContext, _payload: Vec<u8>| {
            let order = Arc::clone(&order);
            async move {
                order.lock().expect("order lock").push(ctx.job_id);
                TaskOutcome::Succeeded(Vec::new())
            }
        })
        .expect("valid task type");
    WorkerHandle::spawn_with_registry(worker_config(addr, "recorder", 1), registry, quiet_log())
}

fn submit_record(client: &mut Client, priority: Priority) -> JobId {
    let req = SubmitRequest {
        priority,
        ..SubmitRequest::new("record", encode_json(&json!({})))
    };
    match client.submit(req).expect("submit") {
        SubmitAnswer::Accepted { job_id, .. } => job_id,
        SubmitAnswer::Rejected(r) => panic!("rejected: {r}"),
    }
}

#[test]
fn scheduling_order_is_reproduced_after_a_restart_and_new_jobs_follow() {
    use Priority::*;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = taskyard::config::CoordinatorConfig {
        aging_step_millis: 3_600_000,
        ..coordinator_config(dir.path())
    };
    // (priority, id) in submission order, across the restart.
    let mut submitted: Vec<(Priority, JobId)> = Vec::new();
    let coordinator = start_coordinator(config.clone());
    let mut client = Client::connect(&coordinator.client_addr.to_string()).expect("connect");
    for p in [Low, High, Normal, Low, High, Normal, Normal, Low, High] {
        submitted.push((p, submit_record(&mut client, p)));
    }
    coordinator.stop();

    let coordinator = start_coordinator(config);
    let mut client = Client::connect(&coordinator.client_addr.to_string()).expect("connect");
    for p in [High, Low, Normal] {
        submitted.push((p, submit_record(&mut client, p)));
    }
    let order = Arc::new(Mutex::new(Vec::new()));
    let worker = recording_worker(coordinator.worker_addr, &order);
    wait_until("all jobs to run", Duration::from_secs(10), || {
        order.lock().expect("order lock").len() == submitted.len()
    });
    worker.stop();
    coordinator.stop();

    // Highest priority first, then submission order, new jobs after old.
    let mut expected = submitted.clone();
    expected.sort_by_key(|(p, _)| std::cmp::Reverse(*p));
    let expected: Vec<JobId> = expected.into_iter().map(|(_, id)| id).collect();
    assert_eq!(*order.lock().expect("order lock"), expected);
}
