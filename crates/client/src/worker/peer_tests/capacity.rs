//! The worker against a coordinator that assigns more than the capacity it
//! registered: the extra assignment is refused, never queued; and a
//! worker with `prefetch`, which registers and holds that many more.

use super::*;

#[tokio::test(start_paused = true)]
async fn an_assignment_beyond_capacity_is_refused_with_a_failed_result() {
    let h = Harness::start("w-full", 1).await;
    let (mut peer, _) = h.accept_registered().await;
    let (_, _, busy) = assign("sleep", json!({"millis": 60_000}));
    send(&mut peer, busy).await;
    let (job_id, lease, extra) = assign("echo", json!({"message": "too many"}));
    send(&mut peer, extra).await;
    let refusal = TaskOutcome::failed(
        "worker w-full is at its capacity (1 running): an assignment beyond capacity is refused",
    );
    assert_eq!(
        next_non_heartbeat(&mut peer).await,
        result(job_id, lease, refusal),
        "answered at once, not after the sleep"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_prefetching_worker_registers_the_extra_slots_and_runs_them_in_turn() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let config = WorkerConfig {
        coordinator: listener.local_addr().expect("addr").to_string(),
        worker_id: "w-prefetch".into(),
        capacity: 1,
        prefetch: 1,
        heartbeat_interval_millis: HEARTBEAT.as_millis() as u64,
        ..WorkerConfig::default()
    };
    let registry = TaskRegistry::with_builtins();
    let h = Harness::start_config(listener, config, registry, TaskRuntime::current(), None);
    let (mut peer, register) = h.accept_registered().await;
    let WorkerMessage::Register { capacity, .. } = register else {
        panic!("expected Register, got {register:?}");
    };
    assert_eq!(capacity, 2, "capacity 1 plus prefetch 1");
    let (sleeping, sleep_lease, sleep) = assign("sleep", json!({"millis": 5_000}));
    send(&mut peer, sleep).await;
    let (waiting, wait_lease, echo) = assign("echo", json!({"message": "waits"}));
    send(&mut peer, echo).await;
    let (job_id, lease, extra) = assign("echo", json!({"message": "too many"}));
    send(&mut peer, extra).await;
    let refusal = TaskOutcome::failed(
        "worker w-prefetch is at its capacity (2 running): an assignment beyond capacity is refused",
    );
    assert_eq!(
        next_non_heartbeat(&mut peer).await,
        result(job_id, lease, refusal),
        "the third is refused at once; the second waits for the slot"
    );
    let first = next_non_heartbeat(&mut peer).await;
    assert!(
        matches!(&first, Some(WorkerMessage::TaskResult { job_id, lease, .. }) if *job_id == sleeping && *lease == sleep_lease),
        "the running job ends first: {first:?}"
    );
    let second = next_non_heartbeat(&mut peer).await;
    assert!(
        matches!(&second, Some(WorkerMessage::TaskResult { job_id, lease, .. }) if *job_id == waiting && *lease == wait_lease),
        "then the prefetched one runs: {second:?}"
    );
    h.stop().await;
}
