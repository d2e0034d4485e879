//! The Python package from the Rust side: a Python worker process
//! (`clients/python/tests/worker_main.py`) registers with an in-process
//! coordinator, runs jobs the Rust client submits, reports progress the
//! Rust client reads, and hears a cancel. Needs a Python with the package
//! installed: `$TASKYARD_PYTHON`, else `pyenv/bin/python` in cargo's
//! target directory (which `.ci/run` makes); without one the test names the package and skips
//! (fails under `TASKYARD_REQUIRE_EXTERNAL=1`).

mod common;

use common::processes::Killed;

use common::python::python;
use common::{wait_until, Cluster};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;
use taskyard::client::WaitOutcome;
use taskyard::protocol::{payloads, JobState, SubmitAnswer, SubmitRequest};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn submit(
    client: &mut taskyard::client::Client,
    task_type: &str,
    payload: serde_json::Value,
) -> taskyard::protocol::JobId {
    let req = SubmitRequest::new(task_type, payloads::encode_json(&payload));
    match client.submit(req).expect("submit") {
        SubmitAnswer::Accepted { job_id, .. } => job_id,
        SubmitAnswer::Rejected(r) => panic!("rejected: {r}"),
    }
}

#[test]
fn a_python_worker_runs_what_the_rust_client_submits() {
    let Some(python) = python() else { return };
    let mut cluster = Cluster::start(0, 1);
    let events = cluster.dir.path().join("events");
    let worker = Command::new(python)
        .arg(PathBuf::from(ROOT).join("clients/python/tests/worker_main.py"))
        .args([
            "--coordinator",
            &cluster.coordinator().worker_addr.to_string(),
        ])
        .args(["--worker-id", "py-from-rust", "--capacity", "4"])
        .arg("--events")
        .arg(&events)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the Python worker");
    let _worker = Killed(vec![worker]);
    cluster.wait_for_workers(1);
    let mut client = cluster.client();

    let ids: Vec<_> = (0..50)
        .map(|i| {
            submit(
                &mut client,
                "echo",
                serde_json::json!({ "message": format!("m{i}") }),
            )
        })
        .collect();
    for (i, id) in ids.iter().enumerate() {
        match client
            .wait(*id, Duration::from_secs(30), Duration::from_millis(5))
            .expect("wait")
        {
            WaitOutcome::Finished(job) => {
                assert_eq!(job.state, JobState::Succeeded, "{job:?}");
                assert_eq!(job.result.as_deref(), Some(format!("m{i}").as_bytes()));
                assert_eq!(job.worker_id.map(|w| w.0).as_deref(), Some("py-from-rust"));
            }
            other => panic!("{other:?}"),
        }
    }

    let slow = submit(
        &mut client,
        "py.slow",
        serde_json::json!({ "millis": 60_000 }),
    );
    wait_until(
        "the Python worker reports progress",
        Duration::from_secs(10),
        || {
            client
                .status(slow)
                .ok()
                .flatten()
                .and_then(|job| job.progress)
                .is_some_and(|p| p.message == "sleeping")
        },
    );
    client.cancel(slow).expect("cancel");
    let cancelled = format!("cancelled {slow}");
    wait_until(
        "the Python handler hears the cancel",
        Duration::from_secs(10),
        || std::fs::read_to_string(&events).is_ok_and(|e| e.lines().any(|l| l == cancelled)),
    );
    cluster.stop();
}
