//! PostgreSQL stopped for 5 s under a running coordinator: answers are held
//! (never released before their commit), `/readyz` says why, nothing
//! acknowledged is lost, and work resumes once the database is back.

mod common;

use common::ha_processes::{http_body, CoordinatorProcess};
use std::time::{Duration, Instant};
use taskyard::client::Client;
use taskyard::config::WorkerConfig;
use taskyard::protocol::{JobId, JobState, SubmitAnswer, SubmitRequest};
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
fn a_five_second_postgresql_outage_holds_answers_and_loses_nothing() {
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
    // Submitted during the outage: held until its commit.
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
    std::thread::sleep(Duration::from_secs(5).saturating_sub(stopped.elapsed()));
    assert!(!held.is_finished(), "answered while PostgreSQL was down");
    pg.start_again().expect("start PostgreSQL again");
    let restarted = Instant::now();
    let (answer, answered_at) = held.join().expect("held submitter");
    let held_id = accepted(answer.expect("the held submission is answered after the outage"));
    assert!(
        answered_at >= restarted,
        "answered before PostgreSQL was back"
    );
    println!(
        "held answer released {:?} after PostgreSQL was back",
        answered_at - restarted
    );
    acknowledged.push(held_id);
    acknowledged.extend((0..20).map(|i| {
        accepted(
            client
                .submit(keyed_echo(&format!("after-{i}")))
                .expect("submit after"),
        )
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
