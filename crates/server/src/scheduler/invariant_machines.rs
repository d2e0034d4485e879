//! The coordinator actor's pure machines in the random-event test:
//! `ExpiryRun`, `DeletionQueue` and `SchedulePasses`, driven exactly as
//! the actor drives them (`actors/coordinator/expiry.rs`, `job_admin.rs`,
//! `schedule_passes.rs`, the sweep, the commit answer, the shutdown),
//! with the database's answers, the timers and the actor's mailbox as
//! random events. Every command a machine returns is checked against what
//! its documented guarantees say it must be, and its own invariants after
//! every step.
//!
//! What the database deletes is not modelled: an expiry batch is counted
//! (full or partial) without naming jobs, and a deletion answered is
//! answered as if the rows were already gone, so neither touches the
//! jobs the test holds.

use crate::scheduler::deletion_queue::{DeletionQueue, Settled, Tracked, MAX_BUSY_ANSWERS};
use crate::scheduler::expiry_run::{
    ExpiryAnswer, ExpiryCommand, ExpiryCutoffs, ExpiryPolicy, ExpiryRun, PAUSE_PER_BATCH_TIME,
};
use crate::scheduler::schedule::passes::{PassCommand, SchedulePasses, LONGEST_SLOT_TIMER};
use crate::scheduler::CoordinatorState;
use proptest::prelude::*;
use proptest::sample::Index;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use taskyard_client::clock::Now;
use taskyard_protocol::JobId;

/// Few deletions out at once, so the bound is reached within a few events.
pub(super) const MAX_DELETIONS: usize = 2;

/// Short times and small batches, so full batches, pauses and intervals
/// all pass within a few dozen events.
pub(super) const EXPIRY: ExpiryPolicy = ExpiryPolicy {
    job_retention_ms: 4_000,
    failed_retention_ms: 8_000,
    interval_ms: 5_000,
    batch_rows: 3,
};

/// The schedule book stands for one schedule every this long: a pass or a
/// sweep decides its slots that have come, and the next is this far on.
pub(super) const SLOT_PERIOD_MS: i64 = 1_500;

/// What the database answers an expiry batch.
#[derive(Debug, Clone, Copy)]
pub(super) enum ExpiryReply {
    /// `batch_rows` jobs deleted.
    Full,
    /// Fewer.
    Partial,
    Busy,
    Failed,
}

/// What the database answers a deletion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DeletionReply {
    Answered,
    /// Rows of the next batch were staged: nothing done.
    Busy,
    /// An error (or the database thread is gone).
    Failed,
}

/// What the database answers a commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CommitReply {
    Committed,
    /// Failed for now: the rows are marked dirty again.
    Failed,
    /// Refused for good: the coordinator abandons (stops, then exits).
    Refused,
}

/// A client's deletion: which one, and the jobs it marks as being deleted.
#[derive(Debug)]
pub(super) struct Deletion {
    id: u64,
    candidates: Vec<JobId>,
}

/// The three machines, and everything out with them: requests the
/// database has not answered, timers not fired, messages in the mailbox.
pub(super) struct Machines {
    /// A stop was requested (or a commit refused): `GroupCommit` says
    /// `is_stopping`.
    stopping: bool,
    /// A commit was refused: the process exits at the next tick.
    abandoned: bool,

    expiry: ExpiryRun,
    /// The `asked_at` of each expiry `Delete` the database has not answered.
    expiry_out: Vec<i64>,
    /// When the next batch may be asked for (monotonic ms), as the
    /// guarantees say: after a full batch, nine times as long as it took
    /// (at most the interval after asking); after a partial one or a
    /// failure, the interval after asking; after busy, at once.
    expiry_due: i64,
    /// When each `LookAgain` timer fires (monotonic ms).
    look_timers: Vec<i64>,

    deletions: DeletionQueue<Deletion>,
    /// Deletions sent and not yet answered by the database.
    sent: Vec<Tracked<Deletion>>,
    /// Each deletion admitted and not yet settled: its busy answers and
    /// how many jobs it marks as being deleted.
    open: BTreeMap<u64, (u32, usize)>,
    /// The deletions answered busy and not yet sent again or given up.
    parked: BTreeSet<u64>,
    next_deletion: u64,

    passes: SchedulePasses,
    /// `SchedulePass` messages in the mailbox.
    passes_queued: usize,
    /// A pass that left schedules due wants another after the next commit
    /// sent.
    pass_wanted: bool,
    /// Slot timers armed: when each fires (monotonic ms), and for which
    /// slot (wall ms).
    slot_timers: Vec<(i64, i64)>,
    /// The earliest schedule slot still to come (wall ms), as the
    /// schedule book would say.
    next_due: Option<i64>,
}

impl Machines {
    pub(super) fn new() -> Self {
        Machines {
            stopping: false,
            abandoned: false,
            expiry: ExpiryRun::new(EXPIRY),
            expiry_out: Vec::new(),
            expiry_due: i64::MIN,
            look_timers: Vec::new(),
            deletions: DeletionQueue::new(MAX_DELETIONS),
            sent: Vec::new(),
            open: BTreeMap::new(),
            parked: BTreeSet::new(),
            next_deletion: 0,
            passes: SchedulePasses::default(),
            passes_queued: 0,
            pass_wanted: false,
            slot_timers: Vec::new(),
            next_due: None,
        }
    }

    pub(super) fn is_stopping(&self) -> bool {
        self.stopping
    }

    pub(super) fn is_abandoned(&self) -> bool {
        self.abandoned
    }

    // ---- expiry (actors/coordinator/expiry.rs) ----

    /// `expire_if_due`: a look asks for a batch exactly when none is out
    /// and one is due.
    fn expire_if_due(&mut self, now: Now) -> Result<(), TestCaseError> {
        let command = self.expiry.look(now);
        let due = self.expiry_out.is_empty() && now.mono_ms >= self.expiry_due;
        prop_assert_eq!(
            command.is_some(),
            due,
            "expiry look at {} (due at {}, {} out): {:?}",
            now.mono_ms,
            self.expiry_due,
            self.expiry_out.len(),
            command
        );
        match command {
            None => {}
            Some(ExpiryCommand::Delete {
                cutoffs,
                limit,
                asked_at,
            }) => {
                let wanted = ExpiryCutoffs {
                    finished_before: now.wall_ms - EXPIRY.job_retention_ms as i64,
                    failed_before: now.wall_ms - EXPIRY.failed_retention_ms as i64,
                };
                prop_assert_eq!(cutoffs, wanted, "cutoffs from the wall clock");
                prop_assert_eq!(limit, EXPIRY.batch_rows);
                prop_assert_eq!(asked_at, now.mono_ms, "asked now, on monotonic time");
                self.expiry_out.push(asked_at);
            }
            Some(other) => prop_assert!(false, "a look answered {:?}", other),
        }
        Ok(())
    }

    /// The database answers the batch out (if any) `took_ms` after it was
    /// asked for... at `now`; after a full batch the next look is asked
    /// for unless the coordinator is stopping.
    pub(super) fn expiry_answered(
        &mut self,
        reply: ExpiryReply,
        now: Now,
    ) -> Result<(), TestCaseError> {
        if self.expiry_out.is_empty() {
            return Ok(());
        }
        let asked_at = self.expiry_out.remove(0);
        let answered_at = now.mono_ms;
        let interval = EXPIRY.interval_ms as i64;
        let (answer, due) = match reply {
            ExpiryReply::Full => {
                let took = (answered_at - asked_at).max(0);
                let rest = answered_at + took * PAUSE_PER_BATCH_TIME;
                (
                    ExpiryAnswer::Deleted(EXPIRY.batch_rows),
                    rest.min(asked_at + interval),
                )
            }
            ExpiryReply::Partial => (
                ExpiryAnswer::Deleted(EXPIRY.batch_rows - 1),
                asked_at + interval,
            ),
            ExpiryReply::Failed => (ExpiryAnswer::Failed, asked_at + interval),
            ExpiryReply::Busy => (ExpiryAnswer::Busy, asked_at),
        };
        self.expiry_due = due;
        let command = self
            .expiry
            .answered(asked_at, answered_at, answer, self.stopping);
        let full = matches!(reply, ExpiryReply::Full);
        let pause = Duration::from_millis(u64::try_from(due - answered_at).unwrap_or(0));
        let wanted = (full && !self.stopping).then_some(ExpiryCommand::LookAgain(pause));
        prop_assert_eq!(
            command,
            wanted,
            "expiry answered {:?} (asked at {}, answered at {})",
            reply,
            asked_at,
            answered_at
        );
        if let Some(ExpiryCommand::LookAgain(pause)) = command {
            self.look_timers
                .push(now.mono_ms + pause.as_millis() as i64);
        }
        Ok(())
    }

    // ---- deletions (actors/coordinator/job_admin.rs) ----

    /// `delete_named`: the jobs that may be deleted are sent as one
    /// deletion, refused exactly when `MAX_DELETIONS` are out.
    pub(super) fn delete(
        &mut self,
        state: &mut CoordinatorState,
        ids: &[JobId],
    ) -> Result<(), TestCaseError> {
        let (candidates, _) = state.deletable(ids);
        if candidates.is_empty() {
            return Ok(()); // answered at once
        }
        let id = self.next_deletion;
        self.next_deletion += 1;
        let full = self.open.len() >= MAX_DELETIONS;
        match self.deletions.admit(Deletion { id, candidates }) {
            Ok(sent) => {
                prop_assert!(!full, "admitted a deletion with {} out", self.open.len());
                state.deleting(&sent.deletion.candidates);
                self.open.insert(id, (0, sent.deletion.candidates.len()));
                self.sent.push(sent);
            }
            Err((_, refused)) => {
                prop_assert!(full, "refused with {} out", self.open.len());
                prop_assert_eq!(refused.id, id, "the refused deletion handed back");
            }
        }
        Ok(())
    }

    /// `deletion_answered`: one deletion out with the database is
    /// answered; busy parks it (its jobs stay marked) unless it was busy
    /// `MAX_BUSY_ANSWERS` times or the coordinator stops; any other answer
    /// settles it.
    pub(super) fn deletion_answered(
        &mut self,
        which: &Index,
        reply: DeletionReply,
        state: &mut CoordinatorState,
    ) -> Result<(), TestCaseError> {
        if self.sent.is_empty() {
            return Ok(());
        }
        let sent = self.sent.remove(which.index(self.sent.len()));
        let id = sent.deletion.id;
        let busy = reply == DeletionReply::Busy;
        let busy_answers = self.open.get(&id).map_or(0, |o| o.0) + u32::from(busy);
        let parks = busy && busy_answers < MAX_BUSY_ANSWERS && !self.stopping;
        let settled = self.deletions.answered(sent, busy, self.stopping);
        match settled {
            None => {
                prop_assert!(parks, "deletion {} parked on {:?}", id, reply);
                prop_assert!(self.parked.insert(id), "deletion {} parked twice", id);
                if let Some(open) = self.open.get_mut(&id) {
                    open.0 = busy_answers;
                }
            }
            Some(Settled::GaveUp(d)) => {
                prop_assert!(busy && !parks, "deletion {} given up on {:?}", id, reply);
                prop_assert_eq!(d.id, id);
                self.settle(d, state)?;
            }
            Some(Settled::Answered(d)) => {
                prop_assert!(!busy, "deletion {} answered though busy", id);
                prop_assert_eq!(d.id, id);
                self.settle(d, state)?;
            }
        }
        Ok(())
    }

    /// `settle_deletion`: the request is answered, its jobs may change
    /// again; exactly once per deletion.
    fn settle(
        &mut self,
        deletion: Deletion,
        state: &mut CoordinatorState,
    ) -> Result<(), TestCaseError> {
        prop_assert!(
            self.open.remove(&deletion.id).is_some(),
            "deletion {} settled twice",
            deletion.id
        );
        state.deleted(&deletion.candidates);
        Ok(())
    }

    /// `wake_deletions` (a commit answered, or a sweep): every parked
    /// deletion is sent again, each once.
    fn wake_deletions(&mut self) -> Result<(), TestCaseError> {
        let woken = self.deletions.wake();
        let ids: Vec<u64> = woken.iter().map(|t| t.deletion.id).collect();
        let parked: Vec<u64> = std::mem::take(&mut self.parked).into_iter().collect();
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        prop_assert_eq!(sorted, parked, "woken {:?}", ids);
        self.sent.extend(woken);
        Ok(())
    }

    /// `give_up_parked_deletions` (a stop, a refused commit): every parked
    /// deletion is answered as failed, each once.
    fn give_up_parked(&mut self, state: &mut CoordinatorState) -> Result<(), TestCaseError> {
        let given_up = self.deletions.give_up_parked();
        let mut ids: Vec<u64> = given_up.iter().map(|d| d.id).collect();
        ids.sort_unstable();
        let parked: Vec<u64> = std::mem::take(&mut self.parked).into_iter().collect();
        prop_assert_eq!(ids, parked, "given up");
        for deletion in given_up {
            self.settle(deletion, state)?;
        }
        Ok(())
    }

    // ---- schedule passes (actors/coordinator/schedule_passes.rs) ----

    /// Runs what `SchedulePasses` commands: a pass goes to the mailbox,
    /// the slot timer is cancelled or armed.
    fn run_passes(
        &mut self,
        commands: impl IntoIterator<Item = PassCommand>,
        slot: Option<i64>,
        now: Now,
    ) -> Result<(), TestCaseError> {
        for command in commands {
            match command {
                PassCommand::QueuePass => self.passes_queued += 1,
                PassCommand::CancelSlotTimer => {
                    prop_assert!(
                        self.slot_timers.pop().is_some(),
                        "cancelled a slot timer none armed"
                    );
                }
                PassCommand::ArmSlotTimer(delay) => {
                    let slot = slot.unwrap_or(i64::MIN);
                    let fires = now.mono_ms + delay.as_millis() as i64;
                    self.slot_timers.push((fires, slot));
                }
            }
        }
        Ok(())
    }

    /// `schedule_pass_on_commit_sent`: the pass wanted goes, unless one
    /// is queued already.
    pub(super) fn commit_sent(&mut self, now: Now) -> Result<(), TestCaseError> {
        let command = self.passes.commit_sent();
        let wanted =
            (self.pass_wanted && self.passes_queued == 0).then_some(PassCommand::QueuePass);
        prop_assert_eq!(
            command,
            wanted,
            "commit sent: pass wanted {}, {} queued",
            self.pass_wanted,
            self.passes_queued
        );
        self.pass_wanted = false;
        self.run_passes(command, None, now)
    }

    /// `schedule_pass_if_settled`: nothing waits for a commit, so none
    /// will be sent: the pass wanted goes now.
    fn schedule_pass_if_settled(&mut self, settled: bool, now: Now) -> Result<(), TestCaseError> {
        match settled {
            true => self.commit_sent(now),
            false => Ok(()),
        }
    }

    /// `arm_slot_timer`: the timer is armed for the earliest slot to come
    /// within `LONGEST_SLOT_TIMER` (replacing one armed for a later slot);
    /// never for one due now, never twice.
    fn arm_slot_timer(&mut self, now: Now) -> Result<(), TestCaseError> {
        let due = self.next_due;
        let commands = self.passes.arm(now.wall_ms, due);
        let armed = self.slot_timers.first().map(|t| t.1);
        let mut wanted = Vec::new();
        if let Some(due) = due {
            let delay = Duration::from_millis(due.abs_diff(now.wall_ms) + 1);
            if due > now.wall_ms && armed.is_none_or(|at| at > due) && delay <= LONGEST_SLOT_TIMER {
                if armed.is_some() {
                    wanted.push(PassCommand::CancelSlotTimer);
                }
                wanted.push(PassCommand::ArmSlotTimer(delay));
            }
        }
        prop_assert_eq!(
            &commands,
            &wanted,
            "arm at {} for {:?} (armed for {:?})",
            now.wall_ms,
            due,
            armed
        );
        self.run_passes(commands, due, now)?;
        prop_assert!(self.slot_timers.len() <= 1, "two slot timers armed");
        if let Some(due) = due.filter(|d| {
            *d > now.wall_ms && d.abs_diff(now.wall_ms) < LONGEST_SLOT_TIMER.as_millis() as u64
        }) {
            let armed = self.slot_timers.first().map(|t| t.1);
            prop_assert!(
                armed.is_some_and(|at| at <= due),
                "slot {} comes within a minute of {}, timer armed for {:?}",
                due,
                now.wall_ms,
                armed
            );
        }
        Ok(())
    }

    /// `finish_schedule_step`: a sweep or a pass ended (`more`: it left
    /// schedules due).
    fn finish_schedule_step(
        &mut self,
        more: bool,
        settled: bool,
        now: Now,
    ) -> Result<(), TestCaseError> {
        self.passes.step_finished(more);
        self.pass_wanted |= more;
        self.schedule_pass_if_settled(settled, now)?;
        self.arm_slot_timer(now)
    }

    /// The schedule book decides its slots that have come: the earliest
    /// still to come is after `now`.
    fn decide_slots(&mut self, now: Now) {
        if let Some(due) = self.next_due.filter(|d| *d <= now.wall_ms) {
            let behind = (now.wall_ms - due) / SLOT_PERIOD_MS + 1;
            self.next_due = Some(due + behind * SLOT_PERIOD_MS);
        }
    }

    /// A schedule was created, changed, paused or deleted: the earliest
    /// slot is `due` now (`schedules.rs`: `finish`, then the timer).
    pub(super) fn schedule_stored(
        &mut self,
        due: Option<i64>,
        now: Now,
    ) -> Result<(), TestCaseError> {
        self.next_due = due;
        self.arm_slot_timer(now)
    }

    /// The `SchedulePass` handler: the queued pass (if any) starts; a
    /// stopping coordinator runs none. `left_due`: the book had more
    /// schedules due than one pass decides.
    pub(super) fn pass_runs(
        &mut self,
        state: &mut CoordinatorState,
        left_due: bool,
        settled: impl Fn(&CoordinatorState) -> bool,
        now: Now,
    ) -> Result<(), TestCaseError> {
        if self.passes_queued == 0 {
            return Ok(());
        }
        self.passes_queued -= 1;
        self.passes.pass_started();
        if self.stopping {
            return Ok(());
        }
        let more = state.schedule_pass(now) || left_due;
        self.decide_slots(now);
        let settled = settled(state);
        self.finish_schedule_step(more, settled, now)
    }

    /// The `Sweep` handler's part after `state.sweep` (which said `more`).
    pub(super) fn swept(
        &mut self,
        more: bool,
        settled: bool,
        now: Now,
    ) -> Result<(), TestCaseError> {
        self.expire_if_due(now)?;
        self.wake_deletions()?;
        self.decide_slots(now);
        self.finish_schedule_step(more, settled, now)
    }

    /// Time passed to `now`: the timers due fire, earliest first (late:
    /// at `now`).
    pub(super) fn tick(&mut self, now: Now) -> Result<(), TestCaseError> {
        let mut due: Vec<(i64, bool)> = self
            .look_timers
            .iter()
            .map(|t| (*t, true))
            .chain(self.slot_timers.iter().map(|t| (t.0, false)))
            .filter(|t| t.0 <= now.mono_ms)
            .collect();
        due.sort_unstable();
        self.look_timers.retain(|t| *t > now.mono_ms);
        for (_, look) in due {
            if look {
                if !self.stopping {
                    self.expire_if_due(now)?;
                }
            } else {
                self.slot_timers.clear();
                let command = self.passes.timer_fired();
                let wanted = (self.passes_queued == 0).then_some(PassCommand::QueuePass);
                prop_assert_eq!(command, wanted, "slot timer fired");
                self.run_passes(command, None, now)?;
            }
        }
        Ok(())
    }

    /// The commit out was answered (`settled`: nothing waits for another
    /// one now). A refused commit gives up the parked deletions and stops.
    pub(super) fn commit_answered(
        &mut self,
        reply: CommitReply,
        settled: bool,
        state: &mut CoordinatorState,
        now: Now,
    ) -> Result<(), TestCaseError> {
        if reply == CommitReply::Refused {
            self.give_up_parked(state)?;
            self.stopping = true;
            self.abandoned = true;
            return Ok(());
        }
        self.schedule_pass_if_settled(settled, now)?;
        self.wake_deletions()
    }

    /// `Shutdown`: the parked deletions are given up, and the coordinator
    /// stops (it ends once everything is durable).
    pub(super) fn stop(&mut self, state: &mut CoordinatorState) -> Result<(), TestCaseError> {
        self.give_up_parked(state)?;
        self.stopping = true;
        Ok(())
    }

    /// Each machine's guarantees, as they hold between events.
    pub(super) fn check(&self, state: &CoordinatorState, settled: bool) -> Result<(), String> {
        let fail = |what: String| Err(what);
        // ExpiryRun: at most one batch is asked for at a time.
        if self.expiry_out.len() > 1 {
            return fail(format!("{} expiry batches out", self.expiry_out.len()));
        }
        if self.expiry.in_flight() == self.expiry_out.is_empty() {
            return fail(format!(
                "expiry in flight {} with {} out",
                self.expiry.in_flight(),
                self.expiry_out.len()
            ));
        }
        // DeletionQueue: at most `max_out` out, parked ones included.
        let out = self.sent.len() + self.parked.len();
        if self.deletions.out() != out || out != self.open.len() || out > MAX_DELETIONS {
            return fail(format!(
                "deletions out: queue says {}, {} sent, {} parked, {} open (max {})",
                self.deletions.out(),
                self.sent.len(),
                self.parked.len(),
                self.open.len(),
                MAX_DELETIONS
            ));
        }
        if self.deletions.parked() != self.parked.len() {
            return fail(format!(
                "{} parked, queue says {}",
                self.parked.len(),
                self.deletions.parked()
            ));
        }
        // Nobody waits forever: nothing will wake a stopping coordinator's
        // parked deletions.
        if self.stopping && !self.parked.is_empty() {
            return fail(format!("stopping with deletions {:?} parked", self.parked));
        }
        // The jobs being deleted are those of the deletions out.
        let marked: usize = self.open.values().map(|o| o.1).sum();
        if state.deleting_count() != marked {
            return fail(format!(
                "{} jobs being deleted, {} in deletions out",
                state.deleting_count(),
                marked
            ));
        }
        // SchedulePasses: at most one pass queued, one slot timer armed.
        if self.passes_queued > 1 {
            return fail(format!("{} passes queued", self.passes_queued));
        }
        if self.passes.is_queued() != (self.passes_queued == 1) {
            return fail(format!(
                "pass queued {}, {} in the mailbox",
                self.passes.is_queued(),
                self.passes_queued
            ));
        }
        if self.slot_timers.len() > 1
            || self.passes.armed_for() != self.slot_timers.first().map(|t| t.1)
        {
            return fail(format!(
                "slot timer armed for {:?}, timers {:?}",
                self.passes.armed_for(),
                self.slot_timers
            ));
        }
        if self.passes.wants_pass_after_commit() != self.pass_wanted {
            return fail(format!(
                "pass wanted after commit {}, should be {}",
                self.passes.wants_pass_after_commit(),
                self.pass_wanted
            ));
        }
        // A pass wanted after a commit never waits on a coordinator that
        // will send none.
        if self.pass_wanted && settled && !self.abandoned {
            return fail("a pass waits for a commit, and none waits to be sent".into());
        }
        Ok(())
    }
}
