//! Starting and stopping a coordinator process: a single node on SQLite
//! (`server`), or a node of a cluster on PostgreSQL that leads in terms
//! under a lease (`node`); restoring declared schedules at start-up.

pub mod node;
pub mod schedule_startup;
pub mod server;

pub use server::{CoordinatorHandle, CoordinatorServer, StartError, StopOutcome};
