//! What the real binaries say about a bad config file before they open
//! anything: one line naming the file (with line and column for a syntax
//! error or an unknown key), the key, and what is wrong; exit code 2.

use std::process::Command;
use std::time::Duration;

/// Runs `binary --config FILE` for a file holding `text`; returns its exit
/// code and its stderr. A binary still running after 20 s is a failure
/// (the worker used to retry an unresolvable coordinator for ever).
fn run_with_config(binary: &str, text: &str) -> (Option<i32>, String, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, text).expect("write config");
    let mut child = Command::new(binary)
        .arg("--config")
        .arg(&path)
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("binary starts");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("{binary} with {text:?} did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    (out.status.code(), stderr, path.display().to_string())
}

const WORKER: &str = env!("CARGO_BIN_EXE_taskyard-worker");
const COORDINATOR: &str = env!("CARGO_BIN_EXE_taskyard-coordinator");

#[test]
fn a_worker_whose_coordinator_name_does_not_resolve_exits_2_naming_the_key_and_file() {
    let (code, stderr, file) =
        run_with_config(WORKER, "coordinator = \"no-such-host.invalid:7401\"\n");
    assert_eq!(code, Some(2), "{stderr}");
    let expected =
        format!("{file}: key `coordinator`: \"no-such-host.invalid:7401\" does not resolve");
    assert!(stderr.contains(&expected), "{stderr}");
    let (code, stderr, file) = run_with_config(WORKER, "coordinator = \"not-an-address\"\n");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("{file}:1:15: key `coordinator`")),
        "{stderr}"
    );
}

#[test]
fn a_syntax_error_is_reported_at_its_line_and_column() {
    let text = "sweep-interval-millis = 500\nmax-active-jobs = = 3\n";
    let (code, stderr, file) = run_with_config(COORDINATOR, text);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains(&format!("{file}:2:")), "{stderr}");
    assert!(stderr.contains("key `max-active-jobs`"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
}

#[test]
fn a_misspelt_key_gets_the_closest_key_suggested_not_a_list_of_all() {
    let (code, stderr, file) = run_with_config(COORDINATOR, "max-actve-jobs = 3\n");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{file}:1:1: key `max-actve-jobs`: unknown key; did you mean `max-active-jobs`?"
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("client-listen"), "{stderr}");
}

#[test]
fn a_declared_schedule_with_an_hour_out_of_range_names_the_field_and_value() {
    let text = "[[schedule]]\nname = \"nightly\"\ntask-type = \"report\"\ncron = \"0 25 * * *\"\n";
    let (code, stderr, _) = run_with_config(COORDINATOR, text);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("key `schedule.nightly.cron`: hour: 25 is outside 0–23"),
        "{stderr}"
    );
}

#[test]
fn a_duration_without_a_unit_or_in_both_spellings_names_the_key_and_value() {
    let (code, stderr, file) = run_with_config(COORDINATOR, "heartbeat-timeout = \"6 sec\"\n");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{file}:1:21: key `heartbeat-timeout`: \"6 sec\" is not a duration \
             (use 250ms, 30s, 5m, 1h, 7d)"
        )),
        "{stderr}"
    );
    let (code, stderr, file) = run_with_config(WORKER, "drain-timeout = 30\n");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{file}:1:17: key `drain-timeout`: 30 has no unit: write \"30ms\""
        )),
        "{stderr}"
    );
    let text = "heartbeat-timeout = \"6s\"\nheartbeat-timeout-millis = 6000\n";
    let (code, stderr, file) = run_with_config(COORDINATOR, text);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{file}:2:28: key `heartbeat-timeout-millis`: set heartbeat-timeout or \
             heartbeat-timeout-millis, not both"
        )),
        "{stderr}"
    );
}
