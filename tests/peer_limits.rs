//! No worker connection can stall or bloat the coordinator: registrations
//! beyond the limits are refused with an error frame naming the limit, and
//! a connection that never registers is closed at the handshake timeout,
//! and one that does not read its assignments is dropped.

mod common;

use common::raw_worker::RawWorker;
use common::Cluster;
use serde_json::json;
use std::time::Duration;
use taskyard::client::WaitOutcome;
use taskyard::protocol::payloads::encode_json;
use taskyard::protocol::{CoordinatorToWorker, JobState, SubmitAnswer, SubmitRequest, TaskOutcome};

/// The error frame the coordinator closes with, then the end of the stream.
fn closed_with_error(worker: &mut RawWorker, answer: Option<CoordinatorToWorker>) -> String {
    let Some(CoordinatorToWorker::Error { message }) = answer else {
        panic!("expected an error frame, got {answer:?}");
    };
    assert_eq!(worker.recv(Duration::from_secs(5)), None, "then closed");
    message
}

#[test]
fn a_registration_beyond_the_limits_is_refused_naming_the_limit() {
    let cluster = Cluster::start_configured(|_| {});
    let addr = cluster.coordinator().worker_addr;

    let mut greedy = RawWorker::greet(addr, "greedy");
    let many: Vec<String> = (0..90_000).map(|i| format!("t{i}")).collect();
    let answer = greedy.send_register(1, many);
    let message = closed_with_error(&mut greedy, answer);
    assert!(
        message.contains("max-task-types-per-worker (256)"),
        "{message}"
    );

    let mut huge = RawWorker::greet(addr, "huge");
    let answer = huge.send_register(u32::MAX, vec!["echo".into()]);
    let message = closed_with_error(&mut huge, answer);
    assert!(message.contains("max-worker-capacity"), "{message}");

    let _fine = RawWorker::register(addr, "fine", 10_000, &["echo"]);
    let workers = cluster.client().workers().expect("workers listed");
    let names: Vec<&str> = workers.iter().map(|w| w.worker_id.0.as_str()).collect();
    assert_eq!(names, ["fine"], "the refused workers were never registered");
}

#[test]
fn a_worker_that_says_hello_but_never_registers_is_closed_at_the_handshake_timeout() {
    let cluster = Cluster::start_configured(|c| c.handshake_timeout_millis = 200);
    let mut silent = RawWorker::greet(cluster.coordinator().worker_addr, "silent");
    let answer = silent.recv(Duration::from_secs(10));
    let message = closed_with_error(&mut silent, answer);
    assert!(
        message.contains("Register") && message.contains("handshake-timeout-millis (200)"),
        "{message}"
    );
}

#[test]
fn a_huge_error_from_a_worker_is_stored_cut_with_a_marker() {
    let cluster = Cluster::start_configured(|_| {});
    let mut worker = RawWorker::register(cluster.coordinator().worker_addr, "w", 1, &["echo"]);
    let mut client = cluster.client();
    let req = SubmitRequest {
        max_attempts: Some(1),
        ..SubmitRequest::new("echo", encode_json(&json!({ "message": "x" })))
    };
    let SubmitAnswer::Accepted { job_id, .. } = client.submit(req).expect("answered") else {
        panic!("rejected");
    };
    let (job, lease) = worker.expect_assign(Duration::from_secs(5));
    assert_eq!(job, job_id);
    worker.send_result(job, lease, TaskOutcome::failed("e".repeat(70_000)));
    let wait = client.wait(job_id, Duration::from_secs(10), Duration::from_millis(10));
    let Ok(WaitOutcome::Finished(view)) = wait else {
        panic!("job did not finish: {wait:?}");
    };
    assert_eq!(view.state, JobState::Failed);
    let error = view.error.expect("an error");
    assert!(
        error.len() < 8192 + 80 && error.ends_with("more bytes cut: max-error-bytes is 8192]"),
        "{} bytes ending {:?}",
        error.len(),
        &error[error.len().saturating_sub(60)..]
    );
}

#[test]
fn a_worker_that_heartbeats_but_never_reads_is_dropped_and_its_backlog_freed() {
    const BUDGET: usize = 256 * 1024;
    let cluster = Cluster::start_configured(|c| {
        c.max_unwritten_worker_bytes = BUDGET;
        c.heartbeat_timeout_millis = 1000;
        c.handshake_timeout_millis = 500;
    });
    let unwritten = cluster.coordinator().worker_unwritten.clone();
    let mut deaf = RawWorker::register(cluster.coordinator().worker_addr, "deaf", 1000, &["big"]);
    let heartbeat = deaf.encoded(taskyard::protocol::WorkerMessage::Heartbeat);
    let mut socket = deaf.socket();
    socket
        .set_write_timeout(Some(Duration::from_millis(100)))
        .expect("timeout");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let beating = std::thread::spawn({
        let stop = stop.clone();
        move || {
            use std::io::Write;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                if socket.write_all(&heartbeat).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    });
    // 400 assignments of ~64 KB: far more than loopback buffers hold.
    let mut client = cluster.client();
    let payload = json!({ "filler": "x".repeat(64 * 1024) });
    let jobs: Vec<_> = (0..400)
        .map(|_| common::jobs::submit(&mut client, common::jobs::request("big", payload.clone())))
        .collect();
    common::wait_until(
        "the deaf worker to be dropped and its backlog freed",
        Duration::from_secs(20),
        || {
            unwritten.get() == 0
                && client
                    .workers()
                    .is_ok_and(|w| w.iter().all(|w| w.worker_id.0 != "deaf"))
        },
    );
    let view = common::jobs::status(&mut client, jobs[0]);
    assert_ne!(
        view.state,
        JobState::Running,
        "its attempts were taken back"
    );
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    beating.join().expect("heartbeat thread");
}
