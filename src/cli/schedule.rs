//! `taskyard schedule create|update|list|show|pause|resume|trigger|delete`:
//! human tables, or `--json` (the `ScheduleView` as the wire has it, with
//! the payload as JSON). A refused request prints the field at fault and
//! exits 3 (5 for an unknown schedule); nothing is stored.

use crate::cli::output::{self, emit, table};
use crate::cli::schedule_args::{CreateArgs, UpdateArgs};
use crate::cli::{CliError, Context, Exit};
use crate::client::{Client, ScheduleRefusedAnswer};
use crate::clock::text::format_millis_in;
use crate::protocol::{ScheduleRefusal, ScheduleSpec, ScheduleView, SubmitAnswer};
use clap::{Args, Subcommand};
use serde_json::{json, Value};

#[derive(Debug, Subcommand)]
pub enum ScheduleCommand {
    /// Add a schedule: a cron expression (with --tz) or --every, and the
    /// job it submits each slot.
    Create(CreateArgs),
    /// Change the options given of a schedule's definition, keeping the
    /// others (--replace: replace the whole definition). Slots before now
    /// are not fired for it.
    Update(UpdateArgs),
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

/// Runs one `schedule` subcommand.
pub fn run(ctx: &Context, command: ScheduleCommand) -> Result<Exit, CliError> {
    let mut client = ctx.connect()?;
    let view = match command {
        ScheduleCommand::Create(args) => client.create_schedule(args.spec())?,
        ScheduleCommand::Update(args) => update(&mut client, args)?,
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
        true => output::json_text(&view.to_json()),
        false => details(&view),
    })?;
    Ok(Exit::Success)
}

/// `update`: reads the definition (unless `--replace`), changes what was
/// given, and sends it. Two updates at once each keep only their own
/// changes to the options both give; the last one sent wins.
fn update(
    client: &mut Client,
    args: UpdateArgs,
) -> Result<Result<ScheduleView, ScheduleRefusedAnswer>, CliError> {
    let current = match args.merges() {
        true => match client.show_schedule(&args.name)? {
            Ok(view) => Some(view.spec),
            Err(refusal) => return Ok(Err(refusal)),
        },
        false => None,
    };
    Ok(client.update_schedule(args.spec(current)?)?)
}

fn list(ctx: &Context, views: Vec<ScheduleView>) -> Result<Exit, CliError> {
    if ctx.json {
        let all: Vec<Value> = views.iter().map(ScheduleView::to_json).collect();
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
                    .map_or("-".into(), |t| in_zone(&v.spec, *t)),
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

/// A slot of `spec` for people: in the zone its cron expression is read in.
fn in_zone(spec: &ScheduleSpec, millis: i64) -> String {
    format_millis_in(millis, spec.tz.as_deref())
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
            run.slot.map_or("trigger".into(), |t| in_zone(&v.spec, t)),
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
    lines.extend(v.next_fires.iter().map(|t| format!("  {}", in_zone(s, *t))));
    lines.push("recent runs:".into());
    let runs = v.recent_runs.iter().map(|r| {
        vec![
            r.slot.map_or("trigger".into(), |t| in_zone(s, t)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::payloads::encode_json;

    fn view(tz: Option<&str>) -> ScheduleView {
        ScheduleView {
            spec: ScheduleSpec {
                cron: Some("0 3 * * *".into()),
                tz: tz.map(str::to_string),
                ..ScheduleSpec::new("nightly", "report", encode_json(&json!({})))
            },
            next_fires: vec![1_796_695_200_000], // 2026-12-08T02:00:00Z
            last_slot: None,
            recent_runs: Vec::new(),
            fired: 0,
            skipped: 0,
        }
    }

    #[test]
    fn a_schedule_s_next_fires_show_in_its_own_zone() {
        let berlin = details(&view(Some("Europe/Berlin")));
        assert!(
            berlin.contains("  2026-12-08T03:00:00+01:00 Europe/Berlin"),
            "{berlin}"
        );
        let utc = details(&view(None));
        assert!(utc.contains("  2026-12-08T02:00:00Z"), "{utc}");
    }
}
