//! Exit codes and the one error type every command returns.

use crate::client::ClientError;
use crate::protocol::{IdPrefix, JobId, JobState};
use std::process::ExitCode;
use thiserror::Error;

/// How the `taskyard` process ends. The numbers are a stable interface for
/// scripts; `EXIT_CODES_HELP` documents them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: the command did what was asked (for `wait`: the job SUCCEEDED).
    Success = 0,
    /// 1: the job ended FAILED or CANCELLED.
    JobFailed = 1,
    /// 2: bad arguments, or the coordinator was unreachable or broke off
    /// the conversation.
    Usage = 2,
    /// 3: the coordinator rejected the submission.
    Rejected = 3,
    /// 4: `wait` (or `submit --wait`) timed out before the job finished.
    WaitTimedOut = 4,
    /// 5: the coordinator does not know the job (expired or never existed):
    /// it answered, so unlike 2 asking again will not help.
    NotFound = 5,
}

/// The table behind `EXIT_CODES_HELP`, for a README or a test to quote.
pub const EXIT_CODES: [(Exit, &str); 6] = [
    (Exit::Success, "success"),
    (Exit::JobFailed, "the job ended FAILED or CANCELLED"),
    (Exit::Usage, "bad arguments or coordinator unreachable"),
    (Exit::Rejected, "submission rejected"),
    (Exit::WaitTimedOut, "wait timed out"),
    (Exit::NotFound, "no such job (expired or never existed)"),
];

/// The exit-code section of `taskyard --help`; kept equal to `EXIT_CODES`
/// by a test.
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0  success
  1  the job ended FAILED or CANCELLED
  2  bad arguments or coordinator unreachable
  3  submission rejected
  4  wait timed out
  5  no such job (expired or never existed)";

impl Exit {
    /// The process exit status.
    pub fn code(self) -> u8 {
        self as u8
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit.code())
    }
}

/// Why a command did not succeed. `run` prints it as one line,
/// `taskyard: <message>`, and exits with `exit()`.
#[derive(Debug, Error)]
pub enum CliError {
    #[error(transparent)]
    Client(ClientError),
    #[error("job {0} not found (expired or never existed)")]
    NoSuchJob(JobId),
    /// No job's id starts with the prefix given for a job id.
    #[error("no job id starts with {0} (expired or never existed)")]
    NoSuchPrefix(IdPrefix),
    #[error("submission rejected: {0}")]
    Rejected(String),
    /// A schedule change refused by the coordinator (the reason names the
    /// field); nothing was stored.
    #[error("schedule refused: {0}")]
    ScheduleRefused(String),
    #[error("{0}")]
    NoSuchSchedule(String),
    #[error("timed out after {} waiting for job {job_id}; it is still {state}",
            crate::clock::text::format_duration(waited.as_millis() as u64))]
    WaitTimedOut {
        job_id: JobId,
        state: JobState,
        waited: std::time::Duration,
    },
    #[error("cannot write output: {0}")]
    Output(std::io::Error),
    /// `dev` could not start: bad config, database or listen address.
    #[error("{0}")]
    Setup(String),
    /// An argument that parsed but makes no sense (a time in the past).
    #[error("{0}")]
    BadArgument(String),
    /// A coordinator's HTTP listener could not be asked (`cluster`).
    #[error("{0}")]
    Unreachable(String),
    #[error("job {job_id} already finished ({state})")]
    AlreadyFinished { job_id: JobId, state: JobState },
    #[error("job {job_id} is {state}; only a SUCCEEDED job has a result")]
    NoResult { job_id: JobId, state: JobState },
}

impl CliError {
    /// The exit code this error ends the process with.
    pub fn exit(&self) -> Exit {
        match self {
            CliError::NoSuchJob(_) | CliError::NoSuchPrefix(_) | CliError::NoSuchSchedule(_) => {
                Exit::NotFound
            }
            CliError::Client(_)
            | CliError::Output(_)
            | CliError::Setup(_)
            | CliError::BadArgument(_)
            | CliError::Unreachable(_) => Exit::Usage,
            CliError::AlreadyFinished { .. } | CliError::NoResult { .. } => Exit::JobFailed,
            CliError::Rejected(_) | CliError::ScheduleRefused(_) => Exit::Rejected,
            CliError::WaitTimedOut { .. } => Exit::WaitTimedOut,
        }
    }
}

impl From<ClientError> for CliError {
    fn from(e: ClientError) -> CliError {
        match e {
            ClientError::NotFound(job_id) => CliError::NoSuchJob(job_id),
            ClientError::NoMatch(prefix) => CliError::NoSuchPrefix(prefix),
            other => CliError::Client(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_text_lists_every_exit_code() {
        for (exit, meaning) in EXIT_CODES {
            let line = format!("  {}  {meaning}", exit.code());
            assert!(EXIT_CODES_HELP.contains(&line), "missing {line:?}");
        }
        assert_eq!(EXIT_CODES_HELP.lines().count(), EXIT_CODES.len() + 1);
    }

    #[test]
    fn unknown_job_exits_5_and_an_unreachable_coordinator_2() {
        let id = JobId::mint();
        let e = CliError::from(ClientError::NotFound(id));
        assert_eq!(e.exit(), Exit::NotFound);
        assert_eq!(e.exit().code(), 5);
        assert_eq!(
            e.to_string(),
            format!("job {id} not found (expired or never existed)")
        );
        let unreachable = CliError::from(ClientError::Unreachable {
            addr: "127.0.0.1:1".into(),
            reason: "connection refused".into(),
        });
        assert_eq!(unreachable.exit(), Exit::Usage);
    }

    #[test]
    fn a_prefix_nothing_matches_exits_5_and_an_ambiguous_one_2() {
        let prefix = crate::protocol::IdPrefix::parse("0193abcd").expect("prefix");
        let none = CliError::from(ClientError::NoMatch(prefix.clone()));
        assert_eq!(none.exit(), Exit::NotFound);
        let ambiguous = CliError::from(ClientError::Ambiguous {
            prefix,
            candidates: vec![JobId::mint(), JobId::mint()],
        });
        assert_eq!(ambiguous.exit(), Exit::Usage);
    }

    #[test]
    fn every_exit_code_is_distinct() {
        let mut codes: Vec<u8> = EXIT_CODES.iter().map(|(e, _)| e.code()).collect();
        codes.dedup();
        assert_eq!(codes, [0, 1, 2, 3, 4, 5]);
    }
}
