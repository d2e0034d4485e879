//! The worker against a coordinator that assigns more than the capacity it
//! registered: the extra assignment is refused, never queued.

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
