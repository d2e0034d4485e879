//! Idle client connections are closed after `client-idle-timeout-millis`
//! with an error frame saying why; `Ping` keeps one open, and the blocking
//! `Client` survives idle periods on its own.

mod common;

use common::raw_client::{self, read_frame};
use common::{jobs, sessions, Cluster};
use serde_json::json;
use std::time::Duration;
use taskyard::client::{Client, ClientOptions};
use taskyard::net::handshake::ListenerPolicy;
use taskyard::protocol::*;
use tokio::io::{AsyncWriteExt, DuplexStream};

const IDLE: Duration = Duration::from_millis(1000);

async fn ping(peer: &mut DuplexStream, request_id: u64) -> Option<CoordinatorToClient> {
    let frame = raw_client::request_frame(request_id, ClientRequest::Ping);
    peer.write_all(&frame).await.ok()?;
    sessions::read_frame(peer).await
}

#[actix_rt::test]
async fn a_pinged_connection_stays_open_and_a_silent_one_is_closed_saying_why() {
    let dir = tempfile::tempdir().expect("dir");
    let (server, config) = sessions::coordinator(dir.path()).await;
    let policy = ListenerPolicy {
        idle_timeout: Some(IDLE),
        ..sessions::client_policy(&config)
    };
    tokio::time::pause();
    let mut peer = sessions::session(&server, policy, 64 * 1024);
    let hello = raw_client::frame(&ClientMessage::Hello(Hello::new(Role::Client, None)));
    peer.write_all(&hello).await.expect("hello");
    assert!(matches!(
        sessions::read_frame(&mut peer).await,
        Some(CoordinatorToClient::Hello(_))
    ));

    for request_id in 1..=3 {
        tokio::time::advance(IDLE - Duration::from_millis(1)).await;
        let pong = ping(&mut peer, request_id).await;
        assert!(
            matches!(&pong, Some(CoordinatorToClient::Response { request_id: id, response: ClientResponse::Pong }) if *id == request_id),
            "ping {request_id} answered {pong:?}"
        );
    }
    tokio::time::advance(IDLE + Duration::from_millis(1)).await;
    match sessions::read_frame(&mut peer).await {
        Some(CoordinatorToClient::Error { message }) => {
            assert!(message.starts_with(IDLE_CLOSED), "{message}");
            assert!(
                message.contains("client-idle-timeout-millis (1000)"),
                "{message}"
            );
        }
        other => panic!("expected the idle error frame, got {other:?}"),
    }
    assert!(
        sessions::read_frame(&mut peer).await.is_none(),
        "closed after the error frame"
    );
}

#[test]
fn an_idle_client_connection_is_closed_with_an_error_frame() {
    let cluster = Cluster::start_configured(|c| c.client_idle_timeout_millis = 200);
    let mut stream = raw_client::connect(&cluster.client_addr());
    let within = Duration::from_secs(10);
    assert!(matches!(
        read_frame(&mut stream, within),
        Some(CoordinatorToClient::Hello(_))
    ));
    match read_frame(&mut stream, within) {
        Some(CoordinatorToClient::Error { message }) => {
            assert!(
                message.contains("client-idle-timeout-millis (200)"),
                "{message}"
            )
        }
        other => panic!("expected the idle error frame, got {other:?}"),
    }
}

#[test]
fn the_blocking_client_outlives_the_idle_timeout() {
    let cluster = Cluster::start_configured(|c| c.client_idle_timeout_millis = 200);
    let idle_pinger = ClientOptions {
        ping_after_idle: Duration::from_millis(100),
        ..ClientOptions::default()
    };
    let never_pings = ClientOptions {
        ping_after_idle: Duration::from_secs(3600),
        ..ClientOptions::default()
    };
    for options in [idle_pinger, never_pings] {
        let mut client = Client::connect_with(&cluster.client_addr(), &options).expect("connect");
        let job = jobs::submit(&mut client, jobs::request("nobody", json!({})));
        // Idle well past the coordinator's timeout: it closes the connection.
        std::thread::sleep(Duration::from_millis(600));
        let view = client.status(job).expect("answered on a new connection");
        assert_eq!(view.map(|v| v.job_id), Some(job));
        client.ping().expect("pong");
    }
}
