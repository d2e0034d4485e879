//! Custom task types through the public builder, end to end against a real
//! coordinator: the `wordcount` of `examples/custom_worker.rs`, permanent
//! and retryable errors, progress and cancellation.

mod common;

#[path = "../crates/client/examples/custom_worker.rs"]
mod example;

use common::jobs::*;
use common::*;
use serde_json::json;
use std::time::Duration;
use taskyard::protocol::*;
use taskyard::worker::{TaskError, Worker};

const WITHIN: Duration = Duration::from_secs(10);

fn cluster_with(
    build: impl FnOnce(taskyard::worker::WorkerBuilder) -> taskyard::worker::WorkerBuilder,
) -> Cluster {
    let mut cluster = Cluster::start_configured(|c| c.retry_base_millis = 20);
    let config = worker_config(cluster.coordinator().worker_addr, "custom", 2);
    let builder = Worker::builder(config).logger(quiet_log());
    cluster
        .workers
        .push(build(builder).spawn().expect("worker starts"));
    cluster.wait_for_workers(1);
    cluster
}

fn done(client: &mut taskyard::client::Client, job: JobId) -> JobView {
    wait_for_job(client, job, "a terminal state", WITHIN, |v| {
        v.state.is_terminal()
    })
}

#[test]
fn the_example_wordcount_task_runs_end_to_end() {
    let cluster = cluster_with(|b| b.task("wordcount", example::wordcount));
    let mut client = cluster.client();
    let types = &client.workers().expect("workers")[0].task_types;
    assert!(types.contains(&"wordcount".to_string()) && types.contains(&"echo".to_string()));
    let job = submit(
        &mut client,
        request("wordcount", json!({"text": "the quick brown\nfox jumps"})),
    );
    let view = done(&mut client, job);
    assert_eq!(view.state, JobState::Succeeded, "{view:?}");
    assert_eq!(result_text(&view), "5");

    let empty = submit(&mut client, request("wordcount", json!({"text": " "})));
    let view = done(&mut client, empty);
    assert_eq!(
        (view.state, view.attempts),
        (JobState::Failed, 1),
        "permanent"
    );
    assert_eq!(
        view.error.as_deref(),
        Some("payload.text: nothing to count")
    );
}

#[test]
fn a_retryable_error_is_retried_and_a_bad_payload_fails_at_once() {
    let cluster = cluster_with(|b| {
        b.task("flaky", |ctx, _payload| async move {
            let _ = ctx;
            Err::<Vec<u8>, _>(TaskError::retryable("try again"))
        })
        .task("wordcount", example::wordcount)
    });
    let mut client = cluster.client();
    let req = SubmitRequest {
        max_attempts: Some(2),
        ..request("flaky", json!({}))
    };
    let job = submit(&mut client, req);
    let view = done(&mut client, job);
    assert_eq!((view.state, view.attempts), (JobState::Failed, 2));
    assert_eq!(view.error.as_deref(), Some("try again"));

    let bad = submit(&mut client, request("wordcount", json!({"words": 3})));
    let view = done(&mut client, bad);
    assert_eq!((view.state, view.attempts), (JobState::Failed, 1));
    assert!(view.error.unwrap_or_default().starts_with("payload:"));
}

#[test]
fn progress_reported_by_a_custom_task_reaches_status_and_cancel_reaches_the_task() {
    let (cancelled_tx, cancelled_rx) = std::sync::mpsc::channel();
    let cluster = cluster_with(move |b| {
        b.task("long", move |ctx, _payload| {
            let cancelled_tx = cancelled_tx.clone();
            async move {
                ctx.progress(10, "warming up");
                ctx.progress(60, "halfway");
                ctx.cancel.cancelled().await;
                let _ = cancelled_tx.send(ctx.job_id);
                Err(TaskError::retryable("cancelled"))
            }
        })
    });
    let mut client = cluster.client();
    let job = submit(&mut client, request("long", json!({})));
    let view = wait_for_job(&mut client, job, "progress 60%", WITHIN, |v| {
        v.progress.as_ref().map(|p| p.percent) == Some(60)
    });
    assert_eq!(view.progress.expect("progress").message, "halfway");
    client.cancel(job).expect("cancel");
    assert_eq!(
        cancelled_rx.recv_timeout(WITHIN),
        Ok(job),
        "the task saw the cancel"
    );
}

#[test]
fn an_invalid_task_name_is_an_error_from_spawn() {
    let config = taskyard::worker::WorkerConfig::default();
    let err = Worker::builder(config)
        .task("bad name", example::wordcount)
        .spawn()
        .err()
        .expect("refused");
    assert!(err.to_string().contains("\"bad name\""), "{err}");
    let config = taskyard::worker::WorkerConfig {
        exec_allow: vec!["no-such-program-xyz".into()],
        ..Default::default()
    };
    let err = Worker::builder(config).spawn().err().expect("refused");
    assert!(err.to_string().contains("exec-allow"), "{err}");
}

#[test]
fn exec_in_a_program_that_cannot_supervise_it_is_an_error_from_spawn() {
    let config = taskyard::worker::WorkerConfig {
        exec_allow: vec!["sh".into()],
        ..Default::default()
    };
    let err = Worker::builder(config).spawn().err().expect("refused");
    let err = err.to_string();
    assert!(err.contains("exec-supervisor"), "{err}");
    assert!(err.contains("run_if_requested"), "{err}");
}
