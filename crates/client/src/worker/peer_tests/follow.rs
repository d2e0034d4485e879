//! Following the leader: epochs on assignments, claims refused, and a
//! standby's `NotLeader` pointing the worker to the leader.

use super::*;
use crate::worker::epoch::ReceivedFrame;
use taskyard_protocol::LeaderAddresses;

type Received = Arc<Mutex<Vec<ReceivedFrame>>>;

/// A harness whose worker records every frame it receives.
async fn observed(worker_id: &str, capacity: u32) -> (Harness, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let (received, observer) = recorder();
    let h = Harness::start_on(
        listener,
        &addr,
        worker_id,
        capacity,
        HEARTBEAT,
        TaskRegistry::with_builtins(),
        TaskRuntime::current(),
        Some(observer),
    );
    (h, received)
}

fn recorder() -> (Received, FrameObserver) {
    let received = Received::default();
    let sink = received.clone();
    let observer: FrameObserver = Arc::new(move |frame: &ReceivedFrame| {
        sink.lock().expect("frames").push(frame.clone());
    });
    (received, observer)
}

/// Completes Hello/Register, answering `Registered` of `epoch`.
async fn register_at(h: &Harness, epoch: u64) -> (Peer, WorkerMessage) {
    let mut peer = h.accept().await;
    expect_hello(&mut peer).await;
    send(&mut peer, CoordinatorToWorker::Hello(hello())).await;
    let register = next(&mut peer).await.expect("Register");
    let WorkerMessage::Register { worker_id, .. } = &register else {
        panic!("expected Register, got {register:?}");
    };
    let registered = CoordinatorToWorker::Registered {
        worker_id: worker_id.clone(),
        epoch,
    };
    send(&mut peer, registered).await;
    (peer, register)
}

fn at_epoch(frame: CoordinatorToWorker, new_epoch: u64) -> CoordinatorToWorker {
    match frame {
        CoordinatorToWorker::TaskAssign {
            job_id,
            lease,
            task_type,
            payload,
            timeout_ms,
            attempt,
            ..
        } => CoordinatorToWorker::TaskAssign {
            job_id,
            lease,
            task_type,
            payload,
            timeout_ms,
            epoch: new_epoch,
            attempt,
        },
        other => other,
    }
}

#[tokio::test(start_paused = true)]
async fn assignments_and_cancels_of_an_older_epoch_are_ignored_and_recorded() {
    let (h, received) = observed("w-epoch", 2).await;
    let (mut peer, _) = register_at(&h, 5).await;
    let (old_job, old_lease, old) = assign("echo", json!({"message": "deposed"}));
    send(&mut peer, at_epoch(old, 4)).await;
    let (sleep_job, sleep_lease, sleep) = assign("sleep", json!({"millis": 1_000}));
    send(&mut peer, at_epoch(sleep, 5)).await;
    let stale_cancel = CoordinatorToWorker::TaskCancel {
        job_id: sleep_job,
        lease: sleep_lease,
        epoch: 3,
    };
    send(&mut peer, stale_cancel).await;
    assert_eq!(
        next_non_heartbeat(&mut peer).await,
        result(sleep_job, sleep_lease, TaskOutcome::Succeeded(Vec::new())),
        "the epoch-5 sleep ran to its end: the epoch-3 cancel was ignored"
    );
    let frames = received.lock().expect("frames").clone();
    let acted: Vec<(bool, u64)> = frames
        .iter()
        .map(|f| (f.acted_on, f.newest_epoch))
        .collect();
    assert_eq!(acted, [(true, 5), (false, 5), (true, 5), (false, 5)]);
    assert!(matches!(
        frames[1].frame,
        CoordinatorToWorker::TaskAssign { job_id, lease, epoch: 4, .. }
            if job_id == old_job && lease == old_lease
    ));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_newest_epoch_outlives_the_connection_and_an_older_registration_is_left() {
    let (h, received) = observed("w-epochs", 1).await;
    let (peer, _) = register_at(&h, 7).await;
    drop(peer);
    let (deposed, _) = register_at(&h, 6).await;
    let (mut peer, _) = register_at(&h, 7).await;
    assert_eq!(
        next(&mut { deposed }).await,
        None,
        "the worker left the coordinator of epoch 6"
    );
    let (job_id, lease, frame) = assign("echo", json!({"message": "current"}));
    send(&mut peer, at_epoch(frame, 7)).await;
    let expected = result(job_id, lease, TaskOutcome::Succeeded(b"current".to_vec()));
    assert_eq!(next_non_heartbeat(&mut peer).await, expected);
    let registered: Vec<(u64, bool)> = received
        .lock()
        .expect("frames")
        .iter()
        .filter_map(|f| match f.frame {
            CoordinatorToWorker::Registered { epoch, .. } => Some((epoch, f.acted_on)),
            _ => None,
        })
        .collect();
    assert_eq!(registered, [(7, true), (6, false), (7, true)]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_refused_claim_is_cancelled_and_its_slot_freed() {
    let h = Harness::start("w-claim", 1).await;
    let (mut peer, _) = h.accept_registered().await;
    let (job_id, lease, frame) = assign("sleep", json!({"millis": 60_000}));
    send(&mut peer, frame).await;
    drop(peer);
    let (mut peer, register) = h.accept_registered().await;
    assert!(matches!(&register, WorkerMessage::Register { running, .. }
        if running == &[RunningAttempt { job_id, lease }]));
    let cancel = CoordinatorToWorker::TaskCancel {
        job_id,
        lease,
        epoch: 0,
    };
    send(&mut peer, cancel).await;
    let (echo_job, echo_lease, frame) = assign("echo", json!({"message": "next"}));
    send(&mut peer, frame).await;
    let start = Instant::now();
    let expected = result(
        echo_job,
        echo_lease,
        TaskOutcome::Succeeded(b"next".to_vec()),
    );
    assert_eq!(next_non_heartbeat(&mut peer).await, expected);
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "the slot was freed"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_standby_names_the_leader_and_the_worker_goes_there() {
    let standby = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let leader = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let leader_addr = leader.local_addr().expect("addr").to_string();
    let list = format!("{},{leader_addr}", standby.local_addr().expect("addr"));
    let h = Harness::start_on(
        leader,
        &list,
        "w-follow",
        1,
        HEARTBEAT,
        TaskRegistry::with_builtins(),
        TaskRuntime::current(),
        None,
    );
    let (stream, _) = timeout(PATIENCE, standby.accept())
        .await
        .expect("tries the first address")
        .expect("accept");
    let mut at_standby: Peer = Framed::new(stream, FrameCodec::new(1 << 20));
    expect_hello(&mut at_standby).await;
    let named = LeaderAddresses {
        node: "b".into(),
        epoch: 2,
        worker: Some(leader_addr),
        ..LeaderAddresses::default()
    };
    let not_leader = CoordinatorToWorker::NotLeader {
        leader: Some(named),
    };
    send(&mut at_standby, not_leader).await;
    let start = Instant::now();
    let (_peer, register) = h.accept_registered().await;
    assert!(matches!(register, WorkerMessage::Register { .. }));
    assert!(
        start.elapsed() < Duration::from_millis(100),
        "went to the named leader at once: {:?}",
        start.elapsed()
    );
    h.stop().await;
}
