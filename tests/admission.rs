//! Admission control over real TCP and through the real `taskyard` binary:
//! at most `max-active-jobs` non-terminal jobs, counted again after a restart.

mod common;

use common::*;
use serde_json::json;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use taskyard::config::CoordinatorConfig;
use taskyard::protocol::payloads::encode_json;
use taskyard::protocol::*;
use taskyard::worker::{TaskRegistry, WorkerHandle};
use tokio::sync::Semaphore;

const LIMIT_REACHED: &str = "max-active-jobs (10) reached";

fn limited_config(dir: &std::path::Path) -> CoordinatorConfig {
    CoordinatorConfig {
        max_active_jobs: 10,
        ..coordinator_config(dir)
    }
}

/// A worker whose `gate` tasks each finish only when the test adds a permit.
fn gate_worker(cluster: &Cluster, gate: &Arc<Semaphore>) -> WorkerHandle {
    let gate = Arc::clone(gate);
    let mut registry = TaskRegistry::empty();
    let handler = move |_, _| {
        let gate = Arc::clone(&gate);
        async move {
            gate.acquire().await.map(|p| p.forget()).ok();
            TaskOutcome::Succeeded(b"through".to_vec())
        }
    };
    registry.register("gate", handler).expect("valid task type");
    let config = worker_config(cluster.coordinator().worker_addr, "gatekeeper", 1);
    WorkerHandle::spawn_with_registry(config, registry, quiet_log())
}

fn gate_job() -> SubmitRequest {
    request("gate", json!({}))
}

fn request(task_type: &str, payload: serde_json::Value) -> SubmitRequest {
    SubmitRequest::new(task_type, encode_json(&payload))
}

fn rejection(answer: &SubmitAnswer) -> Option<&str> {
    match answer {
        SubmitAnswer::Accepted { .. } => None,
        SubmitAnswer::Rejected(r) => Some(&r.reason),
    }
}

/// `taskyard submit gate` against `addr`.
fn cli_submit(addr: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_taskyard"))
        .args(["--coordinator", addr, "submit", "gate", "--payload", "{}"])
        .env_remove("TASKYARD_COORDINATOR")
        .output()
        .expect("run taskyard")
}

#[test]
fn the_eleventh_active_job_is_refused_until_one_finishes_also_after_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut cluster = Cluster {
        coordinator: Some(start_coordinator(limited_config(dir.path()))),
        dir,
        workers: Vec::new(),
    };
    let gate = Arc::new(Semaphore::new(0));
    cluster.workers.push(gate_worker(&cluster, &gate));
    cluster.wait_for_workers(1);
    let mut client = cluster.client();
    for _ in 0..10 {
        let answer = client.submit(gate_job()).expect("submit");
        assert_eq!(rejection(&answer), None);
    }

    let refused = cli_submit(&cluster.client_addr());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(3), "{refused:?}");
    assert_eq!(
        stderr,
        format!("taskyard: submission rejected: {LIMIT_REACHED}\n")
    );
    assert!(refused.stdout.is_empty(), "{refused:?}");

    gate.add_permits(1);
    wait_until("one job finished", Duration::from_secs(10), || {
        client
            .list(Some(JobState::Succeeded), 10)
            .is_ok_and(|jobs| jobs.len() == 1)
    });
    let admitted = cli_submit(&cluster.client_addr());
    assert_eq!(admitted.status.code(), Some(0), "{admitted:?}");
    let answer = client.submit(gate_job()).expect("submit");
    assert_eq!(rejection(&answer), Some(LIMIT_REACHED));

    // Restart: the new coordinator counts the ten non-terminal stored jobs.
    cluster.stop();
    cluster.coordinator = Some(start_coordinator(limited_config(cluster.dir.path())));
    let mut client = cluster.client();
    let jobs = client.list(None, 100).expect("list");
    let active = jobs.iter().filter(|j| !j.state.is_terminal()).count();
    assert_eq!((jobs.len(), active), (11, 10));
    let answer = client.submit(gate_job()).expect("submit");
    assert_eq!(rejection(&answer), Some(LIMIT_REACHED));
}

#[test]
fn a_batch_is_admitted_job_by_job_and_answers_each_submission() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cluster = Cluster {
        coordinator: Some(start_coordinator(limited_config(dir.path()))),
        dir,
        workers: Vec::new(),
    };
    let echo = || request("echo", json!({ "message": "m" }));
    let mut batch: Vec<SubmitRequest> = (0..5).map(|_| echo()).collect();
    batch.push(request("sleep", json!({ "millis": "soon" })));
    batch.extend((0..6).map(|_| echo()));

    let answers = cluster.client().submit_batch(batch).expect("submit batch");
    let reasons: Vec<Option<&str>> = answers.iter().map(rejection).collect();
    assert_eq!(reasons[..5], [None; 5]);
    assert!(
        reasons[5].is_some_and(|r| r.starts_with("payload.millis")),
        "{reasons:?}"
    );
    assert_eq!(reasons[6..11], [None; 5], "the invalid one took no slot");
    assert_eq!(reasons[11], Some(LIMIT_REACHED));
    let stored = cluster.client().list(None, 100).expect("list");
    assert_eq!(stored.len(), 10);
}
