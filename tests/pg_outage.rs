//! PostgreSQL stopped for 5 s under a running coordinator: a submission
//! then is answered not durable (never accepted before its commit),
//! `/readyz` says why, nothing acknowledged is lost, a resubmission with
//! its key once the database is back makes one job, and work resumes.

mod common;

use common::ha_processes::{http_body, CoordinatorProcess};
use std::time::{Duration, Instant};
use taskyard::client::{Client, ClientError};
use taskyard::protocol::{JobId, JobState, SubmitAnswer, SubmitRequest};
use taskyard::worker::WorkerConfig;
use taskyard::worker::WorkerHandle;

fn keyed_echo(key: &str) -> SubmitRequest {
    let mut request = common::jobs::request("echo", serde_json::json!({ "message": key }));
    request.idempotency_key = Some(key.to_string());
    request
}

fn accepted(answer: SubmitAnswer) -> JobId {
    match answer {
        SubmitAnswer::Accepted { job_id, .. } => job_id,
        SubmitAnswer::Rejected(r) => panic!("rejected: {r}"),
    }
}

#[test]
fn a_five_second_postgresql_outage_fails_held_answers_and_loses_nothing() {
    let Some(mut pg) = common::postgres::start() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    // The lease must outlast the outage: trust ends lease - lease/5 after
    // the last renewal's start, which was up to lease/3 before the stop.
    let coordinator = CoordinatorProcess::start(
        "outage",
        &pg.url(),
        dir.path(),
        &[
            "--leader-lease-millis",
            "20000",
            "--sweep-interval-millis",
            "50",
        ],
    );
    common::wait_until("the coordinator to lead", Duration::from_secs(20), || {
        coordinator.is_ready()
    });
    let workers: Vec<WorkerHandle> = (0..2)
        .map(|i| {
            WorkerHandle::spawn(
                WorkerConfig {
                    coordinator: coordinator.worker.to_string(),
                    worker_id: format!("outage-worker-{i}"),
                    capacity: 4,
                    heartbeat_interval_millis: 200,
                    reconnect_max_millis: 200,
                    ..WorkerConfig::default()
                },
                common::quiet_log(),
            )
        })
        .collect();
    let addr = coordinator.client.to_string();
    let mut client = Client::connect(&addr).expect("connect");
    let mut acknowledged: Vec<JobId> = (0..50)
        .map(|i| {
            accepted(
                client
                    .submit(keyed_echo(&format!("before-{i}")))
                    .expect("submit"),
            )
        })
        .collect();

    pg.stop().expect("stop PostgreSQL");
    let stopped = Instant::now();
    // Submitted during the outage: its commit fails, so it is answered as
    // not durable (never as accepted before a commit).
    let held = std::thread::spawn({
        let addr = addr.clone();
        move || {
            let mut client = Client::connect(&addr).expect("connect during the outage");
            let answer = client.submit(keyed_echo("during"));
            (answer, Instant::now())
        }
    });
    let mut reason = String::new();
    common::wait_until(
        "/readyz to say why",
        Duration::from_secs(5),
        || match http_body(coordinator.http, "/readyz") {
            Some((503, body)) => {
                reason = body;
                true
            }
            _ => false,
        },
    );
    println!("/readyz during the outage: {reason}");
    assert!(reason.contains("commit"), "{reason}");
    let (answer, answered_at) = held.join().expect("held submitter");
    match answer {
        Err(ClientError::NotDurable(reason)) => println!(
            "answered not durable {:?} into the outage: {reason}",
            answered_at - stopped
        ),
        other => panic!("expected NotDurable during the outage, got {other:?}"),
    }
    std::thread::sleep(Duration::from_secs(5).saturating_sub(stopped.elapsed()));
    pg.start_again().expect("start PostgreSQL again");
    // Sent again with its key once the database is back: one job.
    let mut again = common::jobs::connect_within(&addr, Duration::from_secs(20));
    let mut resubmitted = None;
    common::wait_until(
        "the resubmission to be accepted",
        Duration::from_secs(20),
        || {
            resubmitted = again.submit(keyed_echo("during")).ok();
            resubmitted.is_some()
        },
    );
    acknowledged.push(accepted(resubmitted.expect("accepted")));
    // A writer connection may still fail its first commit after the
    // outage: that answer is NotDurable, and the key makes a resend safe.
    acknowledged.extend((0..20).map(|i| {
        let mut answer = None;
        common::wait_until(
            "a submission after the outage to be accepted",
            Duration::from_secs(20),
            || {
                answer = client.submit(keyed_echo(&format!("after-{i}"))).ok();
                answer.is_some()
            },
        );
        accepted(answer.expect("accepted"))
    }));
    common::wait_until(
        "every acknowledged job to succeed",
        Duration::from_secs(30),
        || {
            acknowledged.iter().all(
                |id| matches!(client.status(*id), Ok(Some(v)) if v.state == JobState::Succeeded),
            )
        },
    );
    assert!(coordinator.is_ready(), "ready again");
    for w in workers {
        w.stop();
    }
}
