//! A database that refuses writes is an outage, not a hang: held answers
//! are failed as not durable (nothing undurable is revealed), `/readyz`
//! and `/metrics` say why, commits are retried until one succeeds, and a
//! stop still ends within `shutdown-timeout-millis`. A commit the database
//! refuses for good (a row written behind the coordinator's back) ends the
//! process with exit 3, and a restart recovers from the database. The failure is real: another connection holds
//! SQLite's write lock, so every commit gets "database is locked". A
//! database that cannot be written at all is refused at start-up.

mod common;

use common::http::Http;
use common::*;
use rusqlite::Connection;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use taskyard::client::{Client, ClientError};
use taskyard::config::CoordinatorConfig;
use taskyard::protocol::{SubmitAnswer, SubmitRequest};

/// Takes SQLite's write lock on `db` until the connection is dropped.
fn lock_writes(db: &Path) -> Connection {
    let conn = common::db::open(db);
    conn.execute_batch("BEGIN EXCLUSIVE").expect("write lock");
    conn
}

/// The value of an unlabelled metric, if `/metrics` answered with it.
fn metric(http: &Http, name: &str) -> Option<f64> {
    let body = http.get("/metrics").body;
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn a_locked_database_fails_held_answers_makes_readyz_say_why_and_recovers_when_released() {
    let dir = tempfile::tempdir().expect("temp dir");
    let coordinator = start_coordinator(coordinator_config(dir.path()));
    let http = Http::new(coordinator.http_addr.expect("http on"));
    assert_eq!(http.get("/readyz").status, 200);
    let lock = lock_writes(&dir.path().join("taskyard.db"));

    let addr = coordinator.client_addr.to_string();
    let keyed = SubmitRequest {
        idempotency_key: Some("during-the-outage".into()),
        ..jobs::sleep_job(1)
    };
    let submitted = {
        let (addr, keyed) = (addr.clone(), keyed.clone());
        std::thread::spawn(move || {
            let mut client = Client::connect(&addr).expect("connect");
            client.submit(keyed)
        })
    };
    // Until the submit arrives /readyz may say ready; then SQLite waits up
    // to its busy timeout (5 s) for the lock before the commit fails, and
    // meanwhile /readyz times out (503).
    let mut reason = String::new();
    wait_until(
        "/readyz to report the outage",
        Duration::from_secs(30),
        || {
            let ready = http.get("/readyz");
            reason = ready.json()["error"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            ready.status == 503 && reason.contains("commits to the database are failing")
        },
    );
    assert!(reason.contains("database is locked"), "{reason}");
    assert_eq!(
        metric(&http, "taskyard_persistence_commits_failing"),
        Some(1.0)
    );
    let failures = metric(&http, "taskyard_persistence_commit_failures_total");
    assert!(failures.is_some_and(|n| n >= 1.0), "{failures:?}");
    // The failed commit answered the submit: its outcome is unknown.
    match submitted.join().expect("submit thread") {
        Err(ClientError::NotDurable(reason)) => {
            assert!(reason.contains("database is locked"), "{reason}")
        }
        other => panic!("expected NotDurable, got {other:?}"),
    }

    drop(lock);
    wait_until("ready again", Duration::from_secs(10), || {
        http.get("/readyz").status == 200
    });
    // The retried commit stored it: the same key finds that one job.
    let mut client = Client::connect(&addr).expect("connect");
    let again = client.submit(keyed).expect("answered");
    assert!(matches!(again, SubmitAnswer::Accepted { .. }), "{again:?}");
    assert_eq!(db::job_count(&dir.path().join("taskyard.db")), 1);
    assert_eq!(
        metric(&http, "taskyard_persistence_commits_failing"),
        Some(0.0)
    );
    assert_eq!(coordinator.stop(), taskyard::process::StopOutcome::Durable);
}

#[test]
fn sigterm_while_commits_fail_exits_1_within_the_shutdown_timeout_and_stores_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("taskyard.db");
    let log_path = dir.path().join("coordinator.log");
    let client_addr = free_port();
    let mut process = Command::new(env!("CARGO_BIN_EXE_taskyard-coordinator"))
        .arg("--db-path")
        .arg(&db)
        .args(["--client-listen", &client_addr.to_string()])
        .args(["--worker-listen", "127.0.0.1:0", "--http-listen", ""])
        .args(["--shutdown-timeout-millis", "1500"])
        .args(["--sqlite-preallocate-wal", "false"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).expect("log"))
        .spawn()
        .expect("start coordinator");
    let addr = client_addr.to_string();
    wait_until("the coordinator listens", Duration::from_secs(10), || {
        Client::connect(&addr).is_ok()
    });
    let lock = lock_writes(&db);
    let submitter = std::thread::spawn(move || {
        let mut client = Client::connect(&addr).expect("connect");
        client.submit(jobs::sleep_job(1))
    });
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    wait_until("the commit failed", Duration::from_secs(10), || {
        log().contains("commit failed")
    });

    let stopping = Instant::now();
    // SAFETY: a plain kill(2) of our own child process.
    unsafe { libc::kill(process.id() as i32, libc::SIGTERM) };
    let status = process.wait().expect("exit");
    let took = stopping.elapsed();
    assert_eq!(status.code(), Some(1), "{status:?} {}", log());
    assert!(took < Duration::from_secs(6), "stop took {took:?}");
    assert!(log().contains("not_durable_changes"), "{}", log());
    assert!(
        submitter.join().expect("thread").is_err(),
        "the submit was never answered"
    );

    drop(lock);
    assert_eq!(
        db::job_count(&db),
        0,
        "nothing of the refused commit is stored"
    );
}

/// The coordinator binary, run so that it cannot write `db` (an existing
/// database file it does not own): as an unprivileged user when the test
/// runs as root (root ignores file modes), else with the file made
/// read-only. Returns its exit code and stderr.
fn start_on_read_only_database(dir: &Path, db: &Path) -> (Option<i32>, String) {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let set_mode = |path: &Path, mode| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod")
    };
    // A copy beside the database, so the unprivileged user can run it
    // whatever the modes of the directories above the build.
    let binary = dir.join("taskyard-coordinator");
    std::fs::copy(env!("CARGO_BIN_EXE_taskyard-coordinator"), &binary).expect("copy binary");
    set_mode(&binary, 0o755);
    set_mode(dir, 0o777);
    set_mode(db, 0o444);
    let mut command = Command::new(&binary);
    command
        .arg("--db-path")
        .arg(db)
        .args([
            "--client-listen",
            "127.0.0.1:0",
            "--worker-listen",
            "127.0.0.1:0",
        ])
        .args(["--http-listen", "", "--sqlite-preallocate-wal", "false"]);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        command.uid(65534).gid(65534);
    }
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start coordinator");
    let mut status = None;
    wait_until("the coordinator to refuse", Duration::from_secs(10), || {
        status = child.try_wait().expect("wait");
        status.is_some()
    });
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
    }
    (status.and_then(|s| s.code()), stderr)
}

#[test]
fn a_database_that_cannot_be_written_is_refused_at_start_naming_the_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("taskyard.db");
    let config = CoordinatorConfig {
        sqlite_preallocate_wal: false,
        ..coordinator_config(dir.path())
    };
    assert_eq!(
        start_coordinator(config).stop(),
        taskyard::process::StopOutcome::Durable
    );
    let (code, stderr) = start_on_read_only_database(dir.path(), &db);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&db.display().to_string()) && stderr.contains("cannot be written"),
        "{stderr}"
    );
    assert!(stderr.contains("readonly"), "{stderr}");
}

/// Writes a finished job holding idempotency key `key` into `db` behind
/// the coordinator's back; returns its id.
fn write_behind_the_back(db: &Path, key: &str) -> String {
    let id = uuid::Uuid::now_v7().to_string();
    common::db::open(db)
        .execute(
            "INSERT INTO jobs (id, task_type, payload, submitted_at, state, attempts, \
             max_attempts, timeout_ms, idempotency_key, updated_at, finished_at, sequence) \
             VALUES (?1, 'echo', x'80', 1, 'SUCCEEDED', 1, 3, 1000, ?2, 1, 1, 999999)",
            rusqlite::params![id, key],
        )
        .expect("write behind the back");
    id
}

#[test]
fn a_commit_refused_for_good_fails_the_answer_says_why_exits_3_and_a_restart_recovers() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("taskyard.db");
    let log_path = dir.path().join("coordinator.log");
    let (client_addr, http_addr) = (free_port(), free_port());
    let start = || {
        Command::new(env!("CARGO_BIN_EXE_taskyard-coordinator"))
            .arg("--db-path")
            .arg(&db)
            .args(["--client-listen", &client_addr.to_string()])
            .args(["--worker-listen", "127.0.0.1:0"])
            .args(["--http-listen", &http_addr.to_string()])
            .args(["--sqlite-preallocate-wal", "false"])
            .stdout(Stdio::null())
            .stderr(common::processes::append_log(&log_path))
            .spawn()
            .expect("start coordinator")
    };
    let mut process = start();
    let addr = client_addr.to_string();
    let mut client = jobs::connect_within(&addr, Duration::from_secs(10));
    let theirs = write_behind_the_back(&db, "clash");

    // /readyz is watched from before the commit fails until the process ends.
    let http = Http::new(http_addr);
    let watcher = std::thread::spawn(move || {
        let started = Instant::now();
        let mut said = String::new();
        while started.elapsed() < Duration::from_secs(15) && said.is_empty() {
            let ready = std::panic::catch_unwind(|| http.get("/readyz"));
            if let Ok(ready) = ready {
                let error = ready.json()["error"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                if ready.status == 503 && error.contains("refused") {
                    said = error;
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        said
    });
    let clash = SubmitRequest {
        idempotency_key: Some("clash".into()),
        ..jobs::sleep_job(1)
    };
    let answered = Instant::now();
    match client.submit(clash.clone()) {
        Err(ClientError::NotDurable(reason)) => assert!(reason.contains("UNIQUE"), "{reason}"),
        other => panic!("expected NotDurable, got {other:?}"),
    }
    assert!(answered.elapsed() < Duration::from_secs(5));
    let mut status = None;
    wait_until("the coordinator exits", Duration::from_secs(10), || {
        status = process.try_wait().expect("wait");
        status.is_some()
    });
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    assert_eq!(status.and_then(|s| s.code()), Some(3), "{log}");
    assert!(log.contains("the database refused a commit"), "{log}");
    assert!(log.contains("UNIQUE constraint failed"), "{log}");
    let said = watcher.join().expect("watcher");
    assert!(
        said.contains("UNIQUE constraint failed"),
        "/readyz said: {said:?}"
    );

    // A restart reads what the database holds: the key names their job.
    let mut process = start();
    let mut client = jobs::connect_within(&addr, Duration::from_secs(10));
    match client.submit(clash).expect("answered") {
        SubmitAnswer::Accepted { job_id, .. } => assert_eq!(job_id.to_string(), theirs),
        other => panic!("{other:?}"),
    }
    let _ = process.kill();
    let _ = process.wait();
}
