//! Starting and stopping a coordinator process (`spawn`): a single node
//! that leads without a lease (`server`), or a node of a cluster that
//! leads in terms under the shared database's lease (`node`); restoring
//! declared schedules at start-up;
//! loading and checking its config (`config_checks`).

pub mod config_checks;
pub mod node;
mod running;
pub mod schedule_startup;
pub mod server;

pub use config_checks::load_config;
pub use running::{spawn, Running};
pub use server::{CoordinatorHandle, CoordinatorServer, StartError, StopOutcome};
