//! Firing on the coordinator's state with a manual `now`: a slot fires
//! once, each overlap policy, pause and resume, catch-up after the clock
//! jumps, restoring after a restart, and the bound on schedules.

use crate::scheduler::schedule::firing::SCHEDULES_PER_PASS;
use crate::scheduler::schedule::keys::slot_key;
use crate::scheduler::schedule::{ScheduleRefused, ScheduleStep, ScheduleWrite, StoredSchedule};
use crate::scheduler::tests::{consistent, state};
use crate::scheduler::CoordinatorState;
use taskyard_client::clock::Now;
use taskyard_protocol::{
    ClientRequest, ClientResponse, JobState, Overlap, ScheduleRefusal, ScheduleSpec,
};

const MINUTE: i64 = 60_000;
/// 2026-12-05T00:00:00Z: slots of `* * * * *` fall on whole minutes of it.
const T0: i64 = 1_764_892_800_000;

fn every_minute(name: &str, overlap: Overlap) -> ScheduleSpec {
    let payload = taskyard_protocol::payloads::encode_json(&serde_json::json!({"message": "hi"}));
    ScheduleSpec {
        cron: Some("* * * * *".into()),
        overlap,
        ..ScheduleSpec::new(name, "echo", payload)
    }
}

fn at(ms: i64) -> Now {
    Now::both(ms)
}

/// The keys of the jobs the schedule `name` fired, oldest first.
fn fired_keys(s: &CoordinatorState, name: &str) -> Vec<String> {
    let view = s.schedule_named(name).expect("the schedule exists");
    let mut keys: Vec<String> = view
        .recent_runs
        .iter()
        .filter_map(|run| s.job(run.job_id)?.idempotency_key.clone())
        .collect();
    keys.reverse();
    keys
}

fn created(s: &mut CoordinatorState, spec: ScheduleSpec, now: Now) {
    s.create_schedule(spec, now).expect("created");
}

/// `n` every-minute schedules (`max-schedules` raised to fit), created at T0.
fn created_every_minute(s: &mut CoordinatorState, n: usize) {
    s.set_max_schedules(n);
    for i in 0..n {
        created(s, every_minute(&format!("m{i:04}"), Overlap::Allow), at(T0));
    }
}

#[test]
fn a_slot_fires_once_however_often_the_sweep_runs() {
    let mut s = state();
    created(&mut s, every_minute("m", Overlap::Allow), at(T0 + 1));
    s.sweep(at(T0 + 30_000));
    assert!(
        fired_keys(&s, "m").is_empty(),
        "no slot before the first minute"
    );
    for offset in [MINUTE, MINUTE + 1, MINUTE + 500, MINUTE + 59_999] {
        s.sweep(at(T0 + offset));
    }
    assert_eq!(fired_keys(&s, "m"), vec![slot_key("m", T0 + MINUTE)]);
    s.sweep(at(T0 + 2 * MINUTE));
    assert_eq!(
        fired_keys(&s, "m"),
        vec![slot_key("m", T0 + MINUTE), slot_key("m", T0 + 2 * MINUTE)]
    );
    consistent(&s);
}

#[test]
fn skip_skips_a_slot_while_the_previous_run_is_active() {
    let mut s = state();
    created(&mut s, every_minute("m", Overlap::Skip), at(T0));
    s.sweep(at(T0 + MINUTE));
    s.sweep(at(T0 + 2 * MINUTE));
    assert_eq!(fired_keys(&s, "m"), vec![slot_key("m", T0 + MINUTE)]);
    assert_eq!(s.schedule_named("m").expect("exists").skipped, 1);
    let first = s.schedule_named("m").expect("exists").recent_runs[0].job_id;
    s.cancel(first, at(T0 + 2 * MINUTE + 1)).expect("cancelled");
    s.sweep(at(T0 + 3 * MINUTE));
    assert_eq!(fired_keys(&s, "m").len(), 2, "fires again once it ended");
    consistent(&s);
}

#[test]
fn allow_fires_every_slot_whatever_is_active() {
    let mut s = state();
    created(&mut s, every_minute("m", Overlap::Allow), at(T0));
    for k in 1..=3 {
        s.sweep(at(T0 + k * MINUTE));
    }
    assert_eq!(fired_keys(&s, "m").len(), 3);
}

#[test]
fn buffer_one_fires_the_newest_held_slot_when_the_run_ends() {
    let mut s = state();
    created(&mut s, every_minute("m", Overlap::BufferOne), at(T0));
    for k in 1..=3 {
        s.sweep(at(T0 + k * MINUTE));
    }
    let view = s.schedule_named("m").expect("exists");
    assert_eq!(view.recent_runs.len(), 1, "slots 2 and 3 held, 2 replaced");
    assert_eq!(view.skipped, 1);
    s.cancel(view.recent_runs[0].job_id, at(T0 + 3 * MINUTE + 1))
        .expect("cancelled");
    s.sweep(at(T0 + 3 * MINUTE + 500));
    assert_eq!(
        fired_keys(&s, "m"),
        vec![slot_key("m", T0 + MINUTE), slot_key("m", T0 + 3 * MINUTE)],
        "the held slot fires right after the run ends"
    );
    consistent(&s);
}

#[test]
fn cancel_previous_cancels_the_active_run_and_fires() {
    let mut s = state();
    created(&mut s, every_minute("m", Overlap::CancelPrevious), at(T0));
    s.sweep(at(T0 + MINUTE));
    s.sweep(at(T0 + 2 * MINUTE));
    let runs = s.schedule_named("m").expect("exists").recent_runs;
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0].state, Some(JobState::Queued));
    assert_eq!(runs[1].state, Some(JobState::Cancelled));
    consistent(&s);
}

#[test]
fn a_paused_schedule_fires_nothing_and_resumes_without_the_missed_slots() {
    let mut s = state();
    created(&mut s, every_minute("m", Overlap::Allow), at(T0));
    s.set_schedule_paused("m", true, at(T0 + 1))
        .expect("paused");
    s.sweep(at(T0 + 5 * MINUTE));
    assert!(fired_keys(&s, "m").is_empty());
    assert!(s.schedule_named("m").expect("exists").next_fires.is_empty());
    s.set_schedule_paused("m", false, at(T0 + 5 * MINUTE + 10))
        .expect("resumed");
    s.sweep(at(T0 + 5 * MINUTE + 20));
    assert!(fired_keys(&s, "m").is_empty(), "missed slots are not fired");
    s.sweep(at(T0 + 6 * MINUTE));
    assert_eq!(fired_keys(&s, "m"), vec![slot_key("m", T0 + 6 * MINUTE)]);
}

#[test]
fn after_a_jump_only_the_catchup_window_fires_oldest_first() {
    let mut s = state();
    created(&mut s, every_minute("one", Overlap::Allow), at(T0));
    let mut wide = every_minute("three", Overlap::Allow);
    wide.catchup_window_ms = Some(3 * MINUTE as u64);
    created(&mut s, wide, at(T0));
    s.sweep(at(T0 + 10 * MINUTE + 5));
    assert_eq!(
        fired_keys(&s, "one"),
        vec![slot_key("one", T0 + 10 * MINUTE)],
        "default window: the most recent missed slot only"
    );
    assert_eq!(s.schedule_named("one").expect("exists").skipped, 9);
    assert_eq!(
        fired_keys(&s, "three"),
        (8..=10)
            .map(|k| slot_key("three", T0 + k * MINUTE))
            .collect::<Vec<_>>()
    );
    assert_eq!(s.schedule_named("three").expect("exists").skipped, 7);
}

#[test]
fn a_window_under_a_second_is_honoured_and_the_default_fires_a_slot_a_second_late() {
    let mut s = state();
    created(&mut s, every_minute("default", Overlap::Allow), at(T0));
    let mut narrow = every_minute("narrow", Overlap::Allow);
    narrow.catchup_window_ms = Some(500);
    created(&mut s, narrow, at(T0));
    // Both slots decided 700 ms late: within one slot, past 500 ms.
    s.sweep(at(T0 + MINUTE + 700));
    assert_eq!(
        fired_keys(&s, "default"),
        vec![slot_key("default", T0 + MINUTE)]
    );
    assert!(
        fired_keys(&s, "narrow").is_empty(),
        "700 ms is past its 500 ms window"
    );
    assert_eq!(s.schedule_named("narrow").expect("exists").skipped, 1);
    s.sweep(at(T0 + 2 * MINUTE + 499));
    assert_eq!(
        fired_keys(&s, "narrow"),
        vec![slot_key("narrow", T0 + 2 * MINUTE)]
    );
    consistent(&s);
}

#[test]
fn restored_schedules_resume_after_their_last_slot_and_keys_stop_a_second_fire() {
    let mut s = state();
    created(&mut s, every_minute("m", Overlap::Allow), at(T0));
    s.sweep(at(T0 + MINUTE));
    let ScheduleWrite::Put(record) = s.set_schedule_paused("m", false, at(T0)).expect("ok") else {
        panic!("a put");
    };
    // A restart: the jobs come back from the database, then the schedule,
    // stored before its first slot was recorded in it.
    let mut restarted = state();
    restarted.recover(
        crate::scheduler::tests::stored_rows(&s),
        at(T0 + MINUTE + 10),
    );
    let stale = StoredSchedule {
        last_slot: None,
        updated_at: T0,
        fired: 7,
        ..*record
    };
    assert!(restarted.restore_schedules(vec![stale]).is_empty());
    assert_eq!(
        restarted.schedule_named("m").expect("restored").fired,
        7,
        "the stored fired count comes back"
    );
    restarted.sweep(at(T0 + MINUTE + 20));
    assert_eq!(
        fired_keys(&restarted, "m"),
        vec![slot_key("m", T0 + MINUTE)]
    );
    restarted.sweep(at(T0 + 2 * MINUTE));
    assert_eq!(fired_keys(&restarted, "m").len(), 2);
    assert_eq!(
        restarted.schedule_named("m").expect("m").fired,
        8,
        "one more fired"
    );
    consistent(&restarted);
}

#[test]
fn schedules_are_bounded_and_names_unique() {
    let mut s = state();
    s.set_max_schedules(2);
    created(&mut s, every_minute("a", Overlap::Skip), at(T0));
    assert_eq!(
        s.create_schedule(every_minute("a", Overlap::Skip), at(T0)),
        Err(ScheduleRefused::Exists("a".into()))
    );
    created(&mut s, every_minute("b", Overlap::Skip), at(T0));
    assert_eq!(
        s.create_schedule(every_minute("c", Overlap::Skip), at(T0)),
        Err(ScheduleRefused::TooMany { max: 2 })
    );
    let mut bad = every_minute("d", Overlap::Skip);
    bad.cron = Some("nope".into());
    s.delete_schedule("b").expect("deleted");
    let refused = s.create_schedule(bad, at(T0)).expect_err("refused");
    assert!(refused.to_string().starts_with("cron:"), "{refused}");
    assert!(s.schedule_named("d").is_none(), "nothing kept");
}

#[test]
fn a_trigger_fires_now_without_using_a_slot() {
    let mut s = state();
    created(&mut s, every_minute("m", Overlap::Skip), at(T0));
    s.trigger_named_schedule("m", at(T0 + 10))
        .expect("triggered");
    let keys = fired_keys(&s, "m");
    assert_eq!(keys.len(), 1);
    assert!(keys[0].starts_with("schedule:m:trigger:"), "{}", keys[0]);
    assert_eq!(
        s.schedule_named("m").expect("exists").next_fires[0],
        T0 + MINUTE
    );
}

#[test]
fn a_fired_job_names_its_schedule_and_slot_and_a_triggered_one_its_schedule() {
    let mut s = state();
    created(&mut s, every_minute("m", Overlap::Allow), at(T0));
    s.sweep(at(T0 + MINUTE));
    s.trigger_named_schedule("m", at(T0 + MINUTE + 10))
        .expect("triggered");
    let runs = s.schedule_named("m").expect("exists").recent_runs;
    let views: Vec<_> = runs
        .iter()
        .filter_map(|run| s.status(run.job_id, at(T0 + MINUTE + 20)))
        .collect();
    let origins: Vec<_> = views
        .iter()
        .map(|v| (v.schedule.as_deref(), v.schedule_slot))
        .collect();
    assert_eq!(
        origins,
        [(Some("m"), None), (Some("m"), Some(T0 + MINUTE))],
        "newest first: the trigger, then the slot"
    );
    assert_eq!(
        views[1].idempotency_key.as_deref(),
        Some(slot_key("m", T0 + MINUTE).as_str())
    );
    let summary = &s.list_page(None, None, 10, at(T0 + MINUTE + 20)).jobs;
    assert!(
        summary
            .iter()
            .any(|j| j.schedule.as_deref() == Some("m") && j.schedule_slot == Some(T0 + MINUTE)),
        "a list row names them too"
    );
}

#[test]
fn a_declared_schedule_unchanged_at_start_up_is_not_rewritten() {
    let mut s = state();
    let declared = ScheduleSpec {
        from_config: true,
        ..every_minute("m", Overlap::Skip)
    };
    let first = s
        .upsert_schedule(declared.clone(), at(T0))
        .expect("created");
    assert!(matches!(first, Some(ScheduleWrite::Put(_))));
    // Rewriting it would move its floor to now and lose the slots missed
    // while the coordinator was down.
    assert_eq!(
        s.upsert_schedule(declared.clone(), at(T0 + 10 * MINUTE)),
        Ok(None)
    );
    let changed = ScheduleSpec {
        jitter_ms: 5,
        ..declared
    };
    let Ok(Some(ScheduleWrite::Put(record))) = s.upsert_schedule(changed, at(T0 + 11 * MINUTE))
    else {
        panic!("a changed definition is written");
    };
    assert_eq!(record.updated_at, T0 + 11 * MINUTE, "its floor: the change");
}

#[test]
fn many_schedules_due_at_once_are_decided_a_bounded_pass_at_a_time() {
    let mut s = state();
    let n = 2 * SCHEDULES_PER_PASS + 10;
    created_every_minute(&mut s, n);
    let fired = |s: &CoordinatorState| s.active_jobs() as usize;
    assert!(s.sweep(at(T0 + MINUTE)), "a full pass asks for another");
    assert_eq!(fired(&s), SCHEDULES_PER_PASS);
    assert!(s.schedule_pass(at(T0 + MINUTE + 1)));
    assert_eq!(fired(&s), 2 * SCHEDULES_PER_PASS);
    assert!(
        !s.schedule_pass(at(T0 + MINUTE + 2)),
        "the rest fit one pass"
    );
    assert_eq!(fired(&s), n);
    assert!(!s.schedule_pass(at(T0 + MINUTE + 3)), "nothing left");
    assert_eq!(fired(&s), n, "each slot once");
    assert_eq!(s.next_schedule_due(), Some(T0 + 2 * MINUTE));
    consistent(&s);
}

#[test]
fn a_pass_refused_by_admission_asks_for_no_other_until_the_sweep() {
    let mut s = CoordinatorState::new(
        crate::scheduler::Policy {
            max_active_jobs: 5,
            ..crate::scheduler::tests::policy()
        },
        slog::Logger::root(slog::Discard, slog::o!()),
    );
    let n = SCHEDULES_PER_PASS + 1;
    created_every_minute(&mut s, n);
    assert!(!s.sweep(at(T0 + MINUTE)), "refused: no pass at once");
    assert_eq!(s.active_jobs(), 5, "admission holds the rest");
    assert_eq!(
        s.next_schedule_due(),
        Some(T0 + MINUTE),
        "refused slots stay due for the next sweep"
    );
}

#[test]
fn a_schedule_request_is_decided_on_the_state_and_a_change_waits_for_its_write() {
    let mut s = state();
    let create = || ClientRequest::CreateSchedule(Box::new(every_minute("a", Overlap::Skip)));
    // A change comes back as the write to store, with the answer to give once stored.
    match s.schedule_request(create(), at(T0)) {
        Ok(ScheduleStep::Store(ScheduleWrite::Put(_), ClientResponse::Schedule(view))) => {
            assert_eq!(view.spec.name, "a")
        }
        _ => panic!("a create is stored before it is answered"),
    }
    // A second create is refused at once, naming the field; nothing to store.
    match s.schedule_request(create(), at(T0)) {
        Ok(ScheduleStep::Answer(ClientResponse::ScheduleRefused { kind, field, .. })) => {
            assert_eq!(kind, ScheduleRefusal::Exists);
            assert_eq!(field.as_deref(), Some("name"));
        }
        _ => panic!("a duplicate is refused"),
    }
    // Reads are answered at once.
    match s.schedule_request(ClientRequest::ListSchedules { after: None }, at(T0)) {
        Ok(ScheduleStep::Answer(ClientResponse::Schedules { schedules, more })) => {
            assert_eq!(schedules.len(), 1);
            assert!(!more);
        }
        _ => panic!("a list is answered at once"),
    }
    // Deleting stores the deletion and answers with the name.
    match s.schedule_request(ClientRequest::DeleteSchedule { name: "a".into() }, at(T0)) {
        Ok(ScheduleStep::Store(
            ScheduleWrite::Delete(_),
            ClientResponse::ScheduleDeleted { name },
        )) => {
            assert_eq!(name, "a")
        }
        _ => panic!("a delete is stored before it is answered"),
    }
    // Anything else is not a schedule request.
    assert!(s.schedule_request(ClientRequest::Ping, at(T0)).is_err());
    consistent(&s);
}
