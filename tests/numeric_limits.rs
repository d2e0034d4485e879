//! Every number a client or worker sends, at its edge: the largest value
//! accepted, one more refused naming the field and its range, over raw TCP
//! frames, HTTP and the real `taskyard` binary; and edge values read back
//! identically after a coordinator restart on the same SQLite file.

mod common;

use common::raw_client::{connect, frame, read_frame, request_frame};
use common::raw_worker::RawWorker;
use common::*;
use serde::Serialize;
use serde_json::{json, Value};
use std::process::Command;
use std::time::Duration;
use taskyard::client::Client;
use taskyard::protocol::limits::{
    MAX_ATTEMPTS, MAX_DELAY_MS, MAX_LIST_JOBS, MAX_TIMEOUT_MS, PROGRESS_PERCENT,
};
use taskyard::protocol::payloads::encode_json;
use taskyard::protocol::*;

const WAIT: Duration = Duration::from_secs(10);

/// (field, largest accepted, smallest refused above it) for every number
/// of a submission.
const SUBMISSION_EDGES: [(&str, u64, u64); 3] = [
    ("max_attempts", MAX_ATTEMPTS as u64, MAX_ATTEMPTS as u64 + 1),
    ("timeout_ms", MAX_TIMEOUT_MS, MAX_TIMEOUT_MS + 1),
    ("delay_ms", MAX_DELAY_MS, MAX_DELAY_MS + 1),
];

fn echo() -> SubmitRequest {
    SubmitRequest::new("echo", encode_json(&json!({ "message": "edge" })))
}

fn with_field(field: &str, value: u64) -> SubmitRequest {
    let mut req = echo();
    match field {
        "max_attempts" => req.max_attempts = Some(u32::try_from(value).expect("fits u32")),
        "timeout_ms" => req.timeout_ms = Some(value),
        "delay_ms" => req.delay_ms = Some(value),
        other => panic!("no field {other}"),
    }
    req
}

/// Sends one request frame on a fresh connection and returns its answer.
fn raw_answer(addr: &str, request_id: u64, request: ClientRequest) -> CoordinatorToClient {
    let mut stream = connect(addr);
    assert!(matches!(
        read_frame(&mut stream, WAIT),
        Some(CoordinatorToClient::Hello(_))
    ));
    std::io::Write::write_all(&mut stream, &request_frame(request_id, request)).expect("send");
    read_frame(&mut stream, WAIT).expect("an answer")
}

fn submit_answer(answer: CoordinatorToClient) -> SubmitAnswer {
    match answer {
        CoordinatorToClient::Response {
            response: ClientResponse::Submitted(answer),
            ..
        } => answer,
        other => panic!("expected a submit answer, got {other:?}"),
    }
}

#[test]
fn tcp_submission_numbers_accept_their_maximum_and_refuse_one_more_naming_the_field() {
    let cluster = Cluster::start(0, 1);
    let addr = cluster.client_addr();
    for (field, max, over) in SUBMISSION_EDGES {
        let accepted = submit_answer(raw_answer(
            &addr,
            1,
            ClientRequest::Submit(with_field(field, max)),
        ));
        assert!(
            matches!(accepted, SubmitAnswer::Accepted { .. }),
            "{field} {max}: {accepted:?}"
        );
        match submit_answer(raw_answer(
            &addr,
            2,
            ClientRequest::Submit(with_field(field, over)),
        )) {
            SubmitAnswer::Rejected(r) => {
                assert!(
                    r.reason
                        .starts_with(&format!("{field}: {over} is outside ")),
                    "{r}"
                );
                assert!(r.reason.contains(&format!("..={max}")), "{r}");
            }
            other => panic!("{field} {over} accepted: {other:?}"),
        }
    }
    let mut client = cluster.client();
    assert_eq!(
        client.list(None, 10).expect("list").len(),
        3,
        "only the maxima stored"
    );
}

#[test]
fn tcp_request_id_is_echoed_whole_up_to_u64_max() {
    let cluster = Cluster::start(0, 1);
    match raw_answer(&cluster.client_addr(), u64::MAX, ClientRequest::Workers) {
        CoordinatorToClient::Response { request_id, .. } => assert_eq!(request_id, u64::MAX),
        other => panic!("{other:?}"),
    }
}

/// A submission frame built by hand, for values `SubmitRequest` cannot hold.
#[derive(Serialize)]
enum RawClientMessage {
    Request {
        request_id: u64,
        request: RawRequest,
    },
}

#[derive(Serialize)]
enum RawRequest {
    Submit(RawSubmit),
}

#[derive(Serialize)]
struct RawSubmit {
    task_type: &'static str,
    #[serde(with = "taskyard::protocol::byte_fields")]
    payload: Vec<u8>,
    priority: &'static str,
    max_attempts: u64,
}

/// The `Error` frame the coordinator closes with after `submit`.
fn raw_refusal(addr: &str, submit: RawSubmit) -> String {
    let mut stream = connect(addr);
    read_frame(&mut stream, WAIT).expect("hello");
    let request = RawClientMessage::Request {
        request_id: 1,
        request: RawRequest::Submit(submit),
    };
    std::io::Write::write_all(&mut stream, &frame(&request)).expect("send");
    match read_frame(&mut stream, WAIT) {
        Some(CoordinatorToClient::Error { message }) => message,
        other => panic!("expected an error frame, got {other:?}"),
    }
}

#[test]
fn tcp_values_the_wire_types_cannot_hold_close_the_connection_naming_the_field() {
    let cluster = Cluster::start(0, 1);
    let addr = cluster.client_addr();
    let submit = |priority, max_attempts| RawSubmit {
        task_type: "echo",
        payload: encode_json(&json!({ "message": "x" })),
        priority,
        max_attempts,
    };
    let message = raw_refusal(&addr, submit("urgent", 3));
    assert!(
        message.contains("priority: unknown level \"urgent\""),
        "{message}"
    );
    let message = raw_refusal(&addr, submit("high", u64::from(u32::MAX) + 1));
    assert!(
        message.contains("max_attempts: 4294967296 is outside 1..=100"),
        "{message}"
    );
    assert_eq!(cluster.client().list(None, 10).expect("list").len(), 0);
}

#[test]
fn a_worker_progress_beyond_100_percent_is_refused_naming_percent() {
    let cluster = Cluster::start(0, 1);
    let mut worker = RawWorker::register(cluster.coordinator().worker_addr, "w-edge", 1, &["echo"]);
    let job = submit_answer(raw_answer(
        &cluster.client_addr(),
        1,
        ClientRequest::Submit(echo()),
    ));
    let (job_id, lease) = worker.expect_assign(WAIT);
    let SubmitAnswer::Accepted {
        job_id: submitted, ..
    } = job
    else {
        panic!("{job:?}")
    };
    assert_eq!(job_id, submitted);
    let progress = |percent| WorkerMessage::TaskProgress {
        job_id,
        lease,
        percent,
        message: format!("at {percent}"),
    };
    worker.send(progress(PROGRESS_PERCENT.max as u8));
    let mut client = cluster.client();
    wait_until("progress 100 shown", WAIT, || {
        client
            .status(job_id)
            .ok()
            .flatten()
            .and_then(|v| v.progress)
            .is_some_and(|p| p.percent == 100)
    });
    worker.send(progress(101));
    match worker.recv(WAIT) {
        Some(CoordinatorToWorker::Error { message }) => {
            assert_eq!(
                message,
                "task progress refused: percent: 101 is outside 0..=100"
            )
        }
        other => panic!("expected an error frame, got {other:?}"),
    }
}

fn post_submit(http: &common::http::Http, field: &str, value: Value) -> common::http::Response {
    let mut body = json!({ "task_type": "echo", "payload": { "message": "edge" } });
    body[field] = value;
    http.post("/api/jobs", &body)
}

#[test]
fn http_submission_numbers_accept_their_maximum_and_refuse_anything_else_naming_the_field() {
    let cluster = Cluster::start(0, 1);
    let http = cluster.http();
    for (field, max, over) in SUBMISSION_EDGES {
        let accepted = post_submit(&http, field, json!(max));
        assert_eq!(accepted.status, 201, "{field} {max}: {accepted:?}");
        let beyond_u64: Value = serde_json::from_str("18446744073709551616").expect("json");
        for bad in [json!(over), json!(-1), json!(1.5), json!("5"), beyond_u64] {
            let refused = post_submit(&http, field, bad.clone());
            assert_eq!(refused.status, 422, "{field} {bad}: {refused:?}");
            let body = refused.json();
            assert_eq!(body["code"], "invalid_submission");
            let error = body["error"].as_str().expect("error text");
            assert!(error.starts_with(&format!("{field}: ")), "{error}");
            assert!(error.contains(&format!("..={max}")), "{error}");
        }
    }
    let refused = post_submit(&http, "priority", json!("urgent"));
    assert_eq!(refused.status, 400, "{refused:?}");
    assert!(
        refused.body.contains("priority: unknown level"),
        "{refused:?}"
    );
    assert_eq!(post_submit(&http, "priority", json!("high")).status, 201);
}

#[test]
fn http_list_limit_accepts_500_and_refuses_501_naming_limit() {
    let cluster = Cluster::start(0, 1);
    let http = cluster.http();
    assert_eq!(
        http.get(&format!("/api/jobs?limit={MAX_LIST_JOBS}")).status,
        200
    );
    for bad in ["501", "0", "-1", "99999999999999999999999", "lots"] {
        let refused = http.get(&format!("/api/jobs?limit={bad}"));
        assert_eq!(refused.status, 400, "{bad}: {refused:?}");
        let error = refused.json()["error"].as_str().expect("text").to_string();
        assert!(
            error.starts_with("limit: ") && error.contains("1..=500"),
            "{error}"
        );
    }
}

fn taskyard(addr: &str, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_taskyard"))
        .args(["--coordinator", addr])
        .args(args)
        .env_remove("TASKYARD_COORDINATOR")
        .output()
        .expect("run taskyard")
}

#[test]
fn cli_numbers_accept_their_maximum_and_refuse_one_more_at_parse_naming_flag_and_range() {
    let cluster = Cluster::start(0, 1);
    let addr = cluster.client_addr();
    let submit = ["submit", "echo", "--payload", r#"{"message":"edge"}"#];
    let max_delay = format!("{MAX_DELAY_MS}ms");
    let over_delay = format!("{}ms", MAX_DELAY_MS + 1);
    let (max_attempts, over_attempts) = (MAX_ATTEMPTS.to_string(), (MAX_ATTEMPTS + 1).to_string());
    let (max_timeout, over_timeout) = (MAX_TIMEOUT_MS.to_string(), u64::MAX.to_string());
    let (max_limit, over_limit) = (MAX_LIST_JOBS.to_string(), (MAX_LIST_JOBS + 1).to_string());
    let cases: [(&[&str], &str, &str, &str, &str); 4] = [
        (
            &submit,
            "--max-attempts",
            &max_attempts,
            &over_attempts,
            "max_attempts",
        ),
        (
            &submit,
            "--timeout-ms",
            &max_timeout,
            &over_timeout,
            "timeout_ms",
        ),
        (&submit, "--delay", &max_delay, &over_delay, "delay_ms"),
        (&["list"], "--limit", &max_limit, &over_limit, "limit"),
    ];
    for (command, flag, max, over, field) in cases {
        let ok = taskyard(&addr, &[command, &[flag, max]].concat());
        assert_eq!(ok.status.code(), Some(0), "{flag} {max}: {ok:?}");
        let refused = taskyard(&addr, &[command, &[flag, over]].concat());
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(2), "{flag} {over}: {stderr}");
        assert!(
            stderr.contains(flag) && stderr.contains(&format!("{field}: ")),
            "{stderr}"
        );
        assert!(stderr.contains("is outside "), "{stderr}");
    }
    let far = taskyard(
        &addr,
        &[&submit[..], &["--at", "9999-12-31T00:00:00Z"]].concat(),
    );
    let stderr = String::from_utf8_lossy(&far.stderr);
    assert_eq!(far.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--at 9999-12-31") && stderr.contains("delay_ms: "),
        "{stderr}"
    );
    let not_a_day = taskyard(
        &addr,
        &[&submit[..], &["--at", "2027-02-30T00:00:00Z"]].concat(),
    );
    let stderr = String::from_utf8_lossy(&not_a_day.stderr);
    assert_eq!(not_a_day.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--at") && stderr.contains("has no day 30"),
        "{stderr}"
    );
    // Accepted: three maximal submissions; nothing from the refusals.
    assert_eq!(cluster.client().list(None, 10).expect("list").len(), 3);
}

#[test]
fn edge_values_read_back_identically_after_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = coordinator_config(dir.path());
    let coordinator = start_coordinator(config.clone());
    let mut client = Client::connect(&coordinator.client_addr.to_string()).expect("connect");
    let req = SubmitRequest {
        priority: Priority::High,
        max_attempts: Some(MAX_ATTEMPTS),
        timeout_ms: Some(MAX_TIMEOUT_MS),
        delay_ms: Some(MAX_DELAY_MS),
        ..echo()
    };
    let job = common::jobs::submit(&mut client, req);
    let before = common::jobs::status(&mut client, job);
    assert_eq!(
        before.not_before,
        Some(before.submitted_at + MAX_DELAY_MS as i64)
    );
    drop(client);
    coordinator.stop();

    let coordinator = start_coordinator(config);
    let mut client = Client::connect(&coordinator.client_addr.to_string()).expect("connect");
    let after = common::jobs::status(&mut client, job);
    let http = common::http::Http::new(coordinator.http_addr.expect("http listener on"));
    let over_http = http.get(&format!("/api/jobs/{job}")).json();
    coordinator.stop();
    assert_eq!(over_http["priority"], "high");
    assert_eq!(over_http["max_attempts"], json!(MAX_ATTEMPTS));
    assert_eq!(over_http["timeout_ms"], json!(MAX_TIMEOUT_MS));
    assert_eq!(over_http["not_before"], json!(before.not_before));
    assert_eq!(after.priority, Priority::High);
    assert_eq!(after.max_attempts, MAX_ATTEMPTS);
    assert_eq!(after.timeout_ms, MAX_TIMEOUT_MS);
    assert_eq!(after.not_before, before.not_before);
    assert_eq!(after.submitted_at, before.submitted_at);
    assert_eq!(after.sequence, before.sequence);
    assert_eq!(after.attempts, 0);
    assert_eq!(after.state, JobState::Queued);
}

#[test]
fn the_openapi_document_states_the_same_ranges_the_server_checks() {
    use taskyard::protocol::limits::{DELAY_MS, LIST_LIMIT, MAX_ATTEMPTS_RANGE, TIMEOUT_MS};
    let document = taskyard::http::openapi::document(true)
        .to_json()
        .expect("JSON");
    let openapi: Value = serde_json::from_str(&document).expect("JSON");
    // `Submit` is all of the fields (derived from `SubmitBody`) and the
    // payloads of the built-in task types.
    let submit = &openapi["components"]["schemas"]["Submit"]["allOf"][0]["properties"];
    for range in [MAX_ATTEMPTS_RANGE, TIMEOUT_MS, DELAY_MS] {
        let schema = &submit[range.field];
        assert_eq!(
            schema["type"],
            json!(["integer", "null"]),
            "{}",
            range.field
        );
        assert_eq!(schema["minimum"], json!(range.min), "{}", range.field);
        assert_eq!(schema["maximum"], json!(range.max), "{}", range.field);
    }
    let parameters = openapi["paths"]["/api/jobs"]["get"]["parameters"]
        .as_array()
        .expect("parameters");
    let limit = parameters
        .iter()
        .find(|p| p["name"] == "limit")
        .expect("limit parameter");
    assert_eq!(limit["schema"]["minimum"], json!(LIST_LIMIT.min));
    assert_eq!(limit["schema"]["maximum"], json!(LIST_LIMIT.max));
}
