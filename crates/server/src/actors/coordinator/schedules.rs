//! Schedule requests on the coordinator: reads and triggers are answered
//! like any request (behind the batch holding what they show); a change is
//! decided on the state at once, sent to `Persistence` (the handler never
//! waits on it), and answered once the database holds it.

use super::Coordinator;
use crate::actors::outbox::{ClientAnswer, Delivery, Unheld};
use crate::actors::persistence::WriteSchedule;
use crate::scheduler::schedule::{ScheduleRefused, ScheduleWrite};
use crate::store::StoreError;
use actix::{ActorFutureExt, AsyncContext, Context, MailboxError, Recipient, WrapFuture};
use slog::{error, warn};
use taskyard_client::clock::Now;
use taskyard_protocol::{ClientRequest, ClientResponse, ScheduleRefusal, MAX_LIST_SCHEDULES};

/// What a schedule request needs done.
pub(super) enum ScheduleStep {
    /// Answer now (behind the current batch).
    Answer(ClientResponse),
    /// Store this change, then answer with the response.
    Store(ScheduleWrite, ClientResponse),
}

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
        let step = match self.decide_schedule_request(request, now) {
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

    fn decide_schedule_request(
        &mut self,
        request: ClientRequest,
        now: Now,
    ) -> Result<ScheduleStep, Box<ClientRequest>> {
        let state = &mut self.state;
        let (written, name) = match request {
            ClientRequest::CreateSchedule(spec) => {
                let name = spec.name.clone();
                (state.create_schedule(*spec, now), name)
            }
            ClientRequest::UpdateSchedule(spec) => {
                let name = spec.name.clone();
                (state.update_schedule(*spec, now), name)
            }
            ClientRequest::PauseSchedule { name } => {
                (state.set_schedule_paused(&name, true, now), name)
            }
            ClientRequest::ResumeSchedule { name } => {
                (state.set_schedule_paused(&name, false, now), name)
            }
            ClientRequest::DeleteSchedule { name } => (state.delete_schedule(&name), name),
            ClientRequest::ShowSchedule { name } => {
                return Ok(ScheduleStep::Answer(match state.schedule_named(&name) {
                    Some(view) => ClientResponse::Schedule(Box::new(view)),
                    None => refused(ScheduleRefused::Unknown(name)),
                }))
            }
            ClientRequest::ListSchedules { after } => {
                return Ok(ScheduleStep::Answer(self.list_schedules(after)))
            }
            ClientRequest::TriggerSchedule { name } => {
                let answer = match state.trigger_named_schedule(&name, now) {
                    Ok(answer) => ClientResponse::Submitted(answer),
                    Err(e) => refused(e),
                };
                state.schedule(now);
                return Ok(ScheduleStep::Answer(answer));
            }
            other => return Err(Box::new(other)),
        };
        Ok(match written {
            Err(e) => ScheduleStep::Answer(refused(e)),
            Ok(write @ ScheduleWrite::Delete(_)) => {
                ScheduleStep::Store(write, ClientResponse::ScheduleDeleted { name })
            }
            Ok(write) => {
                let view = state
                    .schedule_named(&name)
                    .map(|v| ClientResponse::Schedule(Box::new(v)))
                    .unwrap_or_else(|| refused(ScheduleRefused::Unknown(name)));
                ScheduleStep::Store(write, view)
            }
        })
    }

    fn list_schedules(&self, after: Option<String>) -> ClientResponse {
        let all = self.state.schedule_views();
        let mut schedules: Vec<_> = all
            .into_iter()
            .filter(|v| after.as_ref().is_none_or(|a| v.spec.name > *a))
            .take(MAX_LIST_SCHEDULES + 1)
            .collect();
        let more = schedules.len() > MAX_LIST_SCHEDULES;
        schedules.truncate(MAX_LIST_SCHEDULES);
        ClientResponse::Schedules { schedules, more }
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

/// A refusal as the wire says it.
pub(super) fn refused(e: ScheduleRefused) -> ClientResponse {
    let reason = e.to_string();
    let (kind, field) = match e {
        ScheduleRefused::Invalid(spec) => (ScheduleRefusal::Invalid, Some(spec.field.to_string())),
        ScheduleRefused::Exists(_) => (ScheduleRefusal::Exists, Some("name".into())),
        ScheduleRefused::Unknown(_) => (ScheduleRefusal::Unknown, Some("name".into())),
        ScheduleRefused::TooMany { .. } => (ScheduleRefusal::Limit, None),
    };
    ClientResponse::ScheduleRefused {
        kind,
        field,
        reason,
    }
}
