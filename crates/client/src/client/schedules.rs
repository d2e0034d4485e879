//! The client calls for schedules: each one request, answered with the
//! schedule, or the coordinator's refusal (`ScheduleRefusedAnswer`) as
//! the inner error.

use super::{unexpected, Client, ClientError};
use taskyard_protocol::{
    ClientRequest, ClientResponse, ScheduleRefusal, ScheduleSpec, ScheduleView, SubmitAnswer,
};

/// The coordinator refused a schedule request; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct ScheduleRefusedAnswer {
    pub kind: ScheduleRefusal,
    /// The field at fault, when one is.
    pub field: Option<String>,
    pub reason: String,
}

/// A request's answer: what was asked for, or the refusal.
pub type ScheduleAnswer<T> = Result<Result<T, ScheduleRefusedAnswer>, ClientError>;

impl Client {
    pub fn create_schedule(&mut self, spec: ScheduleSpec) -> ScheduleAnswer<ScheduleView> {
        self.schedule_call(ClientRequest::CreateSchedule(Box::new(spec)))
    }

    pub fn update_schedule(&mut self, spec: ScheduleSpec) -> ScheduleAnswer<ScheduleView> {
        self.schedule_call(ClientRequest::UpdateSchedule(Box::new(spec)))
    }

    pub fn show_schedule(&mut self, name: &str) -> ScheduleAnswer<ScheduleView> {
        self.schedule_call(ClientRequest::ShowSchedule { name: name.into() })
    }

    pub fn pause_schedule(&mut self, name: &str) -> ScheduleAnswer<ScheduleView> {
        self.schedule_call(ClientRequest::PauseSchedule { name: name.into() })
    }

    pub fn resume_schedule(&mut self, name: &str) -> ScheduleAnswer<ScheduleView> {
        self.schedule_call(ClientRequest::ResumeSchedule { name: name.into() })
    }

    /// Deleted once it returns `Ok(Ok(()))` (durable).
    pub fn delete_schedule(&mut self, name: &str) -> ScheduleAnswer<()> {
        let request = ClientRequest::DeleteSchedule { name: name.into() };
        match self.request(request)? {
            ClientResponse::ScheduleDeleted { .. } => Ok(Ok(())),
            other => refusal(other, "ScheduleDeleted"),
        }
    }

    /// Submits the schedule's job now.
    pub fn trigger_schedule(&mut self, name: &str) -> ScheduleAnswer<SubmitAnswer> {
        let request = ClientRequest::TriggerSchedule { name: name.into() };
        match self.request(request)? {
            ClientResponse::Submitted(answer) => Ok(Ok(answer)),
            other => refusal(other, "Submitted"),
        }
    }

    /// Every schedule, by name (as many requests as pages).
    pub fn list_schedules(&mut self) -> Result<Vec<ScheduleView>, ClientError> {
        let mut all: Vec<ScheduleView> = Vec::new();
        loop {
            let after = all.last().map(|v| v.spec.name.clone());
            match self.request(ClientRequest::ListSchedules { after })? {
                ClientResponse::Schedules { schedules, more } => {
                    let progressed = !schedules.is_empty();
                    all.extend(schedules);
                    if !more || !progressed {
                        return Ok(all);
                    }
                }
                other => return Err(unexpected("Schedules", &other)),
            }
        }
    }

    fn schedule_call(&mut self, request: ClientRequest) -> ScheduleAnswer<ScheduleView> {
        match self.request(request)? {
            ClientResponse::Schedule(view) => Ok(Ok(*view)),
            other => refusal(other, "Schedule"),
        }
    }
}

fn refusal<T>(response: ClientResponse, expected: &str) -> ScheduleAnswer<T> {
    match response {
        ClientResponse::ScheduleRefused {
            kind,
            field,
            reason,
        } => Ok(Err(ScheduleRefusedAnswer {
            kind,
            field,
            reason,
        })),
        ClientResponse::Invalid { reason } => Err(ClientError::Invalid(reason)),
        ClientResponse::Overloaded { reason } => Err(ClientError::Overloaded(reason)),
        other => Err(unexpected(expected, &other)),
    }
}
