//! Graceful drain end to end: a draining worker finishes what it runs,
//! takes nothing new and exits; one past its drain timeout abandons its
//! task, which the coordinator retries elsewhere. Also the binary: SIGTERM
//! drains it and it exits 0; a bad `exec-allow` exits 2.

mod common;

use common::jobs::*;
use common::*;
use serde_json::json;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;
use taskyard::protocol::*;
use taskyard::worker::WorkerConfig;
use taskyard::worker::{TaskError, Worker, WorkerHandle};
use tokio::sync::Semaphore;

const WITHIN: Duration = Duration::from_secs(10);

/// A worker whose `work` task waits for a permit from `gate`, then succeeds
/// with the worker's name.
fn gated_worker(
    cluster: &Cluster,
    id: &str,
    gate: &Arc<Semaphore>,
    configure: impl FnOnce(&mut WorkerConfig),
) -> WorkerHandle {
    let mut config = worker_config(cluster.coordinator().worker_addr, id, 2);
    configure(&mut config);
    let (gate, name) = (gate.clone(), id.to_string());
    Worker::builder(config)
        .logger(quiet_log())
        .task("work", move |ctx, _payload| {
            let (gate, name) = (gate.clone(), name.clone());
            async move {
                tokio::select! {
                    permit = gate.acquire() => {
                        permit.map_err(|_| TaskError::retryable("gate closed"))?.forget();
                        Ok(name.into_bytes())
                    }
                    _ = ctx.cancel.cancelled() => Err(TaskError::retryable("cancelled")),
                }
            }
        })
        .spawn()
        .expect("worker starts")
}

fn worker_view(client: &mut taskyard::client::Client, id: &str) -> Option<WorkerView> {
    let workers = client.workers().expect("workers");
    workers.into_iter().find(|w| w.worker_id.0 == id)
}

fn running_on(client: &mut taskyard::client::Client, job: JobId, worker: &str) {
    wait_for_job(client, job, &format!("running on {worker}"), WITHIN, |v| {
        v.state == JobState::Running && v.worker_id.as_ref().map(|w| w.0.as_str()) == Some(worker)
    });
}

#[test]
fn a_draining_worker_finishes_its_task_takes_no_new_one_and_exits() {
    let cluster = Cluster::start_configured(|_| {});
    let mut client = cluster.client();
    let gate = Arc::new(Semaphore::new(0));
    let worker = gated_worker(&cluster, "draining", &gate, |_| {});
    cluster.wait_for_workers(1);
    let first = submit(&mut client, request("work", json!({})));
    running_on(&mut client, first, "draining");

    let drained = std::thread::spawn(move || worker.drain());
    wait_until("the worker is listed as draining", WITHIN, || {
        worker_view(&mut client, "draining").is_some_and(|w| w.draining)
    });
    let second = submit(&mut client, request("work", json!({})));
    assert_eq!(status(&mut client, second).state, JobState::Queued);

    gate.add_permits(1);
    drained.join().expect("drain returns");
    let view = status(&mut client, first);
    assert_eq!(view.state, JobState::Succeeded, "{view:?}");
    assert_eq!(result_text(&view), "draining");
    wait_until("the drained worker disconnected", WITHIN, || {
        worker_view(&mut client, "draining").is_none()
    });
    let waiting = status(&mut client, second);
    assert_eq!(waiting.state, JobState::Queued);
    assert!(waiting.history.is_empty(), "never assigned: {waiting:?}");

    let _other = gated_worker(&cluster, "other", &gate, |_| {});
    gate.add_permits(1);
    let view = wait_for_job(&mut client, second, "state Succeeded", WITHIN, |v| {
        v.state == JobState::Succeeded
    });
    assert_eq!((result_text(&view).as_str(), view.attempts), ("other", 1));
}

#[test]
fn a_task_still_running_at_the_drain_timeout_is_retried_on_another_worker() {
    let cluster = Cluster::start_configured(|c| c.retry_base_millis = 20);
    let mut client = cluster.client();
    let never = Arc::new(Semaphore::new(0));
    let slow = gated_worker(&cluster, "slow", &never, |c| c.drain_timeout_millis = 200);
    cluster.wait_for_workers(1);
    let job = submit(&mut client, request("work", json!({})));
    running_on(&mut client, job, "slow");
    let open = Arc::new(Semaphore::new(Semaphore::MAX_PERMITS));
    let _other = gated_worker(&cluster, "other", &open, |_| {});
    cluster.wait_for_workers(2);

    slow.drain();
    let view = wait_for_job(&mut client, job, "state Succeeded", WITHIN, |v| {
        v.state.is_terminal()
    });
    assert_eq!(
        (view.state, view.attempts),
        (JobState::Succeeded, 2),
        "{view:?}"
    );
    assert_eq!(result_text(&view), "other");
    assert!(
        matches!(
            view.history[0].outcome,
            Some(AttemptOutcome::WorkerLost { .. })
        ),
        "{:?}",
        view.history[0]
    );
}

#[test]
fn the_worker_binary_drains_on_sigterm_and_exits_zero() {
    let cluster = Cluster::start_configured(|_| {});
    let mut client = cluster.client();
    let mut child = Command::new(env!("CARGO_BIN_EXE_taskyard-worker"))
        .args([
            "--coordinator",
            &cluster.coordinator().worker_addr.to_string(),
        ])
        .args([
            "--worker-id",
            "binary",
            "--capacity",
            "1",
            "--log-level",
            "error",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start taskyard-worker");
    cluster.wait_for_workers(1);
    let job = submit(&mut client, sleep_job(300));
    running_on(&mut client, job, "binary");
    // SAFETY: kill with a pid we spawned and a valid signal.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let mut exit = None;
    wait_until("taskyard-worker exits", WITHIN, || {
        exit = child.try_wait().expect("wait");
        exit.is_some()
    });
    assert_eq!(exit.and_then(|s| s.code()), Some(0));
    assert_eq!(
        status(&mut client, job).state,
        JobState::Succeeded,
        "finished before exit"
    );
}

#[test]
fn the_worker_binary_refuses_an_exec_allow_name_that_does_not_resolve() {
    let output = Command::new(env!("CARGO_BIN_EXE_taskyard-worker"))
        .args(["--exec-allow", "sh,no-such-program-xyz"])
        .output()
        .expect("run taskyard-worker");
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("exec-allow") && stderr.contains("no-such-program-xyz"),
        "{stderr}"
    );
}
