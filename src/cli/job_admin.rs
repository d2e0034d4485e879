//! The operator commands that act on many jobs or look at the queues:
//! `retry`, `delete` and `queues`.

use crate::cli::output::{self, emit, table};
use crate::cli::{CliError, Context, DeleteArgs, Exit, RetryArgs};
use crate::client::Client;
use crate::protocol::job_json::BulkJson;
use crate::protocol::{BulkAnswer, IdPrefix, JobId, JobState, QueueStats, Refusal};

/// Each prefix resolved to the one job it names.
fn resolve_all(client: &mut Client, prefixes: &[IdPrefix]) -> Result<Vec<JobId>, CliError> {
    prefixes
        .iter()
        .map(|p| client.resolve(p).map_err(CliError::from))
        .collect()
}

/// `taskyard retry ID... | --all-failed | --all-cancelled [--type T]`.
/// Exit 0 when every named job was retried, 3 when any was refused (each
/// refusal is printed with its reason).
pub fn retry(ctx: &Context, args: RetryArgs) -> Result<Exit, CliError> {
    let mut client = ctx.connect()?;
    let answer = match (args.all_failed, args.all_cancelled) {
        (false, false) => {
            let ids = resolve_all(&mut client, &args.job_ids)?;
            client.retry_jobs(&ids)?
        }
        (failed, _) => {
            let state = if failed {
                JobState::Failed
            } else {
                JobState::Cancelled
            };
            let (done, refused) = client.requeue_finished(state, args.task_type)?;
            if let Some(reason) = refused {
                report(
                    ctx,
                    "requeued",
                    &BulkAnswer {
                        done,
                        ..BulkAnswer::default()
                    },
                )?;
                return Err(CliError::Rejected(reason));
            }
            BulkAnswer {
                done,
                ..BulkAnswer::default()
            }
        }
    };
    report(ctx, "requeued", &answer)
}

/// `taskyard delete ID... | --finished | --all-failed | --all-succeeded |
/// --all-cancelled [--type T] [--older-than D] --yes`. A filter without
/// `--yes` deletes nothing and says how many jobs it would cover.
pub fn delete(ctx: &Context, args: DeleteArgs) -> Result<Exit, CliError> {
    let mut client = ctx.connect()?;
    let filter_state = match (args.all_failed, args.all_succeeded, args.all_cancelled) {
        (true, _, _) => Some(JobState::Failed),
        (_, true, _) => Some(JobState::Succeeded),
        (_, _, true) => Some(JobState::Cancelled),
        _ => None,
    };
    let filtered = args.finished || filter_state.is_some();
    if !filtered {
        if args.task_type.is_some() || args.older_than.is_some() {
            return Err(CliError::BadArgument(
                "--type and --older-than go with a filter (--finished, --all-failed, ...), not with ids".into(),
            ));
        }
        let ids = resolve_all(&mut client, &args.job_ids)?;
        return report(ctx, "deleted", &client.delete_jobs(&ids)?);
    }
    if !args.yes {
        return Err(CliError::BadArgument(format!(
            "deleting {} jobs cannot be undone: add --yes to delete them",
            describe_filter(filter_state, args.task_type.as_deref())
        )));
    }
    let finished_before = args.older_than.map(|ms| {
        crate::clock::Clock::now_millis(&crate::clock::SystemClock)
            .saturating_sub(i64::try_from(ms).unwrap_or(i64::MAX))
    });
    let answer = client.delete_finished(filter_state, args.task_type, finished_before)?;
    report(ctx, "deleted", &answer)
}

fn describe_filter(state: Option<JobState>, task_type: Option<&str>) -> String {
    let state = state.map_or("finished".to_string(), |s| s.to_string());
    match task_type {
        Some(t) => format!("{state} {t:?}"),
        None => state,
    }
}

/// Prints what a bulk command did (`--json`: the shared `BulkJson` shape)
/// and exits 3 when any job was refused.
fn report(ctx: &Context, verb: &str, answer: &BulkJson) -> Result<Exit, CliError> {
    if ctx.json {
        let value = serde_json::to_value(answer).unwrap_or_default();
        emit(&output::json_text(&value))?;
    } else {
        emit(&bulk_text(verb, answer))?;
    }
    match answer.refused.is_empty() {
        true => Ok(Exit::Success),
        false => Ok(Exit::Rejected),
    }
}

/// `requeued 2 job(s)` then the ids, then one `refused ID: reason` line each.
pub fn bulk_text(verb: &str, answer: &BulkAnswer) -> String {
    let mut lines = vec![format!("{verb} {} job(s)", answer.done.len())];
    lines.extend(answer.done.iter().map(JobId::to_string));
    lines.extend(
        answer
            .refused
            .iter()
            .map(|Refusal { job_id, reason }| format!("refused {job_id}: {reason}")),
    );
    if answer.more {
        lines.push("more may match: run the command again".into());
    }
    lines.join("\n")
}

/// `taskyard queues`.
pub fn queues(ctx: &Context) -> Result<Exit, CliError> {
    let stats = ctx.connect()?.queues()?;
    if ctx.json {
        let value = serde_json::to_value(&stats).unwrap_or_default();
        emit(&output::json_text(&value))?;
    } else {
        emit(&queues_text(&stats))?;
    }
    Ok(Exit::Success)
}

/// Two tables: the ready queues, then the task types.
pub fn queues_text(stats: &QueueStats) -> String {
    let secs = |ms: u64| format!("{:.1}s", ms as f64 / 1000.0);
    let queues = stats
        .queues
        .iter()
        .map(|q| {
            vec![
                q.task_type.clone(),
                q.priority.to_string(),
                q.depth.to_string(),
                secs(q.oldest_age_ms),
                secs(q.latency_ms),
            ]
        })
        .collect();
    let types = stats
        .task_types
        .iter()
        .map(|t| {
            vec![
                t.task_type.clone(),
                t.ready.to_string(),
                t.delayed.to_string(),
                t.retry_wait.to_string(),
                t.running.to_string(),
                t.latency_ms.map_or_else(|| "-".to_string(), secs),
                t.workers.to_string(),
                t.free_slots.to_string(),
                if t.no_worker { "NO WORKER" } else { "" }.to_string(),
            ]
        })
        .collect();
    let first = table(&["TYPE", "PRIORITY", "DEPTH", "OLDEST", "LATENCY"], queues);
    let second = table(
        &[
            "TYPE",
            "READY",
            "DELAYED",
            "RETRY_WAIT",
            "RUNNING",
            "LATENCY",
            "WORKERS",
            "FREE",
            "",
        ],
        types,
    );
    format!("{first}\n\n{second}").trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Priority, QueueRow, TaskTypeRow};

    #[test]
    fn bulk_text_lists_done_then_refused_with_reasons() {
        let (a, b) = (JobId::mint(), JobId::mint());
        let answer = BulkAnswer {
            done: vec![a],
            refused: vec![Refusal {
                job_id: b,
                reason: "job is RUNNING".into(),
            }],
            more: true,
        };
        let text = bulk_text("deleted", &answer);
        assert_eq!(
            text,
            format!("deleted 1 job(s)\n{a}\nrefused {b}: job is RUNNING\nmore may match: run the command again")
        );
    }

    #[test]
    fn queues_text_flags_types_no_worker_runs() {
        let stats = QueueStats {
            at: 0,
            queues: vec![QueueRow {
                task_type: "resize".into(),
                priority: Priority::High,
                depth: 3,
                oldest_submitted_at: 0,
                oldest_age_ms: 2500,
                latency_ms: 1200,
            }],
            task_types: vec![TaskTypeRow {
                task_type: "resize".into(),
                ready: 3,
                delayed: 1,
                retry_wait: 0,
                running: 0,
                oldest_age_ms: Some(2500),
                latency_ms: Some(1200),
                workers: 0,
                free_slots: 0,
                no_worker: true,
            }],
        };
        let text = queues_text(&stats);
        assert!(
            text.contains("resize  high      3      2.5s    1.2s"),
            "{text}"
        );
        assert!(
            text.lines()
                .last()
                .is_some_and(|l| l.ends_with("NO WORKER")),
            "{text}"
        );
    }
}
