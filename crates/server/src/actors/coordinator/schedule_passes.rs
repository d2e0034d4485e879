//! Driving schedule passes between sweeps (see `SchedulePasses`, which
//! decides when): the actor runs the passes and the slot timer it asks for.

use super::Coordinator;
use crate::scheduler::schedule::passes::{PassCommand, SchedulePasses};
use actix::{AsyncContext, Context, Handler, Message, SpawnHandle};
use taskyard_client::clock::Now;

/// The pending passes and the armed slot timer's handle.
#[derive(Default)]
pub(super) struct Passes {
    machine: SchedulePasses,
    slot_timer: Option<SpawnHandle>,
}

/// Coordinator → itself: decide the schedule slots that have come.
#[derive(Message)]
#[rtype(result = "()")]
struct SchedulePass;

impl Handler<SchedulePass> for Coordinator {
    type Result = ();

    fn handle(&mut self, _: SchedulePass, ctx: &mut Context<Self>) {
        self.passes.machine.pass_started();
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
        self.passes.machine.step_finished(more);
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
        let command = self.passes.machine.commit_sent();
        self.run_passes(command, ctx);
    }

    /// After a step or a commit's end: when nothing waits for a commit
    /// (the last pass only skipped slots), none will be sent, so the
    /// waiting pass goes now.
    pub(super) fn schedule_pass_if_settled(&mut self, ctx: &mut Context<Self>) {
        if self.commits.is_settled(&self.state) {
            self.schedule_pass_on_commit_sent(ctx);
        }
    }

    /// Arms the slot timer for the earliest schedule slot after `now`,
    /// as `SchedulePasses::arm` says.
    pub(super) fn arm_slot_timer(&mut self, now: Now, ctx: &mut Context<Self>) {
        let due = self.state.next_schedule_due();
        let commands = self.passes.machine.arm(now.wall_ms, due);
        self.run_passes(commands, ctx);
    }

    fn run_passes(
        &mut self,
        commands: impl IntoIterator<Item = PassCommand>,
        ctx: &mut Context<Self>,
    ) {
        for command in commands {
            match command {
                PassCommand::QueuePass => ctx.notify(SchedulePass),
                PassCommand::CancelSlotTimer => {
                    if let Some(handle) = self.passes.slot_timer.take() {
                        ctx.cancel_future(handle);
                    }
                }
                PassCommand::ArmSlotTimer(delay) => {
                    let handle = ctx.run_later(delay, |act, ctx| {
                        act.passes.slot_timer = None;
                        let command = act.passes.machine.timer_fired();
                        act.run_passes(command, ctx);
                    });
                    self.passes.slot_timer = Some(handle);
                }
            }
        }
    }
}
