//! The worker against an in-test coordinator, in real time: task handlers
//! that block their threads must not hold up the heartbeat.

use super::*;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Counts of `block` tasks that started and that returned.
#[derive(Clone, Default)]
struct Blocking {
    started: Arc<AtomicUsize>,
    finished: Arc<AtomicUsize>,
    release: Arc<AtomicBool>,
}

/// `block` keeps its thread busy (never reaching an `.await`) until
/// released, or for at most `BLOCK_LIMIT` so a broken worker fails the
/// test instead of hanging it.
fn blocking_registry(blocking: &Blocking) -> TaskRegistry {
    const BLOCK_LIMIT: Duration = Duration::from_secs(10);
    let mut registry = TaskRegistry::with_builtins();
    let blocking = blocking.clone();
    let register = registry.register("block", move |_ctx, _payload| {
        let blocking = blocking.clone();
        async move {
            blocking.started.fetch_add(1, Ordering::SeqCst);
            let start = std::time::Instant::now();
            while !blocking.release.load(Ordering::SeqCst) && start.elapsed() < BLOCK_LIMIT {
                std::hint::spin_loop();
            }
            blocking.finished.fetch_add(1, Ordering::SeqCst);
            TaskOutcome::Succeeded(Vec::new())
        }
    });
    register.expect("valid task type");
    registry
}

/// Real time, real threads: a blocked thread cannot be simulated on paused time.
#[tokio::test]
async fn heartbeats_continue_while_every_slot_blocks_its_thread() {
    // At least as many blocking tasks as cores: a runtime sized by core
    // count and shared with the heartbeat would have no thread left for it.
    let capacity = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
    let blocking = Blocking::default();
    let tasks = TaskRuntime::dedicated(capacity as u32).expect("task runtime");
    let registry = blocking_registry(&blocking);
    let beat = Duration::from_millis(50);
    let h = Harness::start_with("w-blocked", capacity as u32, beat, registry, tasks).await;
    let (mut peer, _) = h.accept_registered().await;
    let mut jobs = Vec::new();
    for _ in 0..capacity {
        let (job_id, lease, frame) = assign("block", json!({}));
        send(&mut peer, frame).await;
        jobs.push((job_id, lease));
    }
    timeout(Duration::from_secs(5), async {
        while blocking.started.load(Ordering::SeqCst) < capacity {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("every slot starts blocking");

    for n in 1..=3 {
        let frame = timeout(Duration::from_secs(2), next(&mut peer)).await;
        assert_eq!(frame, Ok(Some(WorkerMessage::Heartbeat)), "beat {n}");
    }
    assert_eq!(
        blocking.finished.load(Ordering::SeqCst),
        0,
        "beats came while all slots blocked"
    );

    blocking.release.store(true, Ordering::SeqCst);
    let mut done = Vec::new();
    while done.len() < capacity {
        let frame = timeout(Duration::from_secs(5), next_non_heartbeat(&mut peer)).await;
        match frame.expect("results after release") {
            Some(WorkerMessage::TaskResult { job_id, lease, .. }) => done.push((job_id, lease)),
            other => panic!("expected a result, got {other:?}"),
        }
    }
    done.sort();
    let mut expected = jobs;
    expected.sort();
    assert_eq!(done, expected);
    h.stop().await;
}
