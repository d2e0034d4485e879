//! Random and mutated frames against live client sessions of a real
//! coordinator (real Coordinator, Persistence and SQLite; each session fed
//! through an in-memory duplex stream so 10,000 cases run in seconds). The
//! coordinator must answer or close every case, keep serving a well-behaved
//! client, and leave its database unchanged.

mod common;

use common::db;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use taskyard::client::Client;
use taskyard::clock::SystemClock;
use taskyard::config::CoordinatorConfig;
use taskyard::net::client_session::ClientSession;
use taskyard::net::handshake::{ListenerPolicy, SessionContext};
use taskyard::process::CoordinatorServer;
use taskyard::protocol::payloads::encode_json;
use taskyard::protocol::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CASES: usize = 10_000;

fn frame(message: &ClientMessage) -> Vec<u8> {
    let body = rmp_serde::to_vec_named(message).unwrap_or_default();
    let mut bytes = (body.len() as u32).to_be_bytes().to_vec();
    bytes.extend_from_slice(&body);
    bytes
}

/// Well-formed conversations that change nothing: a `Hello` and read-only
/// or no-op requests. Mutations of them are the interesting inputs.
fn seeds() -> Vec<Vec<u8>> {
    let hello = frame(&ClientMessage::Hello(Hello::new(Role::Client, None)));
    let job_id = JobId::mint();
    let requests = [
        ClientRequest::Status { job_id },
        ClientRequest::List {
            state: Some(JobState::Failed),
            limit: 5,
            task_type: Some("echo".into()),
            cursor: None,
        },
        ClientRequest::ReadChunk {
            job_id,
            field: ByteField::Result,
            offset: u64::MAX,
            max_bytes: u32::MAX,
        },
        ClientRequest::Workers,
        ClientRequest::Cancel { job_id },
        ClientRequest::Requeue { job_id },
    ];
    requests
        .into_iter()
        .enumerate()
        .map(|(i, request)| {
            let mut bytes = hello.clone();
            bytes.extend(frame(&ClientMessage::Request {
                request_id: i as u64,
                request,
            }));
            bytes
        })
        .collect()
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Insert(usize, u8),
    Remove(usize),
    Truncate(usize),
}

fn mutate(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for m in mutations {
        let len = bytes.len().max(1);
        match *m {
            Mutation::Flip(at, bits) => {
                if let Some(b) = bytes.get_mut(at % len) {
                    *b ^= bits;
                }
            }
            Mutation::Insert(at, b) => bytes.insert(at % (bytes.len() + 1), b),
            Mutation::Remove(at) if !bytes.is_empty() => {
                bytes.remove(at % len);
            }
            Mutation::Truncate(at) => bytes.truncate(at % len),
            Mutation::Remove(_) => {}
        }
    }
    bytes
}

fn hostile_input(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    let mutation = prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(a, b)| Mutation::Flip(a, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(a, b)| Mutation::Insert(a, b)),
        any::<usize>().prop_map(Mutation::Remove),
        any::<usize>().prop_map(Mutation::Truncate),
    ];
    let n = seeds.len();
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..300),
        (0..n, prop::collection::vec(mutation, 1..6))
            .prop_map(move |(i, ms)| mutate(seeds[i].clone(), &ms)),
        (any::<u32>(), prop::collection::vec(any::<u8>(), 0..64)).prop_map(|(len, body)| {
            let mut bytes = len.to_be_bytes().to_vec();
            bytes.extend(body);
            bytes
        }),
    ]
}

fn generate_cases() -> Vec<Vec<u8>> {
    let mut runner = TestRunner::deterministic();
    let strategy = hostile_input(seeds());
    (0..CASES)
        .filter_map(|_| strategy.new_tree(&mut runner).ok().map(|t| t.current()))
        .collect()
}

/// Feeds `input` to a fresh session, half-closes, and reads until the
/// session closes. Panics if it neither answers nor closes in time.
async fn feed(
    input: &[u8],
    server: &CoordinatorServer,
    policy: &Arc<ListenerPolicy>,
    log: &slog::Logger,
) {
    let (mut ours, theirs) = tokio::io::duplex(64 * 1024);
    let (read, write) = tokio::io::split(theirs);
    let peer = SocketAddr::from(([127, 0, 0, 1], 9));
    let conn = SessionContext::new(Arc::clone(policy), peer, None, log);
    ClientSession::start(read, write, server.coordinator.clone(), conn);
    let exchange = async {
        let _ = ours.write_all(input).await;
        let _ = ours.shutdown().await;
        let mut sink = Vec::new();
        let _ = ours.read_to_end(&mut sink).await;
    };
    let finished = tokio::time::timeout(Duration::from_secs(5), exchange).await;
    assert!(
        finished.is_ok(),
        "session neither answered nor closed for input {input:?}"
    );
}

#[actix_rt::test]
async fn ten_thousand_hostile_inputs_leave_the_coordinator_serving_and_the_database_unchanged() {
    let dir = tempfile::tempdir().expect("dir");
    let config = CoordinatorConfig {
        client_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        worker_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        db_path: dir.path().join("fuzz.db"),
        http_listen: String::new(),
        ..CoordinatorConfig::default()
    };
    let log = slog::Logger::root(slog::Discard, slog::o!());
    let server = CoordinatorServer::start(&config, Arc::new(SystemClock), log.clone())
        .await
        .expect("coordinator starts");
    let addr = server.client_addr.to_string();
    let well_behaved = move || {
        let mut client = Client::connect(&addr).expect("well-behaved client connects");
        let req = SubmitRequest::new("echo", encode_json(&json!({ "message": "still here" })));
        client.submit(req).expect("answered")
    };
    let baseline = actix_rt::task::spawn_blocking(well_behaved.clone())
        .await
        .expect("join");
    assert!(matches!(baseline, SubmitAnswer::Accepted { .. }));
    let rows_before = db::job_count(&config.db_path);

    let policy = Arc::new(ListenerPolicy {
        role: Role::Client,
        token: None,
        max_frame_bytes: config.max_frame_bytes,
        handshake_timeout: Duration::from_millis(config.handshake_timeout_millis),
        max_in_flight: config.max_in_flight_requests,
        max_unwritten_bytes: config.max_unwritten_answer_bytes,
        unwritten: Default::default(),
        idle_timeout: None,
        worker_limits: Default::default(),
        advertised_http: None,
    });
    let cases = generate_cases();
    assert_eq!(cases.len(), CASES);
    for (i, input) in cases.iter().enumerate() {
        feed(input, &server, &policy, &log).await;
        if i % 2500 == 0 {
            let rows = db::job_count(&config.db_path);
            assert_eq!(rows, rows_before, "database changed after case {i}");
        }
    }
    assert_eq!(
        db::job_count(&config.db_path),
        rows_before,
        "database unchanged"
    );
    let after = actix_rt::task::spawn_blocking(well_behaved)
        .await
        .expect("join");
    assert!(
        matches!(after, SubmitAnswer::Accepted { .. }),
        "still serving"
    );
}
