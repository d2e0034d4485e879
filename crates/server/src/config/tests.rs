//! Loading both configs from files and flags: every error names its key and file.

use super::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use taskyard_client::worker::{WorkerConfig, WorkerOptions};

fn file_with(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().expect("temp file");
    f.write_all(text.as_bytes()).expect("write");
    f
}

/// The retention keys `config/coordinator.toml` must list, as it
/// spells them (durations without `-millis`).
const RETENTION_KEYS: [&str; 8] = [
    "retain-finished-in-memory",
    "retain-finished-in-memory-for",
    "retain-finished-in-memory-bytes",
    "history-readers",
    "job-retention",
    "failed-job-retention",
    "expiry-interval",
    "expiry-batch-rows",
];

#[test]
fn example_files_load_with_every_key() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config");
    let c = load::<CoordinatorOptions>(Some(&dir.join("coordinator.toml")), Default::default())
        .expect("config/coordinator.toml loads");
    assert_eq!(c.client_listen.port(), 7400);
    let text = std::fs::read_to_string(dir.join("coordinator.toml")).expect("readable");
    let set = toml::from_str::<CoordinatorOptions>(&text)
        .expect("parses")
        .keys_set();
    for key in RETENTION_KEYS {
        assert!(set.iter().any(|k| k == key), "{key} is in coordinator.toml");
    }
    let defaults = CoordinatorConfig::default();
    let retention = |c: &CoordinatorConfig| {
        (
            (
                c.retain_finished_in_memory,
                c.retain_finished_in_memory_millis,
                c.retain_finished_in_memory_bytes,
            ),
            (c.history_readers, c.expiry_batch_rows),
            (c.job_retention_millis, c.failed_job_retention_millis),
            c.expiry_interval_millis,
        )
    };
    assert_eq!(
        retention(&c),
        retention(&defaults),
        "the file states the defaults"
    );
    let w = load::<WorkerOptions>(Some(&dir.join("worker.toml")), Default::default())
        .expect("config/worker.toml loads");
    assert_eq!(w.coordinator, "127.0.0.1:7401");
    let d = load::<CoordinatorOptions>(Some(&dir.join("dev.toml")), Default::default())
        .expect("config/dev.toml loads");
    assert_eq!(d.db_path, PathBuf::from("taskyard-data/taskyard.db"));
}

#[test]
fn flags_override_the_file() {
    let f = file_with("heartbeat-timeout-millis = 9000\nretry-base-millis = 50\n");
    let flags = CoordinatorOptions {
        heartbeat_timeout_millis: Some(2000),
        ..Default::default()
    };
    let c = load::<CoordinatorOptions>(Some(f.path()), flags).expect("valid");
    assert_eq!(c.heartbeat_timeout_millis, 2000);
    assert_eq!(c.retry_base_millis, 50);
    assert_eq!(c.sweep_interval_millis, 500, "default kept");
}

#[test]
fn unknown_key_names_the_key_and_file() {
    let f = file_with("sweep-interval-millis = 100\nheartbeat-timout-millis = 5\n");
    let err =
        load::<CoordinatorOptions>(Some(f.path()), Default::default()).expect_err("unknown key");
    assert_eq!(err.key.as_deref(), Some("heartbeat-timout-millis"));
    assert_eq!(err.source_name, f.path().display().to_string());
    assert_eq!(err.position, Some(Position { line: 2, column: 1 }));
    assert_eq!(
        err.reason,
        "unknown key; did you mean `heartbeat-timeout-millis`?"
    );
    assert!(
        err.to_string().starts_with(&format!(
            "{}:2:1: key `heartbeat-timout-millis`",
            err.source_name
        )),
        "{err}"
    );
    let f = file_with("capacity = 2\nflavour = \"vanilla\"\n");
    let err = load::<WorkerOptions>(Some(f.path()), Default::default()).expect_err("unknown");
    assert!(err.reason.starts_with("unknown key (`--help`"), "{err}");
    assert!(
        !err.reason.contains("coordinator"),
        "no list of every key: {err}"
    );
}

#[test]
fn a_bad_value_names_the_line_and_column_of_the_value() {
    let f = file_with("# worker\ncapacity = 2\n  prefetch =  20000\n");
    let err = load::<WorkerOptions>(Some(f.path()), Default::default()).expect_err("range");
    assert_eq!(err.key.as_deref(), Some("prefetch"));
    assert_eq!(
        err.position,
        Some(Position {
            line: 3,
            column: 15
        }),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with(&format!("{}:3:15: key `prefetch`", err.source_name)),
        "{err}"
    );
    // Set by a flag: the command line is blamed, with no position.
    let flags = WorkerOptions {
        prefetch: Some(20_000),
        ..Default::default()
    };
    let f = file_with("capacity = 2\n");
    let err = load::<WorkerOptions>(Some(f.path()), flags).expect_err("range");
    assert_eq!(
        (err.source_name.as_str(), err.position),
        ("command line", None)
    );
}

#[test]
fn metrics_max_task_types_is_bounded_and_the_example_states_its_default() {
    let f = file_with("metrics-max-task-types = 1001\n");
    let err = load::<CoordinatorOptions>(Some(f.path()), Default::default())
        .expect_err("above the maximum");
    assert_eq!(err.key.as_deref(), Some("metrics-max-task-types"));
    assert!(err.reason.contains("maximum of 1000"), "{err}");
    let f = file_with("metrics-max-task-types = 0\n");
    let c = load::<CoordinatorOptions>(Some(f.path()), Default::default()).expect("0 is valid");
    assert_eq!(c.metrics_max_task_types, 0);
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/coordinator.toml");
    let c = load::<CoordinatorOptions>(Some(&example), Default::default()).expect("loads");
    assert_eq!(
        c.metrics_max_task_types,
        CoordinatorConfig::default().metrics_max_task_types
    );
    assert!(std::fs::read_to_string(&example)
        .unwrap_or_default()
        .contains("\nmetrics-max-task-types = "));
}

#[test]
fn a_syntax_error_names_the_file_line_and_column() {
    let f = file_with("capacity = 2\nheartbeat-interval-millis = = 3\n");
    let err = load::<WorkerOptions>(Some(f.path()), Default::default()).expect_err("syntax");
    assert_eq!(err.position.map(|p| p.line), Some(2));
    assert_eq!(err.key.as_deref(), Some("heartbeat-interval-millis"));
    assert!(!err.reason.contains('\n'), "one line: {err}");
    let shown = err.to_string();
    let at = format!("{}:2:", f.path().display());
    assert!(shown.starts_with(&at), "{shown}");
    let f = file_with("[unclosed\n");
    let err = load::<WorkerOptions>(Some(f.path()), Default::default()).expect_err("syntax");
    assert_eq!(err.position.map(|p| p.line), Some(1), "{err}");
}

#[test]
fn wrong_type_names_the_key_and_file() {
    let f = file_with("capacity = \"lots\"\n");
    let err = load::<WorkerOptions>(Some(f.path()), Default::default()).expect_err("bad type");
    assert_eq!(err.key.as_deref(), Some("capacity"));
    assert!(err.to_string().contains(&f.path().display().to_string()));
}

#[test]
fn a_coordinator_list_with_an_empty_element_or_a_bad_address_names_the_key_and_file() {
    for (text, reason) in [
        ("coordinator = \"a:7401,,b:7401\"\n", "element 2 is empty"),
        ("coordinator = \"a:7401,b\"\n", "\"b\" is not host:port"),
    ] {
        let f = file_with(text);
        let err = load::<WorkerOptions>(Some(f.path()), Default::default()).expect_err(text);
        assert_eq!(err.key.as_deref(), Some("coordinator"));
        assert_eq!(err.source_name, f.path().display().to_string());
        assert!(err.to_string().contains(reason), "{err}");
    }
    let f = file_with("coordinator = \"a:7401, b:7402\"\n");
    let w = load::<WorkerOptions>(Some(f.path()), Default::default()).expect("a list");
    assert_eq!(w.coordinator, "a:7401, b:7402");
}

#[test]
fn out_of_range_value_names_the_key() {
    let f = file_with("capacity = 0\n");
    let err = load::<WorkerOptions>(Some(f.path()), Default::default()).expect_err("zero capacity");
    assert_eq!(err.key.as_deref(), Some("capacity"));
    assert_eq!(err.source_name, f.path().display().to_string());
    let flags = CoordinatorOptions {
        retry_cap_millis: Some(10),
        ..Default::default()
    };
    let err = load::<CoordinatorOptions>(None, flags).expect_err("cap below base");
    assert_eq!(err.key.as_deref(), Some("retry-cap-millis"));
    assert_eq!(err.source_name, "command line");
}

#[test]
fn store_postgres_needs_a_url_that_parses_and_never_shows_its_password() {
    let f = file_with("store = \"postgres\"\n");
    let err = load::<CoordinatorOptions>(Some(f.path()), Default::default()).expect_err("no URL");
    assert_eq!(err.key.as_deref(), Some("postgres-url"));
    // That the URL parses is checked by start-up, which knows the store.
    let load_config = crate::process::load_config;
    let f =
        file_with("store = \"postgres\"\npostgres-url = \"postgres://u:pw-in-file@h:nan/db\"\n");
    let err = load_config(Some(f.path()), Default::default()).expect_err("bad URL");
    assert_eq!(err.key.as_deref(), Some("postgres-url"));
    assert_eq!(err.source_name, f.path().display().to_string());
    assert!(!err.to_string().contains("pw-in-file"), "{err}");
    let f =
        file_with("store = \"postgres\"\npostgres-url = \"postgres://u:pw-in-file@h:5433/db\"\n");
    let config = load_config(Some(f.path()), Default::default()).expect("loads");
    assert_eq!(config.store, StoreKind::Postgres);
    assert!(!format!("{config:?}").contains("pw-in-file"));
    assert!(format!("{config:?}").contains("(set, not shown)"));
    let f = file_with("store = \"sqlite\"\n");
    let config = load_config(Some(f.path()), Default::default()).expect("loads");
    assert_eq!(config.store, StoreKind::Sqlite);
}

#[test]
fn submission_defaults_must_be_values_a_submission_could_ask_for() {
    use taskyard_protocol::limits::{MAX_ATTEMPTS, MAX_TIMEOUT_MS};
    let at_max =
        format!("task-timeout-millis = {MAX_TIMEOUT_MS}\ndefault-max-attempts = {MAX_ATTEMPTS}\n");
    let f = file_with(&at_max);
    load::<CoordinatorOptions>(Some(f.path()), Default::default()).expect("the maximum");
    for (key, text) in [
        (
            "task-timeout-millis",
            format!("task-timeout-millis = {}", MAX_TIMEOUT_MS + 1),
        ),
        (
            "default-max-attempts",
            format!("default-max-attempts = {}", MAX_ATTEMPTS + 1),
        ),
    ] {
        let f = file_with(&text);
        let err =
            load::<CoordinatorOptions>(Some(f.path()), Default::default()).expect_err("one beyond");
        assert_eq!(err.key.as_deref(), Some(key));
        assert!(err.reason.contains("is outside 1..="), "{err}");
    }
}

#[test]
fn a_result_or_payload_bigger_than_a_frame_is_an_error_naming_both_keys() {
    let f = file_with("max-result-bytes = 2097152\nmax-frame-bytes = 1048576\n");
    let err = load::<CoordinatorOptions>(Some(f.path()), Default::default())
        .expect_err("a result that no frame carries");
    assert_eq!(err.key.as_deref(), Some("max-result-bytes"));
    assert_eq!(err.source_name, f.path().display().to_string());
    assert!(err.reason.contains("max-frame-bytes (1048576)"), "{err}");
    let flags = CoordinatorOptions {
        max_frame_bytes: Some(64 * 1024),
        max_result_bytes: Some(32 * 1024),
        ..Default::default()
    };
    let err = load::<CoordinatorOptions>(None, flags).expect_err("default payload too big");
    assert_eq!(err.key.as_deref(), Some("max-payload-bytes"));
    assert!(err.reason.contains("max-frame-bytes (65536)"), "{err}");
    let flags = WorkerOptions {
        max_frame_bytes: Some(64 * 1024),
        ..Default::default()
    };
    let err = load::<WorkerOptions>(None, flags).expect_err("default output too big");
    assert_eq!(err.key.as_deref(), Some("max-output-bytes"));
    assert!(err.reason.contains("max-frame-bytes"), "{err}");
    let defaults = CoordinatorConfig::default();
    assert!(defaults.validate().is_ok(), "the defaults fit");
    assert!(WorkerConfig::default().validate().is_ok());
}

#[test]
fn exec_allow_is_a_list_in_toml_and_a_repeatable_comma_separated_flag() {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        options: WorkerOptions,
    }
    let f = file_with("exec-allow = [\"sh\", \"/bin/echo\"]\n");
    let w = load::<WorkerOptions>(Some(f.path()), Default::default()).expect("valid");
    assert_eq!(w.exec_allow, ["sh", "/bin/echo"]);
    let cli = Cli::try_parse_from(["w", "--exec-allow", "sh,echo", "--exec-allow", "true"])
        .expect("flags parse");
    assert_eq!(
        cli.options.exec_allow.as_deref(),
        Some(&["sh".to_string(), "echo".into(), "true".into()][..])
    );
}

#[test]
fn an_exec_allow_name_not_on_path_is_a_config_error_naming_it() {
    let f = file_with("exec-allow = [\"sh\", \"no-such-program-xyz\"]\n");
    let err = load::<WorkerOptions>(Some(f.path()), Default::default()).expect_err("bad name");
    assert_eq!(err.key.as_deref(), Some("exec-allow"));
    assert_eq!(err.source_name, f.path().display().to_string());
    assert!(err.reason.contains("no-such-program-xyz"), "{err}");
}

#[test]
fn an_exec_supervisor_that_is_not_an_executable_file_is_a_config_error() {
    let f = file_with("exec-supervisor = \"/nonexistent/taskyard-worker\"\n");
    let err = load::<WorkerOptions>(Some(f.path()), Default::default()).expect_err("bad path");
    assert_eq!(err.key.as_deref(), Some("exec-supervisor"));
    assert!(err.reason.contains("/nonexistent/taskyard-worker"), "{err}");
}

#[test]
fn missing_file_is_named() {
    let err = load::<WorkerOptions>(
        Some(Path::new("/nonexistent/worker.toml")),
        Default::default(),
    )
    .expect_err("missing");
    assert!(
        err.to_string()
            .starts_with("/nonexistent/worker.toml: cannot read"),
        "{err}"
    );
}

#[test]
fn declared_limits_load_and_a_bad_one_names_its_pattern_and_field() {
    let f = file_with(
        "[[limit]]\npattern = \"stripe:*\"\nmax-running = 5\n\n\
         [[limit]]\npattern = \"stripe:acct_42\"\nmax-running = 1\n",
    );
    let c = load::<CoordinatorOptions>(Some(f.path()), Default::default()).expect("loads");
    let limits = c.concurrency_limits().expect("valid");
    assert_eq!(limits.len(), 2);
    for (text, key) in [
        ("pattern = \"a*b\"\nmax-running = 1", "limit.a*b.pattern"),
        ("pattern = \"a**\"\nmax-running = 1", "limit.a**.pattern"),
        ("pattern = \"k\"\nmax-running = 0", "limit.k.max-running"),
    ] {
        let f = file_with(&format!("[[limit]]\n{text}\n"));
        let err =
            load::<CoordinatorOptions>(Some(f.path()), Default::default()).expect_err("refused");
        assert_eq!(err.key.as_deref(), Some(key), "{err}");
        assert_eq!(err.source_name, f.path().display().to_string());
    }
    let twice = file_with(
        "[[limit]]\npattern = \"k\"\nmax-running = 1\n[[limit]]\npattern = \"k\"\nmax-running = 2\n",
    );
    let err =
        load::<CoordinatorOptions>(Some(twice.path()), Default::default()).expect_err("twice");
    assert_eq!(err.key.as_deref(), Some("limit.k.pattern"), "{err}");
    let unknown = file_with("[[limit]]\npattern = \"k\"\nrate = \"100/s\"\n");
    let err = load::<CoordinatorOptions>(Some(unknown.path()), Default::default())
        .expect_err("rate is not a key yet");
    assert!(err.to_string().contains("rate"), "{err}");
}

#[test]
fn a_limit_or_schedule_flag_is_one_inline_table() {
    let limit: crate::config::limit::DeclaredLimit = "{pattern = \"k:*\", max-running = 2}"
        .parse()
        .expect("a limit");
    assert_eq!((limit.pattern.as_str(), limit.max_running), ("k:*", 2));
    let err = "{pattern = \"k\"}"
        .parse::<crate::config::limit::DeclaredLimit>()
        .expect_err("no max-running");
    assert!(err.starts_with("not a limit table: "), "{err}");
    let schedule: crate::config::schedule::DeclaredSchedule =
        "{name = \"tick\", every = \"1s\", task-type = \"echo\"}"
            .parse()
            .expect("a schedule");
    assert_eq!(schedule.name, "tick");
    assert!("nonsense"
        .parse::<crate::config::schedule::DeclaredSchedule>()
        .is_err());
}
