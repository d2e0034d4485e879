//! taskyard's coordinator: the single-writer `Coordinator` actor
//! ([`actors`]) over its pure core ([`scheduler`]), the SQLite and
//! PostgreSQL stores ([`store`]) and leadership ([`ha`]), the network
//! listeners ([`net`]), the HTTP API and dashboard ([`http`]), process
//! start-up ([`process`]) and the coordinator's configuration
//! ([`config`]).
//!
//! Where a request goes and the rules the code keeps: ARCHITECTURE.md at
//! the repository root.

pub mod actors;
pub mod config;
pub mod ha;
pub mod http;
pub mod net;
pub mod process;
pub mod scheduler;
pub mod store;
