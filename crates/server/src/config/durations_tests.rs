//! Both spellings of a duration key, in files and flags, and which one an
//! error names.

use crate::config::durations::*;
use crate::config::ConfigOptions;
use crate::config::{load, ConfigError, CoordinatorOptions, Position};
use clap::Parser;
use std::io::Write;
use taskyard_client::worker::WorkerOptions;

fn file_with(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().expect("temp file");
    f.write_all(text.as_bytes()).expect("write");
    f
}

#[derive(Parser)]
struct Coordinator {
    #[command(flatten)]
    options: CoordinatorOptions,
}

#[derive(Parser)]
struct Worker {
    #[command(flatten)]
    options: WorkerOptions,
}

fn flags(args: &[&str]) -> CoordinatorOptions {
    Coordinator::try_parse_from(std::iter::once("c").chain(args.iter().copied()))
        .expect("flags parse")
        .options
}

fn coordinator(text: &str, args: &[&str]) -> Result<crate::config::CoordinatorConfig, ConfigError> {
    let f = file_with(text);
    load::<CoordinatorOptions>(Some(f.path()), flags(args)).map_err(|mut e| {
        e.source_name = e
            .source_name
            .replace(&f.path().display().to_string(), "FILE");
        e
    })
}

#[test]
fn a_duration_is_a_whole_number_and_a_unit() {
    for (text, millis) in [
        ("250ms", 250),
        ("30s", 30_000),
        ("5m", 300_000),
        ("1h", 3_600_000),
        ("7d", 604_800_000),
        (" 6s ", 6000),
        ("0ms", 0),
    ] {
        assert_eq!(parse(text), Ok(millis), "{text}");
    }
    for bad in ["6 sec", "6S", "1.5s", "-5s", "1m30s", "s", ""] {
        assert_eq!(
            parse(bad),
            Err(format!(
                "{bad:?} is not a duration (use 250ms, 30s, 5m, 1h, 7d)"
            ))
        );
    }
    assert_eq!(
        parse("6000"),
        Err("\"6000\" has no unit: write 6000ms for milliseconds (units: ms, s, m, h, d)".into())
    );
    assert!(parse("99999999999999999999d")
        .expect_err("")
        .contains("too long"));
}

#[test]
fn every_millis_key_has_a_duration_spelling_that_is_no_other_key() {
    fn check<O: ConfigOptions>() {
        let declared = O::declared_keys();
        let spelled: Vec<String> = O::duration_keys().into_iter().map(|(_, m)| m).collect();
        let millis: Vec<&String> = declared.iter().filter(|k| k.ends_with("-millis")).collect();
        assert_eq!(spelled.iter().collect::<Vec<_>>(), millis);
        for (key, _) in O::duration_keys() {
            assert!(!declared.contains(&key), "{key} is also a declared key");
            assert!(O::keys().contains(&key), "{key} is suggested for typos");
        }
    }
    check::<CoordinatorOptions>();
    check::<WorkerOptions>();
    let keys = CoordinatorOptions::duration_keys();
    assert!(keys.contains(&(
        "heartbeat-timeout".into(),
        "heartbeat-timeout-millis".into()
    )));
    assert!(keys.contains(&(
        "retain-finished-in-memory-for".into(),
        "retain-finished-in-memory-millis".into()
    )));
}

#[test]
fn a_file_takes_either_spelling() {
    let c =
        coordinator("heartbeat-timeout = \"6s\"\nretry-base = \"250ms\"\n", &[]).expect("valid");
    assert_eq!(
        (c.heartbeat_timeout_millis, c.retry_base_millis),
        (6000, 250)
    );
    let c = coordinator("heartbeat-timeout-millis = 7000\n", &[]).expect("valid");
    assert_eq!(c.heartbeat_timeout_millis, 7000);
    let c = coordinator(
        "retain-finished-in-memory-for = \"2m\"\nretain-finished-in-memory = 5\n",
        &[],
    )
    .expect("valid");
    assert_eq!(
        (
            c.retain_finished_in_memory_millis,
            c.retain_finished_in_memory
        ),
        (120_000, 5)
    );
    let f = file_with("drain-timeout = \"1m\"\ncoordinator-timeout = \"7d\"\n");
    let w = load::<WorkerOptions>(Some(f.path()), Default::default()).expect("valid");
    assert_eq!(
        (w.drain_timeout_millis, w.coordinator_timeout_millis),
        (60_000, 604_800_000)
    );
}

#[test]
fn flags_take_either_spelling_and_help_shows_the_duration() {
    let c = load::<CoordinatorOptions>(None, flags(&["--heartbeat-timeout", "6s"])).expect("valid");
    assert_eq!(c.heartbeat_timeout_millis, 6000);
    let c = load::<CoordinatorOptions>(None, flags(&["--heartbeat-timeout-millis", "6500"]))
        .expect("valid");
    assert_eq!(c.heartbeat_timeout_millis, 6500);
    let parsed =
        Worker::try_parse_from(["w", "--reconnect-max", "1s", "--drain-timeout-millis", "5"]);
    let w = load::<WorkerOptions>(None, parsed.expect("parses").options).expect("valid");
    assert_eq!((w.reconnect_max_millis, w.drain_timeout_millis), (1000, 5));
    let help = Coordinator::try_parse_from(["c", "--help"])
        .err()
        .expect("help")
        .to_string();
    assert!(help.contains("--heartbeat-timeout <DURATION>"), "{help}");
    assert!(
        help.contains("A worker silent for longer than this"),
        "{help}"
    );
    assert!(!help.contains("--heartbeat-timeout-millis"), "{help}");
    let before = help.find("--sweep-interval <DURATION>").expect("shown");
    let after = help.find("--task-timeout <DURATION>").expect("shown");
    let at = help.find("--heartbeat-timeout <DURATION>").expect("shown");
    assert!(before < at && at < after, "in declaration order: {help}");
}

#[test]
fn a_bad_duration_flag_is_refused_naming_the_flag_and_value() {
    let err = Coordinator::try_parse_from(["c", "--heartbeat-timeout", "6 sec"])
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("--heartbeat-timeout <DURATION>"), "{err}");
    assert!(
        err.contains("\"6 sec\" is not a duration (use 250ms, 30s, 5m, 1h, 7d)"),
        "{err}"
    );
    let err = Coordinator::try_parse_from(["c", "--heartbeat-timeout", "6000"])
        .err()
        .expect("a bare number is refused")
        .to_string();
    assert!(err.contains("write 6000ms"), "{err}");
}

#[test]
fn both_spellings_in_one_file_is_an_error_naming_both_at_the_second() {
    let err = coordinator(
        "heartbeat-timeout-millis = 6000\nheartbeat-timeout = \"6s\"\n",
        &[],
    )
    .expect_err("both");
    assert_eq!(
        err.to_string(),
        "FILE:2:21: key `heartbeat-timeout`: set heartbeat-timeout or \
         heartbeat-timeout-millis, not both"
    );
    let err = coordinator(
        "sweep-interval = \"1s\"\n\nsweep-interval-millis = 1000\n",
        &[],
    )
    .expect_err("both");
    assert_eq!(err.key.as_deref(), Some("sweep-interval-millis"));
    assert_eq!(
        err.position,
        Some(Position {
            line: 3,
            column: 25
        })
    );
    assert_eq!(
        err.reason,
        "set sweep-interval or sweep-interval-millis, not both"
    );
}

#[test]
fn both_spellings_on_one_command_line_is_an_error_naming_both() {
    let err = Coordinator::try_parse_from([
        "c",
        "--heartbeat-timeout-millis",
        "6000",
        "--heartbeat-timeout",
        "6s",
    ])
    .err()
    .expect("both")
    .to_string();
    assert!(
        err.contains("--heartbeat-timeout <DURATION>")
            && err.contains("--heartbeat-timeout-millis"),
        "{err}"
    );
    // Options built in code are checked when loaded.
    let mut options = flags(&["--heartbeat-timeout", "6s"]);
    options.heartbeat_timeout_millis = Some(6000);
    let err = load::<CoordinatorOptions>(None, options).expect_err("both");
    assert_eq!(
        err.to_string(),
        "command line: key `heartbeat-timeout`: set heartbeat-timeout or \
         heartbeat-timeout-millis, not both"
    );
}

#[test]
fn a_bad_duration_in_a_file_names_the_file_key_and_value() {
    let err = coordinator("# c\nheartbeat-timeout = \"6 sec\"\n", &[]).expect_err("bad");
    assert_eq!(
        err.to_string(),
        "FILE:2:21: key `heartbeat-timeout`: \"6 sec\" is not a duration (use 250ms, 30s, 5m, 1h, 7d)"
    );
    let err = coordinator("heartbeat-timeout = 6000\n", &[]).expect_err("a number");
    assert_eq!(err.key.as_deref(), Some("heartbeat-timeout"));
    assert!(
        err.reason.starts_with("6000 has no unit: write \"6000ms\""),
        "{err}"
    );
    let err = coordinator("heartbeat-timeout = true\n", &[]).expect_err("a boolean");
    assert!(err.reason.contains("a duration in quotes"), "{err}");
    let err = coordinator("heartbeat-timout = \"6s\"\n", &[]).expect_err("misspelt");
    assert_eq!(err.reason, "unknown key; did you mean `heartbeat-timeout`?");
}

#[test]
fn a_flag_in_either_spelling_wins_over_the_file_in_either() {
    let cases = [
        (
            "heartbeat-timeout-millis = 9000\n",
            ["--heartbeat-timeout", "2s"],
        ),
        (
            "heartbeat-timeout = \"9s\"\n",
            ["--heartbeat-timeout-millis", "2000"],
        ),
        (
            "heartbeat-timeout = \"9s\"\n",
            ["--heartbeat-timeout", "2s"],
        ),
    ];
    for (file, args) in cases {
        let c = coordinator(file, &args).expect("valid");
        assert_eq!(c.heartbeat_timeout_millis, 2000, "{file} {args:?}");
    }
    let c = coordinator("heartbeat-timeout = \"9s\"\n", &["--retry-base", "1s"]).expect("valid");
    assert_eq!(
        (c.heartbeat_timeout_millis, c.retry_base_millis),
        (9000, 1000)
    );
}

#[test]
fn a_value_out_of_range_is_named_as_the_winning_source_wrote_it() {
    let err = coordinator("heartbeat-timeout = \"5ms\"\n", &[]).expect_err("too short");
    assert_eq!(
        err.to_string(),
        "FILE:1:21: key `heartbeat-timeout`: 5ms is below the minimum of 10ms"
    );
    let err = coordinator("heartbeat-timeout-millis = 5\n", &[]).expect_err("too short");
    assert_eq!(err.key.as_deref(), Some("heartbeat-timeout-millis"));
    let err = coordinator(
        "heartbeat-timeout-millis = 6000\n",
        &["--heartbeat-timeout", "5ms"],
    )
    .expect_err("too short");
    assert_eq!(
        (err.source_name.as_str(), err.key.as_deref()),
        ("command line", Some("heartbeat-timeout"))
    );
    let err = coordinator("heartbeat-timeout = \"5ms\"\n", &["--retry-base", "1s"])
        .expect_err("too short");
    assert_eq!(
        (err.source_name.as_str(), err.key.as_deref()),
        ("FILE", Some("heartbeat-timeout"))
    );
    let err = coordinator("leader-lease = \"2h\"\n", &[]).expect_err("too long");
    assert_eq!(err.reason, "2h is outside 300ms..=1h");
    let f = file_with("heartbeat-interval = \"2s\"\ncoordinator-timeout = \"1s\"\n");
    let err = load::<WorkerOptions>(Some(f.path()), Default::default()).expect_err("too short");
    assert_eq!(err.key.as_deref(), Some("coordinator-timeout"));
    assert_eq!(
        err.position,
        Some(Position {
            line: 2,
            column: 23
        })
    );
    assert!(
        err.reason
            .starts_with("1s must exceed heartbeat-interval (2s)"),
        "{err}"
    );
}
