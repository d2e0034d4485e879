//! taskyard: a distributed job scheduler with one durable coordinator.
//!
//! Where things are, how a request flows and the rules the code keeps:
//! ARCHITECTURE.md at the repository root.

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
pub mod net;
pub mod process;
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

/// The guide's Rust examples, compiled by `cargo test --doc` like the
/// README's (tests/guide_snippets.rs runs its other blocks and checks that
/// every page of the guide is listed here).
#[cfg(doctest)]
#[doc = include_str!("../docs/guide/README.md")]
#[doc = include_str!("../docs/guide/cli.md")]
#[doc = include_str!("../docs/guide/configuration.md")]
#[doc = include_str!("../docs/guide/high-availability.md")]
#[doc = include_str!("../docs/guide/http-and-metrics.md")]
#[doc = include_str!("../docs/guide/jobs.md")]
#[doc = include_str!("../docs/guide/operations.md")]
#[doc = include_str!("../docs/guide/protocol.md")]
#[doc = include_str!("../docs/guide/schedules.md")]
#[doc = include_str!("../docs/guide/security.md")]
#[doc = include_str!("../docs/guide/workers.md")]
pub struct GuideDoctests;
