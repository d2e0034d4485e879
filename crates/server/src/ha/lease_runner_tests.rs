use super::*;
use crate::ha::MemoryLease;
use std::sync::mpsc;
use taskyard_protocol::LeaderAddresses;

fn me(node: &str) -> NodeIdentity {
    NodeIdentity {
        node: node.into(),
        addresses: LeaderAddresses {
            client: Some(format!("{node}:7400")),
            ..LeaderAddresses::default()
        },
    }
}

struct Running {
    commands: Sender<LeaseCommand>,
    events: Receiver<LeaseEvent>,
    thread: std::thread::JoinHandle<()>,
}

fn run(lease: &MemoryLease, node: &str, ttl_ms: u64) -> Running {
    let (commands, rx) = mpsc::channel();
    let (tx, events) = mpsc::channel();
    let runner = LeaseRunner {
        store: Box::new(lease.clone()),
        me: me(node),
        timing: LeaseTiming::from_ttl(Duration::from_millis(ttl_ms)),
        commands: rx,
        trust: TrustDeadline::default(),
        report: Box::new(move |e| {
            let _ = tx.send(e);
        }),
    };
    let thread = std::thread::spawn(move || runner.run());
    Running {
        commands,
        events,
        thread,
    }
}

/// The next `Won` or `SteppedDown`, within `within`.
fn next_change(r: &Running, within: Duration) -> Option<LeaseEvent> {
    let deadline = Instant::now() + within;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match r.events.recv_timeout(left) {
            Ok(LeaseEvent::Seen { .. }) => continue,
            Ok(e) => return Some(e),
            Err(_) => return None,
        }
    }
    None
}

#[test]
fn one_wins_the_other_waits_and_a_release_hands_over_at_once() {
    let lease = MemoryLease::new();
    let a = run(&lease, "a", 3000);
    assert_eq!(
        next_change(&a, Duration::from_secs(2)),
        Some(LeaseEvent::Won { epoch: 1 })
    );
    let b = run(&lease, "b", 3000);
    assert_eq!(
        next_change(&b, Duration::from_millis(1500)),
        None,
        "a holds it"
    );
    let started = Instant::now();
    let (done, released) = mpsc::channel();
    a.commands
        .send(LeaseCommand::Release(done))
        .expect("a runs");
    released
        .recv_timeout(Duration::from_secs(2))
        .expect("released");
    a.thread.join().expect("a ended");
    assert_eq!(
        next_change(&b, Duration::from_secs(2)),
        Some(LeaseEvent::Won { epoch: 2 })
    );
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(500),
        "woken by the release: {took:?}"
    );
    b.commands.send(LeaseCommand::Stop).expect("b runs");
    b.thread.join().expect("b ended");
}

#[test]
fn a_bumped_epoch_is_refused_at_the_next_renewal_and_an_outage_ends_the_trust() {
    let lease = MemoryLease::new();
    let a = run(&lease, "a", 600);
    assert_eq!(
        next_change(&a, Duration::from_secs(2)),
        Some(LeaseEvent::Won { epoch: 1 })
    );
    lease.bump_epoch();
    let down = next_change(&a, Duration::from_secs(1));
    assert!(
        matches!(
            down,
            Some(LeaseEvent::SteppedDown(StepDown {
                epoch: 1,
                reason: StepDownReason::Refused
            }))
        ),
        "{down:?}"
    );
    // Expired after 600 ms: taken again at a new epoch.
    assert_eq!(
        next_change(&a, Duration::from_secs(2)),
        Some(LeaseEvent::Won { epoch: 3 })
    );
    lease.fail(true);
    let started = Instant::now();
    let down = next_change(&a, Duration::from_secs(2));
    assert!(
        matches!(
            down,
            Some(LeaseEvent::SteppedDown(StepDown {
                reason: StepDownReason::TrustEnded,
                ..
            }))
        ),
        "{down:?}"
    );
    assert!(
        started.elapsed() <= Duration::from_millis(600),
        "{:?}",
        started.elapsed()
    );
    lease.fail(false);
    a.commands.send(LeaseCommand::Stop).expect("a runs");
    a.thread.join().expect("a ended");
}

#[test]
fn a_fence_reported_by_the_node_steps_down_at_once() {
    let lease = MemoryLease::new();
    let a = run(&lease, "a", 3000);
    assert_eq!(
        next_change(&a, Duration::from_secs(2)),
        Some(LeaseEvent::Won { epoch: 1 })
    );
    a.commands
        .send(LeaseCommand::StepDown {
            epoch: 9,
            reason: StepDownReason::Fenced,
        })
        .expect("a runs");
    assert_eq!(
        next_change(&a, Duration::from_millis(300)),
        None,
        "a fence of another epoch is ignored"
    );
    a.commands
        .send(LeaseCommand::StepDown {
            epoch: 1,
            reason: StepDownReason::Fenced,
        })
        .expect("a runs");
    let down = next_change(&a, Duration::from_millis(500));
    assert!(
        matches!(
            down,
            Some(LeaseEvent::SteppedDown(StepDown {
                epoch: 1,
                reason: StepDownReason::Fenced
            }))
        ),
        "{down:?}"
    );
    a.commands.send(LeaseCommand::Stop).expect("a runs");
    a.thread.join().expect("a ended");
}
