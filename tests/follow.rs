//! Following the leader and keeping running work across a coordinator
//! restart, over real TCP: a worker that outlives its coordinator keeps its
//! task and the restarted coordinator applies its result (one execution);
//! the client library, the CLI and a worker given a list whose first
//! address is a standby reach the leader; a keyed submission in flight
//! when the connection dies is sent again, an unkeyed one is not.

mod common;

use common::jobs::{sleep_job, status, submit};
use common::standby::{leader_at, FakeStandby, HangUp};
use common::tasks::{recorded_result, recording_registry, Executions};
use common::*;
use std::process::Command;
use std::time::Duration;
use taskyard::client::{Client, ClientError, ClientOptions};
use taskyard::protocol::{JobState, SubmitAnswer, SubmitRequest};
use taskyard::worker::WorkerHandle;

const WITHIN: Duration = Duration::from_secs(20);

/// A coordinator config on fixed ports, so a restart listens where the
/// worker reconnects.
fn fixed_ports_config(dir: &std::path::Path) -> taskyard::config::CoordinatorConfig {
    taskyard::config::CoordinatorConfig {
        client_listen: free_port(),
        worker_listen: free_port(),
        heartbeat_timeout_millis: 2000,
        ..coordinator_config(dir)
    }
}

#[test]
fn a_worker_surviving_a_coordinator_restart_keeps_its_job_and_its_result_is_applied() {
    for crash in [true, false] {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = fixed_ports_config(dir.path());
        let coordinator = start_coordinator(config.clone());
        let executions = Executions::default();
        let worker = WorkerHandle::spawn_with_registry(
            worker_config(config.worker_listen, "survivor", 1),
            recording_registry("survivor", &executions),
            quiet_log(),
        );
        let mut client = Client::connect(&config.client_listen.to_string()).expect("connect");
        let job = submit(&mut client, sleep_job(1500));
        wait_until("the job to run", WITHIN, || {
            status(&mut client, job).state == JobState::Running
        });
        let lease = status(&mut client, job).lease.expect("a lease");
        if crash {
            coordinator.kill();
        } else {
            coordinator.stop();
        }
        let restarted = start_coordinator(config.clone());
        assert_eq!(restarted.recovery.awaiting_claim, 1, "crash {crash}");
        let mut client = Client::connect(&config.client_listen.to_string()).expect("reconnect");
        wait_until("the job to succeed", WITHIN, || {
            status(&mut client, job).state.is_terminal()
        });
        let view = status(&mut client, job);
        assert_eq!(view.state, JobState::Succeeded, "crash {crash}: {view:?}");
        assert_eq!(view.attempts, 1, "crash {crash}: not retried");
        assert_eq!(
            view.result,
            Some(recorded_result("survivor", lease)),
            "the surviving attempt's result is applied"
        );
        assert_eq!(executions.of(job).len(), 1, "crash {crash}: ran once");
        worker.stop();
        restarted.stop();
    }
}

#[test]
fn the_client_follows_not_leader_to_the_leader_and_skips_a_standby_that_knows_none() {
    let cluster = Cluster::start(1, 1);
    let leader = cluster.coordinator().client_addr;
    let pointing = FakeStandby::for_clients(Some(leader_at(Some(leader), None)));
    let mut client = Client::connect(&pointing.addr.to_string()).expect("redirected");
    assert_eq!(client.addr(), leader.to_string());
    submit(&mut client, sleep_job(1));

    let clueless = FakeStandby::for_clients(None);
    let list = format!("{},{leader}", clueless.addr);
    let client = Client::connect(&list).expect("the next address");
    assert_eq!(client.addr(), leader.to_string());
    assert_eq!(
        clueless.answered.load(std::sync::atomic::Ordering::SeqCst),
        1
    );

    let options = ClientOptions {
        failover_timeout: Duration::from_millis(300),
        ..ClientOptions::default()
    };
    let alone = Client::connect_with(&clueless.addr.to_string(), &options);
    assert!(
        matches!(alone, Err(ClientError::NotLeader { leader: None, .. })),
        "no leader within the failover timeout"
    );
    for bad in ["", "a:1,,b:2", "nohost"] {
        let err = Client::connect(bad).err().expect("refused");
        assert!(
            matches!(err, ClientError::BadAddress { .. }),
            "{bad}: {err}"
        );
    }
}

#[test]
fn the_cli_given_a_standby_first_reaches_the_leader_and_a_bad_list_exits_2() {
    let cluster = Cluster::start(1, 1);
    let leader = cluster.coordinator().client_addr;
    let standby = FakeStandby::for_clients(Some(leader_at(Some(leader), None)));
    let list = format!("{},{leader}", standby.addr);
    let output = Command::new(env!("CARGO_BIN_EXE_taskyard"))
        .args([
            "--coordinator",
            &list,
            "submit",
            "echo",
            "--payload",
            r#"{"message":"hi"}"#,
        ])
        .output()
        .expect("run taskyard");
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(standby.answered.load(std::sync::atomic::Ordering::SeqCst) >= 1);
    let output = Command::new(env!("CARGO_BIN_EXE_taskyard"))
        .env("TASKYARD_COORDINATOR", format!("{leader},"))
        .arg("workers")
        .output()
        .expect("run taskyard");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--coordinator (or TASKYARD_COORDINATOR): element 2 is empty"),
        "{stderr}"
    );
}

#[test]
fn a_worker_given_a_standby_first_registers_with_the_leader() {
    let mut cluster = Cluster::start(0, 1);
    let leader = cluster.coordinator().worker_addr;
    let standby = FakeStandby::for_workers(Some(leader_at(None, Some(leader))));
    let mut config = worker_config(leader, "follower", 1);
    config.coordinator = format!("{},{leader}", standby.addr);
    cluster.add_worker_with(config, taskyard::worker::TaskRegistry::with_builtins());
    cluster.wait_for_workers(1);
    assert!(standby.answered.load(std::sync::atomic::Ordering::SeqCst) >= 1);
    let mut client = cluster.client();
    let job = submit(&mut client, sleep_job(1));
    wait_until("the job to run on the follower", WITHIN, || {
        status(&mut client, job).state == JobState::Succeeded
    });
}

#[test]
fn a_keyed_submission_in_flight_when_the_connection_dies_is_sent_again_and_an_unkeyed_one_is_not() {
    let cluster = Cluster::start(1, 1);
    let leader = cluster.coordinator().client_addr;
    let keyed = SubmitRequest {
        idempotency_key: Some("once".into()),
        ..sleep_job(1)
    };
    let dying = HangUp::start();
    let mut client = Client::connect(&format!("{},{leader}", dying.addr)).expect("connect");
    let answer = client
        .submit(keyed.clone())
        .expect("sent again to the next coordinator");
    assert!(dying.swallowed() > 0, "the first copy was read and dropped");
    let SubmitAnswer::Accepted { job_id, .. } = answer else {
        panic!("{answer:?}")
    };
    assert_eq!(client.addr(), leader.to_string());
    let mut direct = cluster.client();
    assert_eq!(submit(&mut direct, keyed), job_id, "one job for the key");

    let dying = HangUp::start();
    let mut client = Client::connect(&format!("{},{leader}", dying.addr)).expect("connect");
    let lost = client.submit(sleep_job(1));
    assert!(
        matches!(&lost, Err(e) if e.is_connection_loss()),
        "an unkeyed submission is not repeated: {lost:?}"
    );
    assert!(dying.swallowed() > 0);
    submit(&mut client, sleep_job(1));
    assert_eq!(
        client.addr(),
        leader.to_string(),
        "the next call reconnects"
    );
}

#[test]
fn a_worker_config_with_an_empty_list_element_exits_2_naming_the_key_and_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("worker.toml");
    std::fs::write(&file, "coordinator = \"127.0.0.1:7401,,127.0.0.1:7402\"\n").expect("write");
    let output = Command::new(env!("CARGO_BIN_EXE_taskyard-worker"))
        .arg("--config")
        .arg(&file)
        .output()
        .expect("run taskyard-worker");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    for part in [
        "coordinator",
        "element 2 is empty",
        &file.display().to_string(),
    ] {
        assert!(stderr.contains(part), "{part:?} in {stderr}");
    }
}

/// Every heartbeat is answered, so a worker can tell a paused or
/// partitioned coordinator (no answers) from a live one.
#[test]
fn every_heartbeat_is_answered_with_a_heartbeat_ack() {
    let cluster = Cluster::start(0, 1);
    let mut raw = common::raw_worker::RawWorker::register(
        cluster.coordinator().worker_addr,
        "beating",
        1,
        &["sleep"],
    );
    for _ in 0..3 {
        raw.send(taskyard::protocol::WorkerMessage::Heartbeat);
        assert_eq!(
            raw.recv(Duration::from_secs(5)),
            Some(taskyard::protocol::CoordinatorToWorker::HeartbeatAck)
        );
    }
}
