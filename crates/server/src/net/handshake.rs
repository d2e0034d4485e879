//! What a listener demands of each connection: a `Hello` of our protocol
//! version, for this listener's role, with its token when one is set, within
//! the handshake timeout; then frames no larger than the limit.

use crate::net::listener::Slot;
use crate::net::write_budget::UnwrittenBytes;
use slog::Logger;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use taskyard_client::security::Secret;
use taskyard_protocol::register::WorkerLimits;
use taskyard_protocol::{Hello, Role, PROTOCOL_VERSION, VERSION_MISMATCH, WRONG_LISTENER};

pub use taskyard_protocol::UNAUTHORIZED;

/// One listener's rules for the sessions it starts.
#[derive(Debug, Clone)]
pub struct ListenerPolicy {
    pub role: Role,
    /// Required in every `Hello` when set.
    pub token: Option<Secret>,
    pub max_frame_bytes: usize,
    /// A connection without a valid `Hello` by then is closed.
    pub handshake_timeout: Duration,
    /// Client requests forwarded whose answers are not yet written to the
    /// socket, per connection.
    pub max_in_flight: usize,
    /// A session stops reading frames while more than this many bytes it
    /// encoded are not yet taken by the socket.
    pub max_unwritten_bytes: usize,
    /// The listener's sessions' unwritten bytes, summed.
    pub unwritten: UnwrittenBytes,
    /// A client connection with no request for this long (and none in
    /// flight) is closed with an error frame. `None`: never (workers, whose
    /// liveness is the heartbeat).
    pub idle_timeout: Option<Duration>,
    /// What a worker may register with (unused on the client listener).
    pub worker_limits: WorkerLimits,
    /// The HTTP address this node advertises, told to clients in `Hello`.
    pub advertised_http: Option<String>,
}

impl ListenerPolicy {
    /// The coordinator's `Hello` on this listener.
    /// A client's also names the advertised HTTP address.
    pub fn hello(&self) -> Hello {
        let http = match self.role {
            Role::Client => self.advertised_http.clone(),
            Role::Worker => None,
        };
        Hello {
            http,
            ..Hello::new(self.role, None)
        }
    }

    /// Accepts a peer's `Hello` only with our protocol version, the role
    /// this listener serves and the right token. The error is the text of
    /// the error frame: it names both versions or roles, and never a token.
    pub fn check_hello(&self, peer: &Hello) -> Result<(), String> {
        if peer.protocol_version != PROTOCOL_VERSION {
            return Err(format!(
                "{VERSION_MISMATCH}: peer speaks version {}, this coordinator speaks version {}",
                peer.protocol_version, PROTOCOL_VERSION
            ));
        }
        if peer.role != self.role {
            return Err(format!(
                "{WRONG_LISTENER}: a {} connected to the {} port (protocol version {} on both sides)",
                peer.role, self.role, PROTOCOL_VERSION
            ));
        }
        match &self.token {
            Some(token) if !token.matches(peer.token.as_deref()) => Err(UNAUTHORIZED.to_string()),
            _ => Ok(()),
        }
    }
}

/// What every session knows about its connection.
pub struct SessionContext {
    pub policy: Arc<ListenerPolicy>,
    pub peer: SocketAddr,
    /// The listener's connection slot, freed when the session ends.
    pub slot: Option<Slot>,
    /// Carries the peer address on every line.
    pub log: Logger,
}

impl SessionContext {
    pub fn new(
        policy: Arc<ListenerPolicy>,
        peer: SocketAddr,
        slot: Option<Slot>,
        log: &Logger,
    ) -> Self {
        SessionContext {
            policy,
            peer,
            slot,
            log: log.new(slog::o!("peer" => peer.to_string())),
        }
    }

    /// The error text for a connection that sent no valid `awaited` frame
    /// (`Hello`, or a worker's `Register`) in time.
    pub fn handshake_expired(&self, awaited: &str) -> String {
        format!(
            "no valid {awaited} within handshake-timeout-millis ({})",
            self.policy.handshake_timeout.as_millis()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(token: Option<&str>) -> ListenerPolicy {
        ListenerPolicy {
            role: Role::Client,
            token: token.map(Secret::new),
            max_frame_bytes: 1024,
            handshake_timeout: Duration::from_secs(5),
            max_in_flight: 8,
            max_unwritten_bytes: 4096,
            unwritten: UnwrittenBytes::default(),
            idle_timeout: None,
            worker_limits: WorkerLimits::default(),
            advertised_http: None,
        }
    }

    #[test]
    fn a_token_is_required_only_when_set() {
        let open = policy(None);
        assert_eq!(open.check_hello(&Hello::new(Role::Client, None)), Ok(()));
        let closed = policy(Some("t0ken"));
        assert_eq!(
            closed.check_hello(&Hello::new(Role::Client, Some("t0ken"))),
            Ok(())
        );
        for wrong in [None, Some("token"), Some("")] {
            assert_eq!(
                closed.check_hello(&Hello::new(Role::Client, wrong)),
                Err(UNAUTHORIZED.to_string())
            );
        }
    }

    #[test]
    fn a_client_hello_names_the_advertised_http_address_and_a_worker_hello_does_not() {
        let advertised = Some("coord.example:7480".to_string());
        let client = ListenerPolicy {
            advertised_http: advertised.clone(),
            ..policy(None)
        };
        assert_eq!(client.hello().http, advertised);
        assert_eq!(client.hello().token, None);
        let worker = ListenerPolicy {
            role: Role::Worker,
            ..client
        };
        assert_eq!(worker.hello().http, None);
    }

    #[test]
    fn version_and_role_mismatches_name_both_sides() {
        let p = policy(None);
        let mut old = Hello::new(Role::Client, None);
        old.protocol_version = 0;
        let err = p.check_hello(&old).expect_err("old version");
        assert!(err.contains("version 0") && err.contains(&format!("version {PROTOCOL_VERSION}")));
        let err = p
            .check_hello(&Hello::new(Role::Worker, None))
            .expect_err("worker on client port");
        assert!(
            err.contains("a worker connected to the client port"),
            "{err}"
        );
    }
}
