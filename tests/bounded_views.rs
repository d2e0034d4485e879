//! Jobs larger than one frame (issue 16, bounded views): no job, however
//! large its payload, result or history, makes a command fail. Real
//! coordinator and workers in-process, the real `taskyard` binary.

mod common;

use common::jobs::*;
use common::*;
use serde_json::json;
use std::process::{Command, Output};
use std::time::Duration;
use taskyard::client::{Client, ClientError, WaitOutcome};
use taskyard::protocol::*;
use taskyard::worker::{TaskContext, TaskError, Worker};

const WITHIN: Duration = Duration::from_secs(20);

fn taskyard(coordinator: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_taskyard"))
        .args(["--coordinator", coordinator])
        .args(args)
        .env_remove("TASKYARD_COORDINATOR")
        .env_remove("TASKYARD_TOKEN")
        .output()
        .expect("run taskyard")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn succeeded(output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "stderr: {stderr}");
    stdout(output)
}

/// A payload of a task type no worker runs: about `bytes` long once encoded.
fn blob(bytes: usize) -> SubmitRequest {
    request("blob", json!({ "data": "x".repeat(bytes) }))
}

/// 900 KB that are not text, the same every time.
fn big_result() -> Vec<u8> {
    (0..900_000u32).map(|i| (i * 7 % 251) as u8).collect()
}

async fn big(_: TaskContext, _payload: Vec<u8>) -> Result<Vec<u8>, TaskError> {
    Ok(big_result())
}

fn cluster_with_big_task() -> Cluster {
    let mut cluster = Cluster::start_configured(|_| {});
    let config = worker_config(cluster.coordinator().worker_addr, "big", 2);
    let worker = Worker::builder(config)
        .logger(quiet_log())
        .task("big", big)
        .spawn()
        .expect("worker starts");
    cluster.workers.push(worker);
    cluster.wait_for_workers(1);
    cluster
}

fn wait_all_terminal(client: &mut Client) {
    wait_until("every job terminal", WITHIN, || {
        let page = client.list_page(None, None, 0).expect("counts");
        page.counts.iter().all(|c| c.state.is_terminal())
    });
}

#[test]
fn list_of_five_jobs_with_250_kb_payloads_succeeds() {
    let cluster = Cluster::start_configured(|_| {});
    let mut client = cluster.client();
    let ids: Vec<JobId> = (0..5).map(|_| submit(&mut client, blob(250_000))).collect();
    let text = succeeded(&taskyard(&cluster.client_addr(), &["list"]));
    for id in &ids {
        assert!(text.contains(&id.to_string()), "{id} listed: {text}");
    }
    assert!(text.contains("5 QUEUED"), "{text}");
    let json = succeeded(&taskyard(&cluster.client_addr(), &["list", "--json"]));
    let value: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(value["jobs"].as_array().map(Vec::len), Some(5));
    assert!(value["jobs"][0]["payload_bytes"].as_u64() > Some(250_000));
    let listed = client.list(None, 10).expect("the library lists them too");
    assert_eq!(listed.len(), 5);
}

#[test]
fn list_of_nine_echo_jobs_of_60_kb_succeeds() {
    let cluster = Cluster::start(1, 4);
    let mut client = cluster.client();
    let message = "m".repeat(60_000);
    for _ in 0..9 {
        submit(&mut client, request("echo", json!({ "message": message })));
    }
    wait_all_terminal(&mut client);
    let text = succeeded(&taskyard(&cluster.client_addr(), &["list"]));
    assert!(text.contains("9 SUCCEEDED"), "{text}");
    assert_eq!(text.lines().filter(|l| l.contains("echo")).count(), 9);
}

#[test]
fn status_wait_and_result_of_a_job_with_a_big_payload_and_result_succeed() {
    let cluster = cluster_with_big_task();
    let addr = cluster.client_addr();
    let mut client = cluster.client();
    let payload = json!({ "data": "p".repeat(250_000) });
    let job = submit(&mut client, request("big", payload.clone()));
    let id = job.to_string();

    let waited = taskyard(&addr, &["wait", &id]);
    assert!(succeeded(&waited).contains("900000 bytes"), "{waited:?}");
    let status = succeeded(&taskyard(&addr, &["status", &id]));
    assert!(status.contains("SUCCEEDED"), "{status}");
    assert!(
        status.contains(&format!(
            "bytes (not shown: `taskyard payload {id}` prints it)"
        )),
        "{status}"
    );
    let json = succeeded(&taskyard(&addr, &["status", "--json", &id]));
    let value: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(value["payload_omitted"], json!(true), "{json:.300}");
    assert_eq!(value["result_bytes"], json!(900_000));

    let result = taskyard(&addr, &["result", &id]);
    assert_eq!(result.status.code(), Some(0), "{:?}", result.stderr);
    assert!(result.stdout == big_result(), "byte-identical result");
    let printed = succeeded(&taskyard(&addr, &["payload", &id]));
    let back: serde_json::Value = serde_json::from_str(printed.trim()).expect("json payload");
    assert_eq!(back, payload);

    // The HTTP API is not framed: it still has the job whole.
    let http = cluster.http().get(&format!("/api/jobs/{id}"));
    assert_eq!(http.status, 200, "{:.200}", http.body);
    assert_eq!(http.json()["payload"], payload);
    // A list page holds summaries: the job, without its payload.
    let page = cluster.http().get("/api/jobs").json();
    assert_eq!(page["jobs"][0]["job_id"], json!(id), "{page:.300}");
    assert_eq!(page["jobs"][0]["payload"], serde_json::Value::Null);

    let view = status_of(&mut client, job);
    assert!(
        view.payload_omitted && !view.result_omitted,
        "{}",
        view.payload_bytes
    );
    assert_eq!(client.result(job).expect("result"), big_result());
    match client.wait(job, WITHIN, Duration::from_millis(20)) {
        Ok(WaitOutcome::Finished(view)) => {
            assert_eq!(view.result.as_deref(), Some(&big_result()[..]));
            assert_eq!(payloads::decode_value(&view.payload).ok(), Some(payload));
        }
        other => panic!("{other:?}"),
    }
}

fn status_of(client: &mut Client, job: JobId) -> JobView {
    client.status(job).expect("status").expect("known")
}

#[test]
fn a_list_of_500_jobs_with_8_kib_errors_fits_small_frames_page_by_page() {
    let mut cluster = Cluster::start_configured(|c| {
        c.max_frame_bytes = 64 * 1024;
        c.max_payload_bytes = 32 * 1024;
        c.max_result_bytes = 32 * 1024;
    });
    cluster.add_worker("w", 16);
    cluster.wait_for_workers(1);
    let mut client = cluster.client();
    let message = "e".repeat(8 * 1024);
    let fail = SubmitRequest {
        max_attempts: Some(1),
        ..request("fail", json!({ "message": message }))
    };
    let jobs: Vec<SubmitRequest> = (0..500).map(|_| fail.clone()).collect();
    for batch in jobs.chunks(5) {
        let answers = client.submit_batch(batch.to_vec()).expect("submitted");
        assert!(answers
            .iter()
            .all(|a| matches!(a, SubmitAnswer::Accepted { .. })));
    }
    wait_all_terminal(&mut client);

    let first = client.list_page(None, None, 500).expect("one page");
    assert!(first.jobs.len() < 500, "a 64 KiB frame holds fewer");
    let next = first.next.expect("a cursor for the rest");
    assert_eq!(next, first.jobs.last().expect("some").cursor());
    assert!(first.jobs[0]
        .error
        .as_deref()
        .is_some_and(|e| e.len() < 200));
    let all = client.list(None, 500).expect("every page");
    let distinct: std::collections::HashSet<JobId> = all.iter().map(|j| j.job_id).collect();
    assert_eq!(distinct.len(), 500);

    let text = succeeded(&taskyard(
        &cluster.client_addr(),
        &["list", "--limit", "500"],
    ));
    assert_eq!(text.lines().filter(|l| l.contains(" fail ")).count(), 500);
    assert!(
        text.contains("500 FAILED") && !text.contains("more:"),
        "{text:.300}"
    );
    let text = succeeded(&taskyard(
        &cluster.client_addr(),
        &["list", "--limit", "10"],
    ));
    let hint = text.lines().last().expect("a hint");
    assert!(hint.contains(" list --limit 10 --cursor "), "{hint}");
    let cursor = hint
        .split_whitespace()
        .skip_while(|word| *word != "--cursor")
        .nth(1)
        .expect(hint);
    let rest = taskyard(
        &cluster.client_addr(),
        &["list", "--cursor", cursor, "--limit", "500"],
    );
    assert_eq!(
        succeeded(&rest)
            .lines()
            .filter(|l| l.contains(" fail "))
            .count(),
        490
    );
    let view = status_of(&mut client, all[0].job_id);
    assert!(view.error.as_deref().is_some_and(|e| e.len() >= 8 * 1024));
}

#[test]
fn submit_takes_its_payload_from_a_file_and_names_a_missing_one() {
    let cluster = Cluster::start_configured(|_| {});
    let addr = cluster.client_addr();
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("payload.json");
    let payload = json!({ "data": "f".repeat(200_000) });
    std::fs::write(&path, payload.to_string()).expect("write");
    let file = path.to_str().expect("utf-8 path");
    let id = succeeded(&taskyard(
        &addr,
        &["submit", "blob", "--payload-file", file],
    ));
    let printed = succeeded(&taskyard(&addr, &["payload", id.trim()]));
    let back: serde_json::Value = serde_json::from_str(printed.trim()).expect("json");
    assert_eq!(back, payload);

    let missing = dir.path().join("nope.json");
    let missing = missing.to_str().expect("utf-8 path");
    let output = taskyard(&addr, &["submit", "blob", "--payload-file", missing]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(missing) && stderr.contains("cannot read"),
        "{stderr}"
    );
    std::fs::write(&path, "{not json").expect("write");
    let output = taskyard(&addr, &["submit", "blob", "--payload-file", file]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(file) && stderr.contains("not valid JSON"),
        "{stderr}"
    );
}

#[test]
fn a_chunk_past_the_end_or_of_no_result_is_refused_clearly() {
    let cluster = Cluster::start(1, 2);
    let mut client = cluster.client();
    let job = submit(&mut client, request("echo", json!({ "message": "hello" })));
    wait_for_job(&mut client, job, "done", WITHIN, |v| v.state.is_terminal());
    let chunk = client
        .read_chunk(job, ByteField::Result, 1, 2)
        .expect("chunk");
    assert_eq!((chunk.bytes.as_slice(), chunk.total), (&b"el"[..], 5));
    match client.read_chunk(job, ByteField::Result, 6, 10) {
        Err(ClientError::ChunkRefused { reason, .. }) => {
            assert!(reason.contains("offset 6 is past the end"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    let end = client
        .read_chunk(job, ByteField::Result, 5, 10)
        .expect("at the end");
    assert!(end.bytes.is_empty());
    let queued = submit(&mut client, blob(10));
    match client.read_chunk(queued, ByteField::Result, 0, 10) {
        Err(ClientError::ChunkRefused { reason, .. }) => {
            assert!(
                reason.contains("only a SUCCEEDED job has a result"),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
    let unknown = JobId::mint();
    assert!(matches!(
        client.read_chunk(unknown, ByteField::Payload, 0, 1),
        Err(ClientError::NotFound(id)) if id == unknown
    ));
    client.ping().expect("the connection is still fine");
}

#[test]
fn a_batch_whose_answer_could_not_fit_is_refused_before_anything_is_submitted() {
    use std::io::Write;
    let cluster = Cluster::start_configured(|c| {
        c.max_frame_bytes = 64 * 1024;
        c.max_payload_bytes = 32 * 1024;
        c.max_result_bytes = 32 * 1024;
    });
    let most = fit::max_batch_submissions(64 * 1024);
    let mut raw = common::raw_client::connect(&cluster.client_addr());
    let hello = common::raw_client::read_frame(&mut raw, WITHIN);
    assert!(
        matches!(hello, Some(CoordinatorToClient::Hello(_))),
        "{hello:?}"
    );
    let answer_to = |raw: &mut std::net::TcpStream, id: u64, batch: Vec<SubmitRequest>| {
        let frame = common::raw_client::request_frame(id, ClientRequest::SubmitBatch(batch));
        raw.write_all(&frame).expect("sent");
        match common::raw_client::read_frame(raw, WITHIN) {
            Some(CoordinatorToClient::Response { response, .. }) => response,
            other => panic!("no answer: {other:?}"),
        }
    };
    // Every submission rejected with the longest reason there is: an
    // invalid payload whose task type is long.
    let rejected = || SubmitRequest::new("t".repeat(200), b"not json".to_vec());
    let too_many = answer_to(&mut raw, 1, vec![rejected(); most + 1]);
    let ClientResponse::Overloaded { reason } = too_many else {
        panic!("not refused: {too_many:?}");
    };
    assert!(reason.contains("max-frame-bytes (65536)"), "{reason}");
    let fits = answer_to(&mut raw, 2, vec![rejected(); most]);
    let ClientResponse::BatchSubmitted(answers) = fits else {
        panic!("not answered whole: {fits:?}");
    };
    assert_eq!(answers.len(), most);
    let valid = vec![request("nobody", json!({})); most + 1];
    let refused = answer_to(&mut raw, 3, valid);
    assert!(
        matches!(refused, ClientResponse::Overloaded { .. }),
        "{refused:?}"
    );
    let listed = cluster.client().list(None, 10).expect("list");
    assert!(listed.is_empty(), "nothing was submitted: {listed:?}");
}
