//! `SchedulePasses`: when the coordinator decides schedule slots between
//! sweeps. A plain value (no actors, no timers): each method takes an
//! event and returns what the actor must do.
//!
//! - A timer is armed for the earliest due slot, so a slot fires when it
//!   comes instead of at the next sweep (up to `sweep-interval-millis`
//!   late).
//! - When more schedules are due at once than one pass decides
//!   (`SCHEDULES_PER_PASS`), one more pass follows as each commit is sent:
//!   10,000 schedules on one cron slot go out a commit at a time, and
//!   requests that arrive meanwhile are handled between the passes instead
//!   of waiting behind one batch of 10,000 jobs. The pass decides while the
//!   commit it follows is being written, so deciding and writing overlap
//!   instead of taking turns (each pass's jobs go in the next commit).
//!
//! Guarantees: at most one pass is queued at a time; at most one slot
//! timer is armed, for the earliest slot still to come within
//! `LONGEST_SLOT_TIMER`; a pass wanted after a commit goes when one is
//! sent, or at once when nothing waits for a commit.

use std::time::Duration;

/// The furthest ahead a slot timer is armed; a later slot is armed by a
/// sweep closer to it (a wall clock set back would otherwise hold a timer
/// armed far ahead).
pub const LONGEST_SLOT_TIMER: Duration = Duration::from_secs(60);

/// What the actor must do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassCommand {
    /// Queue one schedule pass; report it with `pass_started`.
    QueuePass,
    /// Cancel the armed slot timer.
    CancelSlotTimer,
    /// Arm the slot timer to fire after this long; report it with
    /// `timer_fired`.
    ArmSlotTimer(Duration),
}

/// The coordinator's pending schedule passes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SchedulePasses {
    /// The slot (wall ms) the armed timer is for.
    armed_for: Option<i64>,
    /// Another pass is wanted once the next commit is sent.
    after_commit: bool,
    /// A pass is queued.
    queued: bool,
}

impl SchedulePasses {
    /// The queued pass runs now.
    pub fn pass_started(&mut self) {
        self.queued = false;
    }

    /// A sweep or a pass ended; `more`: it left schedules due, so another
    /// pass follows the next commit sent.
    pub fn step_finished(&mut self, more: bool) {
        self.after_commit |= more;
    }

    /// A commit was sent (or none will be: nothing waits for one): the
    /// pass waiting for it goes.
    pub fn commit_sent(&mut self) -> Option<PassCommand> {
        match std::mem::take(&mut self.after_commit) {
            true => self.queue(),
            false => None,
        }
    }

    /// The slot timer fired.
    pub fn timer_fired(&mut self) -> Option<PassCommand> {
        self.armed_for = None;
        self.queue()
    }

    /// The earliest slot still to come is `due` (wall ms; none: no
    /// schedule), it is `now_wall`: the timer to arm for it, unless it is
    /// due now (a pass or the next sweep decides it), already armed for
    /// it or earlier, or further than `LONGEST_SLOT_TIMER` ahead.
    pub fn arm(&mut self, now_wall: i64, due: Option<i64>) -> Vec<PassCommand> {
        let Some(due) = due else {
            return Vec::new();
        };
        if due <= now_wall || self.armed_for.is_some_and(|at| at <= due) {
            return Vec::new();
        }
        // `now` is truncated to the millisecond: one more keeps the timer
        // from waking just before the slot.
        let delay = Duration::from_millis(due.abs_diff(now_wall) + 1);
        if delay > LONGEST_SLOT_TIMER {
            return Vec::new();
        }
        let mut commands = Vec::with_capacity(2);
        if self.armed_for.replace(due).is_some() {
            commands.push(PassCommand::CancelSlotTimer);
        }
        commands.push(PassCommand::ArmSlotTimer(delay));
        commands
    }

    /// The slot (wall ms) the armed timer is for, if one is armed.
    /// Read-only, for tests.
    #[cfg(test)]
    pub(crate) fn armed_for(&self) -> Option<i64> {
        self.armed_for
    }

    /// True while a queued pass has not started. Read-only, for tests.
    #[cfg(test)]
    pub(crate) fn is_queued(&self) -> bool {
        self.queued
    }

    /// True while a pass waits for the next commit sent. Read-only, for
    /// tests.
    #[cfg(test)]
    pub(crate) fn wants_pass_after_commit(&self) -> bool {
        self.after_commit
    }

    fn queue(&mut self) -> Option<PassCommand> {
        (!std::mem::replace(&mut self.queued, true)).then_some(PassCommand::QueuePass)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_that_left_schedules_due_follows_the_next_commit_once() {
        let mut passes = SchedulePasses::default();
        assert_eq!(passes.commit_sent(), None, "nothing wanted");
        passes.step_finished(true);
        passes.step_finished(false);
        assert_eq!(passes.commit_sent(), Some(PassCommand::QueuePass));
        assert_eq!(passes.commit_sent(), None, "once");
        passes.step_finished(true);
        assert_eq!(passes.commit_sent(), None, "one is queued already");
        passes.pass_started();
        passes.step_finished(true);
        assert_eq!(passes.commit_sent(), Some(PassCommand::QueuePass));
    }

    #[test]
    fn the_timer_is_armed_for_the_earliest_slot_within_a_minute() {
        let mut passes = SchedulePasses::default();
        assert!(passes.arm(1_000, None).is_empty());
        assert!(passes.arm(1_000, Some(1_000)).is_empty(), "due now");
        assert!(passes.arm(1_000, Some(62_000)).is_empty(), "too far");
        assert_eq!(
            passes.arm(1_000, Some(5_000)),
            vec![PassCommand::ArmSlotTimer(Duration::from_millis(4_001))]
        );
        assert!(passes.arm(1_000, Some(6_000)).is_empty(), "armed earlier");
        assert_eq!(
            passes.arm(1_000, Some(3_000)),
            vec![
                PassCommand::CancelSlotTimer,
                PassCommand::ArmSlotTimer(Duration::from_millis(2_001))
            ],
            "an earlier slot replaces the timer"
        );
        assert_eq!(passes.timer_fired(), Some(PassCommand::QueuePass));
        assert_eq!(
            passes.arm(3_001, Some(5_000)),
            vec![PassCommand::ArmSlotTimer(Duration::from_millis(2_000))],
            "nothing to cancel once fired"
        );
    }
}
