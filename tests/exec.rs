//! The `exec` task end to end: a real coordinator and a worker whose
//! `exec-allow` lists `sh` and `echo`. Process groups are checked from
//! outside, through /proc.

mod common;

use common::jobs::*;
use common::processes::{live_group_members, processes_mentioning, read_pgid};
use common::*;
use serde_json::json;
use std::time::Duration;
use taskyard::protocol::*;
use taskyard::worker::Worker;
use taskyard::worker::WorkerConfig;

const WITHIN: Duration = Duration::from_secs(10);

fn exec_cluster(configure: impl FnOnce(&mut WorkerConfig)) -> Cluster {
    let mut cluster = Cluster::start_configured(|c| c.retry_base_millis = 50);
    let mut config = worker_config(cluster.coordinator().worker_addr, "exec-worker", 2);
    config.exec_allow = vec!["sh".into(), "echo".into()];
    config.exec_supervisor = exec_supervisor();
    configure(&mut config);
    let worker = Worker::builder(config)
        .logger(quiet_log())
        .spawn()
        .expect("worker starts");
    cluster.workers.push(worker);
    cluster.wait_for_workers(1);
    cluster
}

fn exec_job(payload: serde_json::Value) -> SubmitRequest {
    SubmitRequest {
        max_attempts: Some(1),
        ..request("exec", payload)
    }
}

fn sh(script: &str) -> SubmitRequest {
    exec_job(json!({"program": "sh", "args": ["-c", script]}))
}

fn finished(client: &mut taskyard::client::Client, job: JobId) -> JobView {
    wait_for_job(client, job, "a terminal state", WITHIN, |v| {
        v.state.is_terminal()
    })
}

#[test]
fn a_program_that_exits_zero_succeeds_with_its_stdout() {
    let cluster = exec_cluster(|_| {});
    let mut client = cluster.client();
    let job = submit(
        &mut client,
        exec_job(json!({"program": "echo", "args": ["hi", "there"]})),
    );
    let view = finished(&mut client, job);
    assert_eq!(view.state, JobState::Succeeded, "{view:?}");
    assert_eq!(result_text(&view), "hi there\n");
    let env = submit(
        &mut client,
        exec_job(
            json!({"program": "sh", "args": ["-c", "cat; echo \"$GREETING\""],
                        "env": {"GREETING": "hello"}, "stdin": "from stdin "}),
        ),
    );
    assert_eq!(
        result_text(&finished(&mut client, env)),
        "from stdin hello\n"
    );
}

#[test]
fn programs_get_the_systems_huge_page_setting_back() {
    let reported = |status: &str| {
        status
            .lines()
            .find(|l| l.starts_with("THP_enabled:"))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
    };
    let own = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    if reported(&own).is_none() {
        return; // a kernel too old to report it
    }
    // As the worker binary does first thing in `main`.
    assert!(taskyard::memory::disable_transparent_huge_pages());
    let own = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    assert_eq!(reported(&own).as_deref(), Some("THP_enabled: 0"));
    let cluster = exec_cluster(|_| {});
    let mut client = cluster.client();
    let job = submit(&mut client, sh("cat /proc/self/status"));
    let view = finished(&mut client, job);
    assert_eq!(view.state, JobState::Succeeded, "{view:?}");
    assert_eq!(
        reported(&result_text(&view)).as_deref(),
        Some("THP_enabled: 1")
    );
}

#[test]
fn a_non_zero_exit_fails_with_the_code_and_the_tail_of_stderr() {
    let cluster = exec_cluster(|_| {});
    let mut client = cluster.client();
    let job = submit(
        &mut client,
        sh("echo starting; echo 'disk full' >&2; exit 3"),
    );
    let view = finished(&mut client, job);
    assert_eq!(view.state, JobState::Failed);
    let error = view.error.unwrap_or_default();
    assert!(error.contains("exited with code 3"), "{error}");
    assert!(error.ends_with("stderr: disk full"), "{error}");
}

#[test]
fn output_over_max_output_bytes_is_truncated_and_marked() {
    let cluster = exec_cluster(|c| c.max_output_bytes = 10);
    let mut client = cluster.client();
    let job = submit(&mut client, sh("printf 0123456789abcdef"));
    let view = finished(&mut client, job);
    assert_eq!(view.state, JobState::Succeeded, "{view:?}");
    assert_eq!(result_text(&view), "0123456789\n[truncated: 6 more bytes]");
}

#[test]
fn a_program_not_on_the_allow_list_fails_permanently_naming_it() {
    let cluster = exec_cluster(|_| {});
    let mut client = cluster.client();
    let job = submit(
        &mut client,
        SubmitRequest {
            max_attempts: Some(3),
            ..exec_job(json!({"program": "true"}))
        },
    );
    let view = finished(&mut client, job);
    assert_eq!((view.state, view.attempts), (JobState::Failed, 1));
    let error = view.error.unwrap_or_default();
    assert!(error.contains("program \"true\" is not allowed"), "{error}");
    assert!(error.contains("exec-allow is ["), "{error}");
}

/// A shell that records its pid (its process group id, as the group's
/// leader), starts a background sleep and waits on a foreground one.
fn spawning_script(pgid_file: &std::path::Path) -> String {
    format!("echo $$ > {}; sleep 60 & sleep 60", pgid_file.display())
}

fn group_of_three_running(pgid: i32) {
    wait_until("shell and both sleeps running", WITHIN, || {
        live_group_members(pgid).len() == 3
    });
}

fn group_gone(pgid: i32) {
    wait_until("no live process left in the group", WITHIN, || {
        live_group_members(pgid).is_empty()
    });
}

#[test]
fn a_deadline_kills_the_whole_process_group() {
    let cluster = exec_cluster(|_| {});
    let mut client = cluster.client();
    let pgid_file = cluster.dir.path().join("deadline.pgid");
    let req = SubmitRequest {
        timeout_ms: Some(1500),
        ..sh(&spawning_script(&pgid_file))
    };
    let job = submit(&mut client, req);
    let pgid = read_pgid(&pgid_file);
    group_of_three_running(pgid);
    let view = finished(&mut client, job);
    assert_eq!(view.state, JobState::Failed);
    assert_eq!(
        view.history[0].outcome,
        Some(AttemptOutcome::TimedOut { timeout_ms: 1500 })
    );
    group_gone(pgid);
}

#[test]
fn a_cancel_kills_the_whole_process_group() {
    let cluster = exec_cluster(|_| {});
    let mut client = cluster.client();
    let pgid_file = cluster.dir.path().join("cancel.pgid");
    let job = submit(&mut client, sh(&spawning_script(&pgid_file)));
    let pgid = read_pgid(&pgid_file);
    group_of_three_running(pgid);
    client.cancel(job).expect("cancel");
    group_gone(pgid);
    assert_eq!(status(&mut client, job).state, JobState::Cancelled);
    let token = pgid_file.display().to_string();
    wait_until("no watchdog left", WITHIN, || {
        processes_mentioning(&token).is_empty()
    });
}

#[test]
fn a_program_that_ignores_sigterm_is_killed_after_the_grace_period() {
    let cluster = exec_cluster(|c| c.exec_kill_grace_millis = 200);
    let mut client = cluster.client();
    let pgid_file = cluster.dir.path().join("stubborn.pgid");
    let script = format!(
        "trap '' TERM; echo $$ > {}; while :; do sleep 0.05; done",
        pgid_file.display()
    );
    let job = submit(&mut client, sh(&script));
    let pgid = read_pgid(&pgid_file);
    client.cancel(job).expect("cancel");
    group_gone(pgid);
}

#[test]
fn the_watchdog_leaves_when_its_attempt_ends() {
    let cluster = exec_cluster(|_| {});
    let mut client = cluster.client();
    let go = cluster.dir.path().join("go");
    let token = go.display().to_string();
    let script = format!("while [ ! -e {token} ]; do sleep 0.05; done; echo done");
    let job = submit(&mut client, sh(&script));
    wait_until("the shell and its watchdog", WITHIN, || {
        processes_mentioning(&token).len() == 2
    });
    std::fs::write(&go, "").expect("let the script finish");
    assert_eq!(result_text(&finished(&mut client, job)), "done\n");
    wait_until("no watchdog left", WITHIN, || {
        processes_mentioning(&token).is_empty()
    });
}

#[test]
fn progress_lines_on_stderr_reach_status() {
    let cluster = exec_cluster(|_| {});
    let mut client = cluster.client();
    let job = submit(
        &mut client,
        sh("echo 'TASKYARD_PROGRESS 40 resizing 2/5' >&2; sleep 60"),
    );
    let view = wait_for_job(&mut client, job, "progress reported", WITHIN, |v| {
        v.progress.is_some()
    });
    let progress = view.progress.expect("progress");
    assert_eq!(
        (progress.percent, progress.message.as_str()),
        (40, "resizing 2/5")
    );
    client.cancel(job).expect("cancel");
}

#[test]
fn a_worker_without_exec_allow_does_not_advertise_exec() {
    let mut cluster = exec_cluster(|_| {});
    cluster.add_worker("plain", 1);
    cluster.wait_for_workers(2);
    let workers = cluster.client().workers().expect("workers");
    let offers = |id: &str| {
        let w = workers.iter().find(|w| w.worker_id.0 == id).expect(id);
        w.task_types.contains(&"exec".to_string())
    };
    assert!(offers("exec-worker"));
    assert!(!offers("plain"));
}
