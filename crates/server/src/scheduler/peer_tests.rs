//! What a hostile or confused worker can and cannot do to the state: results
//! and progress for leases it does not hold, oversized registrations.

use super::tests::{accepted, assignments, consistent, echo, state, w};
use super::*;
use taskyard_client::clock::Now;
use taskyard_protocol::*;

/// Two workers for `echo`, one job running on "a"; the effects are taken.
fn job_running_on_a() -> (CoordinatorState, JobId, LeaseId) {
    let mut s = state();
    s.register_worker(w("a"), SessionId(1), 1, vec!["echo".into()], Now::both(0));
    s.register_worker(w("b"), SessionId(2), 1, vec!["echo".into()], Now::both(0));
    let job = accepted(s.submit(echo("x"), Now::both(0)));
    s.assign_queued(Now::both(0));
    let assigned = assignments(&s.take_effects());
    assert_eq!(assigned.len(), 1);
    assert_eq!(assigned[0].0, SessionId(1), "assigned to a");
    s.take_dirty();
    (s, job, assigned[0].2)
}

#[test]
fn a_result_sent_by_a_worker_that_does_not_hold_the_lease_is_stale() {
    let (mut s, job, lease) = job_running_on_a();
    let forged = s.task_result(
        &w("b"),
        job,
        lease,
        TaskOutcome::Succeeded(vec![]),
        Now::both(1),
    );
    assert!(forged.is_err(), "the forged result is refused");
    assert_eq!(
        s.status(job, Now::both(1)).map(|v| v.state),
        Some(JobState::Running)
    );
    assert_eq!(s.metrics.stale_results, 1);
    assert!(!s.has_dirty(), "nothing changed");
    consistent(&s);
    let real = s.task_result(
        &w("a"),
        job,
        lease,
        TaskOutcome::Succeeded(vec![]),
        Now::both(2),
    );
    assert!(real.is_ok(), "the lease holder's result still counts");
    assert_eq!(
        s.status(job, Now::both(2)).map(|v| v.state),
        Some(JobState::Succeeded)
    );
    consistent(&s);
}

#[test]
fn progress_from_a_worker_that_does_not_hold_the_lease_is_ignored() {
    let (mut s, job, lease) = job_running_on_a();
    let report = |percent| job::Progress {
        percent,
        message: String::new(),
        at: 1,
    };
    s.task_progress(&w("b"), job, lease, report(90));
    assert_eq!(s.status(job, Now::both(1)).and_then(|v| v.progress), None);
    s.task_progress(&w("a"), job, lease, report(10));
    assert_eq!(
        s.status(job, Now::both(1))
            .and_then(|v| v.progress)
            .map(|p| p.percent),
        Some(10)
    );
}

/// Keeps the message of every log record.
#[derive(Clone, Default)]
struct Messages(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl slog::Drain for Messages {
    type Ok = ();
    type Err = slog::Never;
    fn log(&self, record: &slog::Record, _: &slog::OwnedKVList) -> Result<(), slog::Never> {
        if let Ok(mut lines) = self.0.lock() {
            lines.push(record.msg().to_string());
        }
        Ok(())
    }
}

#[test]
fn stale_result_warnings_are_rate_limited_and_every_one_is_counted() {
    let (mut s, job, lease) = job_running_on_a();
    let messages = Messages::default();
    s.log = slog::Logger::root(messages.clone(), slog::o!());
    for now in 1..=100 {
        let forged = TaskOutcome::Succeeded(vec![]);
        assert!(s
            .task_result(&w("b"), job, lease, forged, Now::both(now))
            .is_err());
    }
    let stale_lines = || {
        let lines = messages.0.lock().expect("lines");
        lines.iter().filter(|m| m.contains("stale result")).count()
    };
    assert_eq!(stale_lines(), 1, "one line for a burst");
    assert_eq!(s.metrics.stale_results, 100, "every one counted");
    let late = TaskOutcome::Succeeded(vec![]);
    assert!(s
        .task_result(&w("b"), job, lease, late, Now::both(2_000))
        .is_err());
    assert_eq!(stale_lines(), 2, "a second later, the next line");
}

#[test]
fn a_timeout_beyond_a_year_is_refused_naming_the_field() {
    let mut s = state();
    for timeout_ms in [u64::MAX, submission::MAX_TIMEOUT_MS + 1, 0] {
        let req = SubmitRequest {
            timeout_ms: Some(timeout_ms),
            ..echo("x")
        };
        match s.submit(req, Now::both(0)) {
            SubmitAnswer::Rejected(r) => assert!(r.to_string().contains("timeout_ms"), "{r}"),
            other => panic!("accepted {timeout_ms}: {other:?}"),
        }
    }
    let req = SubmitRequest {
        timeout_ms: Some(submission::MAX_TIMEOUT_MS),
        ..echo("x")
    };
    let job = accepted(s.submit(req, Now::both(0)));
    assert_eq!(
        s.status(job, Now::both(0)).map(|v| v.timeout_ms),
        Some(submission::MAX_TIMEOUT_MS)
    );
    consistent(&s);
}
