//! The latency histograms and per-task-type counters as jobs move: waits
//! count from the moment a job became ready (not its delay, not the time
//! before a requeue), to the microsecond, on the monotonic clock.

use super::tests::{accepted, assignments, consistent, echo, state, w};
use super::*;
use crate::scheduler::task_type_metrics::JobCounters;
use taskyard_client::clock::{Clock, ManualClock};
use taskyard_protocol::*;

fn counters<'a>(s: &'a CoordinatorState, task_type: &str) -> &'a JobCounters {
    s.metrics
        .by_task_type
        .iter()
        .find(|(label, _)| *label == task_type)
        .map(|(_, c)| c)
        .expect("the task type is labelled")
}

fn close(actual: f64, expected: f64) -> bool {
    (actual - expected).abs() < 1e-9
}

fn register(s: &mut CoordinatorState, clock: &ManualClock) {
    s.register_worker(w("a"), SessionId(1), 2, vec!["echo".into()], clock.now());
    s.assign_queued(clock.now());
}

#[test]
fn a_delayed_job_waits_from_the_end_of_its_delay_to_the_microsecond() {
    let clock = ManualClock::starting_at(1_000_000);
    let mut s = state();
    let req = SubmitRequest {
        delay_ms: Some(5000),
        ..echo("later")
    };
    accepted(s.submit(req, clock.now()));
    clock.advance(5000);
    s.sweep(clock.now());
    clock.advance_micros(2500);
    register(&mut s, &clock);
    assert_eq!(assignments(&s.take_effects()).len(), 1);
    let waited = &counters(&s, "echo").submit_to_start;
    assert_eq!(waited.count, 1);
    assert!(close(waited.sum, 0.0025), "2.5 ms, not 5 s: {}", waited.sum);
    consistent(&s);
}

#[test]
fn a_requeued_job_waits_from_its_requeue_and_attempts_run_to_the_microsecond() {
    let clock = ManualClock::starting_at(1_000_000);
    let mut s = state();
    register(&mut s, &clock);
    s.take_effects();
    let req = SubmitRequest {
        max_attempts: Some(1),
        ..echo("once")
    };
    let job = accepted(s.submit(req, clock.now()));
    clock.advance_micros(300);
    s.assign_queued(clock.now());
    let (_, _, lease) = assignments(&s.take_effects())[0];
    clock.advance_micros(1234);
    let failed = TaskOutcome::Failed {
        error: "boom".into(),
        retryable: true,
    };
    s.task_result(&w("a"), job, lease, failed, clock.now())
        .expect("applied");
    assert!(close(counters(&s, "echo").run_time.sum, 0.001234));
    clock.advance(60_000);
    s.requeue(job, clock.now()).expect("requeued");
    clock.advance_micros(700);
    s.assign_queued(clock.now());
    assert_eq!(assignments(&s.take_effects()).len(), 1);
    let c = counters(&s, "echo");
    assert_eq!((c.submitted, c.failed), (1, 1));
    assert_eq!(
        c.submit_to_start.count, 2,
        "the first start and the requeued one"
    );
    assert!(
        close(c.submit_to_start.sum, 0.0003 + 0.0007),
        "not the minute before the requeue: {}",
        c.submit_to_start.sum
    );
    consistent(&s);
}

#[test]
fn counters_are_kept_per_task_type_and_a_worker_s_types_are_labelled_before_any_job() {
    let clock = ManualClock::starting_at(0);
    let mut s = state();
    register(&mut s, &clock);
    assert_eq!(counters(&s, "echo").submitted, 0, "exported at zero");
    s.submit(SubmitRequest::new("mail", echo("x").payload), clock.now());
    s.submit(echo("y"), clock.now());
    s.submit(echo("z"), clock.now());
    assert_eq!(counters(&s, "mail").submitted, 1);
    assert_eq!(counters(&s, "echo").submitted, 2);
    consistent(&s);
}
