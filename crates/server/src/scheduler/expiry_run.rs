//! `ExpiryRun`: when the coordinator asks the database to delete a batch
//! of expired jobs. A plain value (no actors, no clock): each method takes
//! an event and returns what the actor must do.
//!
//! Guarantees:
//! - at most one batch is asked for at a time;
//! - after a full batch the next is asked for once a pause
//!   `PAUSE_PER_BATCH_TIME` times as long as the batch took has passed
//!   (never longer than the interval after asking), so a backlog drains
//!   batch after batch while expiry takes at most a tenth of the
//!   persistence thread (the thread live work's commits need: deleting
//!   back to back cost a concurrent drain 40% of its rate;
//!   docs/performance-log.md).
//!   The time a batch took includes its wait behind commits, so expiry
//!   backs off further while live work is busy;
//! - after a partial batch or a failure, the next look is an interval
//!   after asking; while the database was busy, at the next look;
//! - looks run on monotonic time, so a wall-clock step neither stops
//!   expiry nor makes it look at once; the cutoffs are wall times, since
//!   the stored finish times are.

use std::time::Duration;
use taskyard_client::clock::Now;

/// How long finished jobs are kept in the database, and how expiry runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExpiryPolicy {
    /// SUCCEEDED and CANCELLED jobs (`job-retention-millis`).
    pub job_retention_ms: u64,
    /// FAILED jobs (`failed-job-retention-millis`).
    pub failed_retention_ms: u64,
    /// Pause between looks once nothing more has expired.
    pub interval_ms: u64,
    /// Most jobs deleted per transaction.
    pub batch_rows: usize,
}

/// Which finished jobs have expired: finished before these times (unix
/// milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExpiryCutoffs {
    /// SUCCEEDED and CANCELLED jobs (`job-retention-millis`).
    pub finished_before: i64,
    /// FAILED jobs (`failed-job-retention-millis`).
    pub failed_before: i64,
}

/// What the actor must do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpiryCommand {
    /// Ask the database to delete at most `limit` jobs that finished
    /// before `cutoffs`; report the answer with `answered(asked_at, …)`.
    Delete {
        cutoffs: ExpiryCutoffs,
        limit: usize,
        asked_at: i64,
    },
    /// Call `look` again after this long (the pause after a full batch).
    LookAgain(Duration),
}

/// What the database answered to a `Delete`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpiryAnswer {
    /// This many jobs were deleted.
    Deleted(usize),
    /// The database was busy; nothing was deleted.
    Busy,
    Failed,
}

/// After a full batch, the pause before the next, as a multiple of how
/// long the batch took from asking to answer: 9 keeps expiry to at most a
/// tenth of the persistence thread's time.
pub const PAUSE_PER_BATCH_TIME: i64 = 9;

/// Expiry's progress: when to look next, and whether a batch is out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiryRun {
    policy: ExpiryPolicy,
    /// Monotonic time of the next look.
    next_at: i64,
    in_flight: bool,
}

impl ExpiryRun {
    /// Looks at once, then as `policy` says.
    pub fn new(policy: ExpiryPolicy) -> ExpiryRun {
        ExpiryRun {
            policy,
            next_at: i64::MIN,
            in_flight: false,
        }
    }

    /// A look (the sweep's, or after a pause): `Delete` when one is due
    /// and none is out.
    pub fn look(&mut self, now: Now) -> Option<ExpiryCommand> {
        if self.in_flight || now.mono_ms < self.next_at {
            return None;
        }
        self.in_flight = true;
        Some(ExpiryCommand::Delete {
            cutoffs: ExpiryCutoffs {
                finished_before: before(now.wall_ms, self.policy.job_retention_ms),
                failed_before: before(now.wall_ms, self.policy.failed_retention_ms),
            },
            limit: self.policy.batch_rows,
            asked_at: now.mono_ms,
        })
    }

    /// The answer to the `Delete` asked at `asked_at` came at
    /// `answered_at` (monotonic ms). After a full batch, unless the
    /// coordinator is `stopping`, the next look is asked for.
    pub fn answered(
        &mut self,
        asked_at: i64,
        answered_at: i64,
        answer: ExpiryAnswer,
        stopping: bool,
    ) -> Option<ExpiryCommand> {
        self.in_flight = false;
        let full = matches!(answer, ExpiryAnswer::Deleted(n) if n >= self.policy.batch_rows);
        let later =
            asked_at.saturating_add(i64::try_from(self.policy.interval_ms).unwrap_or(i64::MAX));
        self.next_at = match answer {
            _ if full => {
                let took = answered_at.saturating_sub(asked_at).max(0);
                answered_at
                    .saturating_add(took.saturating_mul(PAUSE_PER_BATCH_TIME))
                    .min(later)
            }
            ExpiryAnswer::Deleted(_) | ExpiryAnswer::Failed => later,
            ExpiryAnswer::Busy => asked_at,
        };
        let pause = u64::try_from(self.next_at.saturating_sub(answered_at)).unwrap_or(0);
        (full && !stopping).then_some(ExpiryCommand::LookAgain(Duration::from_millis(pause)))
    }
}

#[cfg(test)]
impl ExpiryRun {
    /// True while a `Delete` is out (asked for and not yet `answered`).
    /// Read-only, for tests that check the one-at-a-time guarantee.
    pub(crate) fn in_flight(&self) -> bool {
        self.in_flight
    }
}

fn before(now: i64, retention_ms: u64) -> i64 {
    now.saturating_sub(i64::try_from(retention_ms).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: ExpiryPolicy = ExpiryPolicy {
        job_retention_ms: 1_000,
        failed_retention_ms: 5_000,
        interval_ms: 60_000,
        batch_rows: 10,
    };

    fn at(mono_ms: i64, wall_ms: i64) -> Now {
        Now {
            mono_ms,
            wall_ms,
            mono_us: mono_ms * 1_000,
        }
    }

    #[test]
    fn one_batch_at_a_time_with_cutoffs_from_the_wall_clock() {
        let mut run = ExpiryRun::new(POLICY);
        let asked = run.look(at(1_000, 100_000));
        assert_eq!(
            asked,
            Some(ExpiryCommand::Delete {
                cutoffs: ExpiryCutoffs {
                    finished_before: 99_000,
                    failed_before: 95_000,
                },
                limit: 10,
                asked_at: 1_000,
            })
        );
        assert_eq!(run.look(at(2_000, 101_000)), None, "one is out");
    }

    #[test]
    fn a_full_batch_rests_nine_times_as_long_as_it_took_within_the_interval() {
        let mut run = ExpiryRun::new(POLICY);
        run.look(at(1_000, 0));
        assert_eq!(
            run.answered(1_000, 1_040, ExpiryAnswer::Deleted(10), false),
            Some(ExpiryCommand::LookAgain(Duration::from_millis(360)))
        );
        assert_eq!(run.look(at(1_399, 0)), None, "resting");
        assert!(run.look(at(1_400, 0)).is_some());
        assert_eq!(
            run.answered(1_400, 11_400, ExpiryAnswer::Deleted(10), false),
            Some(ExpiryCommand::LookAgain(Duration::from_millis(50_000))),
            "never longer than the interval after asking"
        );
        run.look(at(61_400, 0));
        assert_eq!(
            run.answered(61_400, 61_400, ExpiryAnswer::Deleted(10), true),
            None,
            "a stopping coordinator asks for no more"
        );
    }

    #[test]
    fn a_partial_batch_or_a_failure_waits_the_interval_and_busy_looks_again_at_once() {
        for answer in [ExpiryAnswer::Deleted(3), ExpiryAnswer::Failed] {
            let mut run = ExpiryRun::new(POLICY);
            run.look(at(1_000, 0));
            assert_eq!(run.answered(1_000, 1_040, answer, false), None);
            assert_eq!(run.look(at(60_999, 0)), None);
            assert!(run.look(at(61_000, 0)).is_some());
        }
        let mut run = ExpiryRun::new(POLICY);
        run.look(at(1_000, 0));
        assert_eq!(run.answered(1_000, 1_040, ExpiryAnswer::Busy, false), None);
        assert!(
            run.look(at(1_041, 0)).is_some(),
            "the next sweep looks again"
        );
    }

    #[test]
    fn a_wall_clock_step_changes_cutoffs_not_when_to_look() {
        let mut run = ExpiryRun::new(POLICY);
        run.look(at(1_000, 100_000));
        run.answered(1_000, 1_010, ExpiryAnswer::Deleted(0), false);
        assert_eq!(
            run.look(at(2_000, 999_999_999)),
            None,
            "the wall jumped ahead"
        );
    }
}
