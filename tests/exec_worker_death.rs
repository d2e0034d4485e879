//! `exec` programs die with their worker: a real `taskyard-worker` process
//! killed with SIGKILL while its shell script runs (with a child of its
//! own) takes every process of the script's group with it within a second,
//! its watchdog leaves too, and the job is retried on another worker as for
//! any lost worker. Processes are checked from outside, through /proc.

mod common;

use common::jobs::*;
use common::processes::{live_group_members, processes_mentioning, read_pgid};
use common::*;
use serde_json::json;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use taskyard::protocol::*;
use taskyard::worker::Worker;

const WITHIN: Duration = Duration::from_secs(10);
/// The promise under test: nothing of the job is left this soon after its
/// worker was killed.
const ORPHANS_GONE_WITHIN: Duration = Duration::from_secs(1);

/// `taskyard-worker` allowing `sh`, as a process of its own (its own
/// binary supervises its programs: no `--exec-supervisor`).
fn worker_process(cluster: &Cluster, id: &str) -> Child {
    let coordinator = cluster.coordinator().worker_addr.to_string();
    Command::new(env!("CARGO_BIN_EXE_taskyard-worker"))
        .args(["--coordinator", &coordinator, "--worker-id", id])
        .args(["--capacity", "1", "--exec-allow", "sh"])
        .args(["--heartbeat-interval-millis", "200", "--log-level", "error"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start taskyard-worker")
}

/// An in-process worker allowing `sh`, to take the retried attempt.
fn add_exec_worker(cluster: &mut Cluster, id: &str) {
    let mut config = worker_config(cluster.coordinator().worker_addr, id, 1);
    config.exec_allow = vec!["sh".into()];
    config.exec_supervisor = exec_supervisor();
    let worker = Worker::builder(config)
        .logger(quiet_log())
        .spawn()
        .expect("worker starts");
    cluster.workers.push(worker);
}

/// First attempt: records the shell's pid (the group's id: the program
/// leads its group), starts a background sleep and waits on a foreground
/// one. Any later attempt succeeds at once with "retried".
fn first_attempt_hangs(dir: &Path) -> SubmitRequest {
    let (started, pgid) = (dir.join("started"), dir.join("pgid"));
    let script = format!(
        "if [ -e {s} ]; then echo retried; exit 0; fi; touch {s}; echo $$ > {p}; \
         sleep 300 & sleep 300",
        s = started.display(),
        p = pgid.display()
    );
    SubmitRequest {
        max_attempts: Some(2),
        ..request("exec", json!({"program": "sh", "args": ["-c", script]}))
    }
}

#[test]
fn a_worker_killed_with_sigkill_takes_its_exec_programs_with_it() {
    let mut cluster = Cluster::start_configured(|c| {
        c.retry_base_millis = 50;
        c.heartbeat_timeout_millis = 1000;
    });
    let mut client = cluster.client();
    let mut doomed = worker_process(&cluster, "doomed");
    cluster.wait_for_workers(1);
    let dir = cluster.dir.path().to_path_buf();
    let job = submit(&mut client, first_attempt_hangs(&dir));
    let pgid = read_pgid(&dir.join("pgid"));
    wait_until("shell and both sleeps running", WITHIN, || {
        live_group_members(pgid).len() == 3
    });
    let token = dir.display().to_string();
    // The shell, and the watchdog outside its group.
    wait_until("the shell and its watchdog", WITHIN, || {
        processes_mentioning(&token).len() == 2
    });

    doomed.kill().expect("SIGKILL the worker");
    let killed = Instant::now();
    doomed.wait().expect("reap the worker");
    let left = || ORPHANS_GONE_WITHIN.saturating_sub(killed.elapsed());
    wait_until("no live process left in the group", left(), || {
        live_group_members(pgid).is_empty()
    });
    wait_until("the watchdog gone too", left(), || {
        processes_mentioning(&token).is_empty()
    });

    add_exec_worker(&mut cluster, "survivor");
    let view = wait_for_job(&mut client, job, "a terminal state", WITHIN, |v| {
        v.state.is_terminal()
    });
    assert_eq!(
        (view.state, view.attempts),
        (JobState::Succeeded, 2),
        "{view:?}"
    );
    assert_eq!(result_text(&view), "retried\n");
    assert!(
        matches!(
            view.history[0].outcome,
            Some(AttemptOutcome::WorkerLost { .. })
        ),
        "{:?}",
        view.history[0]
    );
}
