//! No worker connection can stall or bloat the coordinator: registrations
//! beyond the limits are refused with an error frame naming the limit, and
//! a connection that never registers is closed at the handshake timeout.

mod common;

use common::raw_worker::RawWorker;
use common::Cluster;
use std::time::Duration;
use taskyard::protocol::CoordinatorToWorker;

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
