//! Driving expiry (see `ExpiryRun`, which decides when): the sweep looks,
//! `Persistence` deletes the batch asked for, and its answer (durable
//! deletions) tells the state which idempotency keys and counts went with
//! them.

use super::Coordinator;
use crate::actors::persistence::ExpireJobs;
use crate::scheduler::expiry_run::{ExpiryAnswer, ExpiryCommand, ExpiryRun};
use crate::store::ExpiredJob;
use actix::{ActorFutureExt, AsyncContext, Context, Recipient, WrapFuture};
use slog::{info, warn};
use taskyard_client::clock::Now;

/// Expiry's place in the coordinator: where batches go, and when next.
pub(super) struct Expiry {
    pub(super) link: Recipient<ExpireJobs>,
    pub(super) run: ExpiryRun,
}

impl Coordinator {
    /// Asks for the next batch of expired jobs if `ExpiryRun` says one is
    /// due. Never waits.
    pub(super) fn expire_if_due(&mut self, now: Now, ctx: &mut Context<Self>) {
        let Some(expiry) = self.expiry.as_mut() else {
            return;
        };
        if let Some(command) = expiry.run.look(now) {
            self.run_expiry(command, ctx);
        }
    }

    fn run_expiry(&mut self, command: ExpiryCommand, ctx: &mut Context<Self>) {
        match command {
            ExpiryCommand::Delete {
                cutoffs,
                limit,
                asked_at,
            } => {
                let Some(expiry) = self.expiry.as_ref() else {
                    return;
                };
                let sent = expiry.link.send(ExpireJobs { cutoffs, limit });
                ctx.spawn(sent.into_actor(self).map(move |answer, act, ctx| {
                    let outcome = match answer {
                        Ok(Ok(expired)) => Ok(expired),
                        Ok(Err(e)) => Err(e.to_string()),
                        Err(e) => Err(format!("persistence unavailable: {e}")),
                    };
                    act.expired(asked_at, outcome, ctx);
                }));
            }
            ExpiryCommand::LookAgain(pause) => {
                ctx.run_later(pause, |act, ctx| {
                    if !act.commits.is_stopping() {
                        let now = act.now();
                        act.expire_if_due(now, ctx);
                    }
                });
            }
        }
    }

    /// Applies one expiry answer: the deleted jobs' keys and counts go.
    fn expired(
        &mut self,
        asked_at: i64,
        outcome: Result<Option<Vec<ExpiredJob>>, String>,
        ctx: &mut Context<Self>,
    ) {
        let answer = match &outcome {
            Ok(Some(jobs)) => ExpiryAnswer::Deleted(jobs.len()),
            Ok(None) => ExpiryAnswer::Busy,
            Err(e) => {
                warn!(self.log, "expiring finished jobs failed; trying again later"; "error" => e);
                ExpiryAnswer::Failed
            }
        };
        if let Ok(Some(jobs)) = &outcome {
            if !jobs.is_empty() {
                info!(self.log, "finished jobs expired"; "jobs" => jobs.len());
            }
            for job in jobs {
                self.state.forget_expired(
                    job.id,
                    job.idempotency_key.as_deref(),
                    &job.task_type,
                    job.state,
                );
            }
        }
        let (answered_at, stopping) = (self.now().mono_ms, self.commits.is_stopping());
        let Some(expiry) = self.expiry.as_mut() else {
            return;
        };
        if let Some(command) = expiry.run.answered(asked_at, answered_at, answer, stopping) {
            self.run_expiry(command, ctx);
        }
    }
}
