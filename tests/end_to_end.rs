//! A real coordinator and real workers over TCP, driven through the client
//! library; the database checked with SQLite directly.

mod common;

use common::*;
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use taskyard::client::{Client, WaitOutcome};
use taskyard::protocol::payloads::encode_json;
use taskyard::protocol::*;

fn echo(message: &str) -> SubmitRequest {
    SubmitRequest::new("echo", encode_json(&json!({ "message": message })))
}

fn accepted(answer: SubmitAnswer) -> JobId {
    match answer {
        SubmitAnswer::Accepted { job_id, .. } => job_id,
        SubmitAnswer::Rejected(r) => panic!("rejected: {r}"),
    }
}

#[test]
fn two_hundred_echo_jobs_from_four_threads_all_succeed_and_are_stored() {
    let mut cluster = Cluster::start(2, 4);
    let addr = cluster.client_addr();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                let mut client = Client::connect(&addr).expect("connect");
                let submitted: Vec<(JobId, String)> = (0..50)
                    .map(|i| {
                        let message = format!("thread {t} job {i}");
                        (
                            accepted(client.submit(echo(&message)).expect("submit")),
                            message,
                        )
                    })
                    .collect();
                for (job_id, message) in &submitted {
                    let outcome = client
                        .wait(*job_id, Duration::from_secs(30), Duration::from_millis(5))
                        .expect("wait");
                    let WaitOutcome::Finished(view) = outcome else {
                        panic!("job {job_id} did not finish");
                    };
                    assert_eq!(view.state, JobState::Succeeded, "{view:?}");
                    assert_eq!(view.result.as_deref(), Some(message.as_bytes()));
                }
                submitted.len()
            })
        })
        .collect();
    let total: usize = threads.into_iter().map(|t| t.join().expect("thread")).sum();
    assert_eq!(total, 200);

    let listed = cluster.client().list(None, 500).expect("list");
    assert_eq!(listed.len(), 200);
    assert!(listed.iter().all(|v| v.state == JobState::Succeeded));

    let db = cluster.db_path();
    cluster.stop();
    assert_eq!(db::job_count_in(&db, "SUCCEEDED"), 200);
}

#[test]
fn jobs_survive_a_restart_and_run_when_a_worker_arrives() {
    let mut cluster = Cluster::start(0, 1);
    let mut client = cluster.client();
    let answer = client.submit(echo("later")).expect("submit");
    assert!(matches!(
        answer,
        SubmitAnswer::Accepted {
            no_worker: true,
            ..
        }
    ));
    let job_id = accepted(answer);
    cluster.stop();

    let restarted = start_coordinator(coordinator_config(cluster.dir.path()));
    cluster.coordinator = Some(restarted);
    let mut client = cluster.client();
    let view = client
        .status(job_id)
        .expect("status")
        .expect("job still there");
    assert_eq!(view.state, JobState::Queued);
    assert!(view.no_worker);
    cluster.add_worker("late-worker", 1);
    let outcome = client
        .wait(job_id, Duration::from_secs(10), Duration::from_millis(10))
        .expect("wait");
    assert!(
        matches!(outcome, WaitOutcome::Finished(v) if v.result.as_deref() == Some(&b"later"[..]))
    );
}

#[test]
fn invalid_payload_is_rejected_naming_the_field_and_stores_nothing() {
    let mut cluster = Cluster::start(0, 1);
    let mut client = cluster.client();
    let mut bad = echo("x");
    bad.payload = encode_json(&json!({ "message": 42 }));
    match client.submit(bad).expect("answer") {
        SubmitAnswer::Rejected(r) => assert!(r.reason.starts_with("payload.message"), "{r}"),
        other => panic!("accepted: {other:?}"),
    }
    assert!(client.list(None, 10).expect("list").is_empty());
    let db = cluster.db_path();
    cluster.stop();
    assert_eq!(db::job_count(&db), 0);
}

/// Reads frames until the coordinator closes the connection; returns the
/// raw bytes received.
fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut received = Vec::new();
    let _ = stream.read_to_end(&mut received);
    received
}

fn decode_error_frame(bytes: &[u8]) -> String {
    use bytes::BytesMut;
    use tokio_util::codec::Decoder;
    let mut codec = FrameCodec::<CoordinatorToClient, ClientMessage>::new(DEFAULT_MAX_FRAME_BYTES);
    let mut buf = BytesMut::from(bytes);
    while let Ok(Some(frame)) = codec.decode(&mut buf) {
        if let CoordinatorToClient::Error { message } = frame {
            return message;
        }
    }
    panic!("no error frame in {} bytes", bytes.len());
}

#[test]
fn garbage_and_oversized_frames_close_only_that_connection() {
    let cluster = Cluster::start(1, 1);
    let mut garbage = TcpStream::connect(cluster.client_addr()).expect("connect");
    garbage
        .write_all(&[0, 0, 0, 4, 0xc1, 0xc1, 0xc1, 0xc1])
        .expect("write");
    let message = decode_error_frame(&read_until_closed(&mut garbage));
    assert!(message.contains("malformed frame"), "{message}");

    let mut oversized = TcpStream::connect(cluster.client_addr()).expect("connect");
    oversized.write_all(&[0x7f, 0, 0, 0]).expect("write");
    let message = decode_error_frame(&read_until_closed(&mut oversized));
    assert!(message.contains("exceeds max-frame-bytes"), "{message}");

    // Every other connection is still served.
    let mut client = cluster.client();
    let job_id = accepted(client.submit(echo("still here")).expect("submit"));
    let outcome = client
        .wait(job_id, Duration::from_secs(10), Duration::from_millis(5))
        .expect("wait");
    assert!(matches!(outcome, WaitOutcome::Finished(v) if v.state == JobState::Succeeded));
}

#[test]
fn wrong_protocol_version_gets_an_error_naming_both_versions() {
    let cluster = Cluster::start(0, 1);
    let mut stream = TcpStream::connect(cluster.client_addr()).expect("connect");
    let hello = ClientMessage::Hello(Hello {
        protocol_version: 99,
        role: Role::Client,
        token: None,
        http: None,
    });
    let body = rmp_serde::to_vec_named(&hello).expect("encode");
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    stream.write_all(&frame).expect("write");
    let message = decode_error_frame(&read_until_closed(&mut stream));
    assert!(message.contains("version 99"), "{message}");
    assert!(
        message.contains(&format!("version {PROTOCOL_VERSION}")),
        "{message}"
    );
}

#[test]
fn attempt_history_is_persisted_across_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = taskyard::config::CoordinatorConfig {
        retry_base_millis: 10,
        ..coordinator_config(dir.path())
    };
    let coordinator = start_coordinator(config.clone());
    let worker = taskyard::worker::WorkerHandle::spawn(
        worker_config(coordinator.worker_addr, "history-worker", 1),
        quiet_log(),
    );
    let mut client = Client::connect(&coordinator.client_addr.to_string()).expect("connect");
    let failing = SubmitRequest {
        task_type: "fail".into(),
        payload: encode_json(&json!({ "message": "always" })),
        max_attempts: Some(2),
        ..echo("unused")
    };
    let job_id = accepted(client.submit(failing).expect("submit"));
    let outcome = client
        .wait(job_id, Duration::from_secs(10), Duration::from_millis(5))
        .expect("wait");
    let WaitOutcome::Finished(before) = outcome else {
        panic!("job did not finish");
    };
    assert_eq!(before.state, JobState::Failed);
    worker.stop();
    coordinator.stop();

    let coordinator = start_coordinator(config);
    let mut client = Client::connect(&coordinator.client_addr.to_string()).expect("connect");
    let after = client.status(job_id).expect("status").expect("job kept");
    assert_eq!(after.history, before.history);
    let outcomes: Vec<String> = after
        .history
        .iter()
        .map(|a| {
            a.outcome
                .as_ref()
                .map(|o| o.to_string())
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(outcomes, vec!["failed: always", "failed: always"]);
    assert!(after
        .history
        .iter()
        .all(|a| a.worker_id.0 == "history-worker"));
    coordinator.stop();
}

#[test]
fn a_list_asking_for_every_job_gets_at_most_max_list_jobs() {
    let cluster = Cluster::start(0, 1);
    let mut client = cluster.client();
    let total = MAX_LIST_JOBS as usize + 20;
    let batch: Vec<SubmitRequest> = (0..total).map(|i| echo(&i.to_string())).collect();
    let answers = client.submit_batch(batch).expect("submitted");
    let newest = accepted(answers.last().cloned().expect("answers"));
    let listed = client.list(None, u32::MAX).expect("listed");
    assert_eq!(listed.len(), MAX_LIST_JOBS as usize);
    assert_eq!(listed[0].job_id, newest, "newest first");
}
