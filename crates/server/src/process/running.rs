//! The one way a coordinator process starts: what the store can do
//! decides what runs. A store only one coordinator opens (SQLite) runs a
//! single node that leads without a lease; a database coordinators share
//! (PostgreSQL) runs a node that starts as a standby and leads in terms
//! under its lease.

use crate::config::CoordinatorConfig;
use crate::process::node::NodeHandle;
use crate::process::{CoordinatorHandle, StartError, StopOutcome};
use slog::Logger;

/// A started coordinator process, on threads of its own.
pub enum Running {
    /// The only coordinator of its database.
    Single(CoordinatorHandle),
    /// A node of a cluster sharing the database.
    Node(NodeHandle),
}

/// Starts the coordinator `config` describes; returns once it listens.
pub fn spawn(config: CoordinatorConfig, log: Logger) -> Result<Running, StartError> {
    let backend = crate::store::open(&config, &log);
    if backend.is_shared() {
        NodeHandle::spawn_on(config, backend, log).map(Running::Node)
    } else {
        CoordinatorHandle::spawn(config, log).map(Running::Single)
    }
}

impl Running {
    /// Graceful stop; a leading node then releases the lease.
    pub fn stop(self) -> StopOutcome {
        match self {
            Running::Single(handle) => handle.stop(),
            Running::Node(handle) => handle.stop(),
        }
    }

    /// True once it ended by itself (the database refused a commit).
    pub fn has_ended(&self) -> bool {
        match self {
            Running::Single(handle) => handle.has_ended(),
            Running::Node(handle) => handle.has_ended(),
        }
    }
}
