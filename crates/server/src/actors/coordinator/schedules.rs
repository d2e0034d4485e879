//! Schedule requests on the coordinator: reads and triggers are answered
//! like any request (behind the batch holding what they show); a change is
//! decided on the state at once, sent to `Persistence` (the handler never
//! waits on it), and answered once the database holds it.

use super::Coordinator;
use crate::actors::outbox::{ClientAnswer, Delivery, Unheld};
use crate::actors::persistence::WriteSchedule;
use crate::scheduler::schedule::{ScheduleStep, ScheduleWrite};
use crate::store::StoreError;
use actix::{ActorFutureExt, AsyncContext, Context, MailboxError, Recipient, WrapFuture};
use slog::{error, warn};
use taskyard_protocol::{ClientRequest, ClientResponse, ScheduleRefusal};

impl Coordinator {
    /// Handles a request about schedules (`Plan::Schedule`).
    pub(super) fn schedule_request(
        &mut self,
        request: ClientRequest,
        reply_to: Recipient<ClientAnswer>,
        request_id: u64,
        ctx: &mut Context<Self>,
    ) {
        let now = self.now();
        let step = match self.state.schedule_request(request, now) {
            Ok(step) => step,
            // `plan` sends only schedule requests here.
            Err(_) => ScheduleStep::Answer(ClientResponse::Invalid {
                reason: "not a request about schedules".into(),
            }),
        };
        match step {
            ScheduleStep::Answer(response) => {
                self.finish(Some(Delivery::client(reply_to, request_id, response)), ctx);
            }
            ScheduleStep::Store(write, response) => {
                self.store_schedule(write, response, reply_to, request_id, ctx);
                // A created or resumed schedule may be due at once, or
                // before the slot timer armed.
                self.finish(None, ctx);
                self.arm_slot_timer(now, ctx);
            }
        }
    }

    /// Stores the skipped counts a step moved, in the background: they
    /// are counters for people, not state anything waits for, so a
    /// failure is logged and the next skip writes them again.
    pub(super) fn store_skipped_counts(&mut self, write: ScheduleWrite, ctx: &mut Context<Self>) {
        let Some(link) = self.schedule_writes.clone() else {
            return;
        };
        let sent = link.send(WriteSchedule { write });
        ctx.spawn(sent.into_actor(self).map(|stored, act, _| {
            let failure = match stored {
                Ok(Ok(())) => return,
                Ok(Err(e)) => e.to_string(),
                Err(e) => e.to_string(),
            };
            warn!(act.log, "schedules' skipped counts not stored"; "error" => failure);
        }));
    }

    fn store_schedule(
        &mut self,
        write: ScheduleWrite,
        response: ClientResponse,
        reply_to: Recipient<ClientAnswer>,
        request_id: u64,
        ctx: &mut Context<Self>,
    ) {
        let Some(link) = self.schedule_writes.clone() else {
            return answer_stored(Err(MailboxError::Closed), response, reply_to, request_id);
        };
        let sent = link.send(WriteSchedule { write });
        ctx.spawn(sent.into_actor(self).map(move |stored, act, _| {
            let failure = match &stored {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(e) => Some(e.to_string()),
            };
            if let Some(e) = failure {
                error!(act.log, "schedule change not stored"; "error" => e);
            }
            answer_stored(stored, response, reply_to, request_id)
        }));
    }
}

fn answer_stored(
    stored: Result<Result<(), StoreError>, MailboxError>,
    response: ClientResponse,
    reply_to: Recipient<ClientAnswer>,
    request_id: u64,
) {
    let response = match stored {
        Ok(Ok(())) => response,
        Ok(Err(e)) => store_refused(e.to_string()),
        Err(e) => store_refused(format!("the database thread is unavailable: {e}")),
    };
    Delivery::client(reply_to, request_id, response).deliver_unheld(Unheld::StoredByItsOwnWrite);
}

fn store_refused(reason: String) -> ClientResponse {
    ClientResponse::ScheduleRefused {
        kind: ScheduleRefusal::Store,
        field: None,
        reason: format!("not stored (the change holds in memory until restart): {reason}"),
    }
}
