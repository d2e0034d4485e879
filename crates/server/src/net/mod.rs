//! Network plumbing of the coordinator: listeners, handshakes, one session
//! actor per connection (clients, workers), and the bounds on what one
//! peer may make the coordinator hold (write budgets, open files).

pub mod client_session;
pub mod handshake;
pub mod listener;
pub mod open_files;
pub mod session_io;
pub mod worker_session;
pub mod write_budget;
