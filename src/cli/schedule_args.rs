//! What `schedule create` and `schedule update` take, and the definition
//! each sends. `create` fills what is not given with the defaults;
//! `update` changes only what is given on the definition it read from the
//! coordinator (`--replace`: the whole definition, like `create`).

use crate::cli::CliError;
use crate::clock::text::{parse_duration, parse_rfc3339};
use crate::protocol::payloads::encode_json;
use crate::protocol::{limits, Overlap, Priority, ScheduleSpec};
use clap::Args;
use serde_json::{json, Value};

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("cadence").required(true).args(["cron", "every"]))]
pub struct CreateArgs {
    /// Unique name: letters, digits, '.', '_', '-'.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// The task type each job has, e.g. echo.
    #[arg(value_name = "TYPE")]
    pub task_type: String,
    #[command(flatten)]
    pub options: ScheduleOptions,
}

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("cadence").args(["cron", "every"]))]
pub struct UpdateArgs {
    /// The schedule to change.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// A new task type for its jobs [default: unchanged].
    #[arg(value_name = "TYPE")]
    pub task_type: Option<String>,
    /// Replace the whole definition, as `create` would write it: options
    /// not given take their defaults (needs TYPE and --cron or --every).
    #[arg(long)]
    pub replace: bool,
    #[command(flatten)]
    pub options: ScheduleOptions,
}

/// The options of a definition; each `None` when not given.
#[derive(Debug, Args)]
pub struct ScheduleOptions {
    /// Cron expression: 5 fields (or 6, seconds first); L, W, #, MON..SUN, JAN..DEC.
    #[arg(long, value_name = "EXPR")]
    pub cron: Option<String>,
    /// IANA time zone the cron expression is read in [default: UTC].
    #[arg(long, value_name = "ZONE", conflicts_with = "every")]
    pub tz: Option<String>,
    /// A fixed interval instead of cron (whole seconds: 30s, 5m, 1h).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub every: Option<u64>,
    /// Each job's payload as JSON [default: {}].
    #[arg(long, value_name = "JSON", value_parser = parse_json)]
    pub payload: Option<Value>,
    /// high, normal or low [default: normal].
    #[arg(long)]
    pub priority: Option<Priority>,
    /// Attempts per job [default: the coordinator's default-max-attempts].
    #[arg(long, value_name = "N", value_parser = limits::MAX_ATTEMPTS_RANGE.parser_u32())]
    pub max_attempts: Option<u32>,
    /// Per-attempt timeout [default: the coordinator's task-timeout].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<u64>,
    /// When the previous run is still active: skip, allow, buffer-one,
    /// cancel-previous [default: skip].
    #[arg(long, value_parser = |s: &str| s.parse::<Overlap>())]
    pub overlap: Option<Overlap>,
    /// Missed slots this recent fire after downtime [default: one slot].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub catchup_window: Option<u64>,
    /// Delay each job by a fixed pseudo-random 0..DURATION [default: 0].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub jitter: Option<u64>,
    /// Create it paused (update: pause it; `schedule resume` resumes).
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

impl CreateArgs {
    /// The definition `create` sends: every option not given at its default.
    pub fn spec(self) -> ScheduleSpec {
        let defaults = ScheduleSpec::new(self.name, self.task_type, encode_json(&json!({})));
        self.options.apply(defaults)
    }
}

impl UpdateArgs {
    /// True when the definition must be read first (no `--replace`).
    pub fn merges(&self) -> bool {
        !self.replace
    }

    /// The definition `update` sends: with `--replace`, `create`'s; else
    /// `current` (as the coordinator answered `show`) with only the options
    /// given changed.
    pub fn spec(self, current: Option<ScheduleSpec>) -> Result<ScheduleSpec, CliError> {
        match (self.replace, current) {
            (true, _) => self.replacement(),
            (false, Some(current)) => self.merged(current),
            (false, None) => Err(CliError::BadArgument(
                "schedule update: the current definition is needed without --replace".into(),
            )),
        }
    }

    fn replacement(self) -> Result<ScheduleSpec, CliError> {
        let task_type = self.task_type.ok_or_else(|| {
            CliError::BadArgument("--replace needs the task type (TYPE) too".into())
        })?;
        if self.options.cron.is_none() && self.options.every.is_none() {
            return Err(CliError::BadArgument(
                "--replace needs --cron or --every too".into(),
            ));
        }
        Ok(CreateArgs {
            name: self.name,
            task_type,
            options: self.options,
        }
        .spec())
    }

    fn merged(self, mut current: ScheduleSpec) -> Result<ScheduleSpec, CliError> {
        let o = &self.options;
        if o.tz.is_some() && o.cron.is_none() && current.cron.is_none() {
            return Err(CliError::BadArgument(format!(
                "--tz: schedule {} runs at an interval, not by cron (give --cron too)",
                current.name
            )));
        }
        if let Some(task_type) = self.task_type {
            current.task_type = task_type;
        }
        Ok(self.options.apply(current))
    }
}

impl ScheduleOptions {
    /// `spec` with every option given here set; a new cadence replaces the
    /// old one (a cron keeps its zone unless --tz is given; --every drops both).
    fn apply(self, mut spec: ScheduleSpec) -> ScheduleSpec {
        if let Some(cron) = self.cron {
            spec.cron = Some(cron);
            spec.every_ms = None;
        }
        if let Some(every) = self.every {
            spec.every_ms = Some(every);
            spec.cron = None;
            spec.tz = None;
        }
        set(&mut spec.tz, self.tz.map(Some));
        set(&mut spec.payload, self.payload.as_ref().map(encode_json));
        set(&mut spec.priority, self.priority);
        set(&mut spec.max_attempts, self.max_attempts.map(Some));
        set(&mut spec.timeout_ms, self.timeout.map(Some));
        set(&mut spec.overlap, self.overlap);
        set(&mut spec.catchup_window_ms, self.catchup_window.map(Some));
        set(&mut spec.jitter_ms, self.jitter);
        spec.paused |= self.paused;
        set(&mut spec.start_at, self.start.map(Some));
        set(&mut spec.end_at, self.end.map(Some));
        spec
    }
}

/// Overwrites `field` with `given`, when given.
fn set<T>(field: &mut T, given: Option<T>) {
    if let Some(value) = given {
        *field = value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::schedule::ScheduleCommand;
    use crate::cli::{parse, Command};

    fn update_args(args: &[&str]) -> UpdateArgs {
        let words = ["taskyard", "schedule", "update"];
        let words = words.into_iter().chain(args.iter().copied());
        match parse::try_parse_from(words).expect("valid").command {
            Command::Schedule(ScheduleCommand::Update(update)) => update,
            other => panic!("parsed as {other:?}"),
        }
    }

    /// A Berlin cron schedule with every option away from its default.
    fn berlin() -> ScheduleSpec {
        ScheduleSpec {
            cron: Some("0 3 * * *".into()),
            tz: Some("Europe/Berlin".into()),
            priority: Priority::High,
            max_attempts: Some(7),
            timeout_ms: Some(90_000),
            overlap: Overlap::BufferOne,
            catchup_window_ms: Some(3_600_000),
            jitter_ms: 5_000,
            start_at: Some(1_800_000_000_000),
            end_at: Some(1_900_000_000_000),
            from_config: true,
            ..ScheduleSpec::new("nightly", "report", encode_json(&json!({"team": "ops"})))
        }
    }

    #[test]
    fn update_of_one_option_keeps_every_other() {
        let spec = update_args(&["nightly", "--max-attempts", "2"])
            .spec(Some(berlin()))
            .expect("merged");
        assert_eq!(
            spec,
            ScheduleSpec {
                max_attempts: Some(2),
                ..berlin()
            }
        );
    }

    #[test]
    fn update_without_a_type_keeps_it_and_with_one_changes_it() {
        let kept = update_args(&["nightly", "--jitter", "1s"]).spec(Some(berlin()));
        assert_eq!(kept.expect("merged").task_type, "report");
        let changed = update_args(&["nightly", "summary"]).spec(Some(berlin()));
        assert_eq!(changed.expect("merged").task_type, "summary");
    }

    #[test]
    fn a_new_cron_keeps_the_zone_and_every_drops_cron_and_zone() {
        let cron = update_args(&["nightly", "--cron", "0 4 * * *"]).spec(Some(berlin()));
        let cron = cron.expect("merged");
        assert_eq!(cron.cron.as_deref(), Some("0 4 * * *"));
        assert_eq!(cron.tz.as_deref(), Some("Europe/Berlin"));
        let every = update_args(&["nightly", "--every", "5m"]).spec(Some(berlin()));
        let every = every.expect("merged");
        assert_eq!(
            (every.cron, every.tz, every.every_ms),
            (None, None, Some(300_000))
        );
    }

    #[test]
    fn tz_alone_on_an_interval_schedule_is_refused_naming_tz() {
        let interval = ScheduleSpec {
            every_ms: Some(60_000),
            ..ScheduleSpec::new("tick", "echo", encode_json(&json!({})))
        };
        let err = update_args(&["tick", "--tz", "UTC"])
            .spec(Some(interval))
            .expect_err("no cron");
        assert!(err.to_string().starts_with("--tz: "), "{err}");
    }

    #[test]
    fn replace_writes_the_whole_definition_with_defaults() {
        let args = ["nightly", "report", "--replace", "--cron", "0 3 * * *"];
        let spec = update_args(&args).spec(Some(berlin())).expect("replaced");
        let mut expected = ScheduleSpec::new("nightly", "report", encode_json(&json!({})));
        expected.cron = Some("0 3 * * *".into());
        assert_eq!(spec, expected);
        let no_type = update_args(&["nightly", "--replace", "--every", "1m"]).spec(None);
        assert!(no_type.expect_err("type").to_string().contains("TYPE"));
        let no_cadence = update_args(&["nightly", "report", "--replace"]).spec(None);
        assert!(no_cadence
            .expect_err("cadence")
            .to_string()
            .contains("--cron"));
    }

    #[test]
    fn create_still_needs_a_type_and_a_cadence() {
        let parse = |args: &[&str]| {
            let words = ["taskyard", "schedule", "create"];
            parse::try_parse_from(words.into_iter().chain(args.iter().copied()))
        };
        assert!(parse(&["n", "echo"]).is_err(), "a cadence is required");
        assert!(
            parse(&["n", "--every", "1m"]).is_err(),
            "a type is required"
        );
        assert!(parse(&["n", "echo", "--every", "1m", "--tz", "UTC"]).is_err());
        let cli = parse(&["n", "echo", "--every", "1m"]).expect("valid");
        let Command::Schedule(ScheduleCommand::Create(args)) = cli.command else {
            panic!("not create");
        };
        let spec = args.spec();
        assert_eq!(
            (spec.priority, spec.overlap),
            (Priority::Normal, Overlap::Skip)
        );
        assert_eq!(spec.payload, encode_json(&json!({})));
    }
}
