//! Driving expiry: the sweep asks `Persistence` to delete a batch of
//! expired jobs when one is due, and the answer (durable deletions) tells
//! the state which idempotency keys and counts went with them. At most
//! one batch is asked for at a time; after a full batch the next is asked
//! for once a pause `PAUSE_PER_BATCH_TIME` times as long as the batch took
//! has passed, so a backlog drains batch after batch while expiry takes at
//! most a tenth of the persistence thread (the thread live work's commits
//! need: deleting back to back cost a concurrent drain 40% of its rate;
//! docs/performance-log.md). The time a batch took includes its wait behind commits,
//! so expiry backs off further while live work is busy.

use super::Coordinator;
use crate::actors::persistence::ExpireJobs;
use crate::clock::Now;
use crate::store::{ExpiredJob, ExpiryCutoffs};
use actix::{ActorFutureExt, AsyncContext, Context, Recipient, WrapFuture};
use slog::{info, warn};
use std::time::Duration;

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

/// Expiry's place in the coordinator: where to send, and when next.
pub(super) struct ExpiryRun {
    pub(super) link: Recipient<ExpireJobs>,
    pub(super) policy: ExpiryPolicy,
    /// Monotonic time of the next look: a wall-clock step neither stops
    /// expiry nor makes it look at once.
    pub(super) next_at: i64,
    pub(super) in_flight: bool,
}

/// After a full batch, the pause before the next, as a multiple of how
/// long the batch took from asking to answer: 9 keeps expiry to at most a
/// tenth of the persistence thread's time.
const PAUSE_PER_BATCH_TIME: i64 = 9;

/// When to look for expired jobs again, given when the last batch was
/// asked for and answered: after a full batch, once it has rested
/// `PAUSE_PER_BATCH_TIME` times the batch's time (never longer than
/// `interval_ms` after asking); after a partial batch or a failure, the
/// interval after asking; while persistence was busy, at once.
fn next_look(asked_at: i64, answered_at: i64, answer: Answer, interval_ms: u64) -> i64 {
    let later = asked_at.saturating_add(i64::try_from(interval_ms).unwrap_or(i64::MAX));
    match answer {
        Answer::Full => {
            let took = answered_at.saturating_sub(asked_at).max(0);
            answered_at
                .saturating_add(took.saturating_mul(PAUSE_PER_BATCH_TIME))
                .min(later)
        }
        Answer::Partial | Answer::Failed => later,
        Answer::Busy => asked_at,
    }
}

/// What one expiry answer was, as `next_look` needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Full,
    Partial,
    Busy,
    Failed,
}

fn before(now: i64, retention_ms: u64) -> i64 {
    now.saturating_sub(i64::try_from(retention_ms).unwrap_or(i64::MAX))
}

impl Coordinator {
    /// Asks for the next batch of expired jobs if one is due and none is
    /// being deleted. Never waits.
    /// The cutoffs are wall times, since the stored `finished_at` are.
    pub(super) fn expire_if_due(&mut self, now: Now, ctx: &mut Context<Self>) {
        let Some(run) = self.expiry.as_mut() else {
            return;
        };
        if run.in_flight || now.mono_ms < run.next_at {
            return;
        }
        run.in_flight = true;
        let cutoffs = ExpiryCutoffs {
            finished_before: before(now.wall_ms, run.policy.job_retention_ms),
            failed_before: before(now.wall_ms, run.policy.failed_retention_ms),
        };
        let sent = run.link.send(ExpireJobs {
            cutoffs,
            limit: run.policy.batch_rows,
        });
        ctx.spawn(sent.into_actor(self).map(move |answer, act, ctx| {
            let outcome = match answer {
                Ok(Ok(expired)) => Ok(expired),
                Ok(Err(e)) => Err(e.to_string()),
                Err(e) => Err(format!("persistence unavailable: {e}")),
            };
            act.expired(now.mono_ms, outcome, ctx);
        }));
    }

    /// Applies one expiry answer and decides when to look again (see
    /// `next_look`); after a full batch the look is scheduled for then.
    fn expired(
        &mut self,
        asked_at: i64,
        outcome: Result<Option<Vec<ExpiredJob>>, String>,
        ctx: &mut Context<Self>,
    ) {
        let Some(run) = self.expiry.as_mut() else {
            return;
        };
        run.in_flight = false;
        let (full, interval) = (run.policy.batch_rows, run.policy.interval_ms);
        let answer = match &outcome {
            Ok(Some(jobs)) if jobs.len() >= full => Answer::Full,
            Ok(Some(_)) => Answer::Partial,
            Ok(None) => Answer::Busy,
            Err(e) => {
                warn!(self.log, "expiring finished jobs failed; trying again later"; "error" => e);
                Answer::Failed
            }
        };
        let answered_at = self.now().mono_ms;
        let next_at = next_look(asked_at, answered_at, answer, interval);
        if let Some(run) = self.expiry.as_mut() {
            run.next_at = next_at;
        }
        let Ok(Some(jobs)) = outcome else {
            return;
        };
        if !jobs.is_empty() {
            info!(self.log, "finished jobs expired"; "jobs" => jobs.len());
        }
        let again = jobs.len() >= full;
        for job in &jobs {
            self.state.forget_expired(
                job.id,
                job.idempotency_key.as_deref(),
                &job.task_type,
                job.state,
            );
        }
        if again && !self.commits.is_stopping() {
            let pause = u64::try_from(next_at.saturating_sub(answered_at)).unwrap_or(0);
            ctx.run_later(Duration::from_millis(pause), |act, ctx| {
                if !act.commits.is_stopping() {
                    let now = act.now();
                    act.expire_if_due(now, ctx);
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{next_look, Answer};

    #[test]
    fn a_full_batch_rests_nine_times_as_long_as_it_took_within_the_interval() {
        assert_eq!(next_look(1_000, 1_040, Answer::Full, 60_000), 1_400);
        assert_eq!(next_look(1_000, 1_000, Answer::Full, 60_000), 1_000);
        assert_eq!(
            next_look(1_000, 11_000, Answer::Full, 60_000),
            61_000,
            "never longer than the interval after asking"
        );
        assert_eq!(next_look(1_000, 1_040, Answer::Partial, 60_000), 61_000);
        assert_eq!(next_look(1_000, 1_040, Answer::Failed, 60_000), 61_000);
        assert_eq!(next_look(1_000, 1_040, Answer::Busy, 60_000), 1_000);
    }
}
