//! Rendering: every function here turns answers into text (human) or a JSON
//! value (`--json`) and does no I/O, except `emit` and `warn` which write it.
//!
//! The JSON shape of a job and of a page is the one the HTTP API has
//! (`protocol::job_json`): the `JobView` fields under their wire names,
//! times as unix milliseconds, `payload` as the decoded JSON value, `result`
//! as a string when it is UTF-8, and `result_hex` (lowercase hex) when it is
//! not. `payload_hex` likewise when the payload is not decodable.
//! `payload_bytes` and `result_bytes` give the sizes; `payload_omitted`,
//! `result_omitted` and `history_omitted` say what the coordinator left out
//! to fit one frame (an omitted payload is `null`, with no `payload_hex`).

use crate::cli::exit::CliError;
use crate::clock::text::format_millis;
use crate::http::dto::{free_capacity, ApiWorker};
use crate::protocol::job_json::{hex, JobJson, JobPageJson};
use crate::protocol::payloads::decode_value;
use crate::protocol::{
    Attempt, JobId, JobList, JobState, JobSummary, JobView, Priority, Progress, WorkerView,
};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::io::{self, Write};

/// Writes `text` and a newline to stdout. A closed pipe (`taskyard list |
/// head`) is not an error: the reader has what it wanted.
pub fn emit(text: &str) -> Result<(), CliError> {
    let mut out = io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(CliError::Output(e)),
        _ => Ok(()),
    }
}

/// Writes raw bytes to stdout, unchanged (for `taskyard result`).
pub fn emit_bytes(bytes: &[u8]) -> Result<(), CliError> {
    let mut out = io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(CliError::Output(e)),
        _ => Ok(()),
    }
}

/// Writes one line to stderr; a failure to do so is ignored, as there is
/// nowhere left to report it.
pub fn warn(line: &str) {
    let _ = writeln!(io::stderr().lock(), "{line}");
}

/// The note shown when no connected worker runs a job's task type.
pub fn no_worker_note(task_type: &str) -> String {
    format!("note: no connected worker runs task type {task_type:?}; the job waits until one does")
}

/// A pretty-printed JSON document.
pub fn json_text(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// `submit` output.
pub fn submitted(job_id: JobId, no_worker: bool, as_json: bool) -> String {
    if as_json {
        json_text(&json!({ "job_id": job_id, "no_worker": no_worker }))
    } else {
        job_id.to_string()
    }
}

/// A job as JSON: the shape shared with the HTTP API (`protocol::job_json`).
pub fn job_json(job: &JobView) -> Value {
    JobJson::of(job).value()
}

/// `result --json`: `{"job_id", "result", "result_hex", "result_bytes"}`,
/// the same names as in `job_json`: `result` is the text when the bytes
/// are UTF-8, else `null` with `result_hex` (lowercase hex).
pub fn result_json(job_id: JobId, result: &[u8]) -> Value {
    let (text, hex_text) = match std::str::from_utf8(result) {
        Ok(text) => (Some(text), None),
        Err(_) => (None, Some(hex(result))),
    };
    json!({
        "job_id": job_id,
        "result": text,
        "result_hex": hex_text,
        "result_bytes": result.len(),
    })
}

/// `payload --json`: `{"job_id", "payload", "payload_hex",
/// "payload_bytes"}`, as in `job_json`: `payload` is the decoded JSON
/// value, or `null` with `payload_hex` when the bytes are not MessagePack.
pub fn payload_json(job_id: JobId, payload: &[u8]) -> Value {
    let (value, hex_text) = match decode_value(payload) {
        Ok(value) => (value, None),
        Err(_) => (Value::Null, Some(hex(payload))),
    };
    json!({
        "job_id": job_id,
        "payload": value,
        "payload_hex": hex_text,
        "payload_bytes": payload.len(),
    })
}

/// `status` output: one `label  value` line per field; absent optional
/// fields (key, schedule, result, error, next retry) are left out.
pub fn job_details(job: &JobView) -> String {
    let mut lines = vec![
        ("job", job.job_id.to_string()),
        ("type", job.task_type.clone()),
        ("state", job.state.to_string()),
        ("priority", priority_text(job)),
    ];
    if let Some(key) = &job.idempotency_key {
        lines.push(("key", key.clone()));
    } else if job.key_omitted {
        lines.push((
            "key",
            "(not shown: the view is limited to one frame)".into(),
        ));
    }
    if let Some(schedule) = &job.schedule {
        lines.push(("schedule", schedule_text(schedule, job.schedule_slot)));
    }
    if let Some(key) = &job.concurrency_key {
        lines.push(("concurrency key", key.clone()));
    }
    if let Some(reason) = &job.waiting {
        lines.push(("waiting", reason.clone()));
    }
    lines.extend([
        ("attempts", format!("{}/{}", job.attempts, job.max_attempts)),
        ("worker", or_dash(job.worker_id.as_ref())),
        ("lease", or_dash(job.lease.as_ref())),
        ("submitted", format_millis(job.submitted_at)),
        ("updated", format_millis(job.updated_at)),
        ("payload", payload_line(job)),
    ]);
    if let Some(result) = &job.result {
        lines.push(("result", result_preview(result)));
    } else if let Some(size) = job.result_bytes.filter(|_| job.result_omitted) {
        lines.push(("result", omitted(size, "result", job.job_id)));
    }
    if let Some(error) = &job.error {
        lines.push(("error", error.clone()));
    }
    if let Some(at) = job.next_retry_at {
        lines.push(("next retry", format_millis(at)));
    }
    if let Some(progress) = &job.progress {
        lines.push(("progress", progress_text(progress)));
    }
    if let Some(at) = job.not_before.filter(|_| job.state == JobState::Queued) {
        lines.push(("runs at", format!("{} or later", format_millis(at))));
    }
    let mut out = String::new();
    for (label, value) in lines {
        let _ = writeln!(out, "{label:<11}{value}");
    }
    if !job.history.is_empty() {
        out.push_str(&attempts_table(&job.history));
    }
    if job.history_omitted > 0 {
        let _ = write!(
            out,
            "\n({} older attempt(s) not shown: the view is limited to one frame)",
            job.history_omitted
        );
    }
    out.truncate(out.trim_end().len());
    out
}

/// The base priority, and the level aging has raised it to while the job
/// waits in its queue (`low (aged to normal while queued)`). A job that runs,
/// waits for a retry or has finished reads as its base priority only,
/// whatever level it waited at.
fn priority_text(job: &JobView) -> String {
    match waiting_level(job.state, job.priority, job.effective_level) {
        level if level > job.priority.level() => format!(
            "{} (aged to {} while queued)",
            job.priority,
            level_name(level)
        ),
        _ => job.priority.to_string(),
    }
}

/// The level a job is shown at: `effective_level` while it is QUEUED (the
/// only state aging acts in), its base level in any other. A coordinator
/// already sends it so; this keeps an older one's raised level of a
/// finished job off the screen.
fn waiting_level(state: JobState, priority: Priority, effective_level: u8) -> u8 {
    match state {
        JobState::Queued => effective_level,
        _ => priority.level(),
    }
}

/// Which schedule fired a job: `nightly, slot 2026-12-05T02:00:00Z`, or
/// `nightly, triggered by hand` for a manual trigger (no slot).
fn schedule_text(schedule: &str, slot: Option<i64>) -> String {
    match slot {
        Some(slot) => format!("{schedule}, slot {}", format_millis(slot)),
        None => format!("{schedule}, triggered by hand"),
    }
}

/// The attempt history under `status`: one row per attempt.
fn attempts_table(history: &[Attempt]) -> String {
    let rows = history
        .iter()
        .map(|a| {
            vec![
                a.number.to_string(),
                a.worker_id.to_string(),
                a.lease.to_string(),
                format_millis(a.started_at),
                a.ended_at.map_or_else(|| "-".to_string(), format_millis),
                a.outcome
                    .as_ref()
                    .map_or_else(|| "running".to_string(), ToString::to_string),
            ]
        })
        .collect();
    let headers = ["ATTEMPT", "WORKER", "LEASE", "STARTED", "ENDED", "OUTCOME"];
    format!("\n{}", table(&headers, rows))
}

/// How a finished job reads in `wait`: the result for SUCCEEDED (empty when
/// there is none), otherwise the state and the error.
pub fn finished(job: &JobView) -> String {
    if job.state == crate::protocol::JobState::Succeeded {
        return job.result.as_deref().map(result_text).unwrap_or_default();
    }
    format!(
        "job {} {} after {}/{} attempts: {}",
        job.job_id,
        job.state,
        job.attempts,
        job.max_attempts,
        job.error.as_deref().unwrap_or("no error recorded")
    )
}

/// `list` output.
/// `40% resizing`.
pub fn progress_text(progress: &Progress) -> String {
    format!("{}% {}", progress.percent, progress.message)
        .trim_end()
        .to_string()
}

/// `list --json`: the page in the shape shared with the HTTP API
/// (`protocol::job_json::JobPageJson`): summaries, every state's count,
/// the cursor of the next page (`null`: none).
pub fn list_json(page: &JobList) -> Value {
    JobPageJson::of(page).value()
}

/// `list`: the table, then one footer line with the count per state, and
/// when more jobs follow, `more:` and the command that lists them.
pub fn list_text(page: &JobList, next_command: Option<&str>) -> String {
    let counts: Vec<String> = page
        .counts
        .iter()
        .map(|c| format!("{} {}", c.count, c.state))
        .collect();
    let footer = if counts.is_empty() {
        "no jobs".to_string()
    } else {
        counts.join(", ")
    };
    let more = match next_command {
        Some(command) => format!("\nmore: {command}"),
        None => String::new(),
    };
    format!("{}\n\n{footer}{more}", jobs_table(&page.jobs))
}

pub fn jobs_table(jobs: &[JobSummary]) -> String {
    let rows = jobs
        .iter()
        .map(|j| {
            vec![
                j.job_id.to_string(),
                j.task_type.clone(),
                match j.progress_percent {
                    Some(percent) => format!("{} {percent}%", j.state),
                    None => j.state.to_string(),
                },
                j.priority.to_string(),
                level_name(waiting_level(j.state, j.priority, j.effective_level)),
                format!("{}/{}", j.attempts, j.max_attempts),
                format_millis(j.updated_at),
                j.error.as_deref().map_or_else(|| "-".into(), short),
            ]
        })
        .collect();
    let headers = [
        "ID",
        "TYPE",
        "STATE",
        "PRIORITY",
        "EFFECTIVE",
        "ATTEMPTS",
        "UPDATED",
        "LAST ERROR",
    ];
    table(&headers, rows)
}

/// The first line of `text`, at most 60 characters.
fn short(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    if line.chars().count() <= 60 && line.len() == text.len() {
        return line.to_string();
    }
    format!("{}…", line.chars().take(59).collect::<String>())
}

/// `workers` output at `now` (unix milliseconds): one row per worker with
/// its free slots (none while draining: it takes no new task), whether it
/// is draining, and how long ago it last sent a heartbeat; then a footer
/// with the totals.
pub fn workers_table(workers: &[WorkerView], now: i64) -> String {
    let rows = workers
        .iter()
        .map(|w| {
            let w = ApiWorker::from_view(w.clone(), now);
            vec![
                w.worker_id.to_string(),
                w.capacity.to_string(),
                w.active.to_string(),
                w.free.to_string(),
                if w.draining { "yes" } else { "no" }.to_string(),
                age_text(w.heartbeat_age_ms),
                w.task_types.join(","),
            ]
        })
        .collect();
    let headers = [
        "WORKER",
        "CAPACITY",
        "ACTIVE",
        "FREE",
        "DRAINING",
        "HEARTBEAT",
        "TASK TYPES",
    ];
    let capacity: u64 = workers.iter().map(|w| u64::from(w.capacity)).sum();
    let footer = format!(
        "{} worker(s), {} of {capacity} slot(s) free",
        workers.len(),
        free_capacity(workers)
    );
    format!("{}\n\n{footer}", table(&headers, rows))
}

/// `workers --json`: the HTTP API's worker shape (`GET /api/workers`),
/// with `free` and `heartbeat_age_ms` measured at `now`.
pub fn workers_json(workers: &[WorkerView], now: i64) -> Value {
    let workers: Vec<ApiWorker> = workers
        .iter()
        .map(|w| ApiWorker::from_view(w.clone(), now))
        .collect();
    serde_json::to_value(workers).unwrap_or_default()
}

/// An age in milliseconds as people read it: `850ms ago`, `4.2s ago`,
/// `3m12s ago`, `2h05m ago`.
pub fn age_text(ms: i64) -> String {
    let ms = ms.max(0);
    let secs = ms / 1000;
    match ms {
        0..=999 => format!("{ms}ms ago"),
        1_000..=59_999 => format!("{}.{}s ago", secs, (ms % 1000) / 100),
        60_000..=3_599_999 => format!("{}m{:02}s ago", secs / 60, secs % 60),
        _ => format!("{}h{:02}m ago", secs / 3600, (secs % 3600) / 60),
    }
}

/// Left-aligned columns two spaces apart, sized to their widest cell.
/// Padded by hand: a format width over 65,535 panics, and a cell (an
/// error, a task type list) can be longer than that.
pub(crate) fn table(headers: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let header_row = headers.iter().map(|h| h.to_string()).collect();
    let mut out = String::new();
    for row in std::iter::once(header_row).chain(rows) {
        let mut line = String::new();
        for (cell, width) in row.iter().zip(&widths) {
            line.push_str(cell);
            let pad = width.saturating_sub(cell.chars().count()) + 2;
            line.extend(std::iter::repeat_n(' ', pad));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.pop();
    out
}

/// An effective level by the name of the priority it equals.
fn level_name(level: u8) -> String {
    Priority::from_level(i64::from(level)).map_or_else(|| level.to_string(), |p| p.to_string())
}

fn or_dash<T: ToString>(value: Option<&T>) -> String {
    value.map_or_else(|| "-".to_string(), T::to_string)
}

/// The payload as `status` shows it: decoded, or its size when the
/// coordinator left it out of the view.
fn payload_line(job: &JobView) -> String {
    match job.payload_omitted {
        true => omitted(job.payload_bytes, "payload", job.job_id),
        false => payload_text(&job.payload),
    }
}

/// A field left out of a view: its size and the command that prints it.
fn omitted(size: u64, command: &str, job_id: JobId) -> String {
    format!("{size} bytes (not shown: `taskyard {command} {job_id}` prints it)")
}

fn payload_text(payload: &[u8]) -> String {
    match decode_value(payload) {
        Ok(value) => value.to_string(),
        Err(_) => format!("<{} bytes, not MessagePack>", payload.len()),
    }
}

/// A result as text when it is UTF-8, else its size.
/// The first line of a result, cut to `PREVIEW_CHARS`, with the full size
/// when anything was left out; `taskyard result` prints it whole.
pub fn result_preview(result: &[u8]) -> String {
    let text = result_text(result);
    let first_line = text.lines().next().unwrap_or_default();
    if first_line.len() == text.len() && text.chars().count() <= PREVIEW_CHARS {
        return text;
    }
    let shown: String = first_line.chars().take(PREVIEW_CHARS).collect();
    format!(
        "{shown}… ({} bytes; `taskyard result` prints all)",
        result.len()
    )
}

/// Characters of a result `status` shows.
pub const PREVIEW_CHARS: usize = 120;

pub fn result_text(result: &[u8]) -> String {
    match std::str::from_utf8(result) {
        Ok(text) => text.to_string(),
        Err(_) => format!("<{} bytes>", result.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::payloads::encode_json;
    use crate::protocol::{JobState, WorkerId};

    fn job() -> JobView {
        JobView {
            job_id: JobId::mint(),
            task_type: "echo".into(),
            payload: encode_json(&json!({ "message": "hi" })),
            state: JobState::Succeeded,
            priority: Priority::High,
            effective_level: 2,
            sequence: 3,
            attempts: 1,
            max_attempts: 3,
            timeout_ms: 30_000,
            submitted_at: 0,
            updated_at: 1_700_000_000_123,
            worker_id: Some(WorkerId("w1".into())),
            lease: None,
            result: Some(b"hi".to_vec()),
            error: None,
            next_retry_at: None,
            no_worker: false,
            not_before: None,
            history: vec![],
            progress: None,
            payload_bytes: 11,
            payload_omitted: false,
            result_bytes: Some(2),
            result_omitted: false,
            history_omitted: 0,
            idempotency_key: None,
            schedule: None,
            schedule_slot: None,
            key_omitted: false,
            waiting: None,
            concurrency_key: None,
        }
    }

    #[test]
    fn job_json_decodes_payload_and_shows_utf8_result_as_text() {
        let view = job();
        let value = job_json(&view);
        assert_eq!(value["job_id"], json!(view.job_id.to_string()));
        assert_eq!(value["state"], json!("SUCCEEDED"));
        assert_eq!(value["priority"], json!("high"));
        assert_eq!(value["payload"], json!({ "message": "hi" }));
        assert_eq!(value["result"], json!("hi"));
        assert_eq!(value["result_hex"], Value::Null);
        assert_eq!(value["worker_id"], json!("w1"));
        assert_eq!(value["lease"], Value::Null);
        assert_eq!(value["updated_at"], json!(1_700_000_000_123_i64));
        assert_eq!(value["effective_level"], json!(2));
        assert_eq!(value["idempotency_key"], Value::Null);
        assert_eq!(value["schedule"], Value::Null);
        assert_eq!(value["schedule_slot"], Value::Null);
        assert_eq!(value["key_omitted"], json!(false));
        assert_eq!(value["concurrency_key"], Value::Null);
        assert_eq!(value["waiting"], Value::Null);
        assert_eq!(value.as_object().map(|o| o.len()), Some(34));
    }

    #[test]
    fn job_json_gives_non_utf8_result_as_hex() {
        let view = JobView {
            result: Some(vec![0xff, 0x00, 0x1a]),
            ..job()
        };
        let value = job_json(&view);
        assert_eq!(value["result"], Value::Null);
        assert_eq!(value["result_hex"], json!("ff001a"));
    }

    #[test]
    fn details_show_times_attempts_and_result() {
        let text = job_details(&job());
        assert!(text.contains("attempts   1/3"), "{text}");
        assert!(text.contains("updated    2023-11-14T22:13:20Z"), "{text}");
        assert!(text.contains(r#"payload    {"message":"hi"}"#), "{text}");
        assert!(text.contains("result     hi"), "{text}");
        assert!(text.contains("lease      -"), "{text}");
        assert!(!text.contains("error"), "{text}");
    }

    #[test]
    fn failed_job_reads_as_state_and_error() {
        let view = JobView {
            state: JobState::Failed,
            attempts: 3,
            error: Some("boom".into()),
            ..job()
        };
        assert!(finished(&view).ends_with("FAILED after 3/3 attempts: boom"));
        assert_eq!(finished(&job()), "hi");
    }

    #[test]
    fn list_shows_base_priority_and_effective_level() {
        let aged = JobView {
            state: JobState::Queued,
            priority: Priority::Low,
            effective_level: 1,
            ..job()
        };
        let text = jobs_table(&[JobSummary::of(&aged)]);
        let mut lines = text.lines();
        let header = lines.next().unwrap_or_default();
        let row: Vec<&str> = lines
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .collect();
        assert!(header.contains("PRIORITY  EFFECTIVE  ATTEMPTS"), "{text}");
        assert_eq!(row[3..5], ["low", "normal"], "{text}");
    }

    /// A LOW job that waited two aging steps, then ran and finished (as an
    /// older coordinator reported it: raised level and all).
    fn finished_after_aging() -> JobView {
        JobView {
            state: JobState::Succeeded,
            priority: Priority::Low,
            effective_level: 2,
            ..job()
        }
    }

    #[test]
    fn a_finished_job_that_aged_reads_as_its_base_priority() {
        let view = finished_after_aging();
        let text = job_details(&view);
        assert!(text.contains("priority   low\n"), "{text}");
        assert!(!text.contains("aged") && !text.contains("high"), "{text}");
        let table = jobs_table(&[JobSummary::of(&view)]);
        let row: Vec<&str> = table
            .lines()
            .nth(1)
            .unwrap_or_default()
            .split_whitespace()
            .collect();
        assert_eq!(row[3..5], ["low", "low"], "{table}");
        for state in [JobState::Running, JobState::RetryWait, JobState::Failed] {
            let text = job_details(&JobView {
                state,
                ..finished_after_aging()
            });
            assert!(text.contains("priority   low\n"), "{state}: {text}");
        }
    }

    #[test]
    fn a_queued_job_that_aged_says_so() {
        let view = JobView {
            state: JobState::Queued,
            ..finished_after_aging()
        };
        let text = job_details(&view);
        assert!(
            text.contains("priority   low (aged to high while queued)\n"),
            "{text}"
        );
    }

    #[test]
    fn a_scheduled_job_names_its_key_schedule_and_slot() {
        let view = JobView {
            idempotency_key: Some("schedule:nightly:2026-12-05T02:00:00Z".into()),
            schedule: Some("nightly".into()),
            schedule_slot: Some(1_796_436_000_000),
            ..job()
        };
        let text = job_details(&view);
        assert!(
            text.contains("key        schedule:nightly:2026-12-05T02:00:00Z\n"),
            "{text}"
        );
        assert!(
            text.contains("schedule   nightly, slot 2026-12-05T02:00:00Z\n"),
            "{text}"
        );
        let value = job_json(&view);
        assert_eq!(value["schedule"], json!("nightly"));
        assert_eq!(value["schedule_slot"], json!(1_796_436_000_000_i64));
        assert_eq!(
            value["idempotency_key"],
            json!("schedule:nightly:2026-12-05T02:00:00Z")
        );
    }

    #[test]
    fn a_triggered_job_names_its_schedule_and_a_plain_key_only_itself() {
        let triggered = JobView {
            idempotency_key: Some("schedule:nightly:trigger:2026-12-05T09:30:00.123Z".into()),
            schedule: Some("nightly".into()),
            ..job()
        };
        let text = job_details(&triggered);
        assert!(
            text.contains("schedule   nightly, triggered by hand\n"),
            "{text}"
        );
        let keyed = JobView {
            idempotency_key: Some("order-42".into()),
            ..job()
        };
        let text = job_details(&keyed);
        assert!(text.contains("key        order-42\n"), "{text}");
        assert!(!text.contains("schedule"), "{text}");
        assert!(!job_details(&job()).contains("key "), "no key, no line");
    }

    #[test]
    fn tables_align_columns_under_their_headers() {
        let text = table(&["A", "LONG"], vec![vec!["wide cell".into(), "x".into()]]);
        assert_eq!(text, "A          LONG\nwide cell  x");
    }

    /// Longer than the 65,535 a format width may be.
    const HUGE: usize = 70_000;

    #[test]
    fn a_job_with_a_huge_error_prints_without_panicking() {
        let view = JobView {
            state: JobState::Failed,
            error: Some("e".repeat(HUGE)),
            history: vec![Attempt {
                number: 1,
                worker_id: WorkerId("w1".into()),
                lease: crate::protocol::LeaseId::new_random(),
                started_at: 0,
                ended_at: Some(1),
                outcome: Some(crate::protocol::AttemptOutcome::Failed {
                    error: "e".repeat(HUGE),
                }),
            }],
            ..job()
        };
        assert!(job_details(&view).len() > 2 * HUGE);
        assert!(finished(&view).len() > HUGE);
        assert!(
            jobs_table(&[JobSummary::of(&view)]).len() < 1000,
            "the list shows a short error"
        );
    }

    #[test]
    fn a_worker_with_a_huge_task_type_list_prints_without_panicking() {
        let worker = WorkerView {
            worker_id: WorkerId("w1".into()),
            capacity: 1,
            active: 0,
            task_types: (0..10_000).map(|i| format!("type-{i}")).collect(),
            registered_at: 0,
            last_heartbeat_at: 0,
            draining: false,
        };
        let text = workers_table(&[worker.clone(), worker], 0);
        assert_eq!(text.lines().count(), 5, "{text}");
    }

    fn worker(id: &str, capacity: u32, active: u32, draining: bool) -> WorkerView {
        WorkerView {
            worker_id: WorkerId(id.into()),
            capacity,
            active,
            task_types: vec!["echo".into(), "sleep".into()],
            registered_at: 0,
            last_heartbeat_at: 1_000,
            draining,
        }
    }

    #[test]
    fn workers_show_free_slots_draining_and_heartbeat_age() {
        let workers = [worker("w1", 4, 1, false), worker("w2", 4, 1, true)];
        let text = workers_table(&workers, 5_300);
        let lines: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            lines[0],
            [
                "WORKER",
                "CAPACITY",
                "ACTIVE",
                "FREE",
                "DRAINING",
                "HEARTBEAT",
                "TASK",
                "TYPES"
            ]
        );
        assert_eq!(
            lines[1],
            ["w1", "4", "1", "3", "no", "4.3s", "ago", "echo,sleep"]
        );
        assert_eq!(
            lines[2],
            ["w2", "4", "1", "0", "yes", "4.3s", "ago", "echo,sleep"],
            "a draining worker takes nothing new"
        );
        assert!(text.ends_with("2 worker(s), 3 of 8 slot(s) free"), "{text}");
        let value = workers_json(&workers, 5_300);
        assert_eq!(value[0]["free"], 3);
        assert_eq!(value[1]["free"], 0);
        assert_eq!(value[1]["draining"], true);
        assert_eq!(value[0]["heartbeat_age_ms"], 4_300);
    }

    #[test]
    fn ages_read_in_the_largest_sensible_unit() {
        assert_eq!(age_text(-5), "0ms ago");
        assert_eq!(age_text(850), "850ms ago");
        assert_eq!(age_text(4_250), "4.2s ago");
        assert_eq!(age_text(192_000), "3m12s ago");
        assert_eq!(age_text(7_500_000), "2h05m ago");
    }

    #[test]
    fn left_out_fields_show_their_size_and_the_command_that_prints_them() {
        let view = JobView {
            payload: vec![],
            payload_omitted: true,
            payload_bytes: 250_011,
            result: None,
            result_omitted: true,
            result_bytes: Some(900_000),
            history_omitted: 2,
            key_omitted: true,
            ..job()
        };
        let id = view.job_id;
        let text = job_details(&view);
        assert!(
            text.contains("key        (not shown: the view is limited to one frame)\n"),
            "{text}"
        );
        let payload =
            format!("payload    250011 bytes (not shown: `taskyard payload {id}` prints it)");
        let result =
            format!("result     900000 bytes (not shown: `taskyard result {id}` prints it)");
        assert!(text.contains(&payload) && text.contains(&result), "{text}");
        assert!(text.contains("2 older attempt(s) not shown"), "{text}");
        let value = job_json(&view);
        assert_eq!(
            (&value["payload"], &value["payload_hex"]),
            (&Value::Null, &Value::Null)
        );
        assert_eq!(value["payload_omitted"], json!(true));
        assert_eq!(value["result_bytes"], json!(900_000));
    }

    #[test]
    fn result_and_payload_json_use_the_job_json_names() {
        let id = JobId::mint();
        let text = result_json(id, b"done");
        assert_eq!(
            text,
            json!({ "job_id": id, "result": "done", "result_hex": null, "result_bytes": 4 })
        );
        let binary = result_json(id, &[0xff, 0x01]);
        assert_eq!(
            (&binary["result"], &binary["result_hex"]),
            (&Value::Null, &json!("ff01"))
        );
        let payload = payload_json(id, &encode_json(&json!({ "w": 3 })));
        assert_eq!(payload["payload"], json!({ "w": 3 }));
        assert_eq!(payload["payload_hex"], Value::Null);
        let raw = payload_json(id, &[0xc1]);
        assert_eq!(
            (&raw["payload"], &raw["payload_hex"]),
            (&Value::Null, &json!("c1"))
        );
        for key in ["result", "result_hex", "result_bytes"] {
            assert!(job_json(&job()).get(key).is_some(), "{key}");
        }
    }

    #[test]
    fn binary_result_is_shown_as_its_size() {
        assert_eq!(result_text(&[0xff, 0xfe]), "<2 bytes>");
    }
}
