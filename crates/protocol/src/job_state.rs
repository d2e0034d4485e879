//! The job state machine: every state a job can be in and the one function
//! that decides which moves between them are legal.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use thiserror::Error;
use utoipa::ToSchema;

/// Where a job is in its life. `Succeeded`, `Failed` and `Cancelled` are
/// terminal: no transition leaves them.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[schema(as = State)]
pub enum JobState {
    Queued,
    Running,
    RetryWait,
    Succeeded,
    Failed,
    Cancelled,
}

/// A move the state machine does not allow; the job is left unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("illegal job transition {from} -> {to}")]
pub struct IllegalTransition {
    pub from: JobState,
    pub to: JobState,
}

impl JobState {
    pub const ALL: [JobState; 6] = [
        JobState::Queued,
        JobState::Running,
        JobState::RetryWait,
        JobState::Succeeded,
        JobState::Failed,
        JobState::Cancelled,
    ];

    /// True for the states a job ends in: nothing moves it out of them but
    /// an explicit requeue.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobState::Succeeded | JobState::Failed | JobState::Cancelled
        )
    }

    /// The single authority on legal moves. `Running -> Queued` is the
    /// recovery path (an attempt whose outcome is unknown after a restart).
    /// `Failed -> Queued` and `Cancelled -> Queued` are an operator's
    /// explicit requeue; nothing else leaves a terminal state.
    pub fn transition(self, to: JobState) -> Result<JobState, IllegalTransition> {
        use JobState::*;
        let legal = matches!(
            (self, to),
            (Queued, Running)
                | (Queued, Cancelled)
                | (Running, Succeeded)
                | (Running, Failed)
                | (Running, RetryWait)
                | (Running, Queued)
                | (Running, Cancelled)
                | (RetryWait, Queued)
                | (RetryWait, Cancelled)
                | (Failed, Queued)
                | (Cancelled, Queued)
        );
        if legal {
            Ok(to)
        } else {
            Err(IllegalTransition { from: self, to })
        }
    }

    /// The name used on the wire, in the database and in the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "QUEUED",
            JobState::Running => "RUNNING",
            JobState::RetryWait => "RETRY_WAIT",
            JobState::Succeeded => "SUCCEEDED",
            JobState::Failed => "FAILED",
            JobState::Cancelled => "CANCELLED",
        }
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A state name that is not one of the six.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown job state {0:?} (expected one of queued, running, retry_wait, succeeded, failed, cancelled)")]
pub struct UnknownState(pub String);

impl FromStr for JobState {
    type Err = UnknownState;
    /// Accepts any letter case, and `-` for `_` (`retry-wait`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_uppercase().replace('-', "_");
        JobState::ALL
            .into_iter()
            .find(|state| state.as_str() == wanted)
            .ok_or_else(|| UnknownState(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::JobState::*;
    use super::*;

    const LEGAL: [(JobState, JobState); 11] = [
        (Queued, Running),
        (Queued, Cancelled),
        (Running, Succeeded),
        (Running, Failed),
        (Running, RetryWait),
        (Running, Queued),
        (Running, Cancelled),
        (RetryWait, Queued),
        (RetryWait, Cancelled),
        (Failed, Queued),
        (Cancelled, Queued),
    ];

    #[test]
    fn every_legal_transition_is_accepted() {
        for (from, to) in LEGAL {
            assert_eq!(from.transition(to), Ok(to), "{from} -> {to}");
        }
    }

    #[test]
    fn every_other_transition_is_rejected() {
        let mut rejected = 0;
        for from in JobState::ALL {
            for to in JobState::ALL {
                if LEGAL.contains(&(from, to)) {
                    continue;
                }
                assert_eq!(
                    from.transition(to),
                    Err(IllegalTransition { from, to }),
                    "{from} -> {to} must be illegal"
                );
                rejected += 1;
            }
        }
        assert_eq!(rejected, 36 - LEGAL.len());
    }

    #[test]
    fn only_a_requeue_leaves_a_terminal_state() {
        for from in JobState::ALL.into_iter().filter(|s| s.is_terminal()) {
            for to in JobState::ALL {
                let requeue = to == Queued && from != Succeeded;
                assert_eq!(from.transition(to).is_ok(), requeue, "{from} -> {to}");
            }
        }
    }

    #[test]
    fn state_names_parse_back() {
        for state in JobState::ALL {
            assert_eq!(state.as_str().parse::<JobState>(), Ok(state));
        }
        assert_eq!("retry-wait".parse::<JobState>(), Ok(RetryWait));
        assert!("done".parse::<JobState>().is_err());
    }
}
