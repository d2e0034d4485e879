//! A coordinator safe to expose: tokens, TLS, secure defaults and limits,
//! each checked over real sockets.

mod common;

use common::tls::certificates;

use common::jobs::*;
use common::*;
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};
use taskyard::client::{Client, ClientError, ClientOptions};
use taskyard::config::CoordinatorConfig;
use taskyard::protocol::*;
use taskyard::security::Secret;
use taskyard::worker::WorkerHandle;

const CLIENT_TOKEN: &str = "client-s3cret";
const WORKER_TOKEN: &str = "worker-s3cret";

fn with_tokens(c: &mut CoordinatorConfig) {
    c.client_token = CLIENT_TOKEN.into();
    c.worker_token = WORKER_TOKEN.into();
}

fn options(token: Option<&str>) -> ClientOptions {
    ClientOptions {
        token: token.map(Secret::new),
        ..ClientOptions::default()
    }
}

#[test]
fn wrong_missing_and_crossed_tokens_are_refused_and_change_nothing() {
    let cluster = Cluster::start_configured(with_tokens);
    let addr = cluster.client_addr();
    for token in [None, Some("guess"), Some(WORKER_TOKEN)] {
        match Client::connect_with(&addr, &options(token)) {
            Err(ClientError::Unauthorized) => {}
            Err(other) => panic!("token {token:?}: expected Unauthorized, got {other}"),
            Ok(_) => panic!("token {token:?} was accepted"),
        }
    }
    let worker_addr = cluster.coordinator().worker_addr;
    for token in [None, Some(CLIENT_TOKEN)] {
        let mut stream = TcpStream::connect(worker_addr).expect("connect");
        let hello = WorkerMessage::Hello(Hello::new(Role::Worker, token));
        write_frame(&mut stream, &hello);
        let reply = read_all(&mut stream);
        assert!(
            contains(&reply, UNAUTHORIZED),
            "worker token {token:?} not refused"
        );
    }
    let mut client =
        Client::connect_with(&addr, &options(Some(CLIENT_TOKEN))).expect("right token");
    assert!(
        client.workers().expect("workers").is_empty(),
        "no worker registered"
    );
    assert_eq!(db::job_count(&cluster.db_path()), 0);

    let output = Command::new(env!("CARGO_BIN_EXE_taskyard"))
        .args(["--coordinator", &addr, "list"])
        .env("TASKYARD_TOKEN", "wrong")
        .output()
        .expect("run taskyard");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr.trim(),
        "taskyard: unauthorized: check TASKYARD_TOKEN"
    );
}

#[test]
fn workers_and_clients_with_the_right_tokens_run_jobs() {
    let mut cluster = Cluster::start_configured(with_tokens);
    let mut config = worker_config(cluster.coordinator().worker_addr, "trusted", 1);
    config.token = WORKER_TOKEN.into();
    cluster
        .workers
        .push(WorkerHandle::spawn(config, quiet_log()));
    let mut client = Client::connect_with(&cluster.client_addr(), &options(Some(CLIENT_TOKEN)))
        .expect("connect");
    let job = submit(
        &mut client,
        request("echo", json!({ "message": "authorized" })),
    );
    let done = wait_for_job(&mut client, job, "success", Duration::from_secs(10), |v| {
        v.state == JobState::Succeeded
    });
    assert_eq!(done.result.as_deref(), Some(&b"authorized"[..]));
}

#[test]
fn a_non_loopback_listener_without_tokens_refuses_to_start() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("t.db");
    let output = Command::new(env!("CARGO_BIN_EXE_taskyard-coordinator"))
        .arg("--db-path")
        .arg(&db)
        .args([
            "--client-listen",
            "0.0.0.0:0",
            "--worker-listen",
            "127.0.0.1:0",
        ])
        .output()
        .expect("run coordinator");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("client-token"), "{stderr}");
    assert!(stderr.contains("not a loopback address"), "{stderr}");
    assert!(!db.exists(), "nothing opened");

    let output = Command::new(env!("CARGO_BIN_EXE_taskyard-coordinator"))
        .arg("--db-path")
        .arg(&db)
        .args(["--client-listen", "0.0.0.0:0", "--client-token", "t"])
        .output()
        .expect("run coordinator");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("tls-cert") && stderr.contains("allow-plaintext"),
        "{stderr}"
    );
}

#[test]
fn submit_run_and_result_over_tls_and_plaintext_is_refused_cleanly() {
    let certs = tempfile::tempdir().expect("dir");
    let (ca, cert, key) = certificates(certs.path());
    let mut cluster = Cluster::start_configured(|c| {
        with_tokens(c);
        c.tls_cert = cert.clone();
        c.tls_key = key.clone();
    });
    let mut config = worker_config(cluster.coordinator().worker_addr, "tls-worker", 1);
    config.token = WORKER_TOKEN.into();
    config.tls_ca = ca.clone();
    config.tls_server_name = "localhost".into();
    cluster
        .workers
        .push(WorkerHandle::spawn(config, quiet_log()));
    let tls = ClientOptions {
        token: Some(Secret::new(CLIENT_TOKEN)),
        tls_ca: Some(ca),
        tls_server_name: "localhost".into(),
        ..ClientOptions::default()
    };
    let mut client = Client::connect_with(&cluster.client_addr(), &tls).expect("TLS connect");
    let job = submit(
        &mut client,
        request("echo", json!({ "message": "over TLS" })),
    );
    let done = wait_for_job(&mut client, job, "success", Duration::from_secs(10), |v| {
        v.state == JobState::Succeeded
    });
    assert_eq!(done.result.as_deref(), Some(&b"over TLS"[..]));

    let started = Instant::now();
    let plain = Client::connect_with(&cluster.client_addr(), &options(Some(CLIENT_TOKEN)));
    assert!(plain.is_err(), "a plaintext client must fail");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "and fail quickly, not hang"
    );
}

fn write_frame<T: serde::Serialize>(stream: &mut TcpStream, message: &T) {
    let body = rmp_serde::to_vec_named(message).expect("encode");
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    stream.write_all(&frame).expect("write");
}

fn read_all(stream: &mut TcpStream) -> Vec<u8> {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut received = Vec::new();
    let _ = stream.read_to_end(&mut received);
    received
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[test]
fn slowloris_connections_are_closed_after_the_handshake_timeout_while_clients_are_served() {
    let cluster = Cluster::start_configured(|c| c.handshake_timeout_millis = 300);
    let addr = cluster.client_addr();
    let idle: Vec<TcpStream> = (0..200)
        .map(|_| TcpStream::connect(&addr).expect("connect"))
        .collect();
    let started = Instant::now();
    let mut client = cluster.client();
    let mut answered = 0;
    while started.elapsed() < Duration::from_millis(400) {
        submit(&mut client, request("nobody", json!({})));
        answered += 1;
    }
    assert!(answered > 0);
    for mut stream in idle {
        let reply = read_all(&mut stream);
        assert!(
            contains(&reply, "handshake-timeout-millis (300)"),
            "closed with a reason"
        );
    }
    assert!(started.elapsed() < Duration::from_secs(10));
    submit(&mut client, request("nobody", json!({})));
}

#[test]
fn the_connection_limit_refuses_the_extra_connection_with_a_reason() {
    let cluster = Cluster::start_configured(|c| c.max_connections = 2);
    let addr = cluster.client_addr();
    let first = cluster.client();
    let _second = TcpStream::connect(&addr).expect("second");
    let mut third = TcpStream::connect(&addr).expect("third connects at TCP level");
    let reply = read_all(&mut third);
    assert!(contains(&reply, "max-connections (2) reached"));
    drop(first);
    wait_until("a slot to free up", Duration::from_secs(5), || {
        Client::connect(&addr).is_ok()
    });
}

#[test]
fn pipelining_past_the_in_flight_limit_gets_a_typed_refusal() {
    let cluster = Cluster::start_configured(|c| c.max_in_flight_requests = 2);
    let mut stream = TcpStream::connect(cluster.client_addr()).expect("connect");
    write_frame(
        &mut stream,
        &ClientMessage::Hello(Hello::new(Role::Client, None)),
    );
    for request_id in 0..50 {
        let request = ClientRequest::Submit(request("nobody", json!({})));
        write_frame(
            &mut stream,
            &ClientMessage::Request {
                request_id,
                request,
            },
        );
    }
    stream
        .shutdown(std::net::Shutdown::Write)
        .expect("half close");
    let reply = read_all(&mut stream);
    assert!(contains(&reply, "max-in-flight-requests (2) reached"));
}

#[test]
fn an_oversized_payload_is_rejected_naming_the_limit() {
    let cluster = Cluster::start_configured(|c| c.max_payload_bytes = 64);
    let mut client = cluster.client();
    let big = request("echo", json!({ "message": "x".repeat(100) }));
    match client.submit(big).expect("answer") {
        SubmitAnswer::Rejected(r) => assert!(r.reason.contains("max-payload-bytes (64)"), "{r}"),
        other => panic!("accepted: {other:?}"),
    }
    submit(&mut client, request("echo", json!({ "message": "small" })));
}
