//! `taskyard schedule create|update|list|show|pause|resume|trigger|delete`:
//! human tables, or `--json` (the `ScheduleView` as the wire has it, with
//! the payload as JSON). A refused request prints the field at fault and
//! exits 3 (5 for an unknown schedule); nothing is stored.

use crate::cli::output::{self, emit, table};
use crate::cli::time::{format_millis, parse_duration, parse_rfc3339};
use crate::cli::{CliError, Context, Exit};
use crate::client::ScheduleRefusedAnswer;
use crate::protocol::payloads::encode_json;
use crate::protocol::{
    limits, Overlap, Priority, ScheduleRefusal, ScheduleSpec, ScheduleView, SubmitAnswer,
};
use clap::{Args, Subcommand};
use serde_json::{json, Value};

#[derive(Debug, Subcommand)]
pub enum ScheduleCommand {
    /// Add a schedule: a cron expression (with --tz) or --every, and the
    /// job it submits each slot.
    Create(DefinitionArgs),
    /// Replace a schedule's definition (every option; unset ones take
    /// their defaults). Slots before now are not fired for it.
    Update(DefinitionArgs),
    /// Every schedule: cadence, state, next and last run.
    List,
    /// One schedule: its definition, next 5 fire times and recent runs.
    Show(NameArg),
    /// Stop firing (slots while paused are never fired).
    Pause(NameArg),
    /// Fire again from the next slot after now.
    Resume(NameArg),
    /// Submit the schedule's job now, outside its cadence.
    Trigger(NameArg),
    /// Remove a schedule (the jobs it fired stay).
    Delete(NameArg),
}

#[derive(Debug, Args)]
pub struct NameArg {
    #[arg(value_name = "NAME")]
    pub name: String,
}

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("cadence").required(true).args(["cron", "every"]))]
pub struct DefinitionArgs {
    /// Unique name: letters, digits, '.', '_', '-'.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// The task type each job has, e.g. echo.
    #[arg(value_name = "TYPE")]
    pub task_type: String,
    /// Cron expression: 5 fields (or 6, seconds first); L, W, #, MON..SUN, JAN..DEC.
    #[arg(long, value_name = "EXPR")]
    pub cron: Option<String>,
    /// IANA time zone the cron expression is read in [default: UTC].
    #[arg(long, value_name = "ZONE", requires = "cron")]
    pub tz: Option<String>,
    /// A fixed interval instead of cron (whole seconds: 30s, 5m, 1h).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub every: Option<u64>,
    /// Each job's payload as JSON [default: {}].
    #[arg(long, value_name = "JSON", value_parser = parse_json)]
    pub payload: Option<Value>,
    /// high, normal or low.
    #[arg(long, default_value = "normal")]
    pub priority: Priority,
    /// Attempts per job [default: the coordinator's default-max-attempts].
    #[arg(long, value_name = "N", value_parser = limits::MAX_ATTEMPTS_RANGE.parser_u32())]
    pub max_attempts: Option<u32>,
    /// Per-attempt timeout [default: the coordinator's task-timeout-millis].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<u64>,
    /// When the previous run is still active: skip, allow, buffer-one, cancel-previous.
    #[arg(long, default_value = "skip", value_parser = |s: &str| s.parse::<Overlap>())]
    pub overlap: Overlap,
    /// Missed slots this recent fire after downtime [default: one slot].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub catchup_window: Option<u64>,
    /// Delay each job by a fixed pseudo-random 0..DURATION [default: 0].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub jitter: Option<u64>,
    /// Create it paused.
    #[arg(long)]
    pub paused: bool,
    /// No slot before this time (RFC 3339); an interval counts from it.
    #[arg(long, value_name = "TIME", value_parser = parse_rfc3339)]
    pub start: Option<i64>,
    /// No slot after this time (RFC 3339).
    #[arg(long, value_name = "TIME", value_parser = parse_rfc3339)]
    pub end: Option<i64>,
}

fn parse_json(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))
}

impl DefinitionArgs {
    fn spec(self) -> ScheduleSpec {
        let payload = encode_json(&self.payload.unwrap_or(json!({})));
        ScheduleSpec {
            cron: self.cron,
            tz: self.tz,
            every_ms: self.every,
            priority: self.priority,
            max_attempts: self.max_attempts,
            timeout_ms: self.timeout,
            overlap: self.overlap,
            catchup_window_ms: self.catchup_window,
            jitter_ms: self.jitter.unwrap_or(0),
            paused: self.paused,
            start_at: self.start,
            end_at: self.end,
            ..ScheduleSpec::new(self.name, self.task_type, payload)
        }
    }
}

/// Runs one `schedule` subcommand.
pub fn run(ctx: &Context, command: ScheduleCommand) -> Result<Exit, CliError> {
    let mut client = ctx.connect()?;
    let view = match command {
        ScheduleCommand::Create(args) => client.create_schedule(args.spec())?,
        ScheduleCommand::Update(args) => client.update_schedule(args.spec())?,
        ScheduleCommand::Show(a) => client.show_schedule(&a.name)?,
        ScheduleCommand::Pause(a) => client.pause_schedule(&a.name)?,
        ScheduleCommand::Resume(a) => client.resume_schedule(&a.name)?,
        ScheduleCommand::List => return list(ctx, client.list_schedules()?),
        ScheduleCommand::Trigger(a) => return trigger(ctx, client.trigger_schedule(&a.name)?),
        ScheduleCommand::Delete(a) => {
            client.delete_schedule(&a.name)?.map_err(refused)?;
            let text = match ctx.json {
                true => output::json_text(&json!({ "deleted": a.name })),
                false => format!("deleted schedule {}", a.name),
            };
            emit(&text)?;
            return Ok(Exit::Success);
        }
    };
    let view = view.map_err(refused)?;
    emit(&match ctx.json {
        true => output::json_text(&view_json(&view)),
        false => details(&view),
    })?;
    Ok(Exit::Success)
}

fn list(ctx: &Context, views: Vec<ScheduleView>) -> Result<Exit, CliError> {
    if ctx.json {
        let all: Vec<Value> = views.iter().map(view_json).collect();
        emit(&output::json_text(&Value::Array(all)))?;
        return Ok(Exit::Success);
    }
    let rows = views
        .iter()
        .map(|v| {
            vec![
                v.spec.name.clone(),
                cadence(&v.spec),
                v.spec.task_type.clone(),
                v.spec.overlap.as_str().into(),
                state(&v.spec).into(),
                v.next_fires
                    .first()
                    .map_or("-".into(), |t| format_millis(*t)),
                last_run(v),
            ]
        })
        .collect();
    let headers = [
        "NAME", "CADENCE", "TYPE", "OVERLAP", "STATE", "NEXT", "LAST RUN",
    ];
    emit(&table(&headers, rows))?;
    Ok(Exit::Success)
}

fn trigger(
    ctx: &Context,
    answer: Result<SubmitAnswer, ScheduleRefusedAnswer>,
) -> Result<Exit, CliError> {
    match answer.map_err(refused)? {
        SubmitAnswer::Accepted { job_id, no_worker } => {
            emit(&output::submitted(job_id, no_worker, ctx.json))?;
            Ok(Exit::Success)
        }
        SubmitAnswer::Rejected(r) => Err(CliError::Rejected(r.reason)),
    }
}

/// A refusal as the CLI error it ends with: exit 3, or 5 when unknown.
fn refused(r: ScheduleRefusedAnswer) -> CliError {
    match r.kind {
        ScheduleRefusal::Unknown => CliError::NoSuchSchedule(r.reason),
        _ => CliError::ScheduleRefused(r.reason),
    }
}

fn cadence(spec: &ScheduleSpec) -> String {
    match (&spec.cron, spec.every_ms) {
        (Some(cron), _) => format!("{cron} ({})", spec.tz.as_deref().unwrap_or("UTC")),
        (None, Some(ms)) => format!("every {}s", ms / 1000),
        (None, None) => "-".into(),
    }
}

fn state(spec: &ScheduleSpec) -> &'static str {
    if spec.paused {
        "paused"
    } else {
        "active"
    }
}

fn last_run(v: &ScheduleView) -> String {
    match v.recent_runs.first() {
        Some(run) => format!(
            "{} {}",
            run.slot.map_or("trigger".into(), format_millis),
            run.state.map_or("finished".into(), |s| s.to_string())
        ),
        None => "-".into(),
    }
}

/// `show`: the definition, the next fire times, the recent runs.
fn details(v: &ScheduleView) -> String {
    let s = &v.spec;
    let mut lines = vec![
        format!("name:           {}", s.name),
        format!("cadence:        {}", cadence(s)),
        format!("task type:      {}", s.task_type),
        format!("payload:        {}", payload_text(&s.payload)),
        format!("priority:       {}", s.priority),
        format!("overlap:        {}", s.overlap.as_str()),
        format!(
            "catch-up:       {}",
            s.catchup_window_ms
                .map_or("one slot".into(), |ms| format!("{} ms", ms))
        ),
        format!("jitter:         {} ms", s.jitter_ms),
        format!("state:          {}", state(s)),
        format!("fired/skipped:  {} / {}", v.fired, v.skipped),
        "next fires:".into(),
    ];
    lines.extend(
        v.next_fires
            .iter()
            .map(|t| format!("  {}", format_millis(*t))),
    );
    lines.push("recent runs:".into());
    let runs = v.recent_runs.iter().map(|r| {
        vec![
            r.slot.map_or("trigger".into(), format_millis),
            r.job_id.to_string(),
            r.state.map_or("finished".into(), |s| s.to_string()),
        ]
    });
    lines.push(table(&["SLOT", "JOB", "STATE"], runs.collect()));
    lines.join("\n")
}

fn payload_text(payload: &[u8]) -> String {
    crate::protocol::payloads::decode_value(payload)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| format!("{} bytes", payload.len()))
}

/// The JSON shape of a schedule: the definition (payload as JSON, times
/// as unix milliseconds) and what the coordinator knows of its firing.
pub fn view_json(v: &ScheduleView) -> Value {
    let mut value = serde_json::to_value(v).unwrap_or_default();
    if let Some(spec) = value.get_mut("spec") {
        spec["payload"] = crate::protocol::payloads::decode_value(&v.spec.payload)
            .map(|p| serde_json::to_value(p).unwrap_or_default())
            .unwrap_or(Value::Null);
    }
    value
}
