//! The `taskyard` command line: clap definitions here, one function per
//! command in `commands`, rendering in `output`.
//!
//! Adding a subcommand is one variant in `Command` (with its `Args` struct)
//! and one arm in `dispatch`, calling a function that takes `&Context` and
//! returns `Result<Exit, CliError>`.

pub mod bench;
pub mod cluster;
pub mod commands;
pub mod completions;
pub mod config_reference;
pub mod dev;
pub mod exit;
pub mod job_admin;
pub mod man;
pub mod output;
pub mod paging;
pub mod parse;
pub mod reference;
pub mod schedule;
pub mod schedule_args;
pub mod spinner;
pub mod top;

pub use exit::{CliError, Exit, EXIT_CODES, EXIT_CODES_HELP};

use crate::client::{Client, ClientError, ClientOptions};
use crate::clock::text as time;
use crate::protocol::{limits, IdPrefix, JobState, PageCursor, Priority};
use crate::security::Secret;
use clap::{Args, Parser, Subcommand};
use std::process::ExitCode;

/// Where the CLI looks for the coordinator's client listener by default.
pub const DEFAULT_COORDINATOR: &str = "127.0.0.1:7400";

/// `taskyard`: submit jobs to a coordinator and inspect them.
#[derive(Debug, Parser)]
#[command(name = "taskyard", version, about, after_help = EXIT_CODES_HELP)]
pub struct Cli {
    /// The coordinator's client address (host:port) [default: 127.0.0.1:7400],
    /// or several separated by commas (every coordinator of a group: the
    /// leader is found and followed). `bench` starts its own coordinator
    /// unless this is given.
    #[arg(long, global = true, env = "TASKYARD_COORDINATOR", value_name = "ADDR")]
    pub coordinator: Option<String>,
    /// Print one JSON document instead of human-readable text.
    #[arg(long, global = true)]
    pub json: bool,
    /// File holding the client token (else $TASKYARD_TOKEN is used).
    #[arg(long, global = true, env = "TASKYARD_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<std::path::PathBuf>,
    /// PEM CA certificate that signed the coordinator's: connect with TLS.
    #[arg(long, global = true, env = "TASKYARD_TLS_CA", value_name = "FILE")]
    pub tls_ca: Option<std::path::PathBuf>,
    /// The name in the coordinator's certificate (default: the host of --coordinator).
    #[arg(long, global = true, value_name = "NAME", default_value = "")]
    pub tls_server_name: String,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Submit a job and print its id.
    Submit(SubmitArgs),
    /// Show one job.
    Status(StatusArgs),
    /// Wait for a job to finish; the exit code says how it ended.
    Wait(WaitArgs),
    /// List jobs, newest first.
    List(ListArgs),
    /// List connected workers.
    Workers,
    /// Cancel a job that has not finished (exit 1 if it already had).
    Cancel(JobArg),
    /// Put FAILED or CANCELLED jobs back in the queue with a fresh attempt budget.
    Retry(RetryArgs),
    /// Delete finished jobs (with their attempts) from the database.
    Delete(DeleteArgs),
    /// Show the ready queues (depth, age, latency) and each task type's
    /// delayed, retrying and running jobs and the workers that run it.
    Queues,
    /// Write a SUCCEEDED job's raw result bytes to stdout (read in chunks,
    /// so a result of any accepted size arrives whole).
    Result(JobArg),
    /// Print a job's payload as JSON (read in chunks, like `result`).
    Payload(JobArg),
    /// Run a local cluster: a coordinator and embedded workers in this process.
    Dev(dev::DevArgs),
    /// Measure throughput and latency: by default against a coordinator and
    /// workers it starts in this process.
    Bench(bench::BenchArgs),
    /// Show who leads, the leader lease, and the coordinators that checked
    /// in (asks any coordinator's HTTP listener, leader or standby).
    Cluster(cluster::ClusterArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(completions::CompletionsArgs),
    /// Print the manual page taskyard(1), or write one page per command.
    Man(man::ManArgs),
    /// A live view of job counts, queues and workers, redrawn until Ctrl-C.
    Top(top::TopArgs),
    /// Cron and interval schedules that submit a job per slot.
    #[command(subcommand)]
    Schedule(schedule::ScheduleCommand),
}

impl Command {
    /// Why `--json` cannot apply to this command, when it cannot: the
    /// command is refused with this reason rather than ignoring the flag.
    pub fn refuses_json(&self) -> Option<&'static str> {
        match self {
            Command::Completions(_) => Some("`completions` prints a shell script"),
            Command::Man(_) => Some("`man` prints a manual page in roff"),
            Command::Top(_) => Some(
                "`top` is a view for people; `queues --json` and `workers --json` give its numbers",
            ),
            _ => None,
        }
    }
}

#[derive(Debug, Args)]
pub struct JobArg {
    /// The job id printed by `submit`, or a prefix of it only one job's id
    /// starts with (at least 4 hex digits).
    #[arg(value_name = "ID", value_parser = IdPrefix::parse_to_resolve)]
    pub job_id: IdPrefix,
}

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("which").required(true).args(["job_ids", "all_failed", "all_cancelled"]))]
pub struct RetryArgs {
    /// The jobs to retry (ids or unique prefixes).
    #[arg(value_name = "ID", value_parser = IdPrefix::parse_to_resolve)]
    pub job_ids: Vec<IdPrefix>,
    /// Retry every FAILED job (the dead set), oldest first.
    #[arg(long, conflicts_with = "all_cancelled")]
    pub all_failed: bool,
    /// Retry every CANCELLED job, oldest first.
    #[arg(long)]
    pub all_cancelled: bool,
    /// With --all-failed or --all-cancelled: only jobs of this task type.
    #[arg(long = "type", value_name = "TYPE")]
    pub task_type: Option<String>,
}

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("which").required(true)
    .args(["job_ids", "finished", "all_failed", "all_succeeded", "all_cancelled"]))]
pub struct DeleteArgs {
    /// The finished jobs to delete (ids or unique prefixes).
    #[arg(value_name = "ID", value_parser = IdPrefix::parse_to_resolve)]
    pub job_ids: Vec<IdPrefix>,
    /// Delete every finished job (SUCCEEDED, FAILED and CANCELLED).
    #[arg(long, conflicts_with_all = ["all_failed", "all_succeeded", "all_cancelled"])]
    pub finished: bool,
    /// Delete every FAILED job.
    #[arg(long, conflicts_with_all = ["all_succeeded", "all_cancelled"])]
    pub all_failed: bool,
    /// Delete every SUCCEEDED job.
    #[arg(long, conflicts_with = "all_cancelled")]
    pub all_succeeded: bool,
    /// Delete every CANCELLED job.
    #[arg(long)]
    pub all_cancelled: bool,
    /// With a filter: only jobs of this task type.
    #[arg(long = "type", value_name = "TYPE")]
    pub task_type: Option<String>,
    /// With a filter: only jobs that finished at least this long ago (30s, 5m, 2h, 7d).
    #[arg(long, value_name = "DURATION", value_parser = time::parse_duration)]
    pub older_than: Option<u64>,
    /// With a filter: really delete (without it, nothing is deleted).
    #[arg(long)]
    pub yes: bool,
}

/// How long `wait` and `submit --wait` wait when not told.
pub const DEFAULT_WAIT_MS: u64 = 60_000;

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("payload_source").required(true).args(["payload", "payload_file"]))]
pub struct SubmitArgs {
    /// The task type, e.g. echo, sleep or fail.
    #[arg(value_name = "TYPE")]
    pub task_type: String,
    /// The task's payload as JSON, e.g. '{"message":"hi"}'.
    #[arg(long, value_name = "JSON", value_parser = parse_json)]
    pub payload: Option<serde_json::Value>,
    /// Read the payload (JSON) from this file instead, for payloads too
    /// big for a command line.
    #[arg(long, value_name = "PATH")]
    pub payload_file: Option<std::path::PathBuf>,
    /// high, normal or low.
    #[arg(long, default_value = "normal")]
    pub priority: Priority,
    /// Attempts before the job FAILS (default: the coordinator's).
    #[arg(long, value_name = "N", value_parser = limits::MAX_ATTEMPTS_RANGE.parser_u32())]
    pub max_attempts: Option<u32>,
    /// Per-attempt timeout: 250ms, 30s, 5m, 1h (a bare number is seconds)
    /// [default: the coordinator's task-timeout].
    #[arg(long, value_name = "DURATION", conflicts_with = "timeout_ms",
          value_parser = time::duration_within(limits::TIMEOUT_MS, 1000))]
    pub timeout: Option<u64>,
    /// The former `--timeout`, in milliseconds (a unit may be given).
    #[arg(long, value_name = "N", hide = true,
          value_parser = time::duration_within(limits::TIMEOUT_MS, 1))]
    pub timeout_ms: Option<u64>,
    /// Submitting again with the same key returns the first job's id
    /// instead of creating a second job (also after a coordinator restart).
    #[arg(long, value_name = "KEY")]
    pub idempotency_key: Option<String>,
    /// At most the limit set on this key (`[[limit]]` in the coordinator's
    /// config, exact or by a `prefix*` pattern) of the jobs carrying it run
    /// at once; at most 256 bytes.
    #[arg(long, value_name = "KEY", value_parser = concurrency_key)]
    pub concurrency_key: Option<String>,
    /// Do not run before this long from now: 1500ms, 30s, 5m, 2h, 1d (at most 366d).
    #[arg(long, value_name = "DURATION", conflicts_with = "at",
          value_parser = time::duration_within(limits::DELAY_MS, 1000))]
    pub delay: Option<u64>,
    /// Do not run before this time, e.g. 2026-12-03T10:00:00Z (at most 366 days ahead).
    #[arg(long, value_name = "TIME", value_parser = time::parse_rfc3339)]
    pub at: Option<i64>,
    /// Wait for the job to finish, then report like `wait`.
    #[arg(long)]
    pub wait: bool,
    /// How long `--wait` waits: 250ms, 30s, 5m, 1h (a bare number is
    /// seconds) [default: 60s].
    #[arg(long, value_name = "DURATION", conflicts_with = "wait_timeout_secs",
          value_parser = time::duration_within(limits::WAIT_MS, 1000))]
    pub wait_timeout: Option<u64>,
    /// The former `--wait-timeout`, in seconds.
    #[arg(long, value_name = "S", hide = true, value_parser = limits::WAIT_SECS.parser())]
    pub wait_timeout_secs: Option<u64>,
}

impl SubmitArgs {
    /// The per-attempt timeout asked for, in milliseconds, if any.
    pub fn timeout_ms(&self) -> Option<u64> {
        self.timeout.or(self.timeout_ms)
    }

    /// How long `--wait` waits.
    pub fn wait_timeout(&self) -> std::time::Duration {
        wait_timeout(self.wait_timeout, self.wait_timeout_secs)
    }
}

/// The wait timeout of a duration flag or its former seconds flag.
fn wait_timeout(millis: Option<u64>, secs: Option<u64>) -> std::time::Duration {
    let millis = millis.or(secs.map(|s| s.saturating_mul(1000)));
    std::time::Duration::from_millis(millis.unwrap_or(DEFAULT_WAIT_MS))
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The job id printed by `submit`, or a prefix of it only one job's id
    /// starts with (at least 4 hex digits).
    #[arg(value_name = "ID", value_parser = IdPrefix::parse_to_resolve)]
    pub job_id: IdPrefix,
}

#[derive(Debug, Args)]
pub struct WaitArgs {
    /// The job id printed by `submit`, or a unique prefix of it.
    #[arg(value_name = "ID", value_parser = IdPrefix::parse_to_resolve)]
    pub job_id: IdPrefix,
    /// Give up (exit 4) after this long: 250ms, 30s, 5m, 1h (a bare number
    /// is seconds) [default: 60s].
    #[arg(long, value_name = "DURATION", conflicts_with = "timeout_secs",
          value_parser = time::duration_within(limits::WAIT_MS, 1000))]
    pub timeout: Option<u64>,
    /// The former `--timeout`, in seconds.
    #[arg(long, value_name = "S", hide = true, value_parser = limits::WAIT_SECS.parser())]
    pub timeout_secs: Option<u64>,
}

impl WaitArgs {
    /// How long to wait.
    pub fn timeout(&self) -> std::time::Duration {
        wait_timeout(self.timeout, self.timeout_secs)
    }
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only jobs in this state: queued, running, retry_wait, succeeded, failed or cancelled.
    #[arg(long)]
    pub state: Option<JobState>,
    /// Only jobs of this task type.
    #[arg(long = "type", value_name = "TYPE")]
    pub task_type: Option<String>,
    /// At most this many jobs (1 to 500).
    #[arg(long, value_name = "N", default_value_t = paging::DEFAULT_LIST_LIMIT, value_parser = limits::LIST_LIMIT.parser_u32())]
    pub limit: u32,
    /// Continue after the job this cursor names: the one a previous `list`
    /// printed after `more:` (or an HTTP `next_cursor`).
    #[arg(long, value_name = "CURSOR")]
    pub cursor: Option<PageCursor>,
    /// Only jobs of this base priority: high, normal or low.
    #[arg(long)]
    pub priority: Option<Priority>,
    /// Only jobs whose id starts with this (hex digits, dashes optional).
    #[arg(long, value_name = "ID_PREFIX", value_parser = IdPrefix::parse)]
    pub search: Option<IdPrefix>,
    /// Oldest submission first (default: newest first).
    #[arg(long)]
    pub oldest_first: bool,
}

/// What every command needs from the global flags.
#[derive(Debug, Clone)]
pub struct Context {
    pub coordinator: String,
    /// True when `--coordinator` (or its variable) was given rather than defaulted.
    pub coordinator_given: bool,
    pub json: bool,
    pub options: ClientOptions,
}

impl Context {
    /// A connected client for `--coordinator`.
    pub fn connect(&self) -> Result<Client, ClientError> {
        Client::connect_with(&self.coordinator, &self.options)
    }
}

/// Token (from `--token-file`, else `$TASKYARD_TOKEN`) and TLS settings.
fn client_options(cli: &Cli) -> Result<ClientOptions, CliError> {
    let token = match &cli.token_file {
        Some(path) => Some(
            Secret::from_file(path)
                .map_err(|e| CliError::BadArgument(format!("--token-file: {e}")))?,
        ),
        None => crate::config::env_token(),
    };
    Ok(ClientOptions {
        token,
        tls_ca: cli.tls_ca.clone(),
        tls_server_name: cli.tls_server_name.clone(),
        ..ClientOptions::default()
    })
}

/// Runs the parsed command. Errors are printed here, as one line
/// `taskyard: <message>` on stderr; the return value is the exit status.
pub fn run(cli: Cli) -> ExitCode {
    let checked = match &cli.coordinator {
        Some(list) => crate::protocol::parse_address_list(list)
            .map(drop)
            .map_err(|e| {
                CliError::BadArgument(format!("--coordinator (or TASKYARD_COORDINATOR): {e}"))
            }),
        None => Ok(()),
    };
    let result = checked
        .and_then(|()| client_options(&cli))
        .and_then(|options| {
            let ctx = Context {
                coordinator_given: cli.coordinator.is_some(),
                coordinator: cli
                    .coordinator
                    .unwrap_or_else(|| DEFAULT_COORDINATOR.to_string()),
                json: cli.json,
                options,
            };
            dispatch(&ctx, cli.command)
        });
    match result {
        Ok(exit) => exit.into(),
        Err(e) => {
            output::warn(&format!("taskyard: {e}"));
            e.exit().into()
        }
    }
}

fn dispatch(ctx: &Context, command: Command) -> Result<Exit, CliError> {
    if let Some(reason) = command.refuses_json().filter(|_| ctx.json) {
        return Err(CliError::BadArgument(format!(
            "--json does not apply here: {reason}"
        )));
    }
    match command {
        Command::Submit(args) => commands::submit(ctx, args),
        Command::Status(args) => commands::status(ctx, args),
        Command::Wait(args) => commands::wait(ctx, args),
        Command::List(args) => commands::list(ctx, args),
        Command::Workers => commands::workers(ctx),
        Command::Cancel(args) => commands::cancel(ctx, &args.job_id),
        Command::Retry(args) => job_admin::retry(ctx, args),
        Command::Delete(args) => job_admin::delete(ctx, args),
        Command::Queues => job_admin::queues(ctx),
        Command::Result(args) => commands::result(ctx, &args.job_id),
        Command::Payload(args) => commands::payload(ctx, &args.job_id),
        Command::Dev(args) => dev::run(ctx, args),
        Command::Bench(args) => bench::run(ctx, args),
        Command::Cluster(args) => cluster::cluster(ctx, args),
        Command::Completions(args) => completions::run(args),
        Command::Man(args) => man::run(args),
        Command::Top(args) => top::run(ctx, args),
        Command::Schedule(command) => schedule::run(ctx, command),
    }
}

fn parse_json(text: &str) -> Result<serde_json::Value, String> {
    serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))
}

/// `--concurrency-key`: a key `flow::validate_key` accepts.
fn concurrency_key(text: &str) -> Result<String, String> {
    crate::protocol::flow::validate_key("--concurrency-key", text)
        .map(|()| text.to_string())
        .map_err(|e| e.reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::JobId;
    use clap::CommandFactory;
    use std::time::Duration;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        parse::try_parse_from(std::iter::once("taskyard").chain(args.iter().copied()))
    }

    fn submit_args(extra: &[&str]) -> Result<SubmitArgs, clap::Error> {
        let mut args = vec!["submit", "echo", "--payload", r#"{"message":"hi"}"#];
        args.extend_from_slice(extra);
        match parse(&args)?.command {
            Command::Submit(submit) => Ok(submit),
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn clap_definitions_are_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn priority_accepts_the_three_levels_and_defaults_to_normal() {
        for (text, level) in [
            ("high", Priority::High),
            ("normal", Priority::Normal),
            ("low", Priority::Low),
            ("HIGH", Priority::High),
        ] {
            assert_eq!(
                submit_args(&["--priority", text]).map(|a| a.priority).ok(),
                Some(level)
            );
        }
        assert_eq!(
            submit_args(&[]).map(|a| a.priority).ok(),
            Some(Priority::Normal)
        );
        let err = submit_args(&["--priority", "urgent"]).expect_err("urgent is no priority");
        assert!(err.to_string().contains("--priority"), "{err}");
    }

    #[test]
    fn payload_is_parsed_as_json() {
        let args = submit_args(&["--max-attempts", "5", "--wait"]).expect("valid");
        assert_eq!(args.payload, Some(serde_json::json!({ "message": "hi" })));
        assert_eq!(args.max_attempts, Some(5));
        assert!(args.wait);
    }

    #[test]
    fn bad_payload_json_is_an_error_naming_payload() {
        let err = parse(&["submit", "echo", "--payload", "{message: hi"]).expect_err("bad JSON");
        assert_eq!(err.exit_code(), 2);
        let text = err.to_string();
        assert!(text.contains("--payload"), "{text}");
        assert!(text.contains("not valid JSON"), "{text}");
    }

    #[test]
    fn a_payload_comes_from_the_flag_or_a_file_but_not_both() {
        let cli = parse(&["submit", "echo", "--payload-file", "/tmp/p.json"]).expect("valid");
        let Command::Submit(args) = cli.command else {
            panic!("not submit");
        };
        assert_eq!(
            args.payload_file.as_deref(),
            Some(std::path::Path::new("/tmp/p.json"))
        );
        assert!(
            parse(&["submit", "echo"]).is_err(),
            "one of them is required"
        );
        let both = [
            "submit",
            "echo",
            "--payload",
            "{}",
            "--payload-file",
            "/tmp/p.json",
        ];
        assert!(parse(&both).is_err());
    }

    #[test]
    fn list_takes_a_cursor_and_refuses_garbage() {
        let cursor = format!("3.4.{}", JobId::mint());
        let cli = parse(&["list", "--cursor", &cursor]).expect("valid");
        assert!(matches!(
            cli.command,
            Command::List(ListArgs {
                cursor: Some(_),
                ..
            })
        ));
        let err = parse(&["list", "--cursor", "nope"]).expect_err("garbage");
        assert!(err.to_string().contains("--cursor"), "{err}");
    }

    #[test]
    fn state_filter_parses_any_case_and_rejects_unknown_states() {
        let cli = parse(&["list", "--state", "retry-wait"]).expect("valid state");
        assert!(matches!(
            cli.command,
            Command::List(ListArgs {
                state: Some(JobState::RetryWait),
                limit: 50,
                task_type: None,
                cursor: None,
                ..
            })
        ));
        let err = parse(&["list", "--state", "done"]).expect_err("unknown state");
        let text = err.to_string();
        assert!(
            text.contains("--state") && text.contains("unknown job state"),
            "{text}"
        );
    }

    #[test]
    fn unparsable_job_id_is_an_error_naming_the_argument() {
        let err = parse(&["status", "not-a-uuid"]).expect_err("bad id");
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("<ID>"), "{err}");
    }

    #[test]
    fn job_ids_take_unique_prefixes_of_at_least_four_digits() {
        let cli = parse(&["status", "0193AB12"]).expect("a prefix");
        let Command::Status(StatusArgs { job_id }) = cli.command else {
            panic!("not status");
        };
        assert_eq!(job_id.as_str(), "0193ab12");
        let err = parse(&["cancel", "019"]).expect_err("too short");
        assert!(err.to_string().contains("at least 4"), "{err}");
        let cli = parse(&["retry", "0193ab", "0193cd"]).expect("several");
        assert!(
            matches!(cli.command, Command::Retry(RetryArgs { ref job_ids, .. }) if job_ids.len() == 2)
        );
        assert!(parse(&["retry"]).is_err(), "retry needs ids or a filter");
        assert!(parse(&["retry", "--all-failed", "--all-cancelled"]).is_err());
    }

    #[test]
    fn delete_takes_ids_or_one_filter() {
        let cli = parse(&[
            "delete",
            "--all-failed",
            "--type",
            "echo",
            "--older-than",
            "7d",
            "--yes",
        ])
        .expect("a filter");
        let Command::Delete(args) = cli.command else {
            panic!("not delete");
        };
        assert!(args.all_failed && args.yes);
        assert_eq!(args.older_than, Some(7 * 24 * 3600 * 1000));
        assert!(parse(&["delete"]).is_err(), "delete needs ids or a filter");
        assert!(parse(&["delete", "--finished", "--all-failed"]).is_err());
        let cli = parse(&[
            "list",
            "--priority",
            "high",
            "--search",
            "0193-ab",
            "--oldest-first",
        ])
        .expect("list filters");
        assert!(matches!(
            cli.command,
            Command::List(ListArgs {
                priority: Some(Priority::High),
                search: Some(_),
                oldest_first: true,
                ..
            })
        ));
    }

    #[test]
    fn global_flags_are_accepted_after_the_subcommand() {
        let cli = parse(&["workers", "--json", "--coordinator", "10.0.0.1:1"]).expect("valid");
        assert!(cli.json);
        assert_eq!(cli.coordinator.as_deref(), Some("10.0.0.1:1"));
    }

    #[test]
    fn wait_timeouts_default_to_a_minute() {
        let cli = parse(&["wait", &JobId::mint().to_string()]).expect("valid");
        let Command::Wait(args) = cli.command else {
            panic!("not wait");
        };
        assert_eq!(args.timeout(), Duration::from_secs(60));
        let submit = submit_args(&["--wait"]).expect("valid");
        assert_eq!(submit.wait_timeout(), Duration::from_secs(60));
        assert_eq!(submit.timeout_ms(), None, "the coordinator's default");
    }

    fn wait_args(extra: &[&str]) -> Result<WaitArgs, clap::Error> {
        let id = JobId::mint().to_string();
        match parse(&[&["wait", id.as_str()][..], extra].concat())?.command {
            Command::Wait(wait) => Ok(wait),
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn every_duration_flag_takes_a_unit_and_a_bare_number_keeps_its_old_unit() {
        let ms = Duration::from_millis;
        let timeout = |flag: &str, value: &str| {
            submit_args(&[flag, value])
                .map(|a| a.timeout_ms())
                .ok()
                .flatten()
        };
        let submit_wait =
            |flag: &str, value: &str| submit_args(&[flag, value]).map(|a| a.wait_timeout()).ok();
        let wait = |flag: &str, value: &str| wait_args(&[flag, value]).map(|a| a.timeout()).ok();
        for (value, millis) in [
            ("250ms", 250),
            ("30s", 30_000),
            ("5m", 300_000),
            ("1h", 3_600_000),
        ] {
            assert_eq!(
                timeout("--timeout", value),
                Some(millis),
                "--timeout {value}"
            );
            assert_eq!(
                timeout("--timeout-ms", value),
                Some(millis),
                "--timeout-ms {value}"
            );
            assert_eq!(submit_wait("--wait-timeout", value), Some(ms(millis)));
            assert_eq!(
                wait("--timeout", value),
                Some(ms(millis)),
                "wait --timeout {value}"
            );
        }
        assert_eq!(timeout("--timeout", "90"), Some(90_000), "seconds");
        assert_eq!(
            timeout("--timeout-ms", "90"),
            Some(90),
            "the old flag: milliseconds"
        );
        assert_eq!(submit_wait("--wait-timeout", "90"), Some(ms(90_000)));
        assert_eq!(submit_wait("--wait-timeout-secs", "90"), Some(ms(90_000)));
        assert_eq!(wait("--timeout", "90"), Some(ms(90_000)));
        assert_eq!(wait("--timeout-secs", "90"), Some(ms(90_000)));
        let err = wait_args(&["--timeout", "5 min"]).expect_err("unknown unit");
        assert!(err.to_string().contains("--timeout <DURATION>"), "{err}");
        assert!(
            submit_args(&["--timeout", "1s", "--timeout-ms", "5"]).is_err(),
            "both"
        );
        assert!(
            wait_args(&["--timeout", "1s", "--timeout-secs", "5"]).is_err(),
            "both"
        );
        let err = submit_args(&["--wait-timeout", "367d"]).expect_err("beyond a year");
        assert!(err.to_string().contains("wait_ms: "), "{err}");
    }

    #[test]
    fn schedule_durations_take_the_same_syntax() {
        let cli = parse(&[
            "schedule",
            "create",
            "n",
            "report",
            "--every",
            "90",
            "--timeout",
            "250ms",
            "--catchup-window",
            "1h",
            "--jitter",
            "5m",
        ])
        .expect("valid");
        let Command::Schedule(schedule::ScheduleCommand::Create(args)) = cli.command else {
            panic!("not schedule create");
        };
        let spec = args.spec();
        assert_eq!(spec.every_ms, Some(90_000), "a bare number is seconds");
        assert_eq!(spec.timeout_ms, Some(250));
        assert_eq!(spec.catchup_window_ms, Some(3_600_000));
        assert_eq!(spec.jitter_ms, 300_000);
    }

    #[test]
    fn the_usage_line_offers_payload_or_payload_file() {
        let err = parse(&["submit", "echo"]).expect_err("neither");
        let text = err.to_string();
        assert!(
            text.contains("<--payload <JSON>|--payload-file <PATH>>"),
            "{text}"
        );
    }

    #[test]
    fn numeric_flags_accept_their_maximum_and_refuse_one_more_naming_the_range() {
        use limits::{MAX_ATTEMPTS, MAX_DELAY_MS, MAX_LIST_JOBS, MAX_TIMEOUT_MS, MAX_WAIT_SECS};
        let id = JobId::mint().to_string();
        let submit = |flag: &str, value: &str| {
            parse(&["submit", "echo", "--payload", "{}", flag, value]).map(|_| ())
        };
        let list = |_: &str, value: &str| parse(&["list", "--limit", value]).map(|_| ());
        let wait =
            |_: &str, value: &str| parse(&["wait", &id, "--timeout-secs", value]).map(|_| ());
        type Parse<'a> = &'a dyn Fn(&str, &str) -> Result<(), clap::Error>;
        let cases: [(Parse, &str, String, String, &str); 6] = [
            (
                &submit,
                "--max-attempts",
                MAX_ATTEMPTS.to_string(),
                (MAX_ATTEMPTS + 1).to_string(),
                "max_attempts",
            ),
            (
                &submit,
                "--timeout-ms",
                MAX_TIMEOUT_MS.to_string(),
                u64::MAX.to_string(),
                "timeout_ms",
            ),
            (
                &submit,
                "--delay",
                format!("{MAX_DELAY_MS}ms"),
                format!("{}ms", MAX_DELAY_MS + 1),
                "delay_ms",
            ),
            (
                &submit,
                "--wait-timeout-secs",
                MAX_WAIT_SECS.to_string(),
                (MAX_WAIT_SECS + 1).to_string(),
                "timeout_secs",
            ),
            (
                &list,
                "--limit",
                MAX_LIST_JOBS.to_string(),
                (MAX_LIST_JOBS + 1).to_string(),
                "limit",
            ),
            (
                &wait,
                "--timeout-secs",
                MAX_WAIT_SECS.to_string(),
                (MAX_WAIT_SECS + 1).to_string(),
                "timeout_secs",
            ),
        ];
        for (parse_with, flag, max, over, field) in cases {
            parse_with(flag, &max).unwrap_or_else(|e| panic!("{flag} {max}: {e}"));
            let err = parse_with(flag, &over).expect_err(flag);
            assert_eq!(err.exit_code(), i32::from(Exit::Usage.code()), "{flag}");
            let text = err.to_string();
            assert!(
                text.contains(flag) && text.contains(&format!("{field}: ")),
                "{text}"
            );
            assert!(text.contains("..="), "{text}");
        }
        let err = submit("--timeout-ms", "18446744073709551616").expect_err("beyond u64");
        assert!(err.to_string().contains("outside 1..="), "{err}");
    }

    #[test]
    fn at_further_than_the_longest_delay_is_a_bad_argument_naming_at() {
        let now = 1_800_000_000_000;
        let at = now + limits::MAX_DELAY_MS as i64;
        let at_text = time::format_millis(at);
        let args = submit_args(&["--at", &at_text]).expect("valid");
        let req = commands::submit_request(&args, now).expect("the maximum");
        assert_eq!(req.delay_ms, Some(limits::MAX_DELAY_MS));
        let err = commands::submit_request(&args, now - 1).expect_err("one ms more");
        assert_eq!(err.exit(), Exit::Usage);
        assert!(
            err.to_string().starts_with("--at ") && err.to_string().contains("delay_ms: "),
            "{err}"
        );
    }

    #[test]
    fn help_documents_the_exit_codes() {
        let help = Cli::command().render_long_help().to_string();
        assert!(help.contains(EXIT_CODES_HELP), "{help}");
    }
}
