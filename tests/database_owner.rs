//! One owner per SQLite database, with real processes: a second
//! coordinator on a file a live one owns exits non-zero at once, naming
//! the holder, and changes nothing; the first keeps serving and starts no
//! attempt twice; once the first is killed with SIGKILL, a new coordinator
//! starts on the file.

mod common;

use common::jobs::{connect_within, sleep_job, status, submit, wait_for_job};
use common::{free_port, wait_until};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use taskyard::protocol::JobState;

fn coordinator(db: &Path, client: SocketAddr, worker: SocketAddr, log: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_taskyard-coordinator"))
        .arg("--db-path")
        .arg(db)
        .args(["--client-listen", &client.to_string()])
        .args(["--worker-listen", &worker.to_string()])
        .arg("--http-listen=127.0.0.1:0")
        .args(["--heartbeat-timeout-millis", "1000"])
        .args(["--sweep-interval-millis", "50"])
        .stdout(Stdio::null())
        .stderr(common::processes::append_log(log))
        .spawn()
        .expect("start coordinator")
}

fn worker(coordinator: SocketAddr) -> Child {
    Command::new(env!("CARGO_BIN_EXE_taskyard-worker"))
        .args(["--coordinator", &coordinator.to_string()])
        .args(["--worker-id", "owner-test", "--capacity", "2"])
        .args(["--heartbeat-interval-millis", "200"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start worker")
}

#[test]
fn a_second_coordinator_on_a_live_database_refuses_and_a_dead_owner_never_blocks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("owned.db");
    let (client_a, worker_a) = (free_port(), free_port());
    let mut first = coordinator(&db, client_a, worker_a, &dir.path().join("first.log"));
    let mut client = connect_within(&client_a.to_string(), Duration::from_secs(20));
    let mut work = worker(worker_a);
    let long = submit(&mut client, sleep_job(60_000));
    wait_for_job(&mut client, long, "running", Duration::from_secs(10), |v| {
        v.state == JobState::Running
    });
    // The first one records its addresses once they are bound.
    wait_until(
        "the lock file names the first coordinator's client address",
        Duration::from_secs(10),
        || {
            std::fs::read_to_string(dir.path().join("owned.db.lock"))
                .is_ok_and(|text| text.contains(&client_a.to_string()))
        },
    );
    let stored_before = std::fs::metadata(&db).expect("db").len();

    let second_log = dir.path().join("second.log");
    let mut second = coordinator(&db, free_port(), free_port(), &second_log);
    let mut status_of_second = None;
    wait_until("the second to exit at once", Duration::from_secs(5), || {
        status_of_second = second.try_wait().expect("try_wait");
        status_of_second.is_some()
    });
    let status_of_second = status_of_second.expect("exited");
    assert_eq!(status_of_second.code(), Some(2), "exit status");
    let said = std::fs::read_to_string(&second_log).expect("second log");
    assert_eq!(said.trim().lines().count(), 1, "one line: {said}");
    assert!(
        said.contains(&db.display().to_string()),
        "names the file: {said}"
    );
    assert!(
        said.contains(&format!("pid {}", first.id())),
        "names the pid: {said}"
    );
    assert!(
        said.contains(&client_a.to_string()),
        "names the address: {said}"
    );

    // The first keeps serving, and nothing started the long job again.
    let quick = submit(&mut client, sleep_job(1));
    wait_for_job(
        &mut client,
        quick,
        "succeeded",
        Duration::from_secs(10),
        |v| v.state == JobState::Succeeded,
    );
    let running = status(&mut client, long);
    assert_eq!((running.state, running.attempts), (JobState::Running, 1));
    assert!(std::fs::metadata(&db).expect("db").len() >= stored_before);

    // A lock left by a process killed with SIGKILL never blocks a restart.
    first.kill().expect("kill -9");
    first.wait().expect("reap");
    let client_c = free_port();
    let mut third = coordinator(&db, client_c, worker_a, &dir.path().join("third.log"));
    let mut client = connect_within(&client_c.to_string(), Duration::from_secs(20));
    let recovered = status(&mut client, long);
    assert_eq!(recovered.job_id, long);
    for child in [&mut third, &mut work] {
        let _ = child.kill();
        let _ = child.wait();
    }
}
