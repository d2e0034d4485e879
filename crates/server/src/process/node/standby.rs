//! What a standby does with a connection: read its first frame (the
//! peer's `Hello`) within the handshake timeout, answer `NotLeader` with
//! the leader's advertised addresses (as last read), and close.

use crate::net::listener::{Accepted, ReadHalf, WriteHalf};
use futures_util::{SinkExt, StreamExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use slog::{debug, Logger};
use std::time::Duration;
use taskyard_protocol::{
    ClientMessage, CoordinatorToClient, CoordinatorToWorker, FrameCodec, LeaderAddresses, Role,
    WorkerMessage,
};
use tokio_util::codec::{FramedRead, FramedWrite};

/// Longest the `NotLeader` answer may take to write.
const WRITE_TIMEOUT: Duration = Duration::from_secs(1);

/// Answers one connection of a `role` listener as a standby.
pub async fn answer_not_leader(
    accepted: Accepted,
    role: Role,
    leader: Option<LeaderAddresses>,
    handshake_timeout: Duration,
    max_frame_bytes: usize,
    log: Logger,
) {
    let Accepted {
        read, write, peer, ..
    } = accepted;
    let answered = match role {
        Role::Client => {
            let reply = CoordinatorToClient::NotLeader { leader };
            exchange::<ClientMessage, _>(read, write, reply, handshake_timeout, max_frame_bytes)
                .await
        }
        Role::Worker => {
            let reply = CoordinatorToWorker::NotLeader { leader };
            exchange::<WorkerMessage, _>(read, write, reply, handshake_timeout, max_frame_bytes)
                .await
        }
    };
    debug!(log, "standby: answered NotLeader"; "peer" => %peer, "listener" => role.name(),
           "answered" => answered);
}

/// Waits for the peer's first frame (whatever it is: every peer is sent
/// away), then writes `reply` and closes. False when the peer sent
/// nothing readable in time.
async fn exchange<In, Out>(
    read: ReadHalf,
    write: WriteHalf,
    reply: Out,
    handshake_timeout: Duration,
    max_frame_bytes: usize,
) -> bool
where
    In: DeserializeOwned,
    Out: Serialize,
{
    let mut frames = FramedRead::new(read, FrameCodec::<In, Out>::new(max_frame_bytes));
    let first = tokio::time::timeout(handshake_timeout, frames.next()).await;
    if !matches!(first, Ok(Some(Ok(_)))) {
        return false;
    }
    let mut out = FramedWrite::new(write, FrameCodec::<In, Out>::new(max_frame_bytes));
    let sent = async { out.send(reply).await.is_ok() && out.close().await.is_ok() };
    tokio::time::timeout(WRITE_TIMEOUT, sent)
        .await
        .unwrap_or(false)
}
