//! `GroupCommit` without actors: scenarios asserting the exact commands,
//! then every interleaving of events up to a depth, checked against a model
//! of the database and of what each effect may reveal.

use super::*;
use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

const WINDOW: Duration = Duration::from_millis(1);
const SHUTDOWN: Duration = Duration::from_secs(10);

/// An effect: an answer or a task assignment, numbered in hold order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fx {
    Answer(u32),
    Assign(u32),
}

impl Fx {
    fn id(self) -> u32 {
        match self {
            Fx::Answer(n) | Fx::Assign(n) => n,
        }
    }
}

impl HeldEffect for Fx {
    fn starts_attempt(&self) -> bool {
        matches!(self, Fx::Assign(_))
    }

    fn awaited(&self) -> bool {
        matches!(self, Fx::Answer(_))
    }
}

fn job(n: u32) -> JobId {
    JobId(Uuid::from_u128(u128::from(n) + 1))
}

/// A row: a job at one version of its state.
type Row = (JobId, u64);

/// The coordinator's state as far as persistence is concerned: each job's
/// newest version, and which jobs changed since the last `take_dirty`.
#[derive(Debug, Clone, Default)]
struct Rows {
    latest: BTreeMap<JobId, u64>,
    dirty: Vec<JobId>,
    version: u64,
}

impl Rows {
    fn change(&mut self, jobs: impl IntoIterator<Item = u32>) {
        for n in jobs {
            self.version += 1;
            self.latest.insert(job(n), self.version);
            if !self.dirty.contains(&job(n)) {
                self.dirty.push(job(n));
            }
        }
    }
}

impl RowSource for Rows {
    type Row = Row;

    fn dirty_count(&self) -> usize {
        self.dirty.len()
    }

    fn take_dirty(&mut self) -> Vec<Row> {
        let latest = &self.latest;
        self.dirty.drain(..).map(|j| (j, latest[&j])).collect()
    }

    fn job_of(row: &Row) -> JobId {
        row.0
    }

    fn remark_dirty(&mut self, jobs: Vec<JobId>) {
        for j in jobs {
            if !self.dirty.contains(&j) {
                self.dirty.push(j);
            }
        }
    }
}

type Cmds = Vec<Command<Row, Fx>>;

fn gc() -> GroupCommit<Fx> {
    GroupCommit::new(WINDOW, SHUTDOWN)
}

fn commit(batch: u64, rows: Vec<Row>, jobs: usize) -> Command<Row, Fx> {
    Command::Commit { batch, rows, jobs }
}

#[test]
fn at_rest_a_change_is_committed_at_once_and_its_answer_released_after() {
    let (mut g, mut rows) = (gc(), Rows::default());
    rows.change([1]);
    let sent = g.step([Fx::Answer(1)], &mut rows);
    assert_eq!(sent, vec![commit(1, vec![(job(1), 1)], 1)]);
    assert_eq!(g.held(), 1);
    let done = g.committed(1, Ok(()), &mut rows);
    assert_eq!(done, vec![Command::Release(vec![Fx::Answer(1)])]);
    assert_eq!((g.held(), g.durable()), (0, 1));
    assert_eq!(
        g.stats(),
        CommitStats {
            batches: 1,
            rows: 1
        }
    );
}

#[test]
fn a_read_with_nothing_pending_is_released_at_once_and_one_behind_a_batch_waits_for_it() {
    let (mut g, mut rows) = (gc(), Rows::default());
    assert_eq!(
        g.step([Fx::Answer(1)], &mut rows),
        vec![Command::Release(vec![Fx::Answer(1)])]
    );
    rows.change([1]);
    g.step([Fx::Answer(2)], &mut rows);
    assert_eq!(g.step([Fx::Answer(3)], &mut rows), vec![], "read waits");
    assert_eq!(
        g.committed(1, Ok(()), &mut rows),
        vec![Command::Release(vec![Fx::Answer(2), Fx::Answer(3)])]
    );
}

#[test]
fn changes_made_while_a_batch_is_in_flight_share_the_next_batch() {
    let (mut g, mut rows) = (gc(), Rows::default());
    rows.change([1]);
    g.step([Fx::Answer(1)], &mut rows);
    for n in 2..=4 {
        rows.change([n]);
        assert_eq!(g.step([Fx::Answer(n)], &mut rows), vec![]);
    }
    let next = g.committed(1, Ok(()), &mut rows);
    assert_eq!(
        next,
        vec![
            Command::Release(vec![Fx::Answer(1)]),
            commit(2, vec![(job(2), 2), (job(3), 3), (job(4), 4)], 3),
        ]
    );
}

#[test]
fn rows_are_staged_behind_a_batch_in_flight_once_there_are_enough() {
    let (mut g, mut rows) = (gc(), Rows::default());
    rows.change([0]);
    g.step([], &mut rows);
    rows.change(1..STAGE_MIN_ROWS as u32);
    assert_eq!(g.step([], &mut rows), vec![], "15 rows are not worth it");
    rows.change([16]);
    let staged = g.step([Fx::Answer(1)], &mut rows);
    assert!(matches!(&staged[..], [Command::Stage(r)] if r.len() == STAGE_MIN_ROWS));
    // Job 1 changes again after it was staged: written twice, one job.
    rows.change([1]);
    let next = g.committed(1, Ok(()), &mut rows);
    assert_eq!(next, vec![commit(2, vec![(job(1), 18)], 16)]);
    assert_eq!(
        g.committed(2, Ok(()), &mut rows),
        vec![Command::Release(vec![Fx::Answer(1)])]
    );
    assert_eq!(g.stats().rows, 1 + 16);
}

#[test]
fn a_failing_commit_fails_the_awaited_holds_the_rest_retries_and_reports_one_outage_per_streak() {
    let (mut g, mut rows) = (gc(), Rows::default());
    rows.change([1]);
    g.step([Fx::Assign(1), Fx::Answer(1)], &mut rows);
    let failed = g.committed(1, Err("disk full".into()), &mut rows);
    assert_eq!(
        failed,
        vec![
            Command::FailAwaited {
                effects: vec![Fx::Answer(1)],
                reason: "disk full".into()
            },
            Command::OutageBegan {
                batch: 1,
                error: "disk full".into()
            },
            Command::ArmTimer(Timer::Retry, COMMIT_RETRY_DELAY),
        ]
    );
    assert_eq!(rows.dirty, vec![job(1)], "its rows are dirty again");
    assert_eq!(g.held(), 1, "the assignment waits for a commit");
    rows.change([2]);
    assert_eq!(
        g.step([Fx::Answer(2)], &mut rows),
        vec![],
        "no commit before the retry"
    );
    assert_eq!(
        g.timer_fired(Timer::Retry, &mut rows),
        vec![commit(2, vec![(job(1), 1), (job(2), 2)], 2)]
    );
    let again = g.committed(2, Err("still full".into()), &mut rows);
    assert_eq!(
        again,
        vec![
            Command::FailAwaited {
                effects: vec![Fx::Answer(2)],
                reason: "still full".into()
            },
            Command::ArmTimer(Timer::Retry, COMMIT_RETRY_DELAY)
        ]
    );
    assert_eq!(
        g.outage(),
        Some(&Outage {
            failures: 2,
            last_error: "still full".into()
        })
    );
    g.timer_fired(Timer::Retry, &mut rows);
    assert_eq!(
        g.committed(3, Ok(()), &mut rows),
        vec![
            Command::OutageEnded { failures: 2 },
            Command::Release(vec![Fx::Assign(1)]),
        ]
    );
    assert_eq!(g.outage(), None);
}

#[test]
fn a_commit_refused_for_good_fails_the_awaited_and_abandons_once_sending_nothing_more() {
    let (mut g, mut rows) = (gc(), Rows::default());
    rows.change([1]);
    g.step([Fx::Assign(1), Fx::Answer(1)], &mut rows);
    let refused: Vec<Command<Row, Fx>> = g.refused(1, "UNIQUE constraint failed".into());
    assert_eq!(
        refused,
        vec![
            Command::FailAwaited {
                effects: vec![Fx::Answer(1)],
                reason: "UNIQUE constraint failed".into()
            },
            Command::Abandon {
                reason: "the database refused batch 1: UNIQUE constraint failed".into()
            },
        ]
    );
    assert!(g.abandoned().is_some());
    rows.change([2]);
    assert_eq!(g.step([Fx::Answer(2)], &mut rows), vec![], "nothing sent");
    assert_eq!(g.stop_requested(&mut rows), vec![], "no second ending");
    assert!(g.refused::<Row>(1, "again".into()).is_empty());
}

#[test]
fn the_next_batch_waits_for_the_round_a_commit_released_or_for_the_window() {
    let (mut g, mut rows) = (gc(), Rows::default());
    rows.change([1, 2]);
    g.step([Fx::Assign(1), Fx::Assign(2)], &mut rows);
    g.committed(1, Ok(()), &mut rows);
    g.result_arrived();
    rows.change([1]);
    assert_eq!(
        g.step([], &mut rows),
        vec![Command::ArmTimer(Timer::Coalesce, WINDOW)],
        "one result of two: wait"
    );
    g.result_arrived();
    rows.change([2]);
    assert_eq!(
        g.step([], &mut rows),
        vec![
            Command::CancelCoalesceTimer,
            commit(2, vec![(job(1), 3), (job(2), 4)], 2)
        ],
        "the round is complete"
    );
    g.committed(2, Ok(()), &mut rows);

    // A round whose result never comes waits only for the window.
    rows.change([3]);
    g.step([Fx::Assign(3)], &mut rows);
    g.committed(3, Ok(()), &mut rows);
    rows.change([4]);
    assert_eq!(
        g.step([], &mut rows),
        vec![Command::ArmTimer(Timer::Coalesce, WINDOW)]
    );
    assert_eq!(
        g.timer_fired(Timer::Coalesce, &mut rows),
        vec![commit(4, vec![(job(4), 6)], 1)]
    );
}

#[test]
fn a_batch_holding_an_answer_goes_without_waiting_for_the_round() {
    let (mut g, mut rows) = (gc(), Rows::default());
    rows.change([1, 2]);
    g.step([Fx::Assign(1), Fx::Assign(2)], &mut rows);
    g.committed(1, Ok(()), &mut rows);
    rows.change([3]);
    assert_eq!(
        g.step([Fx::Assign(3)], &mut rows),
        vec![Command::ArmTimer(Timer::Coalesce, WINDOW)],
        "an assignment alone waits for the round"
    );
    rows.change([4]);
    assert_eq!(
        g.step([Fx::Answer(4)], &mut rows),
        vec![
            Command::CancelCoalesceTimer,
            commit(2, vec![(job(3), 3), (job(4), 4)], 2)
        ],
        "an answer is held behind the batch: it goes now"
    );

    // Held behind the batch after the one in flight, an answer sends that
    // batch as soon as the commit ends; the batch after waits again.
    rows.change([5]);
    g.step([Fx::Answer(5), Fx::Assign(5)], &mut rows);
    assert_eq!(
        g.committed(2, Ok(()), &mut rows),
        vec![
            Command::Release(vec![Fx::Assign(3), Fx::Answer(4)]),
            commit(3, vec![(job(5), 5)], 1)
        ]
    );
    rows.change([6]);
    g.step([], &mut rows);
    assert_eq!(
        g.committed(3, Ok(()), &mut rows),
        vec![
            Command::Release(vec![Fx::Answer(5), Fx::Assign(5)]),
            Command::ArmTimer(Timer::Coalesce, WINDOW)
        ]
    );
}

#[test]
fn a_zero_window_never_waits_for_results() {
    let (mut g, mut rows) = (GroupCommit::new(Duration::ZERO, SHUTDOWN), Rows::default());
    rows.change([1]);
    g.step([Fx::Assign(1)], &mut rows);
    g.committed(1, Ok(()), &mut rows);
    rows.change([2]);
    assert_eq!(g.step([], &mut rows), vec![commit(2, vec![(job(2), 2)], 1)]);
}

#[test]
fn a_stop_commits_what_is_pending_without_waiting_for_results_then_stops_once() {
    let (mut g, mut rows) = (gc(), Rows::default());
    rows.change([1]);
    g.step([Fx::Assign(1)], &mut rows);
    g.committed(1, Ok(()), &mut rows);
    rows.change([2]);
    g.step([Fx::Assign(2)], &mut rows);
    let stopping = g.stop_requested(&mut rows);
    assert_eq!(
        stopping,
        vec![
            Command::ArmTimer(Timer::StopDeadline, SHUTDOWN),
            Command::CancelCoalesceTimer,
            commit(2, vec![(job(2), 2)], 1),
        ]
    );
    assert!(g.is_stopping());
    assert_eq!(g.stop_requested(&mut rows), vec![], "asked twice");
    assert_eq!(
        g.committed(2, Ok(()), &mut rows),
        vec![
            Command::Release(vec![Fx::Assign(2)]),
            Command::Stop {
                not_durable: 0,
                held: 0
            }
        ]
    );
    assert_eq!(g.timer_fired(Timer::StopDeadline, &mut rows), vec![]);
}

#[test]
fn a_stop_while_commits_fail_ends_at_the_deadline_saying_what_was_not_durable() {
    let (mut g, mut rows) = (gc(), Rows::default());
    rows.change([1, 2]);
    g.step([Fx::Assign(1)], &mut rows);
    g.stop_requested(&mut rows);
    g.committed(1, Err("read-only".into()), &mut rows);
    rows.change([3]);
    g.step([], &mut rows);
    assert_eq!(
        g.timer_fired(Timer::StopDeadline, &mut rows),
        vec![Command::Stop {
            not_durable: 3,
            held: 1
        }]
    );
    assert_eq!(g.timer_fired(Timer::Retry, &mut rows), vec![], "stopped");
    assert_eq!(g.timer_fired(Timer::StopDeadline, &mut rows), vec![]);
}

#[test]
fn a_stop_at_rest_stops_at_once() {
    let (mut g, mut rows) = (gc(), Rows::default());
    assert_eq!(
        g.stop_requested(&mut rows),
        vec![
            Command::ArmTimer(Timer::StopDeadline, SHUTDOWN),
            Command::Stop {
                not_durable: 0,
                held: 0
            }
        ]
    );
}

/// The events a coordinator can feed `GroupCommit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    /// A client changes one job and is answered.
    Submit,
    /// A sweep changes `STAGE_MIN_ROWS` jobs and assigns two.
    Round,
    /// A client reads.
    Read,
    /// A worker's result arrives and changes its job.
    Result,
    CommitOk,
    CommitFails,
    /// A `Stage` of the open transaction fails: its commit will fail.
    StageFails,
    Fire(Timer),
    Stop,
}

const EVENTS: [Event; 11] = [
    Event::Submit,
    Event::Round,
    Event::Read,
    Event::Result,
    Event::CommitOk,
    Event::CommitFails,
    Event::StageFails,
    Event::Fire(Timer::Coalesce),
    Event::Fire(Timer::Retry),
    Event::Fire(Timer::StopDeadline),
    Event::Stop,
];

/// The world around a `GroupCommit`: the database (what is durable, the
/// open transaction, the commit in flight), the armed timers, and what
/// each held effect may reveal.
#[derive(Clone)]
struct World {
    g: GroupCommit<Fx>,
    rows: Rows,
    durable: BTreeMap<JobId, u64>,
    /// Rows staged into the transaction the next commit will end.
    open: Vec<Row>,
    open_failed: bool,
    /// Batch in flight, its rows, and whether it must fail.
    in_flight: Option<(u64, Vec<Row>, bool)>,
    last_batch: u64,
    timers: BTreeSet<Timer>,
    /// Effects held, oldest first, with the versions they may reveal.
    expected: Vec<(u32, BTreeMap<JobId, u64>)>,
    next_fx: u32,
    next_job: u32,
    stop_requested: bool,
    stops: u32,
    /// Stopped at the deadline with changes not durable.
    cut_short: bool,
    in_outage: bool,
}

impl World {
    fn new() -> World {
        World {
            g: gc(),
            rows: Rows::default(),
            durable: BTreeMap::new(),
            open: Vec::new(),
            open_failed: false,
            in_flight: None,
            last_batch: 0,
            timers: BTreeSet::new(),
            expected: Vec::new(),
            next_fx: 0,
            next_job: 0,
            stop_requested: false,
            stops: 0,
            cut_short: false,
            in_outage: false,
        }
    }

    fn possible(&self, event: Event) -> bool {
        match event {
            Event::CommitOk => self.in_flight.as_ref().is_some_and(|f| !f.2),
            Event::CommitFails => self.in_flight.is_some(),
            Event::StageFails => !self.open.is_empty() && !self.open_failed,
            Event::Fire(t) => self.timers.contains(&t),
            _ => true,
        }
    }

    fn effect(&mut self, assign: bool) -> Fx {
        self.next_fx += 1;
        let n = self.next_fx;
        self.expected.push((n, self.rows.latest.clone()));
        if assign {
            Fx::Assign(n)
        } else {
            Fx::Answer(n)
        }
    }

    /// A few jobs, reused, so rows change again while staged or in flight.
    fn jobs(&mut self, n: u32) -> Vec<u32> {
        (0..n)
            .map(|_| {
                self.next_job = (self.next_job + 1) % 20;
                self.next_job
            })
            .collect()
    }

    fn apply_event(&mut self, event: Event) {
        let commands = match event {
            Event::Submit | Event::Read | Event::Round | Event::Result if self.g.is_stopping() => {
                // A stopping coordinator takes no new events.
                return;
            }
            Event::Submit => {
                let jobs = self.jobs(1);
                self.rows.change(jobs);
                let fx = self.effect(false);
                self.g.step([fx], &mut self.rows)
            }
            Event::Round => {
                let jobs = self.jobs(STAGE_MIN_ROWS as u32);
                self.rows.change(jobs);
                let fx = [self.effect(true), self.effect(true)];
                self.g.step(fx, &mut self.rows)
            }
            Event::Read => {
                let fx = self.effect(false);
                self.g.step([fx], &mut self.rows)
            }
            Event::Result => {
                self.g.result_arrived();
                let jobs = self.jobs(1);
                self.rows.change(jobs);
                self.g.step([], &mut self.rows)
            }
            Event::CommitOk | Event::CommitFails => {
                let (batch, rows, _) = self.in_flight.take().expect("possible");
                let result = if event == Event::CommitOk {
                    for (job, version) in rows {
                        let stored = self.durable.entry(job).or_default();
                        *stored = (*stored).max(version);
                    }
                    Ok(())
                } else {
                    Err("failed".to_string())
                };
                self.g.committed(batch, result, &mut self.rows)
            }
            Event::StageFails => {
                self.open_failed = true;
                return;
            }
            Event::Fire(timer) => {
                self.timers.remove(&timer);
                self.g.timer_fired(timer, &mut self.rows)
            }
            Event::Stop => {
                self.stop_requested = true;
                self.g.stop_requested(&mut self.rows)
            }
        };
        self.apply(commands);
        self.check();
    }

    fn apply(&mut self, commands: Cmds) {
        for command in commands {
            match command {
                Command::Stage(rows) => {
                    assert!(self.stops == 0, "staged after Stop");
                    self.open.extend(rows);
                }
                Command::Commit { batch, rows, jobs } => {
                    assert!(self.stops == 0, "commit after Stop");
                    assert!(self.in_flight.is_none(), "two commits in flight");
                    assert_eq!(batch, self.last_batch + 1, "batches in order");
                    self.last_batch = batch;
                    let mut all = std::mem::take(&mut self.open);
                    all.extend(rows);
                    let distinct: BTreeSet<JobId> = all.iter().map(|r| r.0).collect();
                    assert_eq!(jobs, distinct.len(), "jobs counts distinct jobs");
                    let failed = std::mem::take(&mut self.open_failed);
                    self.in_flight = Some((batch, all, failed));
                }
                Command::Release(effects) => {
                    for fx in effects {
                        assert!(!self.expected.is_empty(), "released {fx:?} twice");
                        let (id, reveals) = self.expected.remove(0);
                        assert_eq!(fx.id(), id, "released out of order");
                        for (job, version) in reveals {
                            let durable = self.durable.get(&job).copied().unwrap_or(0);
                            assert!(
                                durable >= version,
                                "{fx:?} released before {job:?} v{version} was durable"
                            );
                        }
                    }
                }
                Command::ArmTimer(timer, _) => {
                    assert!(self.timers.insert(timer), "{timer:?} armed twice");
                }
                Command::CancelCoalesceTimer => {
                    assert!(
                        self.timers.remove(&Timer::Coalesce),
                        "cancelled an unarmed timer"
                    );
                }
                Command::FailAwaited { effects, .. } => {
                    assert!(
                        self.in_flight.is_none(),
                        "failed while a commit is in flight"
                    );
                    for fx in effects {
                        assert!(fx.awaited(), "failed {fx:?}, which nobody awaits");
                        let at = self.expected.iter().position(|(id, _)| *id == fx.id());
                        let at = at.unwrap_or_else(|| panic!("failed {fx:?}, not held"));
                        self.expected.remove(at);
                    }
                }
                Command::Abandon { reason } => panic!("abandoned unasked: {reason}"),
                Command::OutageBegan { .. } => {
                    assert!(!self.in_outage);
                    self.in_outage = true;
                }
                Command::OutageEnded { .. } => {
                    assert!(self.in_outage);
                    self.in_outage = false;
                }
                Command::Stop { not_durable, held } => {
                    assert!(self.stop_requested, "stopped unasked");
                    self.stops += 1;
                    assert_eq!(self.stops, 1, "Stop twice");
                    if not_durable == 0 && held == 0 {
                        self.check_all_durable();
                    } else {
                        self.cut_short = true;
                    }
                }
            }
        }
    }

    fn check(&self) {
        assert_eq!(self.g.held(), self.expected.len(), "held effects");
        assert_eq!(self.g.outage().is_some(), self.in_outage);
    }

    fn check_all_durable(&self) {
        assert!(self.expected.is_empty(), "effects never released");
        for (job, version) in &self.rows.latest {
            assert_eq!(self.durable.get(job), Some(version), "{job:?} not durable");
        }
    }

    /// Lets persistence answer and timers fire until nothing is left:
    /// everything must then be durable and released (unless the stop
    /// deadline cut it short).
    fn drain(&mut self) {
        for _ in 0..100 {
            let next = [
                Event::CommitOk,
                Event::CommitFails,
                Event::Fire(Timer::Coalesce),
                Event::Fire(Timer::Retry),
                Event::Fire(Timer::StopDeadline),
            ]
            .into_iter()
            .find(|e| self.possible(*e));
            match next {
                Some(event) => self.apply_event(event),
                None => {
                    if !self.cut_short {
                        self.check_all_durable();
                        assert!(self.rows.dirty.is_empty() && self.open.is_empty());
                    }
                    return;
                }
            }
        }
        panic!("never quiescent");
    }
}

/// Runs `step`; a failure names the events that led to it.
fn traced(trace: &[Event], step: impl FnOnce()) {
    if let Err(e) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(step)) {
        let message = e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        panic!("after {trace:?}: {message}");
    }
}

fn explore(world: &World, depth: usize, trace: &mut Vec<Event>, leaves: &mut u64) {
    if depth == 0 {
        let mut end = world.clone();
        traced(trace, || end.drain());
        *leaves += 1;
        return;
    }
    for event in EVENTS {
        if !world.possible(event) {
            continue;
        }
        let mut next = world.clone();
        trace.push(event);
        traced(trace, || next.apply_event(event));
        explore(&next, depth - 1, trace, leaves);
        trace.pop();
    }
}

#[test]
fn every_interleaving_releases_only_durable_state_in_order_and_drains() {
    let mut leaves = 0;
    explore(&World::new(), 6, &mut Vec::new(), &mut leaves);
    assert!(leaves > 50_000, "explored {leaves} interleavings");
}

/// The rule eviction relies on: a change made when `sent()` was `s` is
/// durable exactly when `durable()` reaches `s + 1`, also when the batch
/// carrying it is staged behind one in flight, or fails and is retried.
#[test]
fn a_change_is_durable_once_the_batch_after_the_one_sent_before_it_commits() {
    let (mut g, mut rows) = (gc(), Rows::default());
    rows.change([1]);
    g.step([], &mut rows);
    rows.change(0..STAGE_MIN_ROWS as u32 + 2);
    let tag = g.sent() + 1;
    assert_eq!(tag, 2, "batch 1 is in flight; the change goes in batch 2");
    g.step([], &mut rows);
    g.committed(1, Ok(()), &mut rows);
    assert!(g.durable() < tag, "batch 1 did not carry the change");
    let failed = g.committed(2, Err("disk full".into()), &mut rows);
    assert!(g.durable() < tag, "the batch carrying it failed");
    assert!(
        failed
            .iter()
            .any(|c| matches!(c, Command::Stage(r) if r.len() > STAGE_MIN_ROWS)),
        "its rows are staged again, for the retry: {failed:?}"
    );
    let retried = g.timer_fired(Timer::Retry, &mut rows);
    assert!(matches!(retried[..], [Command::Commit { batch: 3, .. }]));
    g.committed(3, Ok(()), &mut rows);
    assert!(g.durable() >= tag);
}
