//! Starting and stopping a coordinator process: a single node on SQLite
//! (`server`), or a node of a cluster on PostgreSQL that leads in terms
//! under a lease (`node`); restoring declared schedules at start-up;
//! loading and checking its config (`config_checks`).

pub mod config_checks;
pub mod node;
pub mod schedule_startup;
pub mod server;

pub use config_checks::load_config;
pub use server::{CoordinatorHandle, CoordinatorServer, StartError, StopOutcome};
