//! What operators do to jobs in bulk: resolve an id prefix, retry named
//! jobs, delete finished jobs (named, or by filter), and the request
//! checks these share. A deletion is durable before it is answered: the
//! persistence thread deletes the rows in a transaction of its own, and
//! until it answers the jobs are marked as being deleted so nothing
//! (a requeue) can write their rows back.

use super::Coordinator;
use crate::actors::outbox::{ClientAnswer, Delivery, Unheld};
use crate::actors::persistence::DeleteJobs;
use crate::scheduler::bulk::requeue_refusal;
use crate::scheduler::deletion::refusal;
use crate::scheduler::deletion_queue::{Settled, Tracked};
use crate::store::{ExpiredJob, StoreError};
use actix::{ActorFutureExt, AsyncContext, Context, MailboxError, Recipient, WrapFuture};
use slog::info;
use taskyard_client::clock::Now;
use taskyard_protocol::{BulkAnswer, ClientResponse, JobId, Refusal};

/// Most deletions waiting for the database at once; another is answered
/// `Overloaded`. Bounds the jobs marked as being deleted to this times
/// `MAX_BULK_JOBS`.
pub const MAX_DELETIONS_IN_FLIGHT: usize = 16;

/// A deletion sent to the database and the request it answers.
pub(super) struct Deletion {
    candidates: Vec<JobId>,
    refused: Vec<Refusal>,
    more: bool,
    reply_to: Recipient<ClientAnswer>,
    request_id: u64,
}

impl Coordinator {
    /// `Requeue` of each of `ids` that memory holds (once each, in order),
    /// then one scheduling pass.
    pub(super) fn requeue_each(&mut self, ids: &[JobId], now: Now) -> BulkAnswer {
        let mut answer = BulkAnswer::default();
        for (i, &id) in ids.iter().enumerate() {
            if ids[..i].contains(&id) {
                continue;
            }
            match self.state.requeue(id, now) {
                Ok(()) => answer.done.push(id),
                Err(refused) => answer.refused.push(requeue_refusal(id, refused)),
            }
        }
        self.state.assign_queued(now);
        answer
    }

    /// Deletes those of `ids` that may be deleted now (see
    /// `CoordinatorState::deletable`) and answers `Bulk` once the database
    /// has; `more` is passed on to the answer. Never waits.
    pub(super) fn delete_named(
        &mut self,
        ids: Vec<JobId>,
        more: bool,
        reply_to: Recipient<ClientAnswer>,
        request_id: u64,
        ctx: &mut Context<Self>,
    ) {
        if self.deletion.is_none() {
            let response = ClientResponse::Invalid {
                reason: "deleting jobs needs the coordinator's database".into(),
            };
            let refusal = Delivery::client(reply_to, request_id, response);
            return refusal.deliver_unheld(Unheld::Refusal);
        }
        let (candidates, refused) = self.state.deletable(&ids);
        if candidates.is_empty() {
            let response = ClientResponse::Bulk(BulkAnswer {
                done: Vec::new(),
                refused,
                more,
            });
            return self.finish(Some(Delivery::client(reply_to, request_id, response)), ctx);
        }
        let deletion = Deletion {
            candidates,
            refused,
            more,
            reply_to,
            request_id,
        };
        match self.deletions.admit(deletion) {
            Ok(sent) => {
                self.state.deleting(&sent.deletion.candidates);
                self.send_deletion(sent, ctx);
            }
            Err((reason, deletion)) => {
                let response = ClientResponse::Overloaded { reason };
                let refusal = Delivery::client(deletion.reply_to, deletion.request_id, response);
                refusal.deliver_unheld(Unheld::Refusal);
            }
        }
    }

    /// Sends the deletions parked on a busy database again (after a
    /// commit was answered, or at a sweep).
    pub(super) fn wake_deletions(&mut self, ctx: &mut Context<Self>) {
        for parked in self.deletions.wake() {
            self.send_deletion(parked, ctx);
        }
    }

    fn send_deletion(&mut self, sent: Tracked<Deletion>, ctx: &mut Context<Self>) {
        let Some(link) = self.deletion.clone() else {
            return self.deletion_answered(sent, Err(MailboxError::Closed), ctx);
        };
        let asked = link.send(DeleteJobs {
            ids: sent.deletion.candidates.clone(),
        });
        ctx.spawn(
            asked
                .into_actor(self)
                .map(move |answer, act, ctx| act.deletion_answered(sent, answer, ctx)),
        );
    }

    /// Applies the database's answer: the deleted jobs leave memory and the
    /// counts, and the request is answered; a busy database is asked
    /// again later (see `DeletionQueue`).
    fn deletion_answered(
        &mut self,
        sent: Tracked<Deletion>,
        answer: Result<Result<Option<Vec<ExpiredJob>>, StoreError>, MailboxError>,
        ctx: &mut Context<Self>,
    ) {
        let busy = matches!(answer, Ok(Ok(None)));
        let stopping = self.commits.is_stopping();
        let Some(settled) = self.deletions.answered(sent, busy, stopping) else {
            return;
        };
        let (deletion, outcome) = match (settled, answer) {
            (Settled::Answered(d), Ok(Ok(Some(deleted)))) => (d, Ok(deleted)),
            (Settled::Answered(d), Ok(Err(e))) => (d, Err(format!("deleting failed: {e}"))),
            (Settled::Answered(d), Err(e)) => {
                (d, Err(format!("the database thread is unavailable: {e}")))
            }
            (Settled::Answered(d) | Settled::GaveUp(d), _) => {
                (d, Err("the database stayed busy; try again".to_string()))
            }
        };
        self.settle_deletion(deletion, outcome, ctx);
    }

    /// Answers the deletions parked on a busy database as failed: the
    /// coordinator is stopping, and no commit or sweep will wake them.
    pub(super) fn give_up_parked_deletions(&mut self, ctx: &mut Context<Self>) {
        for deletion in self.deletions.give_up_parked() {
            let reason = "the coordinator is stopping; try again".to_string();
            self.settle_deletion(deletion, Err(reason), ctx);
        }
    }

    /// Ends a deletion with the database's outcome: the deleted jobs leave
    /// memory and the counts, the others are refused, and the request is
    /// answered behind the batch holding what it shows.
    fn settle_deletion(
        &mut self,
        deletion: Deletion,
        outcome: Result<Vec<ExpiredJob>, String>,
        ctx: &mut Context<Self>,
    ) {
        self.state.deleted(&deletion.candidates);
        let mut bulk = BulkAnswer {
            done: Vec::new(),
            refused: deletion.refused,
            more: deletion.more,
        };
        match outcome {
            Ok(deleted) => {
                for job in &deleted {
                    let key = job.idempotency_key.as_deref();
                    self.state
                        .forget_expired(job.id, key, &job.task_type, job.state);
                }
                bulk.done = deleted.iter().map(|job| job.id).collect();
                let missing = deletion
                    .candidates
                    .iter()
                    .filter(|id| !bulk.done.contains(id));
                bulk.refused
                    .extend(missing.map(|&id| refusal(id, "not found (expired or never existed)")));
                if !bulk.done.is_empty() {
                    info!(self.log, "jobs deleted"; "jobs" => bulk.done.len());
                }
            }
            Err(reason) => bulk.refused.extend(
                deletion
                    .candidates
                    .iter()
                    .map(|&id| refusal(id, reason.clone())),
            ),
        }
        let response = ClientResponse::Bulk(bulk);
        let delivery = Delivery::client(deletion.reply_to, deletion.request_id, response);
        self.finish(Some(delivery), ctx);
    }
}
