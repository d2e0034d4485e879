//! taskyard: a distributed job scheduler with one durable coordinator.

pub mod actors;
pub mod bench;
pub mod cli;
pub mod client;
pub mod clock;
pub mod config;
pub mod ha;
pub mod http;
pub mod logging;
pub mod memory;
pub mod protocol;
pub mod scheduler;
pub mod security;
pub mod signals;
pub mod store;
pub mod worker;

/// The README's Rust example, compiled (not run: it serves until stopped)
/// by `cargo test --doc`, so it cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
