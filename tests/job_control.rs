//! What users do to jobs after submitting them, end to end: cancel in every
//! state, requeue the dead set, delay, fetch raw results, watch progress,
//! list by type. A raw test worker plays the worker where the test must see
//! the frames.

mod common;

use common::jobs::*;
use common::raw_worker::RawWorker;
use common::*;
use serde_json::json;
use std::process::Command;
use std::time::Duration;
use taskyard::client::CancelOutcome;
use taskyard::protocol::*;

const WITHIN: Duration = Duration::from_secs(5);

fn taskyard(addr: &str, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_taskyard"))
        .args(["--coordinator", addr])
        .args(args)
        .output()
        .expect("run taskyard")
}

fn cancelled(outcome: CancelOutcome) -> JobView {
    match outcome {
        CancelOutcome::Cancelled(view) => *view,
        CancelOutcome::AlreadyFinished(state) => panic!("already {state}"),
    }
}

#[test]
fn cancel_works_in_every_state_is_persisted_and_refused_once_finished() {
    let mut cluster = Cluster::start_configured(|c| c.retry_base_millis = 60_000);
    let mut client = cluster.client();
    let worker_addr = cluster.coordinator().worker_addr;
    let mut raw = RawWorker::register(worker_addr, "raw", 1, &["work"]);

    // RUNNING: the worker is told to stop the attempt it holds.
    let running = submit(&mut client, request("work", json!({})));
    let (job, lease) = raw.expect_assign(WITHIN);
    assert_eq!(job, running);
    let view = cancelled(client.cancel(running).expect("cancel"));
    assert_eq!(view.state, JobState::Cancelled);
    assert_eq!(view.history[0].outcome, Some(AttemptOutcome::Cancelled));
    let cancel = raw.recv(WITHIN);
    assert_eq!(
        cancel,
        Some(CoordinatorToWorker::TaskCancel {
            job_id: running,
            lease,
            epoch: 0
        })
    );
    raw.send_result(running, lease, TaskOutcome::Succeeded(b"late".to_vec()));

    // RETRY_WAIT: a failed attempt waiting a minute for its retry.
    let retrying = submit(&mut client, request("work", json!({})));
    let (_, lease) = raw.expect_assign(WITHIN);
    raw.send_result(retrying, lease, TaskOutcome::failed("transient"));
    wait_for_job(&mut client, retrying, "state RetryWait", WITHIN, |v| {
        v.state == JobState::RetryWait
    });
    assert_eq!(
        cancelled(client.cancel(retrying).expect("cancel")).state,
        JobState::Cancelled
    );

    // QUEUED: no worker runs this type.
    let queued = submit(&mut client, request("nobody-runs-this", json!({})));
    assert_eq!(
        cancelled(client.cancel(queued).expect("cancel")).state,
        JobState::Cancelled
    );

    // Finished: refused, exit 1, nothing changes.
    let output = taskyard(&cluster.client_addr(), &["cancel", &running.to_string()]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("already finished (CANCELLED)"), "{stderr}");
    assert_eq!(
        status(&mut client, running).result,
        None,
        "the late result was dropped"
    );

    drop(raw);
    let db = cluster.db_path();
    cluster.stop();
    let restarted = start_coordinator(coordinator_config(db.parent().expect("dir")));
    let mut client =
        taskyard::client::Client::connect(&restarted.client_addr.to_string()).expect("connect");
    for id in [running, retrying, queued] {
        assert_eq!(
            status(&mut client, id).state,
            JobState::Cancelled,
            "{id} after restart"
        );
    }
    restarted.stop();
}

#[test]
fn retrying_a_failed_job_runs_it_again_with_a_fresh_budget_and_keeps_its_history() {
    let cluster = Cluster::start_configured(|c| c.retry_base_millis = 1);
    let mut client = cluster.client();
    let mut raw = RawWorker::register(cluster.coordinator().worker_addr, "raw", 1, &["work"]);
    let req = SubmitRequest {
        max_attempts: Some(2),
        ..request("work", json!({}))
    };
    let job = submit(&mut client, req);
    for _ in 0..2 {
        let (_, lease) = raw.expect_assign(WITHIN);
        raw.send_result(job, lease, TaskOutcome::failed("flaky"));
    }
    let failed = wait_for_job(&mut client, job, "state Failed", WITHIN, |v| {
        v.state == JobState::Failed
    });
    assert_eq!(failed.attempts, 2);
    let dead = client
        .list_page(Some(JobState::Failed), None, 10)
        .expect("list");
    assert_eq!(dead.jobs.len(), 1);
    assert_eq!(dead.jobs[0].error.as_deref(), Some("flaky"));

    let output = taskyard(
        &cluster.client_addr(),
        &["retry", "--all-failed", "--type", "work"],
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let (_, lease) = raw.expect_assign(WITHIN);
    raw.send_result(job, lease, TaskOutcome::Succeeded(b"third time".to_vec()));
    let done = wait_for_job(&mut client, job, "state Succeeded", WITHIN, |v| {
        v.state == JobState::Succeeded
    });
    assert_eq!(done.attempts, 1, "a fresh budget");
    let numbers: Vec<u32> = done.history.iter().map(|a| a.number).collect();
    assert_eq!(numbers, vec![1, 2, 3], "old attempts kept");

    let output = taskyard(&cluster.client_addr(), &["retry", &job.to_string()]);
    assert_eq!(
        output.status.code(),
        Some(3),
        "a SUCCEEDED job cannot be retried: {output:?}"
    );
}

#[test]
fn a_non_retryable_failure_fails_the_job_at_once() {
    let cluster = Cluster::start_configured(|_| {});
    let mut client = cluster.client();
    let mut raw = RawWorker::register(cluster.coordinator().worker_addr, "raw", 1, &["work"]);
    let job = submit(&mut client, request("work", json!({})));
    let (_, lease) = raw.expect_assign(WITHIN);
    raw.send_result(
        job,
        lease,
        TaskOutcome::failed_permanently("program not allowed"),
    );
    let view = wait_for_job(&mut client, job, "a terminal state", WITHIN, |v| {
        v.state.is_terminal()
    });
    assert_eq!((view.state, view.attempts), (JobState::Failed, 1));
    assert_eq!(view.error.as_deref(), Some("program not allowed"));
}

#[test]
fn a_delayed_job_is_not_assigned_before_its_time() {
    let cluster = Cluster::start_configured(|c| c.sweep_interval_millis = 10);
    let mut client = cluster.client();
    let mut raw = RawWorker::register(cluster.coordinator().worker_addr, "raw", 1, &["work"]);
    let req = SubmitRequest {
        delay_ms: Some(300),
        ..request("work", json!({}))
    };
    let job = submit(&mut client, req);
    let view = status(&mut client, job);
    let not_before = view.not_before.expect("delayed");
    assert_eq!(not_before, view.submitted_at + 300);
    let (assigned, _) = raw.expect_assign(WITHIN);
    assert_eq!(assigned, job);
    let started = status(&mut client, job).history[0].started_at;
    assert!(
        started >= not_before,
        "started {started} before {not_before}"
    );
}

#[test]
fn result_prints_raw_bytes_and_an_oversized_result_fails_the_attempt() {
    let cluster = Cluster::start_configured(|c| c.max_result_bytes = 16);
    let mut client = cluster.client();
    let mut raw = RawWorker::register(cluster.coordinator().worker_addr, "raw", 1, &["work"]);
    let small = submit(&mut client, request("work", json!({})));
    let (_, lease) = raw.expect_assign(WITHIN);
    let bytes = vec![0u8, 159, 146, 150, b'\n', 255];
    raw.send_result(small, lease, TaskOutcome::Succeeded(bytes.clone()));
    wait_for_job(&mut client, small, "state Succeeded", WITHIN, |v| {
        v.state == JobState::Succeeded
    });
    let output = taskyard(&cluster.client_addr(), &["result", &small.to_string()]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(output.stdout, bytes, "exactly the bytes, nothing added");

    let big = submit(&mut client, request("work", json!({})));
    let (_, lease) = raw.expect_assign(WITHIN);
    raw.send_result(big, lease, TaskOutcome::Succeeded(vec![b'x'; 17]));
    let view = wait_for_job(&mut client, big, "a terminal state", WITHIN, |v| {
        v.state.is_terminal()
    });
    assert_eq!(view.state, JobState::Failed);
    let error = view.error.unwrap_or_default();
    assert_eq!(error, "result of 17 bytes exceeds max-result-bytes (16)");
    let output = taskyard(&cluster.client_addr(), &["result", &big.to_string()]);
    assert_eq!(output.status.code(), Some(1));
}

#[test]
fn progress_reported_by_a_worker_reaches_status_and_list() {
    let cluster = Cluster::start_configured(|_| {});
    let mut client = cluster.client();
    let mut raw = RawWorker::register(cluster.coordinator().worker_addr, "raw", 1, &["work"]);
    let job = submit(&mut client, request("work", json!({})));
    let (_, lease) = raw.expect_assign(WITHIN);
    raw.send(WorkerMessage::TaskProgress {
        job_id: job,
        lease,
        percent: 40,
        message: "resizing".into(),
    });
    let view = wait_for_job(&mut client, job, "progress reported", WITHIN, |v| {
        v.progress.is_some()
    });
    let progress = view.progress.expect("progress");
    assert_eq!(
        (progress.percent, progress.message.as_str()),
        (40, "resizing")
    );
    let shown = taskyard(&cluster.client_addr(), &["status", &job.to_string()]);
    assert!(String::from_utf8_lossy(&shown.stdout).contains("40% resizing"));
    let listed = taskyard(&cluster.client_addr(), &["list"]);
    assert!(String::from_utf8_lossy(&listed.stdout).contains("RUNNING 40%"));
    raw.send_result(job, lease, TaskOutcome::Succeeded(Vec::new()));
    let done = wait_for_job(&mut client, job, "state Succeeded", WITHIN, |v| {
        v.state == JobState::Succeeded
    });
    assert_eq!(
        done.progress, None,
        "progress belongs to the running attempt"
    );
}

#[test]
fn list_filters_by_type_and_counts_jobs_per_state() {
    let cluster = Cluster::start_configured(|_| {});
    let mut client = cluster.client();
    for _ in 0..3 {
        submit(&mut client, request("alpha", json!({})));
    }
    let beta = submit(&mut client, request("beta", json!({})));
    client.cancel(beta).expect("cancel");
    let page = client
        .list_page(None, Some("beta".into()), 10)
        .expect("list");
    assert_eq!(page.jobs.len(), 1);
    assert_eq!(
        page.counts,
        vec![StateCount {
            state: JobState::Cancelled,
            count: 1
        }]
    );
    let text =
        String::from_utf8_lossy(&taskyard(&cluster.client_addr(), &["list"]).stdout).to_string();
    assert!(text.trim_end().ends_with("3 QUEUED, 1 CANCELLED"), "{text}");
}
