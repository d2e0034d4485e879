//! Driving expiry: the sweep asks `Persistence` to delete a batch of
//! expired jobs when one is due, and the answer (durable deletions) tells
//! the state which idempotency keys and counts went with them. At most
//! one batch is asked for at a time; a full batch asks for the next at
//! once, so a backlog drains batch after batch with commits of live work
//! between them (the persistence thread takes messages in order).

use super::Coordinator;
use crate::actors::persistence::ExpireJobs;
use crate::clock::Now;
use crate::store::{ExpiredJob, ExpiryCutoffs};
use actix::{ActorFutureExt, AsyncContext, Context, Recipient, WrapFuture};
use slog::{info, warn};

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

    /// Applies one expiry answer and decides when to look again: at once
    /// after a full batch, at the next sweep when persistence was busy,
    /// else after the interval.
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
        let later = asked_at.saturating_add(i64::try_from(interval).unwrap_or(i64::MAX));
        run.next_at = match &outcome {
            Ok(Some(jobs)) if jobs.len() >= full => asked_at,
            Ok(Some(_)) => later,
            Ok(None) => asked_at,
            Err(e) => {
                warn!(self.log, "expiring finished jobs failed; trying again later"; "error" => e);
                later
            }
        };
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
            let now = self.now();
            self.expire_if_due(now, ctx);
        }
    }
}
