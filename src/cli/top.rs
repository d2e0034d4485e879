//! `taskyard top`: a live view of the queues and workers, redrawn every
//! `--interval-ms` until Ctrl-C. Each frame is one `Queues`, one `Workers`
//! and one counts-only `List` request: work bounded by the number of task
//! types and workers, not by the jobs ever run.
//!
//! On a terminal each frame replaces the last (cursor home, clear); piped,
//! frames follow each other separated by a blank line, like `top -b`.
//! When the coordinator cannot be asked, the frame says so and shows no
//! numbers, rather than leaving the last ones on screen as if live; the
//! next tick tries again.

use crate::cli::job_admin::queues_text;
use crate::cli::output::{self, workers_table};
use crate::cli::{CliError, Context, Exit};
use crate::client::{Client, ClientError};
use crate::clock::text::format_millis;
use crate::protocol::limits::Range;
use crate::protocol::{JobState, QueueStats, StateCount, WorkerView};
use clap::Args;
use std::io::IsTerminal;
use std::time::Duration;

/// Refresh intervals `--interval-ms` accepts: from 200 ms to a minute.
pub const INTERVAL_MS: Range = Range::new("--interval-ms", 200, 60_000);

#[derive(Debug, Args)]
pub struct TopArgs {
    /// Milliseconds between frames (200 to 60000).
    #[arg(long, value_name = "MS", default_value_t = 1000, value_parser = INTERVAL_MS.parser())]
    pub interval_ms: u64,
    /// Print one frame and exit (exit 2 if the coordinator cannot be asked).
    #[arg(long)]
    pub once: bool,
}

/// What one frame shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub counts: Vec<StateCount>,
    pub queues: QueueStats,
    pub workers: Vec<WorkerView>,
}

/// Asks the coordinator for one frame's worth.
pub fn snapshot(client: &mut Client) -> Result<Snapshot, ClientError> {
    let counts = client.list_page(None, None, 0)?.counts;
    let queues = client.queues()?;
    let workers = client.workers()?;
    Ok(Snapshot {
        counts,
        queues,
        workers,
    })
}

/// The first line of every frame: where, when, how often.
fn heading(addr: &str, now: i64, interval_ms: u64) -> String {
    format!(
        "taskyard top  {addr}  {}  every {:.1}s, Ctrl-C quits",
        format_millis(now),
        interval_ms as f64 / 1000.0
    )
}

/// A frame for a coordinator that answered: the count per state (zeros
/// included), the queues and task types, then the workers.
pub fn frame(snapshot: &Snapshot, heading: &str, now: i64) -> String {
    let counts: Vec<String> = JobState::ALL
        .into_iter()
        .map(|state| {
            let n = snapshot
                .counts
                .iter()
                .find(|c| c.state == state)
                .map_or(0, |c| c.count);
            format!("{n} {state}")
        })
        .collect();
    format!(
        "{heading}\njobs: {}\n\n{}\n\n{}",
        counts.join(", "),
        queues_text(&snapshot.queues),
        workers_table(&snapshot.workers, now)
    )
}

/// A frame for a coordinator that did not answer: the reason, no numbers.
pub fn unreachable_frame(error: &ClientError, heading: &str) -> String {
    format!("{heading}\n\ncoordinator unreachable: {error}\n(retrying; nothing shown is live)")
}

/// Runs until killed (Ctrl-C), or for one frame with `--once`.
pub fn run(ctx: &Context, args: TopArgs) -> Result<Exit, CliError> {
    let interval = Duration::from_millis(args.interval_ms);
    let terminal = std::io::stdout().is_terminal();
    let mut client: Option<Client> = None;
    loop {
        let now = now_millis();
        let heading = heading(&ctx.coordinator, now, args.interval_ms);
        let answer = match client.as_mut() {
            Some(c) => snapshot(c),
            None => ctx.connect().and_then(|mut c| {
                let s = snapshot(&mut c);
                client = Some(c);
                s
            }),
        };
        let text = match &answer {
            Ok(s) => frame(s, &heading, now),
            Err(e) if args.once => return Err(CliError::Unreachable(e.to_string())),
            Err(e) => unreachable_frame(e, &heading),
        };
        if answer.is_err() {
            client = None;
        }
        match (terminal, args.once) {
            (true, false) => output::emit(&format!("\x1b[H\x1b[2J{text}"))?,
            (false, false) => output::emit(&format!("{text}\n"))?,
            (_, true) => {
                output::emit(&text)?;
                return Ok(Exit::Success);
            }
        }
        std::thread::sleep(interval);
    }
}

fn now_millis() -> i64 {
    crate::clock::Clock::now_millis(&crate::clock::SystemClock)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Priority, QueueRow, TaskTypeRow, WorkerId};

    fn snapshot() -> Snapshot {
        Snapshot {
            counts: vec![
                StateCount {
                    state: JobState::Queued,
                    count: 7,
                },
                StateCount {
                    state: JobState::Failed,
                    count: 2,
                },
            ],
            queues: QueueStats {
                at: 10_000,
                queues: vec![QueueRow {
                    task_type: "resize".into(),
                    priority: Priority::High,
                    depth: 7,
                    oldest_submitted_at: 7_000,
                    oldest_age_ms: 3_000,
                    latency_ms: 2_500,
                }],
                task_types: vec![TaskTypeRow {
                    task_type: "resize".into(),
                    ready: 7,
                    delayed: 1,
                    retry_wait: 0,
                    running: 0,
                    oldest_age_ms: Some(3_000),
                    latency_ms: Some(2_500),
                    workers: 0,
                    free_slots: 0,
                    no_worker: true,
                }],
            },
            workers: vec![WorkerView {
                worker_id: WorkerId("w1".into()),
                capacity: 2,
                active: 0,
                task_types: vec!["echo".into()],
                registered_at: 0,
                last_heartbeat_at: 9_000,
                draining: false,
            }],
        }
    }

    #[test]
    fn a_frame_shows_counts_queues_and_workers() {
        let text = frame(&snapshot(), "HEADING", 10_000);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "HEADING");
        assert_eq!(
            lines[1],
            "jobs: 7 QUEUED, 0 RUNNING, 0 RETRY_WAIT, 0 SUCCEEDED, 2 FAILED, 0 CANCELLED"
        );
        assert!(text.contains("NO WORKER"), "{text}");
        assert!(text.contains("2.5s"), "latency: {text}");
        assert!(text.contains("1.0s ago"), "heartbeat age: {text}");
        assert!(text.ends_with("1 worker(s), 2 of 2 slot(s) free"), "{text}");
    }

    #[test]
    fn an_unreachable_coordinator_shows_no_numbers() {
        let error = ClientError::Unreachable {
            addr: "127.0.0.1:7400".into(),
            reason: "connection refused".into(),
        };
        let text = unreachable_frame(&error, "HEADING");
        assert!(
            text.contains("coordinator unreachable: cannot reach coordinator at 127.0.0.1:7400"),
            "{text}"
        );
        assert!(!text.contains("jobs:"), "{text}");
    }

    #[test]
    fn the_heading_names_the_address_time_and_interval() {
        assert_eq!(
            heading("10.0.0.1:7400", 1_700_000_000_123, 1500),
            "taskyard top  10.0.0.1:7400  2023-11-14T22:13:20Z  every 1.5s, Ctrl-C quits"
        );
    }

    #[test]
    fn the_interval_is_bounded_naming_the_flag() {
        let parse = |v: &str| {
            crate::cli::parse::try_parse_from(["taskyard", "top", "--interval-ms", v]).map(drop)
        };
        assert!(parse("200").is_ok());
        let err = parse("100").expect_err("too fast");
        assert!(err.to_string().contains("--interval-ms"), "{err}");
    }
}
