//! Behaviour of `CoordinatorState` step by step, with invariants checked
//! after every step.

use super::*;
use serde_json::json;
use taskyard_client::clock::Now;
use taskyard_protocol::payloads::encode_json;
use taskyard_protocol::*;

/// The policy scheduler tests run under.
pub(super) fn policy() -> Policy {
    Policy {
        aging_step_ms: 60_000,
        max_active_jobs: 1000,
        retry: RetryPolicy {
            base_ms: 1000,
            cap_ms: 30_000,
        },
        default_max_attempts: 3,
        default_timeout_ms: 10_000,
        heartbeat_timeout_ms: 6000,
        max_payload_bytes: 1024,
        max_result_bytes: 1024,
    }
}

pub(super) fn state() -> CoordinatorState {
    CoordinatorState::new(policy(), slog::Logger::root(slog::Discard, slog::o!()))
}

pub(super) fn echo(message: &str) -> SubmitRequest {
    SubmitRequest::new("echo", encode_json(&json!({ "message": message })))
}

pub(super) fn consistent(s: &CoordinatorState) {
    s.check_invariants().expect("invariants hold");
}

pub(super) fn accepted(answer: SubmitAnswer) -> JobId {
    match answer {
        SubmitAnswer::Accepted { job_id, .. } => job_id,
        SubmitAnswer::Rejected(r) => panic!("rejected: {r}"),
    }
}

/// Every job as the database returns it once its rows are committed:
/// whole, without the progress only memory holds.
pub(super) fn stored_rows(s: &CoordinatorState) -> Vec<Job> {
    let stored = |job: &Job| Job {
        progress: None,
        ..job.clone()
    };
    s.jobs.values().map(|job| stored(job)).collect()
}

pub(super) fn w(name: &str) -> WorkerId {
    WorkerId(name.into())
}

/// The TaskAssign frames among the effects, as (session, job, lease).
pub(super) fn assignments(effects: &[Effect]) -> Vec<(SessionId, JobId, LeaseId)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::SendWorker {
                session,
                frame: CoordinatorToWorker::TaskAssign { job_id, lease, .. },
            } => Some((*session, *job_id, *lease)),
            _ => None,
        })
        .collect()
}

#[test]
fn submit_assign_result_succeeds() {
    let mut s = state();
    s.register_worker(w("a"), SessionId(1), 2, vec!["echo".into()], Now::both(0));
    let job = accepted(s.submit(echo("hi"), Now::both(10)));
    assert!(s.has_dirty());
    consistent(&s);
    s.take_effects();
    s.assign_queued(Now::both(10));
    consistent(&s);
    let assigned = assignments(&s.take_effects());
    assert_eq!(assigned.len(), 1);
    let (session, job_id, lease) = assigned[0];
    assert_eq!((session, job_id), (SessionId(1), job));
    assert_eq!(
        s.status(job, Now::both(0)).map(|v| v.state),
        Some(JobState::Running)
    );
    s.task_result(
        &w("a"),
        job,
        lease,
        TaskOutcome::Succeeded(b"hi".to_vec()),
        Now::both(20),
    )
    .expect("applied");
    consistent(&s);
    let view = s.status(job, Now::both(0)).expect("exists");
    assert_eq!(view.state, JobState::Succeeded);
    assert_eq!(view.result.as_deref(), Some(&b"hi"[..]));
    assert_eq!(s.active_jobs(), 0);
}

#[test]
fn fifo_by_sequence_to_the_least_loaded_worker() {
    let mut s = state();
    s.register_worker(w("a"), SessionId(1), 1, vec!["echo".into()], Now::both(0));
    s.register_worker(w("b"), SessionId(2), 1, vec!["echo".into()], Now::both(0));
    let jobs: Vec<JobId> = (0..3)
        .map(|i| accepted(s.submit(echo(&i.to_string()), Now::both(5))))
        .collect();
    s.take_effects();
    s.assign_queued(Now::both(5));
    consistent(&s);
    let assigned = assignments(&s.take_effects());
    let order: Vec<(SessionId, JobId)> = assigned.iter().map(|a| (a.0, a.1)).collect();
    assert_eq!(
        order,
        vec![(SessionId(1), jobs[0]), (SessionId(2), jobs[1])]
    );
    assert_eq!(
        s.status(jobs[2], Now::both(0)).map(|v| v.state),
        Some(JobState::Queued)
    );
}

#[test]
fn invalid_submissions_are_rejected_and_change_nothing() {
    let mut s = state();
    let mut bad = echo("x");
    bad.payload = encode_json(&json!({ "msg": "x" }));
    let too_big = SubmitRequest {
        payload: encode_json(&json!({ "message": "x".repeat(2000) })),
        ..echo("x")
    };
    let zero_attempts = SubmitRequest {
        max_attempts: Some(0),
        ..echo("x")
    };
    for (req, field) in [
        (bad, "payload.msg"),
        (too_big, "payload"),
        (zero_attempts, "max_attempts"),
    ] {
        match s.submit(req, Now::both(0)) {
            SubmitAnswer::Rejected(r) => assert!(r.reason.starts_with(field), "{r}"),
            other => panic!("accepted: {other:?}"),
        }
    }
    assert!(!s.has_dirty());
    assert_eq!(s.list(None, 10, Now::both(0)).len(), 0);
    consistent(&s);
}

#[test]
fn admission_stops_at_max_active_jobs() {
    let mut s = CoordinatorState::new(
        Policy {
            max_active_jobs: 2,
            ..policy()
        },
        slog::Logger::root(slog::Discard, slog::o!()),
    );
    accepted(s.submit(echo("1"), Now::both(0)));
    accepted(s.submit(echo("2"), Now::both(0)));
    match s.submit(echo("3"), Now::both(0)) {
        SubmitAnswer::Rejected(r) => assert_eq!(r.reason, "max-active-jobs (2) reached"),
        other => panic!("admitted: {other:?}"),
    }
}

#[test]
fn unadvertised_task_type_is_accepted_with_a_note() {
    let mut s = state();
    match s.submit(echo("x"), Now::both(0)) {
        SubmitAnswer::Accepted { no_worker, .. } => assert!(no_worker),
        other => panic!("{other:?}"),
    }
}

#[test]
fn failed_attempts_back_off_then_fail_with_the_last_error() {
    let mut s = state();
    s.register_worker(w("a"), SessionId(1), 1, vec!["echo".into()], Now::both(0));
    let job = accepted(s.submit(echo("x"), Now::both(0)));
    let mut now = 0;
    for attempt in 1..=3u32 {
        s.sweep(Now::both(now));
        let (_, _, lease) = *assignments(&s.take_effects()).first().expect("assigned");
        s.task_result(
            &w("a"),
            job,
            lease,
            TaskOutcome::failed(format!("boom {attempt}")),
            Now::both(now),
        )
        .expect("applied");
        consistent(&s);
        let view = s.status(job, Now::both(0)).expect("exists");
        if attempt < 3 {
            assert_eq!(view.state, JobState::RetryWait);
            let delay = 1000 * 2i64.pow(attempt - 1);
            assert_eq!(view.next_retry_at, Some(now + delay));
            s.heartbeat(&w("a"), SessionId(1), Now::both(now + delay - 1));
            s.sweep(Now::both(now + delay - 1));
            assert!(
                assignments(&s.take_effects()).is_empty(),
                "not before its time"
            );
            now += delay;
            s.heartbeat(&w("a"), SessionId(1), Now::both(now));
        } else {
            assert_eq!(view.state, JobState::Failed);
            assert_eq!(view.error.as_deref(), Some("boom 3"));
            let outcomes: Vec<Option<AttemptOutcome>> =
                view.history.iter().map(|a| a.outcome.clone()).collect();
            let failed = |e: &str| Some(AttemptOutcome::Failed { error: e.into() });
            assert_eq!(
                outcomes,
                vec![failed("boom 1"), failed("boom 2"), failed("boom 3")]
            );
            let numbers: Vec<u32> = view.history.iter().map(|a| a.number).collect();
            assert_eq!(numbers, vec![1, 2, 3]);
        }
    }
}

#[test]
fn stale_results_are_dropped_and_change_nothing() {
    let mut s = state();
    s.register_worker(w("a"), SessionId(1), 1, vec!["echo".into()], Now::both(0));
    let job = accepted(s.submit(echo("x"), Now::both(0)));
    s.assign_queued(Now::both(0));
    s.take_effects();
    s.take_dirty();
    let wrong = LeaseId::new_random();
    assert!(s
        .task_result(
            &w("a"),
            job,
            wrong,
            TaskOutcome::Succeeded(vec![]),
            Now::both(1)
        )
        .is_err());
    assert!(s
        .task_result(
            &w("a"),
            JobId::mint(),
            wrong,
            TaskOutcome::Succeeded(vec![]),
            Now::both(1)
        )
        .is_err());
    assert_eq!(
        s.status(job, Now::both(0)).map(|v| v.state),
        Some(JobState::Running)
    );
    assert!(!s.has_dirty());
    consistent(&s);
}

#[test]
fn silent_worker_is_dead_after_the_timeout_and_not_before() {
    let mut s = state();
    s.register_worker(w("a"), SessionId(1), 1, vec!["echo".into()], Now::both(0));
    let job = accepted(s.submit(echo("x"), Now::both(0)));
    s.assign_queued(Now::both(0));
    s.take_effects();
    s.sweep(Now::both(6000));
    assert_eq!(
        s.worker_views(Now::both(0)).len(),
        1,
        "exactly at the timeout: alive"
    );
    s.sweep(Now::both(6001));
    consistent(&s);
    assert!(s.worker_views(Now::both(0)).is_empty());
    let effects = s.take_effects();
    assert!(effects.contains(&Effect::CloseWorker {
        session: SessionId(1),
        reason: "no heartbeat for 6000 ms".into()
    }));
    let view = s.status(job, Now::both(0)).expect("exists");
    assert_eq!(view.state, JobState::RetryWait);
    assert_eq!(view.next_retry_at, Some(6001 + 1000));
    assert_eq!(
        view.history[0].outcome,
        Some(AttemptOutcome::WorkerLost {
            reason: "no heartbeat for 6000 ms".into()
        })
    );
    assert_eq!(view.history[0].ended_at, Some(6001));
    assert!(view.error.unwrap_or_default().starts_with("worker lost"));
}

#[test]
fn expired_deadline_cancels_on_the_worker_and_retries() {
    let mut s = state();
    s.register_worker(w("a"), SessionId(1), 1, vec!["echo".into()], Now::both(0));
    let job = accepted(s.submit(
        SubmitRequest {
            timeout_ms: Some(500),
            ..echo("x")
        },
        Now::both(0),
    ));
    s.assign_queued(Now::both(0));
    let (_, _, lease) = assignments(&s.take_effects())[0];
    s.sweep(Now::both(500));
    assert!(assignments(&s.take_effects()).is_empty());
    s.sweep(Now::both(501));
    consistent(&s);
    let effects = s.take_effects();
    assert!(effects.contains(&Effect::SendWorker {
        session: SessionId(1),
        frame: CoordinatorToWorker::TaskCancel {
            job_id: job,
            lease,
            epoch: 0
        }
    }));
    assert_eq!(
        s.status(job, Now::both(0)).map(|v| v.state),
        Some(JobState::RetryWait)
    );
    assert!(s
        .task_result(
            &w("a"),
            job,
            lease,
            TaskOutcome::Succeeded(vec![]),
            Now::both(502)
        )
        .is_err());
}

#[test]
fn disconnect_of_a_replaced_session_changes_nothing() {
    let mut s = state();
    s.register_worker(w("a"), SessionId(1), 1, vec!["echo".into()], Now::both(0));
    s.register_worker(w("a"), SessionId(2), 1, vec!["echo".into()], Now::both(0));
    s.worker_lost(&w("a"), SessionId(1), "connection closed", Now::both(1));
    assert_eq!(s.worker_views(Now::both(0)).len(), 1);
    consistent(&s);
}

/// Two RUNNING jobs (one in its final attempt) and a QUEUED one, as the
/// store holds them when the coordinator died, with the leases of the
/// running ones.
fn rows_at_a_crash() -> (Vec<Job>, [JobId; 3]) {
    let mut s = state();
    s.register_worker(w("a"), SessionId(1), 4, vec!["echo".into()], Now::both(0));
    let first = accepted(s.submit(echo("1"), Now::both(0)));
    let last = accepted(s.submit(
        SubmitRequest {
            max_attempts: Some(1),
            ..echo("2")
        },
        Now::both(0),
    ));
    let queued = accepted(s.submit(echo("3"), Now::both(0)));
    s.assign_queued(Now::both(0));
    let mut rows: Vec<Job> = [first, last]
        .iter()
        .filter_map(|id| s.job(*id).cloned())
        .collect();
    let mut queued_row = s.job(queued).cloned().expect("exists");
    queued_row.state = JobState::Queued;
    rows.push(queued_row);
    (rows, [first, last, queued])
}

fn lease_of(s: &CoordinatorState, id: JobId) -> LeaseId {
    s.job(id)
        .and_then(|j| j.lease)
        .expect("running under a lease")
}

#[test]
fn recovery_keeps_running_jobs_awaiting_their_claim_then_requeues_or_fails_them() {
    let (rows, [first, last, _]) = rows_at_a_crash();
    let mut recovered = state();
    let summary = recovered.recover(rows, Now::both(100));
    assert_eq!(
        summary,
        RecoverySummary {
            loaded: 3,
            awaiting_claim: 2,
            unclaimable: 0,
            stored: 3
        }
    );
    consistent(&recovered);
    assert!(!recovered.has_dirty(), "nothing is rewritten at start");
    assert!(recovered.awaiting_claim(first) && recovered.awaiting_claim(last));
    recovered.register_worker(w("b"), SessionId(2), 4, vec!["echo".into()], Now::both(100));
    recovered.sweep(Now::both(100 + 5999));
    consistent(&recovered);
    assert_eq!(
        recovered.job(first).map(|j| j.state),
        Some(JobState::Running)
    );
    assert_eq!(
        assignments(&recovered.take_effects()).len(),
        1,
        "only the QUEUED one runs"
    );

    recovered.sweep(Now::both(100 + 6000));
    consistent(&recovered);
    assert_eq!(recovered.unclaimed_count(), 0);
    let failed = recovered.status(last, Now::both(0)).expect("exists");
    assert_eq!(failed.state, JobState::Failed);
    assert_eq!(
        failed.error.as_deref(),
        Some(RESTARTED_DURING_FINAL_ATTEMPT)
    );
    let first_view = recovered.status(first, Now::both(0)).expect("exists");
    assert_eq!(
        first_view.history.first().and_then(|a| a.outcome.clone()),
        Some(AttemptOutcome::Interrupted)
    );
    let ran: Vec<JobId> = assignments(&recovered.take_effects())
        .iter()
        .map(|a| a.1)
        .collect();
    assert_eq!(ran, [first], "requeued at the deadline and run again");
    assert_eq!(recovered.active_jobs(), 2);
    let next = accepted(recovered.submit(echo("4"), Now::both(200)));
    assert_eq!(recovered.job(next).map(|j| j.sequence), Some(4));
}

#[test]
fn a_claimed_attempt_is_re_attached_and_its_result_applied() {
    let (rows, [first, last, _]) = rows_at_a_crash();
    let mut recovered = state();
    recovered.set_epoch(9);
    recovered.recover(rows, Now::both(100));
    let lease = lease_of(&recovered, first);
    let claim = vec![RunningAttempt {
        job_id: first,
        lease,
    }];
    let twice = [claim.clone(), claim].concat();
    recovered.register_worker_claiming(
        w("a"),
        SessionId(7),
        1,
        vec!["echo".into()],
        twice,
        Now::both(200),
    );
    consistent(&recovered);
    assert!(!recovered.awaiting_claim(first));
    let effects = recovered.take_effects();
    assert_eq!(
        effects,
        [Effect::SendWorker {
            session: SessionId(7),
            frame: CoordinatorToWorker::Registered {
                worker_id: w("a"),
                epoch: 9
            }
        }],
        "no cancel for a matching claim, listed twice or not"
    );
    recovered.assign_queued(Now::both(200));
    assert!(
        assignments(&recovered.take_effects()).is_empty(),
        "the re-attached attempt takes the worker's only slot"
    );
    recovered.sweep(Now::both(100 + 6000));
    assert_eq!(
        recovered.job(first).map(|j| j.state),
        Some(JobState::Running),
        "claimed: not requeued"
    );
    assert_eq!(
        recovered.job(last).map(|j| j.state),
        Some(JobState::Failed),
        "unclaimed: failed"
    );
    let outcome = TaskOutcome::Succeeded(b"once".to_vec());
    recovered
        .task_result(&w("a"), first, lease, outcome, Now::both(6200))
        .expect("the result of the re-attached attempt is applied");
    let done = recovered.job(first).expect("held");
    assert_eq!(
        (done.state, done.attempts),
        (JobState::Succeeded, 1),
        "ran once"
    );
    consistent(&recovered);
}

#[test]
fn claims_that_do_not_match_are_answered_with_task_cancel_and_change_nothing() {
    let (rows, [first, last, queued]) = rows_at_a_crash();
    let mut recovered = state();
    recovered.recover(rows, Now::both(100));
    let (first_lease, last_lease) = (lease_of(&recovered, first), lease_of(&recovered, last));
    let forged = LeaseId::new_random();
    let claims = vec![
        RunningAttempt {
            job_id: first,
            lease: forged,
        },
        RunningAttempt {
            job_id: queued,
            lease: first_lease,
        },
        RunningAttempt {
            job_id: JobId::mint(),
            lease: forged,
        },
    ];
    recovered.register_worker_claiming(
        w("a"),
        SessionId(2),
        4,
        vec!["echo".into()],
        claims.clone(),
        Now::both(100),
    );
    let cancelled: Vec<RunningAttempt> = recovered
        .take_effects()
        .into_iter()
        .filter_map(|e| match e {
            Effect::SendWorker {
                frame: CoordinatorToWorker::TaskCancel { job_id, lease, .. },
                ..
            } => Some(RunningAttempt { job_id, lease }),
            _ => None,
        })
        .collect();
    assert_eq!(cancelled, claims);
    assert!(
        recovered.awaiting_claim(first),
        "a wrong lease claims nothing"
    );
    // Another worker cannot claim an attempt of worker "a", even with its lease.
    let stolen = vec![RunningAttempt {
        job_id: last,
        lease: last_lease,
    }];
    recovered.register_worker_claiming(
        w("b"),
        SessionId(3),
        4,
        vec!["echo".into()],
        stolen,
        Now::both(100),
    );
    assert!(recovered.awaiting_claim(last));
    // A result for an attempt still awaiting its claim is stale.
    let early = recovered.task_result(
        &w("a"),
        first,
        first_lease,
        TaskOutcome::Succeeded(vec![]),
        Now::both(101),
    );
    assert!(early.is_err());
    consistent(&recovered);
}

#[test]
fn a_worker_registering_again_keeps_the_attempts_it_lists() {
    let mut s = state();
    s.register_worker(w("a"), SessionId(1), 2, vec!["echo".into()], Now::both(0));
    let kept = accepted(s.submit(echo("kept"), Now::both(0)));
    let dropped = accepted(s.submit(echo("dropped"), Now::both(0)));
    s.assign_queued(Now::both(0));
    s.take_effects();
    let lease = lease_of(&s, kept);
    let claim = vec![RunningAttempt {
        job_id: kept,
        lease,
    }];
    s.register_worker_claiming(
        w("a"),
        SessionId(2),
        2,
        vec!["echo".into()],
        claim,
        Now::both(10),
    );
    consistent(&s);
    assert_eq!(s.job(kept).map(|j| j.state), Some(JobState::Running));
    assert_eq!(
        s.job(dropped).map(|j| j.state),
        Some(JobState::RetryWait),
        "not listed: lost"
    );
    s.task_result(
        &w("a"),
        kept,
        lease,
        TaskOutcome::Succeeded(vec![]),
        Now::both(20),
    )
    .expect("applied through the new session");
}

#[test]
fn list_is_newest_first_and_filters_by_state() {
    let mut s = state();
    let ids: Vec<JobId> = (0..3)
        .map(|i| accepted(s.submit(echo(&i.to_string()), Now::both(i))))
        .collect();
    let listed: Vec<JobId> = s
        .list(None, 2, Now::both(0))
        .iter()
        .map(|v| v.job_id)
        .collect();
    assert_eq!(listed, vec![ids[2], ids[1]]);
    assert!(s.list(Some(JobState::Running), 10, Now::both(0)).is_empty());
}

#[test]
fn same_idempotency_key_returns_the_same_job_also_after_recovery() {
    let mut s = state();
    let keyed = || SubmitRequest {
        idempotency_key: Some("order-7".into()),
        ..echo("x")
    };
    let first = accepted(s.submit(keyed(), Now::both(0)));
    s.take_dirty();
    let rows = stored_rows(&s);
    assert_eq!(accepted(s.submit(keyed(), Now::both(1))), first);
    assert!(!s.has_dirty(), "the repeat stored nothing");
    // A key does not make an invalid request good: it is rejected.
    let invalid = SubmitRequest {
        idempotency_key: Some("order-7".into()),
        ..SubmitRequest::new("sleep", encode_json(&serde_json::Value::Null))
    };
    assert!(
        matches!(s.submit(invalid, Now::both(1)), SubmitAnswer::Rejected(r) if r.reason.starts_with("payload")),
        "rejected as without the key"
    );
    assert!(!s.has_dirty(), "the rejection stored nothing");
    assert_eq!(s.list(None, 10, Now::both(0)).len(), 1);
    consistent(&s);

    let mut recovered = state();
    recovered.recover(rows, Now::both(2));
    assert_eq!(accepted(recovered.submit(keyed(), Now::both(3))), first);
    assert_eq!(recovered.list(None, 10, Now::both(0)).len(), 1);
    let empty_key = SubmitRequest {
        idempotency_key: Some(String::new()),
        ..echo("x")
    };
    assert!(
        matches!(recovered.submit(empty_key, Now::both(4)), SubmitAnswer::Rejected(r) if r.reason.starts_with("idempotency_key"))
    );
}

#[test]
fn recovery_keeps_retry_wait_and_terminal_rows_as_they_are() {
    let mut s = state();
    s.register_worker(w("a"), SessionId(1), 4, vec!["echo".into()], Now::both(0));
    let waiting = accepted(s.submit(echo("retry"), Now::both(0)));
    let done = accepted(s.submit(echo("done"), Now::both(0)));
    s.assign_queued(Now::both(0));
    let leases: Vec<(JobId, LeaseId)> = assignments(&s.take_effects())
        .into_iter()
        .map(|(_, job, lease)| (job, lease))
        .collect();
    for (job, lease) in leases {
        let outcome = if job == waiting {
            TaskOutcome::failed("transient")
        } else {
            TaskOutcome::Succeeded(b"ok".to_vec())
        };
        s.task_result(&w("a"), job, lease, outcome, Now::both(10))
            .expect("applied");
    }
    let rows: Vec<Job> = [waiting, done]
        .iter()
        .filter_map(|id| s.job(*id).cloned())
        .collect();

    let mut recovered = state();
    let summary = recovered.recover(rows.clone(), Now::both(20));
    assert_eq!(
        summary,
        RecoverySummary {
            loaded: 2,
            awaiting_claim: 0,
            unclaimable: 0,
            stored: 2
        }
    );
    consistent(&recovered);
    assert!(
        !recovered.has_dirty(),
        "rows loaded as they are are not rewritten"
    );
    for row in &rows {
        assert_eq!(recovered.job(row.id), Some(row));
    }
    assert_eq!(recovered.active_jobs(), 1);
    recovered.register_worker(w("b"), SessionId(2), 1, vec!["echo".into()], Now::both(20));
    recovered.sweep(Now::both(10 + 999));
    assert!(
        assignments(&recovered.take_effects()).is_empty(),
        "retry not due yet"
    );
    recovered.sweep(Now::both(10 + 1000));
    assert_eq!(
        assignments(&recovered.take_effects()).len(),
        1,
        "due retry runs"
    );
    consistent(&recovered);
}

#[test]
fn a_delayed_job_waits_for_its_time_also_after_recovery() {
    let mut s = state();
    s.register_worker(w("a"), SessionId(1), 1, vec!["echo".into()], Now::both(0));
    let delayed = SubmitRequest {
        delay_ms: Some(1000),
        ..echo("later")
    };
    let job = accepted(s.submit(delayed, Now::both(0)));
    s.assign_queued(Now::both(0));
    consistent(&s);
    assert!(assignments(&s.take_effects()).is_empty());
    let rows = stored_rows(&s);

    let mut recovered = state();
    recovered.recover(rows, Now::both(500));
    recovered.register_worker(w("b"), SessionId(2), 1, vec!["echo".into()], Now::both(500));
    recovered.take_effects();
    recovered.sweep(Now::both(999));
    consistent(&recovered);
    assert!(
        assignments(&recovered.take_effects()).is_empty(),
        "not before its time"
    );
    recovered.sweep(Now::both(1000));
    consistent(&recovered);
    let assigned: Vec<JobId> = assignments(&recovered.take_effects())
        .iter()
        .map(|a| a.1)
        .collect();
    assert_eq!(assigned, vec![job]);
}

#[test]
fn cancel_and_requeue_keep_the_admission_count_and_indexes_right() {
    let mut s = state();
    s.register_worker(w("a"), SessionId(1), 1, vec!["echo".into()], Now::both(0));
    let running = accepted(s.submit(echo("run"), Now::both(0)));
    let queued = accepted(s.submit(echo("wait"), Now::both(0)));
    s.assign_queued(Now::both(0));
    s.take_effects();
    assert_eq!(s.cancel(queued, Now::both(1)), Ok(()));
    assert_eq!(s.cancel(running, Now::both(1)), Ok(()));
    consistent(&s);
    assert_eq!(s.active_jobs(), 0);
    assert_eq!(
        s.cancel(running, Now::both(2)),
        Err(CancelRefused::AlreadyFinished(JobState::Cancelled))
    );
    assert_eq!(s.requeue(running, Now::both(3)), Ok(()));
    consistent(&s);
    assert_eq!(s.active_jobs(), 1);
    s.assign_queued(Now::both(3));
    let assigned: Vec<JobId> = assignments(&s.take_effects()).iter().map(|a| a.1).collect();
    assert_eq!(
        assigned,
        vec![running],
        "the freed slot runs the requeued job"
    );
    assert_eq!(
        s.requeue(running, Now::both(4)),
        Err(RequeueRefused::NotFailed(JobState::Running))
    );
}

#[test]
fn a_refused_transition_changes_nothing_and_names_the_move() {
    let mut s = state();
    let job = accepted(s.submit(echo("x"), Now::both(0)));
    s.take_dirty();
    let before = s.job(job).cloned();
    let refused = s.transition(job, JobState::Succeeded, Now::both(1), |j| j.attempts = 99);
    assert_eq!(
        refused,
        Err(TransitionRefused::Illegal {
            job,
            from: JobState::Queued,
            to: JobState::Succeeded
        })
    );
    assert_eq!(s.job(job).cloned(), before, "update was not run");
    assert!(!s.has_dirty());
    consistent(&s);
    let unknown = JobId::mint();
    assert_eq!(
        s.transition(unknown, JobState::Running, Now::both(1), |_| {}),
        Err(TransitionRefused::UnknownJob(unknown))
    );
}

#[test]
fn the_invariant_check_names_a_slot_held_for_a_job_that_is_not_running() {
    let mut s = state();
    s.register_worker(w("a"), SessionId(1), 2, vec!["echo".into()], Now::both(0));
    let job = accepted(s.submit(echo("x"), Now::both(0)));
    consistent(&s);
    s.workers.start_job(&w("a"), job);
    let err = s.check_invariants().expect_err("a leaked slot");
    assert!(
        err.contains(&job.to_string()) && err.contains("worker a"),
        "{err}"
    );
}

#[test]
fn a_retry_of_every_failed_job_requeues_at_most_its_limit_oldest_first() {
    let mut s = state();
    s.register_worker(w("a"), SessionId(1), 3, vec!["echo".into()], Now::both(0));
    let jobs: Vec<JobId> = (0..3)
        .map(|i| {
            let mut req = echo(&format!("{i}"));
            req.max_attempts = Some(1);
            accepted(s.submit(req, Now::both(i)))
        })
        .collect();
    s.assign_queued(Now::both(3));
    for (_, job, lease) in assignments(&s.take_effects()) {
        s.task_result(
            &w("a"),
            job,
            lease,
            TaskOutcome::failed("boom"),
            Now::both(4),
        )
        .expect("applied");
    }
    assert_eq!(
        s.requeue_failed(None, None, 2, Now::both(5)),
        (jobs[..2].to_vec(), None)
    );
    consistent(&s);
    assert_eq!(
        s.requeue_failed(Some("other"), None, 2, Now::both(6)),
        (vec![], None)
    );
    assert_eq!(
        s.requeue_failed(None, Some(4), 2, Now::both(7)),
        (vec![jobs[2]], None)
    );
    assert_eq!(s.active_jobs(), 3);
}

#[test]
fn summaries_page_by_cursor_and_chunks_stay_within_the_bytes() {
    let mut s = state();
    let ids: Vec<JobId> = (0..3)
        .map(|i| accepted(s.submit(echo(&"m".repeat(100)), Now::both(i))))
        .collect();
    let first = s.list_summaries(None, None, None, 2, Now::both(10));
    assert_eq!(
        first.jobs.iter().map(|j| j.job_id).collect::<Vec<_>>(),
        [ids[2], ids[1]]
    );
    assert!(first
        .jobs
        .iter()
        .all(|j| j.payload_bytes > 100 && j.result_bytes.is_none()));
    let next = first.next.expect("one more");
    assert_eq!(next, first.jobs[1].cursor());
    let rest = s.list_summaries(None, None, Some(next), 2, Now::both(10));
    assert_eq!(rest.jobs.len(), 1);
    assert_eq!((rest.jobs[0].job_id, rest.next), (ids[0], None));

    let job = s.job(ids[0]).expect("held");
    let total = job.payload.len() as u64;
    let chunk = job.chunk(ByteField::Payload, 3, 10).expect("chunk");
    assert_eq!(
        (chunk.offset, chunk.total, chunk.bytes.as_slice()),
        (3, total, &job.payload[3..13])
    );
    let tail = job.chunk(ByteField::Payload, total - 2, 10).expect("tail");
    assert_eq!(tail.bytes.len(), 2);
    assert!(job
        .chunk(ByteField::Payload, total, 10)
        .expect("end")
        .bytes
        .is_empty());
    let past = job
        .chunk(ByteField::Payload, total + 1, 10)
        .expect_err("past the end");
    assert!(past.contains("past the end of the payload"), "{past}");
    let none = job
        .chunk(ByteField::Result, 0, 10)
        .expect_err("QUEUED has no result");
    assert!(none.contains("is QUEUED"), "{none}");
}
