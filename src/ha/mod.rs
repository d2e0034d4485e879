//! High availability: which coordinator leads, and how a standby takes over.
//!
//! The lease lives in the database (`LeaseStore`, implemented by the
//! PostgreSQL store); the leader's own trust in its lease is policy on its
//! monotonic clock (`LeaseKeeper`); every commit transaction is fenced by
//! the lease's epoch (see `Store::set_fence`).

pub mod lease_keeper;
pub mod lease_store;

pub use lease_keeper::{Due, LeaseKeeper, LeaseTiming, Renewal, StepDown, StepDownReason};
pub use lease_store::{LeaderRecord, LeaseError, LeaseStore, Member, MemberRole, NodeIdentity};
