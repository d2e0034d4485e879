//! High availability: which coordinator leads, and how a standby takes over.
//!
//! The lease lives in the database (`LeaseStore`: `PostgresLease`, or
//! `MemoryLease` for tests); the leader's own trust in its lease is policy
//! on its monotonic clock (`LeaseKeeper`), driven on a thread of its own
//! (`LeaseRunner`); every commit transaction is fenced by the lease's
//! epoch (see `Store::set_fence`).

pub mod lease_keeper;
pub mod lease_runner;
pub mod lease_store;
/// Only in tests: `cargo test` enables the `test-lease` feature for the
/// integration tests; a release build has no lease that is not shared.
#[cfg(any(test, feature = "test-lease"))]
pub mod memory_lease;
pub mod postgres_lease;

pub use lease_keeper::{Due, LeaseKeeper, LeaseTiming, Renewal, StepDown, StepDownReason};
pub use lease_runner::{LeaseCommand, LeaseEvent, LeaseRunner, TrustDeadline, LEASE_THREAD};
pub use lease_store::{LeaderRecord, LeaseError, LeaseStore, Member, MemberRole, NodeIdentity};
#[cfg(any(test, feature = "test-lease"))]
pub use memory_lease::MemoryLease;
pub use postgres_lease::PostgresLease;
