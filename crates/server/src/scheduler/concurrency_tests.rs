//! Concurrency keys on the coordinator's state: jobs of a full key wait
//! aside without holding back other jobs, go back in order as slots free,
//! and the counts survive a restart.

use crate::scheduler::concurrency_gate::ConcurrencyLimits;
use crate::scheduler::tests::{accepted, assignments, consistent, echo, state, stored_rows, w};
use crate::scheduler::workers::SessionId;
use crate::scheduler::CoordinatorState;
use taskyard_client::clock::Now;
use taskyard_protocol::flow::LimitPattern;
use taskyard_protocol::{JobId, JobState, TaskOutcome};

fn limited(max_running: u32) -> CoordinatorState {
    let mut s = state();
    s.set_concurrency_limits(ConcurrencyLimits::new([(
        LimitPattern::Prefix("acct:".into()),
        max_running,
    )]));
    s
}

fn submit(s: &mut CoordinatorState, key: Option<&str>, at: i64) -> JobId {
    let mut req = echo("x");
    req.concurrency_key = key.map(str::to_string);
    accepted(s.submit(req, Now::both(at)))
}

fn state_of(s: &CoordinatorState, id: JobId) -> JobState {
    s.job(id).map(|j| j.state).expect("job held")
}

fn succeed(s: &mut CoordinatorState, id: JobId, at: i64) {
    let job = s.job(id).expect("job").clone();
    let (worker, lease) = (job.worker_id.expect("worker"), job.lease.expect("lease"));
    s.task_result(
        &worker,
        id,
        lease,
        TaskOutcome::Succeeded(Vec::new()),
        Now::both(at),
    )
    .expect("current attempt");
}

#[test]
fn a_full_key_waits_aside_and_other_jobs_run_past_it() {
    let mut s = limited(1);
    s.register_worker(w("a"), SessionId(1), 8, vec!["echo".into()], Now::both(0));
    let first = submit(&mut s, Some("acct:42"), 1);
    let second = submit(&mut s, Some("acct:42"), 2);
    let third = submit(&mut s, Some("acct:42"), 3);
    let other_key = submit(&mut s, Some("acct:7"), 4);
    let no_key = submit(&mut s, None, 5);
    s.assign_queued(Now::both(10));
    consistent(&s);
    assert_eq!(state_of(&s, first), JobState::Running);
    assert_eq!(state_of(&s, second), JobState::Queued, "acct:42 is full");
    assert_eq!(state_of(&s, third), JobState::Queued);
    assert_eq!(
        state_of(&s, other_key),
        JobState::Running,
        "another key is not held back"
    );
    assert_eq!(state_of(&s, no_key), JobState::Running);
    assert_eq!(s.gate.running_of("acct:42"), 1);
    assert_eq!(s.gate.waiting_of("acct:42"), 2);
    let shown = s.view(s.job(second).expect("held"), Now::both(10));
    assert_eq!(shown.concurrency_key.as_deref(), Some("acct:42"));
    assert_eq!(
        shown.waiting.as_deref(),
        Some("waiting for concurrency key acct:42: 1/1 running")
    );
    let running = s.view(s.job(first).expect("held"), Now::both(10));
    assert_eq!(running.waiting, None);
    let started = assignments(&s.take_effects()).len();
    assert_eq!(started, 3);

    // The first finishing lets the oldest waiting one go, and only it.
    succeed(&mut s, first, 20);
    s.assign_queued(Now::both(21));
    consistent(&s);
    assert_eq!(state_of(&s, second), JobState::Running);
    assert_eq!(state_of(&s, third), JobState::Queued);
    succeed(&mut s, second, 30);
    s.assign_queued(Now::both(31));
    assert_eq!(state_of(&s, third), JobState::Running);
    consistent(&s);
}

#[test]
fn cancelling_or_raising_the_limit_lets_waiting_jobs_go() {
    let mut s = limited(1);
    s.register_worker(w("a"), SessionId(1), 8, vec!["echo".into()], Now::both(0));
    let running = submit(&mut s, Some("acct:1"), 1);
    let waiting: Vec<JobId> = (2..5).map(|t| submit(&mut s, Some("acct:1"), t)).collect();
    s.assign_queued(Now::both(10));
    assert_eq!(s.gate.waiting_of("acct:1"), 3);
    // A waiting job cancelled leaves the others waiting.
    s.cancel(waiting[0], Now::both(11)).expect("cancel");
    assert_eq!(s.gate.waiting_of("acct:1"), 2);
    consistent(&s);
    // Cancelling the running one lets the next go.
    s.cancel(running, Now::both(12)).expect("cancel");
    s.assign_queued(Now::both(13));
    assert_eq!(state_of(&s, waiting[1]), JobState::Running);
    consistent(&s);
    // Raising the limit lets the rest go at once.
    s.set_concurrency_limits(ConcurrencyLimits::new([(
        LimitPattern::Prefix("acct:".into()),
        5,
    )]));
    s.assign_queued(Now::both(14));
    assert_eq!(state_of(&s, waiting[2]), JobState::Running);
    assert_eq!(s.gate.running_of("acct:1"), 2);
    consistent(&s);
}

#[test]
fn a_restart_counts_running_jobs_again_and_holds_the_rest() {
    let mut s = limited(2);
    s.register_worker(w("a"), SessionId(1), 8, vec!["echo".into()], Now::both(0));
    let jobs: Vec<JobId> = (1..6).map(|t| submit(&mut s, Some("acct:9"), t)).collect();
    s.assign_queued(Now::both(10));
    assert_eq!(s.gate.running_of("acct:9"), 2);
    let rows = stored_rows(&s);
    let mut recovered = limited(2);
    recovered.recover(rows, Now::both(100));
    consistent(&recovered);
    assert_eq!(
        recovered.gate.running_of("acct:9"),
        2,
        "recovered RUNNING attempts count against the key"
    );
    // Another worker cannot start a third while the two are running.
    recovered.register_worker(w("b"), SessionId(2), 8, vec!["echo".into()], Now::both(101));
    recovered.assign_queued(Now::both(102));
    let running = jobs
        .iter()
        .filter(|id| recovered.job(**id).map(|j| j.state) == Some(JobState::Running))
        .count();
    assert_eq!(running, 2);
    consistent(&recovered);
}

#[test]
fn a_key_over_256_bytes_is_refused_naming_the_field() {
    let mut s = state();
    let mut req = echo("x");
    req.concurrency_key = Some("k".repeat(257));
    match s.submit(req, Now::both(1)) {
        taskyard_protocol::SubmitAnswer::Rejected(reason) => {
            assert!(reason.to_string().contains("concurrency_key"), "{reason}")
        }
        other => panic!("accepted: {other:?}"),
    }
    assert_eq!(s.active_jobs(), 0, "nothing admitted");
}
