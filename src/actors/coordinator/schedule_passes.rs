//! When the coordinator decides schedule slots between sweeps:
//! - a timer armed for the earliest due slot, so a slot fires when it
//!   comes instead of at the next sweep (up to `sweep-interval-millis`
//!   late);
//! - when more schedules are due at once than one pass decides
//!   (`SCHEDULES_PER_PASS`), one more pass as each commit is sent: 10,000
//!   schedules on one cron slot go out a commit at a time, and requests
//!   that arrive meanwhile are handled between the passes instead of
//!   waiting behind one batch of 10,000 jobs. The pass decides while the
//!   commit it follows is being written, so deciding and writing overlap
//!   instead of taking turns (each pass's jobs go in the next commit).

use super::Coordinator;
use crate::clock::Now;
use actix::{AsyncContext, Context, Handler, Message, SpawnHandle};
use std::time::Duration;

/// The furthest ahead a slot timer is armed; a later slot is armed by a
/// sweep closer to it (a wall clock set back would otherwise hold a timer
/// armed far ahead).
const LONGEST_SLOT_TIMER: Duration = Duration::from_secs(60);

/// The coordinator's pending schedule passes.
#[derive(Default)]
pub(super) struct SchedulePasses {
    /// The armed slot timer: the slot (wall ms) it is for, and its handle.
    slot_timer: Option<(i64, SpawnHandle)>,
    /// Another pass is wanted once the next commit is sent.
    after_commit: bool,
    /// A `SchedulePass` is in the mailbox.
    queued: bool,
}

/// Coordinator → itself: decide the schedule slots that have come.
#[derive(Message)]
#[rtype(result = "()")]
struct SchedulePass;

impl Handler<SchedulePass> for Coordinator {
    type Result = ();

    fn handle(&mut self, _: SchedulePass, ctx: &mut Context<Self>) {
        self.passes.queued = false;
        if self.commits.is_stopping() || self.deposed {
            return;
        }
        let now = self.now();
        let more = self.state.schedule_pass(now);
        self.finish_schedule_step(more, now, ctx);
    }
}

impl Coordinator {
    /// Ends a sweep or a pass (`more`: it left schedules due) as `finish`
    /// does; then the next pass follows the next commit sent (the one this
    /// step sends, if it sends one; at once if nothing waits for one, as
    /// after a pass that only skipped slots), so each pass's jobs are on
    /// their way to the database before more are fired; and the slot
    /// timer is armed for the earliest slot still to come.
    pub(super) fn finish_schedule_step(&mut self, more: bool, now: Now, ctx: &mut Context<Self>) {
        self.passes.after_commit |= more;
        self.finish(None, ctx);
        if let Some(write) = self.state.take_skipped_counts() {
            self.store_skipped_counts(write, ctx);
        }
        self.schedule_pass_if_settled(ctx);
        self.arm_slot_timer(now, ctx);
    }

    /// A commit was sent: the pass waiting for it goes, and decides while
    /// that commit is written.
    pub(super) fn schedule_pass_on_commit_sent(&mut self, ctx: &mut Context<Self>) {
        if std::mem::take(&mut self.passes.after_commit) {
            self.queue_schedule_pass(ctx);
        }
    }

    /// After a step or a commit's end: when nothing waits for a commit
    /// (the last pass only skipped slots), none will be sent, so the
    /// waiting pass goes now.
    pub(super) fn schedule_pass_if_settled(&mut self, ctx: &mut Context<Self>) {
        if self.commits.is_settled(&self.state) {
            self.schedule_pass_on_commit_sent(ctx);
        }
    }

    fn queue_schedule_pass(&mut self, ctx: &mut Context<Self>) {
        if !self.passes.queued {
            self.passes.queued = true;
            ctx.notify(SchedulePass);
        }
    }

    /// Arms the slot timer for the earliest schedule slot after `now`,
    /// unless one is armed for that slot or an earlier one.
    pub(super) fn arm_slot_timer(&mut self, now: Now, ctx: &mut Context<Self>) {
        let Some(due) = self.state.next_schedule_due() else {
            return;
        };
        if due <= now.wall_ms
            || self
                .passes
                .slot_timer
                .as_ref()
                .is_some_and(|(at, _)| *at <= due)
        {
            return; // due now (a pass or the next sweep decides it), or armed
        }
        // `now` is truncated to the millisecond: one more keeps the timer
        // from waking just before the slot.
        let delay = Duration::from_millis(due.abs_diff(now.wall_ms) + 1);
        if delay > LONGEST_SLOT_TIMER {
            return;
        }
        if let Some((_, handle)) = self.passes.slot_timer.take() {
            ctx.cancel_future(handle);
        }
        let handle = ctx.run_later(delay, |act, ctx| {
            act.passes.slot_timer = None;
            act.queue_schedule_pass(ctx);
        });
        self.passes.slot_timer = Some((due, handle));
    }
}
