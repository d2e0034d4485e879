//! The coordinator process's actors: the single-writer `Coordinator`, one
//! session per connection, the `Sweeper`, `Persistence` and the `History`
//! reader pool.

pub mod client_session;
pub mod coordinator;
pub mod handshake;
pub mod history;
pub mod listener;
pub mod node;
pub mod open_files;
pub mod outbox;
pub mod persistence;
pub mod schedule_startup;
pub mod server;
pub mod session_io;
pub mod sweeper;
pub mod worker_session;
pub mod write_budget;

pub use coordinator::Coordinator;
pub use server::{CoordinatorHandle, CoordinatorServer, StartError, StopOutcome};
