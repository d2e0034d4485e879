//! Peers given every coordinator of a group, a standby first: the CLI and a
//! worker process both reach the real leader on PostgreSQL (the standby
//! answers `NotLeader` naming it).

mod common;

use common::ha_processes::{wait_for_leader, CoordinatorProcess};
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
fn the_cli_and_a_worker_given_a_standby_first_reach_the_leader() {
    let Some(pg) = common::postgres::start() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let flags = ["--leader-lease-millis", "2000"];
    let nodes = [
        CoordinatorProcess::start("addr-a", &pg.url(), dir.path(), &flags),
        CoordinatorProcess::start("addr-b", &pg.url(), dir.path(), &flags),
    ];
    let leader = wait_for_leader(&[&nodes[0], &nodes[1]], Duration::from_secs(20));
    let (leader, standby) = (&nodes[leader], &nodes[1 - leader]);
    common::wait_until(
        "the standby to name the leader",
        Duration::from_secs(10),
        || {
            common::raw_client::named_leader(&standby.client.to_string())
                .flatten()
                .is_some()
        },
    );
    let mut worker = Command::new(env!("CARGO_BIN_EXE_taskyard-worker"))
        .args([
            "--coordinator",
            &format!("{},{}", standby.worker, leader.worker),
        ])
        .args(["--worker-id", "addr-worker", "--capacity", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start worker");
    let output = Command::new(env!("CARGO_BIN_EXE_taskyard"))
        .env(
            "TASKYARD_COORDINATOR",
            format!("{},{}", standby.client, leader.client),
        )
        .args([
            "submit",
            "echo",
            "--payload",
            r#"{"message":"via the standby"}"#,
        ])
        .args(["--wait", "--wait-timeout-secs", "30"])
        .output()
        .expect("run taskyard");
    let _ = worker.kill();
    let _ = worker.wait();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(
        stdout.contains("via the standby"),
        "the worker ran it: {stdout}"
    );
}
