//! taskyard's client and worker library: what a program needs to submit
//! jobs to a coordinator or to run them, without the server's
//! dependencies (no actix-web, SQLite or PostgreSQL).
//!
//! - [`client`]: a blocking client (submit, wait, inspect, cancel, list).
//! - [`worker`]: the worker runtime and custom task types
//!   ([`worker::TaskHandler`], [`worker::Worker::builder`]).
//! - [`config`]: configuration files and flags (`WorkerConfig`, and the
//!   core the coordinator's configuration is built on).
//! - [`security`], [`clock`], [`logging`], [`memory`]: tokens and TLS,
//!   time and durations, log setup, process memory settings, shared with
//!   the coordinator.
//!
//! The wire format itself is the `taskyard-protocol` crate. Where
//! everything is: ARCHITECTURE.md at the repository root.

pub mod client;
pub mod clock;
pub mod config;
pub mod logging;
pub mod memory;
pub mod security;
pub mod worker;
