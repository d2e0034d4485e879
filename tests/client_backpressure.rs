//! A client that pipelines requests and never reads the answers must not
//! make the coordinator hold more than a bounded amount of answers for it,
//! and what it held is released when it disconnects.

mod common;

use common::raw_client::{self, request_frame};
use common::{jobs, sessions, wait_until, Cluster};
use serde_json::json;
use std::io::Write;
use std::time::Duration;
use taskyard::net::handshake::ListenerPolicy;
use taskyard::protocol::*;
use tokio::io::AsyncWriteExt;

const BUDGET: usize = 64 * 1024;
const ANSWER_BYTES: usize = 10 * 1024;

/// A queued job (no worker runs `nobody`) whose `Status` answer is about
/// `ANSWER_BYTES` long.
fn big_job(client: &mut taskyard::client::Client) -> JobId {
    let payload = json!({ "filler": "x".repeat(ANSWER_BYTES) });
    jobs::submit(client, jobs::request("nobody", payload))
}

#[test]
fn a_client_that_never_reads_cannot_grow_the_coordinator_and_is_forgotten_when_it_leaves() {
    let cluster = Cluster::start_configured(|c| c.max_unwritten_answer_bytes = BUDGET);
    let job_id = big_job(&mut cluster.client());
    let unwritten = cluster.coordinator().client_unwritten.clone();
    let max_in_flight = 64;
    let bound = (BUDGET + (max_in_flight + 1) * (ANSWER_BYTES + 1024)) as u64;

    let mut hostile = raw_client::connect(&cluster.client_addr());
    hostile
        .set_write_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    let mut peak = 0;
    for request_id in 0..10_000 {
        let status = request_frame(request_id, ClientRequest::Status { job_id });
        if hostile.write_all(&status).is_err() {
            break; // the coordinator stopped reading: backpressure reached us
        }
        peak = peak.max(unwritten.get());
    }
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(10));
        peak = peak.max(unwritten.get());
    }
    assert!(
        peak <= bound,
        "the coordinator held {peak} unwritten answer bytes for one client (bound {bound})"
    );
    assert!(peak > 0, "the hostile client got answers");

    drop(hostile);
    wait_until(
        "the disconnected client's answers to be released",
        Duration::from_secs(10),
        || unwritten.get() == 0,
    );
    let mut client = cluster.client();
    assert_eq!(jobs::status(&mut client, job_id).job_id, job_id);
}

#[actix_rt::test]
async fn a_request_stays_in_flight_until_its_answer_is_written_to_the_socket() {
    let dir = tempfile::tempdir().expect("dir");
    let (server, config) = sessions::coordinator(dir.path()).await;
    let addr = server.client_addr.to_string();
    let job_id = actix_rt::task::spawn_blocking(move || {
        big_job(&mut taskyard::client::Client::connect(&addr).expect("connect"))
    })
    .await
    .expect("join");
    let policy = ListenerPolicy {
        max_in_flight: 2,
        max_unwritten_bytes: usize::MAX,
        ..sessions::client_policy(&config)
    };
    let unwritten = policy.unwritten.clone();
    let mut peer = sessions::session(&server, policy, 256);
    let hello = raw_client::frame(&ClientMessage::Hello(Hello::new(Role::Client, None)));
    peer.write_all(&hello).await.expect("hello");
    for request_id in 0..2 {
        let status = request_frame(request_id, ClientRequest::Status { job_id });
        peer.write_all(&status).await.expect("request");
    }
    let answered = async {
        while unwritten.get() < (2 * ANSWER_BYTES - 1024) as u64 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), answered)
        .await
        .expect("both answers queued behind the full pipe");
    for request_id in 2..6 {
        let status = request_frame(request_id, ClientRequest::Status { job_id });
        peer.write_all(&status).await.expect("request");
    }
    let read_six = async {
        let mut answers = Vec::new();
        while answers.len() < 6 {
            if let CoordinatorToClient::Response { response, .. } =
                sessions::read_frame(&mut peer).await.expect("a frame")
            {
                answers.push(response);
            }
        }
        answers
    };
    let answers = tokio::time::timeout(Duration::from_secs(10), read_six)
        .await
        .expect("six answers");
    let overloaded = answers
        .iter()
        .filter(|r| matches!(r, ClientResponse::Overloaded { reason } if reason.contains("max-in-flight-requests (2)")))
        .count();
    let jobs = answers
        .iter()
        .filter(|r| matches!(r, ClientResponse::Job(_)))
        .count();
    assert_eq!((jobs, overloaded), (2, 4), "Job and Overloaded answers");
}
