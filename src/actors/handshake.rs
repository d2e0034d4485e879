//! The `Hello` exchange both listeners start with.

use crate::protocol::{Hello, Role, PROTOCOL_VERSION};

/// This coordinator's `Hello` on a listener for `role`.
pub fn hello(role: Role) -> Hello {
    Hello {
        protocol_version: PROTOCOL_VERSION,
        role,
    }
}

/// Accepts a peer's `Hello` only with our protocol version and the role this
/// listener serves; the error names both sides.
pub fn check_hello(peer: &Hello, expected: Role) -> Result<(), String> {
    if peer.protocol_version != PROTOCOL_VERSION {
        return Err(format!(
            "protocol version mismatch: peer speaks version {}, this coordinator speaks version {}",
            peer.protocol_version, PROTOCOL_VERSION
        ));
    }
    if peer.role != expected {
        return Err(format!(
            "wrong listener: a {} connected to the {expected} port (protocol version {} on both sides)",
            peer.role, PROTOCOL_VERSION
        ));
    }
    Ok(())
}
