//! One client session of an in-process coordinator, driven over an
//! in-memory pipe: for tests of what a session does with its peer (paused
//! time, a pipe too small for its answers).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use taskyard::clock::SystemClock;
use taskyard::config::CoordinatorConfig;
use taskyard::net::client_session::ClientSession;
use taskyard::net::handshake::{ListenerPolicy, SessionContext};
use taskyard::process::CoordinatorServer;
use taskyard::protocol::{CoordinatorToClient, Role};
use tokio::io::{AsyncReadExt, DuplexStream};

/// A coordinator in the current actix system, database in `dir`, no HTTP.
pub async fn coordinator(dir: &std::path::Path) -> (CoordinatorServer, CoordinatorConfig) {
    let mut config = super::coordinator_config(dir);
    config.http_listen = String::new();
    let server = CoordinatorServer::start(&config, Arc::new(SystemClock), super::quiet_log())
        .await
        .expect("coordinator starts");
    (server, config)
}

/// The client listener's rules from `config`, without an idle timeout.
pub fn client_policy(config: &CoordinatorConfig) -> ListenerPolicy {
    ListenerPolicy {
        role: Role::Client,
        token: None,
        max_frame_bytes: config.max_frame_bytes,
        handshake_timeout: Duration::from_secs(5),
        max_in_flight: config.max_in_flight_requests,
        max_unwritten_bytes: config.max_unwritten_answer_bytes,
        unwritten: Default::default(),
        idle_timeout: None,
        worker_limits: Default::default(),
        advertised_http: None,
    }
}

/// Starts a session under `policy` behind a pipe of `pipe_bytes`; returns
/// the peer's end.
pub fn session(
    server: &CoordinatorServer,
    policy: ListenerPolicy,
    pipe_bytes: usize,
) -> DuplexStream {
    let (ours, theirs) = tokio::io::duplex(pipe_bytes);
    let (read, write) = tokio::io::split(theirs);
    let peer = SocketAddr::from(([127, 0, 0, 1], 9));
    let conn = SessionContext::new(Arc::new(policy), peer, None, &super::quiet_log());
    ClientSession::start(read, write, server.coordinator.clone(), conn);
    ours
}

/// The next frame from the session, or `None` once it has closed.
pub async fn read_frame(peer: &mut DuplexStream) -> Option<CoordinatorToClient> {
    let len = peer.read_u32().await.ok()? as usize;
    let mut body = vec![0u8; len];
    peer.read_exact(&mut body).await.ok()?;
    Some(rmp_serde::from_slice(&body).expect("a well-formed frame"))
}
