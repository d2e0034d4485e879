//! taskyard: a distributed job scheduler with one durable coordinator.
//! This crate holds the `taskyard` CLI and the binaries, and re-exports
//! the workspace's crates under one name: `taskyard-protocol` (the wire
//! format), `taskyard-client` (client and worker library),
//! `taskyard-server` (the coordinator) and `taskyard-bench` (the load
//! generator). A program that only submits or runs jobs depends on
//! `taskyard-client` alone.
//!
//! Where things are, how a request flows and the rules the code keeps:
//! ARCHITECTURE.md at the repository root.

pub mod cli;
pub mod signals;

pub use taskyard_bench as bench;
pub use taskyard_client::{client, clock, logging, memory, security, worker};
pub use taskyard_protocol as protocol;
pub use taskyard_server::{actors, config, ha, http, net, process, scheduler, store};

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
#[doc = include_str!("../docs/guide/flow-control.md")]
#[doc = include_str!("../docs/guide/high-availability.md")]
#[doc = include_str!("../docs/guide/http-and-metrics.md")]
#[doc = include_str!("../docs/guide/jobs.md")]
#[doc = include_str!("../docs/guide/operations.md")]
#[doc = include_str!("../docs/guide/protocol.md")]
#[doc = include_str!("../docs/guide/schedules.md")]
#[doc = include_str!("../docs/guide/security.md")]
#[doc = include_str!("../docs/guide/workers.md")]
pub struct GuideDoctests;
