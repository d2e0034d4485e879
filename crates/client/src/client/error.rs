//! Everything that can go wrong between the client and the coordinator.

use std::io;
use std::time::Duration;
use taskyard_protocol::{IdPrefix, JobId, ProtocolError};
use thiserror::Error;

/// Why a client call did not produce an answer. After a connection loss
/// (`is_connection_loss`) the `Client` opens a new connection at its next
/// call; after other errors (but `NotFound`) the connection should be
/// considered unusable.
#[derive(Debug, Error)]
pub enum ClientError {
    /// The address list given to `Client::connect` is not usable: empty,
    /// an empty element, or an element that is not `host:port`.
    #[error("coordinator address {list:?}: {reason}")]
    BadAddress { list: String, reason: String },
    /// The address did not resolve, or no resolved address accepted a
    /// connection within the connect timeout.
    #[error("cannot reach coordinator at {addr}: {reason}")]
    Unreachable { addr: String, reason: String },
    /// The coordinator sent an `Error` frame; it closes the connection after it.
    #[error("coordinator refused: {message}")]
    Refused { message: String },
    /// The coordinator at `addr` is a standby; `leader` says who leads
    /// (`None`: nobody right now).
    #[error("coordinator at {addr} is a standby, not the leader{}", match leader {
        Some(l) => format!(" (the leader is {} at {})", l.node, l.client.as_deref().unwrap_or("an unadvertised address")),
        None => " (no coordinator leads right now)".to_string(),
    })]
    NotLeader {
        addr: String,
        leader: Option<Box<taskyard_protocol::LeaderAddresses>>,
    },
    /// The token was missing or wrong.
    #[error("unauthorized: check TASKYARD_TOKEN")]
    Unauthorized,
    /// TLS could not be set up or the handshake failed.
    #[error("TLS: {0}")]
    Tls(String),
    /// A per-connection limit refused the request; it was not run.
    #[error("coordinator overloaded: {0}")]
    Overloaded(String),
    /// The commit carrying the request failed: whether it took effect is
    /// unknown until the coordinator is ready again (see `/readyz`).
    #[error("{0}")]
    NotDurable(String),
    /// The coordinator answered `Hello` with a protocol version we do not speak.
    #[error("coordinator speaks protocol version {theirs}, this client speaks {ours}")]
    VersionMismatch { ours: u32, theirs: u32 },
    /// A frame could not be encoded, or an incoming frame could not be decoded.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// Reading or writing the socket failed.
    #[error("connection error: {0}")]
    Io(#[source] io::Error),
    /// No complete answer arrived within the read timeout.
    #[error("coordinator did not answer within {} s", .0.as_secs())]
    NoAnswer(Duration),
    /// The coordinator closed the connection between frames.
    #[error("coordinator closed the connection")]
    Closed,
    /// A well-formed frame that is not the answer to the request just sent.
    #[error("unexpected answer from coordinator: {0}")]
    UnexpectedResponse(String),
    /// A `ReadChunk` the coordinator could not answer with bytes: the job
    /// has no result (yet), or the offset is past the end.
    #[error("{reason}")]
    ChunkRefused { job_id: JobId, reason: String },
    /// The coordinator handled the request but its answer does not fit
    /// its `max-frame-bytes`, even cut down.
    #[error("the answer ({size} bytes) does not fit the coordinator's max-frame-bytes ({max}); ask for less")]
    AnswerTooLarge { size: u64, max: u64 },
    /// The coordinator does not know this job (only from `Client::wait`;
    /// `Client::status` answers `None` instead).
    #[error("job {0} not found (expired or never existed)")]
    NotFound(JobId),
    /// No job's id starts with this prefix (`Client::resolve`).
    #[error("no job id starts with {0} (expired or never existed)")]
    NoMatch(IdPrefix),
    /// More than one job's id starts with this prefix; some of them.
    #[error("job id prefix {prefix} is ambiguous: it starts {}{}; give more digits", candidates.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", "), if candidates.len() >= taskyard_protocol::id_prefix::MAX_CANDIDATES { ", ..." } else { "" })]
    Ambiguous {
        prefix: IdPrefix,
        candidates: Vec<JobId>,
    },
    /// The coordinator refused the request as asking for something no job
    /// can be (too many ids, a state that is not finished); nothing was done.
    #[error("request refused: {0}")]
    Invalid(String),
}

impl ClientError {
    /// True when the connection is gone or unusable (closed, reset, a
    /// frame cut off, no answer in time): the request may or may not have
    /// been carried out.
    pub fn is_connection_loss(&self) -> bool {
        matches!(
            self,
            ClientError::Closed
                | ClientError::Io(_)
                | ClientError::NoAnswer(_)
                | ClientError::Protocol(ProtocolError::Io(_) | ProtocolError::Truncated)
        )
    }

    /// True when another coordinator of the list might do better: this one
    /// is unreachable, a standby, gone, or refused us for its own reasons.
    /// A wrong token, TLS or protocol version is ours to fix: not worth
    /// trying elsewhere.
    pub fn worth_another_address(&self) -> bool {
        self.is_connection_loss()
            || matches!(
                self,
                ClientError::Unreachable { .. }
                    | ClientError::NotLeader { .. }
                    | ClientError::Refused { .. }
                    | ClientError::UnexpectedResponse(_)
            )
    }
}
