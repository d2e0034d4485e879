//! One function per subcommand: connect, ask, render, choose the exit code.

use crate::cli::output::{self, emit, warn};
use crate::cli::{CliError, Context, Exit, ListArgs, StatusArgs, SubmitArgs, WaitArgs};
use crate::client::{Client, WaitOutcome};
use crate::protocol::payloads::encode_json;
use crate::protocol::{JobId, JobState, JobView, SubmitAnswer, SubmitRequest};
use std::time::Duration;

/// How often `wait` asks for the job's status.
pub const WAIT_POLL_INTERVAL: Duration = Duration::from_millis(250);

/// `taskyard submit`: exit 3 when rejected; with `--wait`, ends like `wait`.
pub fn submit(ctx: &Context, args: SubmitArgs) -> Result<Exit, CliError> {
    let mut client = ctx.connect()?;
    let (job_id, no_worker) = match client.submit(submit_request(&args))? {
        SubmitAnswer::Accepted { job_id, no_worker } => (job_id, no_worker),
        SubmitAnswer::Rejected(rejected) => return Err(CliError::Rejected(rejected.reason)),
    };
    if no_worker {
        warn(&output::no_worker_note(&args.task_type));
    }
    if !args.wait {
        emit(&output::submitted(job_id, no_worker, ctx.json))?;
        return Ok(Exit::Success);
    }
    if !ctx.json {
        emit(&job_id.to_string())?;
    }
    wait_and_report(ctx, &mut client, job_id, args.wait_timeout_secs)
}

/// The wire request for `submit`'s arguments.
pub fn submit_request(args: &SubmitArgs) -> SubmitRequest {
    SubmitRequest {
        task_type: args.task_type.clone(),
        payload: encode_json(&args.payload),
        priority: args.priority,
        max_attempts: args.max_attempts,
        timeout_ms: args.timeout_ms,
        idempotency_key: args.idempotency_key.clone(),
    }
}

/// `taskyard status ID`: an unknown id is exit 2.
pub fn status(ctx: &Context, args: StatusArgs) -> Result<Exit, CliError> {
    let job = ctx
        .connect()?
        .status(args.job_id)?
        .ok_or(CliError::NoSuchJob(args.job_id))?;
    emit_job(ctx, &job, output::job_details)?;
    if job.no_worker && !job.state.is_terminal() {
        warn(&output::no_worker_note(&job.task_type));
    }
    Ok(Exit::Success)
}

/// `taskyard wait ID`: exit 0 SUCCEEDED, 1 FAILED or CANCELLED, 4 timed out.
pub fn wait(ctx: &Context, args: WaitArgs) -> Result<Exit, CliError> {
    let mut client = ctx.connect()?;
    wait_and_report(ctx, &mut client, args.job_id, args.timeout_secs)
}

/// `taskyard list`.
pub fn list(ctx: &Context, args: ListArgs) -> Result<Exit, CliError> {
    let jobs = ctx.connect()?.list(args.state, args.limit)?;
    if ctx.json {
        let values: Vec<_> = jobs.iter().map(output::job_json).collect();
        emit(&output::json_text(&values.into()))?;
    } else {
        emit(&output::jobs_table(&jobs))?;
    }
    Ok(Exit::Success)
}

/// `taskyard workers`.
pub fn workers(ctx: &Context) -> Result<Exit, CliError> {
    let workers = ctx.connect()?.workers()?;
    if ctx.json {
        let value = serde_json::to_value(&workers).unwrap_or_default();
        emit(&output::json_text(&value))?;
    } else {
        emit(&output::workers_table(&workers))?;
    }
    Ok(Exit::Success)
}

/// Waits for `job_id` and prints the outcome. With `--json` the job is
/// printed whatever the outcome, a timeout included.
fn wait_and_report(
    ctx: &Context,
    client: &mut Client,
    job_id: JobId,
    timeout_secs: u64,
) -> Result<Exit, CliError> {
    let timeout = Duration::from_secs(timeout_secs);
    match client.wait(job_id, timeout, WAIT_POLL_INTERVAL)? {
        WaitOutcome::Finished(job) => {
            emit_job(ctx, &job, output::finished)?;
            Ok(finished_exit(job.state))
        }
        WaitOutcome::TimedOut(job) => {
            if ctx.json {
                emit(&output::json_text(&output::job_json(&job)))?;
            }
            Err(CliError::WaitTimedOut {
                job_id,
                state: job.state,
                secs: timeout_secs,
            })
        }
    }
}

/// Prints `job` as JSON or with `human`; an empty human rendering prints nothing.
fn emit_job(ctx: &Context, job: &JobView, human: fn(&JobView) -> String) -> Result<(), CliError> {
    if ctx.json {
        return emit(&output::json_text(&output::job_json(job)));
    }
    let text = human(job);
    if text.is_empty() {
        return Ok(());
    }
    emit(&text)
}

fn finished_exit(state: JobState) -> Exit {
    match state {
        JobState::Succeeded => Exit::Success,
        _ => Exit::JobFailed,
    }
}
