//! One function per subcommand: connect, ask, render, choose the exit code.

use crate::cli::output::{self, emit, warn};
use crate::cli::paging::{next_page_command, HintGlobals};
use crate::cli::spinner::Spinner;
use crate::cli::{CliError, Context, Exit, ListArgs, StatusArgs, SubmitArgs, WaitArgs};
use crate::client::{CancelOutcome, Client, WaitOutcome};
use crate::clock::text::format_millis;
use crate::protocol::payloads::{decode_value, encode_json};
use crate::protocol::{
    limits, IdPrefix, JobId, JobState, JobView, ListOrder, ListQuery, SubmitAnswer, SubmitRequest,
    MAX_LIST_JOBS,
};
use std::time::Duration;

/// How often `wait` asks for the job's status.
pub const WAIT_POLL_INTERVAL: Duration = Duration::from_millis(250);

/// `taskyard submit`: exit 3 when rejected; with `--wait`, ends like `wait`.
pub fn submit(ctx: &Context, args: SubmitArgs) -> Result<Exit, CliError> {
    let request = submit_request(&args, now_millis())?;
    let mut client = ctx.connect()?;
    let (job_id, no_worker) = match client.submit(request)? {
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
    wait_and_report(ctx, &mut client, job_id, args.wait_timeout())
}

/// The wire request for `submit`'s arguments; `--at` becomes a delay from
/// `now` and must lie in the future.
pub fn submit_request(args: &SubmitArgs, now: i64) -> Result<SubmitRequest, CliError> {
    let delay_ms = match (args.delay, args.at) {
        (Some(delay), _) => Some(delay),
        (None, Some(at)) if at <= now => {
            return Err(CliError::BadArgument(format!(
                "--at {} is in the past",
                format_millis(at)
            )))
        }
        (None, Some(at)) => Some(at_as_delay(at, now)?),
        (None, None) => None,
    };
    Ok(SubmitRequest {
        task_type: args.task_type.clone(),
        payload: encode_json(&payload_of(args)?),
        priority: args.priority,
        max_attempts: args.max_attempts,
        timeout_ms: args.timeout_ms(),
        idempotency_key: args.idempotency_key.clone(),
        concurrency_key: args.concurrency_key.clone(),
        delay_ms,
    })
}

/// `--at` as a delay from `now`, within `limits::DELAY_MS`.
fn at_as_delay(at: i64, now: i64) -> Result<u64, CliError> {
    let delay = u64::try_from(at.saturating_sub(now)).unwrap_or(0);
    limits::DELAY_MS
        .check(delay)
        .map_err(|e| CliError::BadArgument(format!("--at {}: {e}", format_millis(at))))
}

/// The payload of `--payload`, or read from `--payload-file`; errors name
/// the file.
fn payload_of(args: &SubmitArgs) -> Result<serde_json::Value, CliError> {
    match (&args.payload, &args.payload_file) {
        (Some(value), _) => Ok(value.clone()),
        (None, Some(path)) => {
            let bad = |reason: String| {
                CliError::BadArgument(format!("--payload-file {}: {reason}", path.display()))
            };
            let text = std::fs::read(path).map_err(|e| bad(format!("cannot read: {e}")))?;
            serde_json::from_slice(&text).map_err(|e| bad(format!("not valid JSON: {e}")))
        }
        (None, None) => Err(CliError::BadArgument(
            "give the payload with --payload or --payload-file".into(),
        )),
    }
}

fn now_millis() -> i64 {
    crate::clock::Clock::now_millis(&crate::clock::SystemClock)
}

/// `taskyard status ID`: an unknown id is exit 2.
pub fn status(ctx: &Context, args: StatusArgs) -> Result<Exit, CliError> {
    let mut client = ctx.connect()?;
    let job_id = client.resolve(&args.job_id)?;
    let job = client.status(job_id)?.ok_or(CliError::NoSuchJob(job_id))?;
    emit_job(ctx, &job, output::job_details)?;
    if job.no_worker && !job.state.is_terminal() {
        warn(&output::no_worker_note(&job.task_type));
    }
    Ok(Exit::Success)
}

/// `taskyard wait ID`: exit 0 SUCCEEDED, 1 FAILED or CANCELLED, 4 timed out.
pub fn wait(ctx: &Context, args: WaitArgs) -> Result<Exit, CliError> {
    let mut client = ctx.connect()?;
    let job_id = client.resolve(&args.job_id)?;
    wait_and_report(ctx, &mut client, job_id, args.timeout())
}

/// `taskyard list`: newest first, with a count per state in the footer.
/// Up to `--limit` jobs, gathered over as many answers as the coordinator's
/// frame size needs; the page's cursor is printed when more follow.
pub fn list(ctx: &Context, args: ListArgs) -> Result<Exit, CliError> {
    let mut client = ctx.connect()?;
    let limit = args.limit.min(MAX_LIST_JOBS);
    let query = |limit, cursor| ListQuery {
        state: args.state,
        task_type: args.task_type.clone(),
        priority: args.priority,
        id_prefix: args.search.clone(),
        order: match args.oldest_first {
            true => ListOrder::OldestFirst,
            false => ListOrder::NewestFirst,
        },
        limit,
        cursor,
    };
    let mut page = client.list_query(query(limit, args.cursor))?;
    let mut rounds = 1;
    while let Some(next) = page.next.filter(|_| page.jobs.len() < limit as usize) {
        if rounds >= crate::client::MAX_LIST_ROUNDS {
            break;
        }
        rounds += 1;
        let left = limit - page.jobs.len() as u32;
        let more = client.list_query(query(left, Some(next)))?;
        page.jobs.extend(more.jobs);
        page.counts = more.counts;
        page.next = more.next;
    }
    let globals = HintGlobals {
        coordinator: ctx.coordinator_given.then_some(ctx.coordinator.as_str()),
        json: ctx.json,
    };
    let next_command = page
        .next
        .as_ref()
        .map(|next| next_page_command(&args, &globals, next));
    if ctx.json {
        emit(&output::json_text(&output::list_json(&page)))?;
        // stdout stays one JSON document (with `next_cursor`); the hint is for people.
        if let Some(command) = next_command {
            warn(&format!("more: {command}"));
        }
    } else {
        emit(&output::list_text(&page, next_command.as_deref()))?;
    }
    Ok(Exit::Success)
}

/// `taskyard cancel ID`: exit 1 when the job had already finished.
pub fn cancel(ctx: &Context, job: &IdPrefix) -> Result<Exit, CliError> {
    let mut client = ctx.connect()?;
    let job_id = client.resolve(job)?;
    match client.cancel(job_id)? {
        CancelOutcome::Cancelled(job) => {
            emit_job(ctx, &job, |j| format!("job {} CANCELLED", j.job_id))?;
            Ok(Exit::Success)
        }
        CancelOutcome::AlreadyFinished(state) => Err(CliError::AlreadyFinished { job_id, state }),
    }
}

/// `taskyard result ID`: the raw result bytes on stdout, nothing else, so
/// it can be piped (with `--json`: `output::result_json`). Exit 1 when the
/// job did not succeed.
pub fn result(ctx: &Context, job: &IdPrefix) -> Result<Exit, CliError> {
    let mut client = ctx.connect()?;
    let job_id = client.resolve(job)?;
    let job = client.status(job_id)?.ok_or(CliError::NoSuchJob(job_id))?;
    if job.state != JobState::Succeeded {
        return Err(CliError::NoResult {
            job_id,
            state: job.state,
        });
    }
    let result = match job.result {
        Some(result) if !job.result_omitted => result,
        _ => client.result(job_id)?,
    };
    match ctx.json {
        true => emit(&output::json_text(&output::result_json(job_id, &result)))?,
        false => output::emit_bytes(&result)?,
    }
    Ok(Exit::Success)
}

/// `taskyard payload ID`: the payload as one line of JSON (the raw bytes
/// when they are not MessagePack); with `--json`, `output::payload_json`.
pub fn payload(ctx: &Context, job: &IdPrefix) -> Result<Exit, CliError> {
    let mut client = ctx.connect()?;
    let job_id = client.resolve(job)?;
    let job = client.status(job_id)?.ok_or(CliError::NoSuchJob(job_id))?;
    let payload = match job.payload_omitted {
        true => client.payload(job_id)?,
        false => job.payload,
    };
    if ctx.json {
        emit(&output::json_text(&output::payload_json(job_id, &payload)))?;
        return Ok(Exit::Success);
    }
    match decode_value(&payload) {
        Ok(value) => emit(&value.to_string()),
        Err(_) => output::emit_bytes(&payload),
    }?;
    Ok(Exit::Success)
}

/// `taskyard workers`: free slots, draining, heartbeat age (see `output::workers_table`).
pub fn workers(ctx: &Context) -> Result<Exit, CliError> {
    let workers = ctx.connect()?.workers()?;
    let now = now_millis();
    if ctx.json {
        emit(&output::json_text(&output::workers_json(&workers, now)))?;
    } else {
        emit(&output::workers_table(&workers, now))?;
    }
    Ok(Exit::Success)
}

/// Waits for `job_id` and prints the outcome. With `--json` the job is
/// printed whatever the outcome, a timeout included.
fn wait_and_report(
    ctx: &Context,
    client: &mut Client,
    job_id: JobId,
    timeout: Duration,
) -> Result<Exit, CliError> {
    let mut last_progress = None;
    let mut spinner = Spinner::for_stderr(ctx.json);
    let show_progress = |view: &JobView| {
        if !ctx.json && view.progress != last_progress {
            if let Some(p) = &view.progress {
                spinner.clear();
                warn(&format!("progress {}", output::progress_text(p)));
            }
            last_progress = view.progress.clone();
        }
        spinner.tick(view);
    };
    let outcome = client.wait_watching(job_id, timeout, WAIT_POLL_INTERVAL, show_progress);
    spinner.clear();
    match outcome? {
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
                waited: timeout,
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
