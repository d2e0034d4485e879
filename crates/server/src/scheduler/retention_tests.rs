//! The hot set: how many finished jobs memory keeps, that only durable
//! rows leave it, and what stays right after they do.

use super::*;
use crate::scheduler::Policy;
use crate::scheduler::Stored;
use serde_json::json;
use taskyard_client::clock::Now;
use taskyard_protocol::payloads::encode_json;
use taskyard_protocol::{JobState, SubmitAnswer, SubmitRequest};

fn state(max_finished: usize, max_age_ms: u64) -> CoordinatorState {
    let policy = Policy {
        max_active_jobs: 100_000,
        ..crate::scheduler::tests::policy()
    };
    let mut s = CoordinatorState::new(policy, slog::Logger::root(slog::Discard, slog::o!()));
    s.set_retention(Retention {
        max_finished,
        max_age_ms,
        max_bytes: u64::MAX,
    });
    s
}

fn submit(s: &mut CoordinatorState, key: Option<&str>, now: i64) -> JobId {
    let mut req = SubmitRequest::new("echo", encode_json(&json!({ "message": "hi" })));
    req.idempotency_key = key.map(str::to_string);
    match s.submit(req, Now::both(now)) {
        SubmitAnswer::Accepted { job_id, .. } => job_id,
        SubmitAnswer::Rejected(r) => panic!("rejected: {r}"),
    }
}

/// Submits and cancels `n` jobs at `now`, then commits them as `batch`
/// (the rows are taken, as the group commit would).
fn finish_jobs(s: &mut CoordinatorState, n: usize, now: i64, batch: u64) -> Vec<JobId> {
    let ids: Vec<JobId> = (0..n).map(|_| submit(s, None, now)).collect();
    for id in &ids {
        s.cancel(*id, Now::both(now)).expect("cancelled");
    }
    s.seal_finished(batch);
    s.take_dirty();
    ids
}

/// Evicts step after step, as the coordinator does, until a step is not
/// full; returns how many in all.
fn evict_all(s: &mut CoordinatorState, now: i64, durable: u64) -> usize {
    let mut evicted = 0;
    loop {
        let step = s.evict_finished(Now::both(now), durable);
        evicted += step;
        if step < EVICTIONS_PER_STEP {
            return evicted;
        }
    }
}

fn cancelled(s: &CoordinatorState) -> u64 {
    s.stats(Now::both(0)).counts[JobState::ALL
        .iter()
        .position(|st| *st == JobState::Cancelled)
        .expect("a state")]
    .count
}

#[test]
fn one_call_evicts_a_bounded_step_and_the_next_ones_the_rest() {
    let mut s = state(100, u64::MAX);
    let n = 2 * EVICTIONS_PER_STEP + 100 + 7;
    finish_jobs(&mut s, n, 0, 1);
    let steps: Vec<usize> = (0..4).map(|_| s.evict_finished(Now::both(0), 1)).collect();
    assert_eq!(steps, vec![EVICTIONS_PER_STEP, EVICTIONS_PER_STEP, 7, 0]);
    assert_eq!(s.finished_in_memory(), 100);
    s.check_invariants().expect("invariants hold");
}

#[test]
fn memory_keeps_at_most_the_configured_number_of_finished_jobs() {
    let mut s = state(100, u64::MAX);
    for round in 0..10 {
        finish_jobs(&mut s, 1000, round, round as u64 + 1);
        evict_all(&mut s, round, round as u64 + 1);
        s.check_invariants().expect("invariants hold");
        assert!(s.finished_in_memory() <= 100, "{}", s.finished_in_memory());
    }
    let active = submit(&mut s, None, 20);
    s.evict_finished(Now::both(20), 10);
    assert_eq!(s.finished_in_memory(), 100);
    assert_eq!(s.jobs_in_memory(), 101, "the window plus the active job");
    assert!(s.holds(active));
    assert_eq!(cancelled(&s), 10_000, "counts are counters, not rows held");
}

#[test]
fn finished_jobs_older_than_the_age_bound_are_evicted() {
    let mut s = state(usize::MAX, 1000);
    let old = finish_jobs(&mut s, 3, 0, 1);
    let young = finish_jobs(&mut s, 2, 900, 2);
    assert_eq!(s.evict_finished(Now::both(1001), 2), 3);
    assert!(old.iter().all(|id| !s.holds(*id)));
    assert!(young.iter().all(|id| s.holds(*id)));
    s.check_invariants().expect("invariants hold");
}

#[test]
fn a_job_whose_finish_is_not_durable_is_not_evicted() {
    let mut s = state(0, u64::MAX);
    let ids = finish_jobs(&mut s, 2, 0, 1);
    assert_eq!(
        s.evict_finished(Now::both(0), 0),
        0,
        "batch 1 is not committed yet"
    );
    let unsealed = submit(&mut s, None, 1);
    s.cancel(unsealed, Now::both(1)).expect("cancelled");
    assert_eq!(s.evict_finished(Now::both(1), 1), 2, "batch 1 is durable");
    assert!(!ids.iter().any(|id| s.holds(*id)));
    assert!(s.holds(unsealed), "not yet tagged with a batch");
    s.seal_finished(2);
    assert_eq!(s.evict_finished(Now::both(1), 2), 0, "still dirty");
    s.take_dirty();
    assert_eq!(s.evict_finished(Now::both(1), 2), 1);
    s.check_invariants().expect("invariants hold");
}

#[test]
fn a_requeued_job_is_not_evicted_and_its_later_finish_counts_once() {
    let mut s = state(1, u64::MAX);
    let ids = finish_jobs(&mut s, 1, 0, 1);
    s.requeue(ids[0], Now::both(1)).expect("requeued");
    assert_eq!(s.finished_in_memory(), 0);
    s.cancel(ids[0], Now::both(2)).expect("cancelled again");
    s.seal_finished(2);
    s.take_dirty();
    assert_eq!(s.finished_in_memory(), 1);
    assert_eq!(
        s.evict_finished(Now::both(2), 2),
        0,
        "one finished job fits the window"
    );
    finish_jobs(&mut s, 1, 3, 3);
    assert_eq!(s.evict_finished(Now::both(3), 3), 1);
    assert!(!s.holds(ids[0]), "the oldest finish went first");
    s.check_invariants().expect("invariants hold");
}

#[test]
fn the_idempotency_key_of_an_evicted_job_still_returns_its_id() {
    let mut s = state(0, u64::MAX);
    let first = submit(&mut s, Some("k"), 0);
    s.cancel(first, Now::both(0)).expect("cancelled");
    s.seal_finished(1);
    s.take_dirty();
    assert_eq!(s.evict_finished(Now::both(0), 1), 1);
    assert!(!s.holds(first));
    assert_eq!(submit(&mut s, Some("k"), 1), first);
    assert!(!s.has_dirty(), "nothing new was created");
}

/// A stored job as recovery receives it.
fn stored_job(s: &mut CoordinatorState, key: &str, now: i64) -> crate::scheduler::Job {
    let id = submit(s, Some(key), now);
    s.job(id).expect("held").clone()
}

#[test]
fn recovery_takes_counts_keys_and_sequence_from_the_whole_table_but_loads_only_what_it_is_given() {
    let mut source = state(10, u64::MAX);
    let active = stored_job(&mut source, "active", 1);
    let mut done = stored_job(&mut source, "done", 2);
    done.state = JobState::Succeeded;
    done.finished_at = Some(3);
    let evicted_long_ago = JobId::mint();
    let stored = Stored {
        jobs: vec![active.clone(), done.clone()],
        idempotency: vec![("old".into(), evicted_long_ago)],
        counts: vec![
            ("echo".into(), JobState::Queued, 1),
            ("echo".into(), JobState::Succeeded, 1_000),
        ],
        newest: Some((5_000, 9)),
    };
    let mut s = state(0, u64::MAX);
    let summary = s.recover_stored(stored, Now::both(10));
    assert_eq!((summary.loaded, summary.stored), (2, 1_001));
    s.check_invariants().expect("invariants hold");
    let list = s.list_page(None, None, 10, Now::both(10));
    assert_eq!(list.jobs.len(), 2, "only the loaded jobs are in memory");
    let succeeded = list.counts.iter().find(|c| c.state == JobState::Succeeded);
    assert_eq!(
        succeeded.map(|c| c.count),
        Some(1_000),
        "footers count the table"
    );
    assert_eq!(submit(&mut s, Some("old"), 11), evicted_long_ago);
    let new = submit(&mut s, None, 11);
    assert_eq!(s.job(new).map(|j| j.sequence), Some(5_001));
    assert_eq!(
        s.evict_finished(Now::both(11), 0),
        1,
        "a loaded finished row is durable"
    );
    assert!(!s.holds(done.id) && s.holds(active.id));
}

#[test]
fn a_job_recovery_fails_stays_in_memory_until_its_row_is_committed() {
    // Without a lease nobody can claim it: it fails at recovery. With one
    // it fails once nobody claimed it within heartbeat-timeout-millis.
    for leased in [false, true] {
        let mut source = state(10, u64::MAX);
        let id = submit(&mut source, None, 1);
        let mut running = source.job(id).expect("held").clone();
        running.state = JobState::Running;
        running.attempts = running.max_attempts;
        if leased {
            running.lease = Some(taskyard_protocol::LeaseId::new_random());
            running.worker_id = Some(taskyard_protocol::WorkerId("w".into()));
        }
        let mut s = state(0, u64::MAX);
        let summary = s.recover(vec![running], Now::both(10));
        assert_eq!(
            (summary.awaiting_claim, summary.unclaimable),
            if leased { (1, 0) } else { (0, 1) }
        );
        let later = Now::both(10 + 6000);
        s.sweep(later);
        assert_eq!(s.job(id).map(|j| j.state), Some(JobState::Failed));
        assert_eq!(
            s.evict_finished(later, 0),
            0,
            "its FAILED row is not stored yet"
        );
        s.seal_finished(1);
        s.take_dirty();
        assert_eq!(s.evict_finished(later, 0), 0);
        assert_eq!(s.evict_finished(later, 1), 1);
    }
}

#[test]
fn an_expired_job_stops_counting_and_its_key_is_free_unless_memory_changed_it_since() {
    let mut s = state(10, u64::MAX);
    let gone = submit(&mut s, Some("a"), 0);
    let requeued = submit(&mut s, Some("b"), 0);
    for id in [gone, requeued] {
        s.cancel(id, Now::both(0)).expect("cancelled");
    }
    s.seal_finished(1);
    s.take_dirty();
    s.requeue(requeued, Now::both(1))
        .expect("requeued, not yet written");
    s.forget_expired(gone, Some("a"), "echo", JobState::Cancelled);
    s.forget_expired(requeued, Some("b"), "echo", JobState::Cancelled);
    s.check_invariants().expect("invariants hold");
    assert!(!s.holds(gone));
    assert!(s.holds(requeued), "its pending write stores it again");
    assert_eq!(cancelled(&s), 0);
    assert_ne!(submit(&mut s, Some("a"), 2), gone, "the key expired");
}

#[test]
fn a_restored_job_requeues_like_one_never_evicted_and_is_restored_once() {
    let mut s = state(0, u64::MAX);
    let id = submit(&mut s, None, 0);
    s.cancel(id, Now::both(0)).expect("cancelled");
    let stored = s.job(id).expect("held").clone();
    s.seal_finished(1);
    s.take_dirty();
    s.evict_finished(Now::both(0), 1);
    s.restore(stored.clone(), Now::both(1));
    s.restore(stored, Now::both(1));
    assert_eq!(s.jobs_in_memory(), 1);
    s.requeue(id, Now::both(1)).expect("requeued");
    s.check_invariants().expect("invariants hold");
    assert_eq!(cancelled(&s), 0, "moved, not counted twice");
    assert_eq!(s.active_jobs(), 1);
}

/// Found by the property test: a job finished and requeued within one
/// step leaves a stale unsealed entry at the front, which eviction pops.
#[test]
fn a_stale_unsealed_entry_popped_by_eviction_leaves_sealing_right() {
    let mut s = state(0, u64::MAX);
    let id = submit(&mut s, None, 0);
    s.cancel(id, Now::both(0)).expect("cancelled");
    s.requeue(id, Now::both(0))
        .expect("requeued in the same step");
    assert_eq!(s.evict_finished(Now::both(0), 0), 0);
    s.seal_finished(1);
    let later = finish_jobs(&mut s, 1, 1, 2);
    assert_eq!(s.evict_finished(Now::both(1), 2), 1);
    assert!(!s.holds(later[0]));
}

#[test]
fn eviction_gives_back_the_room_a_burst_of_jobs_took() {
    let mut s = state(100, u64::MAX);
    finish_jobs(&mut s, 20_000, 1, 1);
    let burst = s.jobs.capacity();
    assert!(burst >= 20_000, "{burst}");
    evict_all(&mut s, 1, 1);
    s.check_invariants().expect("invariants hold");
    assert_eq!(s.jobs.len(), 100);
    assert!(
        s.jobs.capacity() <= 4 * 100 + 16,
        "jobs map kept room for {} after the burst left",
        s.jobs.capacity()
    );
    assert!(s.finished.spare_capacity() <= 4 * 100 + 16);
}

#[test]
fn finished_jobs_past_the_byte_bound_are_evicted_oldest_first() {
    let mut s = state(usize::MAX, u64::MAX);
    s.set_retention(Retention {
        max_bytes: 10_000,
        ..Retention::UNBOUNDED
    });
    let big = |s: &mut CoordinatorState| {
        let message = "x".repeat(1_000);
        let req = SubmitRequest::new("echo", encode_json(&json!({ "message": message })));
        match s.submit(req, Now::both(0)) {
            SubmitAnswer::Accepted { job_id, .. } => job_id,
            SubmitAnswer::Rejected(r) => panic!("rejected: {r}"),
        }
    };
    let ids: Vec<JobId> = (0..30).map(|_| big(&mut s)).collect();
    for id in &ids {
        s.cancel(*id, Now::both(0)).expect("cancelled");
    }
    s.seal_finished(1);
    s.take_dirty();
    assert!(s.finished_over_bytes(), "30 payloads of ~1 KB");
    evict_all(&mut s, 0, 1);
    assert!(!s.finished_over_bytes());
    let kept: Vec<&JobId> = ids.iter().filter(|id| s.holds(**id)).collect();
    assert_eq!(
        kept.len(),
        9,
        "as many ~1,010-byte payloads as fit 10,000 bytes"
    );
    assert_eq!(
        kept,
        ids.iter().skip(21).collect::<Vec<_>>(),
        "the newest stay"
    );
    s.check_invariants().expect("invariants hold");
}
