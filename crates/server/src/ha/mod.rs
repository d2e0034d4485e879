//! High availability: which coordinator leads, and how a standby takes over.
//!
//! The lease lives in the database (`store::lease::LeaseStore`:
//! `PostgresLease`, or `MemoryLease` in tests; re-exported here); the
//! leader's own trust in its lease is policy
//! on its monotonic clock (`LeaseKeeper`), driven on a thread of its own
//! (`LeaseRunner`); every commit transaction is fenced by the lease's
//! epoch (see `Store::set_fence`).

pub mod lease_keeper;
pub mod lease_runner;

pub use crate::store::lease::{
    LeaderRecord, LeaseError, LeaseStore, Member, MemberRole, NodeIdentity,
};
#[cfg(any(test, feature = "test-lease"))]
pub use crate::store::memory_lease::MemoryLease;
pub use crate::store::postgres::PostgresLease;
pub use lease_keeper::{Due, LeaseKeeper, LeaseTiming, Renewal, StepDown, StepDownReason};
pub use lease_runner::{LeaseCommand, LeaseEvent, LeaseRunner, TrustDeadline, LEASE_THREAD};
