//! Requests about schedules, decided on the state: reads and triggers are
//! answered at once; a change is applied to the book and comes back as the
//! write the database must hold before the answer goes out. Pure: the
//! coordinator sends the write and answers once it is stored.

use crate::scheduler::schedule::{ScheduleRefused, ScheduleWrite};
use crate::scheduler::CoordinatorState;
use taskyard_client::clock::Now;
use taskyard_protocol::{ClientRequest, ClientResponse, ScheduleRefusal, MAX_LIST_SCHEDULES};

/// What a schedule request needs done.
pub enum ScheduleStep {
    /// Answer now (behind the current batch).
    Answer(ClientResponse),
    /// Store this change, then answer with the response.
    Store(ScheduleWrite, ClientResponse),
}

impl CoordinatorState {
    /// Decides `request` (a request about schedules; any other comes back
    /// as the error) at `now`.
    pub fn schedule_request(
        &mut self,
        request: ClientRequest,
        now: Now,
    ) -> Result<ScheduleStep, Box<ClientRequest>> {
        let state = self;
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
                return Ok(ScheduleStep::Answer(state.list_schedules(after)))
            }
            ClientRequest::TriggerSchedule { name } => {
                let answer = match state.trigger_named_schedule(&name, now) {
                    Ok(answer) => ClientResponse::Submitted(answer),
                    Err(e) => refused(e),
                };
                state.assign_queued(now);
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
        let all = self.schedule_views();
        let mut schedules: Vec<_> = all
            .into_iter()
            .filter(|v| after.as_ref().is_none_or(|a| v.spec.name > *a))
            .take(MAX_LIST_SCHEDULES + 1)
            .collect();
        let more = schedules.len() > MAX_LIST_SCHEDULES;
        schedules.truncate(MAX_LIST_SCHEDULES);
        ClientResponse::Schedules { schedules, more }
    }
}

/// A refusal as the wire says it.
fn refused(e: ScheduleRefused) -> ClientResponse {
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
