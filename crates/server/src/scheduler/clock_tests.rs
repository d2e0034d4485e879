//! Wall-clock steps: the scheduler's timers (heartbeat age, attempt
//! deadlines, retry backoff, delayed release) run on the monotonic clock,
//! so a wall clock set an hour ahead kills nothing early and one set an
//! hour back hides nothing. The policy (`tests::policy`): heartbeat
//! timeout 6 s, attempt timeout 10 s, first retry after 1 s.

use super::tests::{accepted, assignments, consistent, echo, state, w};
use super::*;
use taskyard_client::clock::{Clock, ManualClock, Now};
use taskyard_protocol::*;

const HOUR: i64 = 3_600_000;

/// A state with worker `a` (capacity 2) registered at the clock's start.
fn with_worker(clock: &ManualClock) -> CoordinatorState {
    let mut s = state();
    s.register_worker(w("a"), SessionId(1), 2, vec!["echo".into()], clock.now());
    s.take_effects();
    s
}

/// Submits a job, runs it on `a`; returns its id and lease.
fn running(s: &mut CoordinatorState, clock: &ManualClock) -> (JobId, LeaseId) {
    let job = accepted(s.submit(echo("x"), clock.now()));
    s.assign_queued(clock.now());
    let (_, id, lease) = assignments(&s.take_effects())[0];
    assert_eq!(id, job);
    (job, lease)
}

/// Runs a job and fails its first attempt: RETRY_WAIT for 1 s.
fn waiting_for_retry(s: &mut CoordinatorState, clock: &ManualClock) -> JobId {
    let (job, lease) = running(s, clock);
    let failed = TaskOutcome::Failed {
        error: "boom".into(),
        retryable: true,
    };
    s.task_result(&w("a"), job, lease, failed, clock.now())
        .expect("applied");
    s.take_effects();
    assert_eq!(state_of(s, job, clock), JobState::RetryWait);
    job
}

/// The jobs assigned since the effects were last taken.
fn assigned_ids(s: &mut CoordinatorState) -> Vec<JobId> {
    assignments(&s.take_effects())
        .into_iter()
        .map(|(_, id, _)| id)
        .collect()
}

fn state_of(s: &CoordinatorState, job: JobId, clock: &ManualClock) -> JobState {
    s.status(job, clock.now()).expect("held").state
}

fn lost_workers(effects: &[Effect]) -> usize {
    effects
        .iter()
        .filter(|e| matches!(e, Effect::CloseWorker { .. }))
        .count()
}

/// Time passes in steps of 1 s with `a` heartbeating at each, sweeping.
fn pass_with_heartbeats(s: &mut CoordinatorState, clock: &ManualClock, ms: i64) {
    for _ in 0..ms / 1000 {
        clock.advance(1000);
        s.heartbeat(&w("a"), SessionId(1), clock.now());
        s.sweep(clock.now());
    }
}

#[test]
fn a_wall_clock_set_an_hour_ahead_declares_no_heartbeating_worker_lost() {
    let clock = ManualClock::starting_at(1_000_000);
    let mut s = with_worker(&clock);
    s.heartbeat(&w("a"), SessionId(1), clock.now());
    clock.step_wall(HOUR);
    clock.advance(1000);
    s.sweep(clock.now());
    assert_eq!(
        lost_workers(&s.take_effects()),
        0,
        "1 s of silence is not 6"
    );
    assert_eq!(s.worker_views(clock.now()).len(), 1);
    consistent(&s);
}

#[test]
fn a_wall_clock_set_an_hour_ahead_times_no_running_attempt_out() {
    let clock = ManualClock::starting_at(1_000_000);
    let mut s = with_worker(&clock);
    let (job, _) = running(&mut s, &clock);
    clock.step_wall(HOUR);
    pass_with_heartbeats(&mut s, &clock, 9000);
    assert_eq!(state_of(&s, job, &clock), JobState::Running, "9 s of 10");
    pass_with_heartbeats(&mut s, &clock, 2000);
    assert_eq!(
        state_of(&s, job, &clock),
        JobState::RetryWait,
        "then it ends"
    );
    consistent(&s);
}

#[test]
fn a_wall_clock_set_an_hour_ahead_releases_no_retry_early() {
    let clock = ManualClock::starting_at(1_000_000);
    let mut s = with_worker(&clock);
    let job = waiting_for_retry(&mut s, &clock);
    clock.step_wall(HOUR);
    clock.advance(999);
    s.sweep(clock.now());
    assert_eq!(
        state_of(&s, job, &clock),
        JobState::RetryWait,
        "999 ms of 1 s"
    );
    let shown = s.status(job, clock.now()).expect("held").next_retry_at;
    assert_eq!(
        shown,
        Some(clock.now_millis() + 1),
        "shown as the wall clock now plus what remains"
    );
    clock.advance(1);
    s.sweep(clock.now());
    assert_eq!(state_of(&s, job, &clock), JobState::Running, "due on time");
    consistent(&s);
}

#[test]
fn a_wall_clock_set_an_hour_ahead_releases_no_delayed_job_early() {
    let clock = ManualClock::starting_at(1_000_000);
    let mut s = with_worker(&clock);
    let req = SubmitRequest {
        delay_ms: Some(5000),
        ..echo("later")
    };
    let job = accepted(s.submit(req, clock.now()));
    clock.step_wall(HOUR);
    pass_with_heartbeats(&mut s, &clock, 4000);
    assert!(assignments(&s.take_effects()).is_empty(), "4 s of 5");
    let shown = s.status(job, clock.now()).expect("held").not_before;
    assert_eq!(
        shown,
        Some(clock.now_millis() + 1000),
        "wall now + 1 s left"
    );
    pass_with_heartbeats(&mut s, &clock, 1000);
    assert_eq!(assignments(&s.take_effects()).len(), 1, "released at 5 s");
    consistent(&s);
}

#[test]
fn a_wall_clock_set_an_hour_back_still_declares_a_silent_worker_lost() {
    let clock = ManualClock::starting_at(1_000_000);
    let mut s = with_worker(&clock);
    let (job, _) = running(&mut s, &clock);
    s.heartbeat(&w("a"), SessionId(1), clock.now());
    clock.step_wall(-HOUR);
    clock.advance(6000);
    s.sweep(clock.now());
    assert_eq!(lost_workers(&s.take_effects()), 0, "6 s is the timeout");
    clock.advance(1);
    s.sweep(clock.now());
    assert_eq!(
        lost_workers(&s.take_effects()),
        1,
        "past it the worker is lost"
    );
    assert!(s.worker_views(clock.now()).is_empty());
    assert_eq!(state_of(&s, job, &clock), JobState::RetryWait);
    consistent(&s);
}

#[test]
fn a_heartbeat_after_the_wall_clock_went_back_counts_from_then() {
    let clock = ManualClock::starting_at(1_000_000);
    let mut s = with_worker(&clock);
    clock.step_wall(-HOUR);
    clock.advance(5000);
    s.heartbeat(&w("a"), SessionId(1), clock.now());
    clock.advance(5000);
    s.sweep(clock.now());
    assert_eq!(
        lost_workers(&s.take_effects()),
        0,
        "5 s since the heartbeat"
    );
    let view = &s.worker_views(clock.now())[0];
    assert_eq!(
        view.last_heartbeat_at,
        clock.now_millis() - 5000,
        "shown on the wall clock now"
    );
}

#[test]
fn a_wall_clock_set_an_hour_back_still_times_an_attempt_out() {
    let clock = ManualClock::starting_at(1_000_000);
    let mut s = with_worker(&clock);
    let (job, lease) = running(&mut s, &clock);
    clock.step_wall(-HOUR);
    pass_with_heartbeats(&mut s, &clock, 10_000);
    assert_eq!(
        state_of(&s, job, &clock),
        JobState::Running,
        "10 s is the timeout"
    );
    clock.advance(1);
    s.sweep(clock.now());
    assert_eq!(state_of(&s, job, &clock), JobState::RetryWait);
    let cancelled = s.take_effects().into_iter().any(|e| {
        matches!(e, Effect::SendWorker { frame: CoordinatorToWorker::TaskCancel { job_id, lease: l, .. }, .. }
                 if job_id == job && l == lease)
    });
    assert!(cancelled, "the worker is told to stop");
    consistent(&s);
}

#[test]
fn a_wall_clock_set_an_hour_back_still_makes_a_retry_due_on_time() {
    let clock = ManualClock::starting_at(1_000_000);
    let mut s = with_worker(&clock);
    let job = waiting_for_retry(&mut s, &clock);
    clock.step_wall(-HOUR);
    clock.advance(999);
    s.sweep(clock.now());
    assert_eq!(state_of(&s, job, &clock), JobState::RetryWait);
    clock.advance(1);
    s.sweep(clock.now());
    assert_eq!(
        state_of(&s, job, &clock),
        JobState::Running,
        "due after 1 s"
    );
    consistent(&s);
}

#[test]
fn a_retried_delayed_job_is_not_delayed_again_by_a_wall_clock_set_back() {
    let clock = ManualClock::starting_at(1_000_000);
    let mut s = with_worker(&clock);
    let req = SubmitRequest {
        delay_ms: Some(5000),
        ..echo("later")
    };
    let job = accepted(s.submit(req, clock.now()));
    pass_with_heartbeats(&mut s, &clock, 5000);
    let (_, id, lease) = assignments(&s.take_effects())[0];
    assert_eq!(id, job);
    clock.step_wall(-HOUR);
    let failed = TaskOutcome::Failed {
        error: "boom".into(),
        retryable: true,
    };
    s.task_result(&w("a"), job, lease, failed, clock.now())
        .expect("applied");
    clock.advance(1000);
    s.sweep(clock.now());
    assert_eq!(
        state_of(&s, job, &clock),
        JobState::Running,
        "its old not_before, an hour ahead of the wall clock now, holds nothing"
    );
    consistent(&s);
}

#[test]
fn a_wall_clock_set_an_hour_back_still_releases_a_delayed_job_on_time() {
    let clock = ManualClock::starting_at(1_000_000);
    let mut s = with_worker(&clock);
    let req = SubmitRequest {
        delay_ms: Some(5000),
        ..echo("later")
    };
    accepted(s.submit(req, clock.now()));
    clock.step_wall(-HOUR);
    pass_with_heartbeats(&mut s, &clock, 4000);
    assert!(assignments(&s.take_effects()).is_empty());
    pass_with_heartbeats(&mut s, &clock, 1000);
    assert_eq!(assignments(&s.take_effects()).len(), 1, "released at 5 s");
    consistent(&s);
}

#[test]
fn submissions_after_the_wall_clock_went_back_keep_fifo_order() {
    let clock = ManualClock::starting_at(1_000_000);
    let mut s = state();
    let first = accepted(s.submit(echo("first"), clock.now()));
    clock.step_wall(-HOUR);
    let second = accepted(s.submit(echo("second"), clock.now()));
    let at = |id| s.status(id, clock.now()).expect("held").submitted_at;
    assert!(at(second) >= at(first), "submission time never decreases");
    s.register_worker(w("a"), SessionId(1), 1, vec!["echo".into()], clock.now());
    let picked = assigned_ids(&mut s);
    assert!(picked.is_empty(), "registering schedules nothing by itself");
    s.assign_queued(clock.now());
    let picked = assigned_ids(&mut s);
    assert_eq!(picked, [first], "the older job runs first");
    consistent(&s);
}

#[test]
fn stored_retry_and_delay_times_become_timers_relative_to_the_wall_clock_at_start() {
    let clock = ManualClock::starting_at(1_000_000);
    let mut s = with_worker(&clock);
    let retry = waiting_for_retry(&mut s, &clock);
    let req = SubmitRequest {
        delay_ms: Some(5000),
        ..echo("later")
    };
    let delayed = accepted(s.submit(req, clock.now()));
    let rows = super::tests::stored_rows(&s);
    // A restart: a new process, whose monotonic clock starts elsewhere.
    let start = Now {
        wall_ms: clock.now_millis(),
        mono_ms: 42,
        mono_us: 42_000,
    };
    let mut recovered = state();
    recovered.recover(rows, start);
    recovered.register_worker(w("b"), SessionId(2), 2, vec!["echo".into()], start);
    recovered.take_effects();
    recovered.sweep(start.plus(999));
    assert!(assignments(&recovered.take_effects()).is_empty());
    recovered.sweep(start.plus(1000));
    let ran = assigned_ids(&mut recovered);
    assert_eq!(ran, [retry], "the retry's wait resumes where it was");
    recovered.heartbeat(&w("b"), SessionId(2), start.plus(4999));
    recovered.sweep(start.plus(4999));
    assert!(assignments(&recovered.take_effects()).is_empty());
    recovered.sweep(start.plus(5000));
    let ran = assigned_ids(&mut recovered);
    assert_eq!(ran, [delayed], "and so does the delay");
    consistent(&recovered);
}
