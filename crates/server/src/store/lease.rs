//! The leader lease as the database keeps it: one leader row (holder,
//! epoch, expires-at on the database's clock) and a row per coordinator
//! that checked in. Times are measured on the database's clock, so
//! coordinators whose clocks disagree still agree on who leads.

use std::time::Duration;
use taskyard_protocol::LeaderAddresses;

/// One coordinator process as the lease sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeIdentity {
    /// Unique per process (`node-name`, default host name plus a random
    /// suffix), so a restarted process never mistakes the old lease for
    /// its own.
    pub node: String,
    /// What it advertises to peers when it leads (`epoch` is ignored here).
    pub addresses: LeaderAddresses,
}

/// The leader row as last read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderRecord {
    /// Holder's node name, epoch and advertised addresses.
    pub leader: LeaderAddresses,
    /// Milliseconds until the lease expires on the database's clock
    /// (negative: expired that long ago).
    pub expires_in_ms: i64,
    /// Milliseconds since the holder last acquired or renewed it.
    pub renewed_ms_ago: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberRole {
    Leader,
    Standby,
}

/// A coordinator that checked in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub node: String,
    pub role: MemberRole,
    pub addresses: LeaderAddresses,
    /// Milliseconds since its last check-in, on the database's clock.
    pub seen_ms_ago: i64,
}

/// The lease's database could not be asked; says where and why (never
/// with a password).
#[derive(Debug, Clone, thiserror::Error)]
#[error("leader lease at {place}: {reason}")]
pub struct LeaseError {
    pub place: String,
    pub reason: String,
}

/// The leader lease's rows. Each call is one short transaction of its own
/// on the implementation's own connection (never the commit path's).
pub trait LeaseStore: Send {
    /// Takes the lease if it is free or expired (on the database's clock):
    /// becomes holder, bumps the epoch, sets expires-at = now + `ttl`.
    /// Returns the new epoch, or `None` when another holder's lease is
    /// still valid. Committed before it returns: from then on, every
    /// commit fenced by an older epoch fails.
    fn try_acquire(&mut self, me: &NodeIdentity, ttl: Duration) -> Result<Option<u64>, LeaseError>;

    /// Extends the lease to now + `ttl` if `me` still holds it at `epoch`.
    /// `false`: it does not (taken over); the caller must step down.
    fn renew(&mut self, me: &NodeIdentity, epoch: u64, ttl: Duration) -> Result<bool, LeaseError>;

    /// Ends the lease at once if `me` holds it at `epoch` (a clean stop),
    /// and wakes standbys waiting in `wait_for_change`.
    fn release(&mut self, me: &NodeIdentity, epoch: u64) -> Result<(), LeaseError>;

    /// The leader row, if anyone ever held the lease.
    fn leader(&mut self) -> Result<Option<LeaderRecord>, LeaseError>;

    /// Records that `me` is alive in `role` (upsert of its member row).
    fn check_in(&mut self, me: &NodeIdentity, role: MemberRole) -> Result<(), LeaseError>;

    /// Members seen within `seen_within`, leader first.
    fn members(&mut self, seen_within: Duration) -> Result<Vec<Member>, LeaseError>;

    /// Returns when the lease may have changed hands (a release was
    /// notified) or after `timeout`, whichever is first.
    fn wait_for_change(&mut self, timeout: Duration) -> Result<(), LeaseError>;
}
