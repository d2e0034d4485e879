//! The first frame on every connection: protocol version, role and token.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Bumped on any incompatible change; peers with different versions refuse
/// each other in the `Hello` exchange.
///
/// 2: `List` answers carry `JobSummary`s (no payload, result or history)
/// and a `next` cursor, and takes a `cursor`; `ReadChunk` reads a payload
/// or result in pieces; a `JobView` may leave out fields that do not fit
/// one frame. Workers' frames are unchanged, but a worker and its
/// coordinator still agree on one version.
///
/// 3: high availability. A standby answers `Hello` with `NotLeader`; the
/// coordinator answers every `Heartbeat` with `HeartbeatAck`;
/// `Registered`, `TaskAssign` and `TaskCancel` carry the lease's `epoch`;
/// `Register` lists the attempts the worker still runs (`running`).
pub const PROTOCOL_VERSION: u32 = 3;

/// The `Error` frame text for a missing or wrong token; clients match on it.
pub const UNAUTHORIZED: &str = "unauthorized";

/// How the `Error` frame refusing a peer of another protocol version
/// begins; a worker that gets it stops instead of retrying.
pub const VERSION_MISMATCH: &str = "protocol version mismatch";

/// How the `Error` frame refusing a peer that dialled the other role's
/// listener begins; a worker that gets it stops instead of retrying.
pub const WRONG_LISTENER: &str = "wrong listener";

/// How the `Error` frame closing an idle client connection begins. The
/// coordinator read no request after it decided to close, so a client may
/// resend on a new connection whatever it sent after that point.
pub const IDLE_CLOSED: &str = "idle connection closed";

/// The shortest `client-idle-timeout-millis` a coordinator accepts: a
/// client that had an answer more recently cannot have been closed as idle.
pub const MIN_CLIENT_IDLE_TIMEOUT_MILLIS: u64 = 100;

/// Which listener a peer believes it is talking to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Worker,
    Client,
}

impl Role {
    /// The lowercase name used on the wire, in log lines and error texts.
    pub fn name(self) -> &'static str {
        match self {
            Role::Worker => "worker",
            Role::Client => "client",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The first frame on every connection, in both directions: the peer
/// announces itself, the coordinator answers with its own version.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub protocol_version: u32,
    pub role: Role,
    /// The peer's shared secret for this listener, when one is configured.
    /// Never sent by the coordinator.
    #[serde(default)]
    pub token: Option<String>,
    /// In the coordinator's `Hello` to a client: the HTTP address it
    /// advertises (`advertise-http`, else its bound `http-listen`), so a
    /// client that knows only the client port can find the HTTP API
    /// (`taskyard cluster`). `None` from peers, from coordinators older
    /// than this field and from one without an HTTP listener; left out of
    /// the frame when `None`, so those frames are unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<String>,
}

impl Hello {
    /// A `Hello` of this protocol version, with `token` if given.
    pub fn new(role: Role, token: Option<&str>) -> Hello {
        Hello {
            protocol_version: PROTOCOL_VERSION,
            role,
            token: token.map(str::to_string),
            http: None,
        }
    }
}

impl fmt::Debug for Hello {
    /// The token is never printed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hello")
            .field("protocol_version", &self.protocol_version)
            .field("role", &self.role)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("http", &self.http)
            .finish()
    }
}
