//! `MemoryLease`: the leader lease kept in this process's memory, shared by
//! every clone, with the process's monotonic clock as "the database's".
//! For tests and `taskyard dev`-style single-machine experiments of the
//! node runtime without PostgreSQL; it meets the `LeaseStore` contract,
//! notifications included. `fail(true)` makes every call fail, like an
//! unreachable database; `stall(true)` makes every call hang.

use crate::store::lease::{LeaderRecord, LeaseError, LeaseStore, Member, MemberRole, NodeIdentity};
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use taskyard_protocol::LeaderAddresses;

#[derive(Default)]
struct Rows {
    holder: Option<(LeaderAddresses, Instant, Instant)>,
    epoch: u64,
    members: BTreeMap<String, (MemberRole, LeaderAddresses, Instant)>,
    changes: u64,
    failing: bool,
    stalled: bool,
}

/// See the module documentation.
#[derive(Clone, Default)]
pub struct MemoryLease {
    rows: Arc<(Mutex<Rows>, Condvar)>,
}

fn ms(d: Duration) -> i64 {
    d.as_millis() as i64
}

impl MemoryLease {
    pub fn new() -> MemoryLease {
        MemoryLease::default()
    }

    fn rows(&self) -> Result<MutexGuard<'_, Rows>, LeaseError> {
        let mut rows = self.rows.0.lock().unwrap_or_else(|e| e.into_inner());
        while rows.stalled {
            rows = self.rows.1.wait(rows).unwrap_or_else(|e| e.into_inner());
        }
        if rows.failing {
            return Err(LeaseError {
                place: "memory".into(),
                reason: "unreachable (fail injected)".into(),
            });
        }
        Ok(rows)
    }

    /// Every call fails while `failing` (an unreachable database).
    pub fn fail(&self, failing: bool) {
        self.rows
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .failing = failing;
    }

    /// Every call blocks while `stalled` (a database that stopped
    /// answering without closing the connection).
    pub fn stall(&self, stalled: bool) {
        let mut rows = self.rows.0.lock().unwrap_or_else(|e| e.into_inner());
        rows.stalled = stalled;
        self.rows.1.notify_all();
    }

    /// Moves the epoch on behind the holder's back (what a takeover by
    /// another process looks like to the holder), keeping the holder.
    pub fn bump_epoch(&self) -> u64 {
        let mut rows = self.rows.0.lock().unwrap_or_else(|e| e.into_inner());
        rows.epoch += 1;
        rows.epoch
    }

    /// The epoch now.
    pub fn epoch(&self) -> u64 {
        self.rows.0.lock().unwrap_or_else(|e| e.into_inner()).epoch
    }

    fn notify(&self, rows: &mut Rows) {
        rows.changes += 1;
        self.rows.1.notify_all();
    }
}

impl LeaseStore for MemoryLease {
    fn try_acquire(&mut self, me: &NodeIdentity, ttl: Duration) -> Result<Option<u64>, LeaseError> {
        let now = Instant::now();
        let mut rows = self.rows()?;
        let free = rows
            .holder
            .as_ref()
            .is_none_or(|(_, _, expires)| *expires <= now);
        if !free {
            return Ok(None);
        }
        rows.epoch += 1;
        let addresses = LeaderAddresses {
            epoch: rows.epoch,
            node: me.node.clone(),
            ..me.addresses.clone()
        };
        rows.holder = Some((addresses, now, now + ttl));
        let epoch = rows.epoch;
        self.notify(&mut rows);
        Ok(Some(epoch))
    }

    fn renew(&mut self, me: &NodeIdentity, epoch: u64, ttl: Duration) -> Result<bool, LeaseError> {
        let now = Instant::now();
        let mut rows = self.rows()?;
        let current = rows.epoch;
        match &mut rows.holder {
            Some((holder, renewed, expires)) if holder.node == me.node && current == epoch => {
                *renewed = now;
                *expires = now + ttl;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn release(&mut self, me: &NodeIdentity, epoch: u64) -> Result<(), LeaseError> {
        let mut rows = self.rows()?;
        let mine = rows.epoch == epoch
            && rows
                .holder
                .as_ref()
                .is_some_and(|(h, _, _)| h.node == me.node);
        if mine {
            // Like the database's row: still there, with no holder.
            let now = Instant::now();
            if let Some((holder, _, expires)) = &mut rows.holder {
                *holder = LeaderAddresses::default();
                *expires = now;
            }
            self.notify(&mut rows);
        }
        Ok(())
    }

    fn leader(&mut self) -> Result<Option<LeaderRecord>, LeaseError> {
        let now = Instant::now();
        let rows = self.rows()?;
        Ok(rows
            .holder
            .as_ref()
            .map(|(leader, renewed, expires)| LeaderRecord {
                leader: LeaderAddresses {
                    epoch: rows.epoch,
                    ..leader.clone()
                },
                expires_in_ms: if *expires > now {
                    ms(*expires - now)
                } else {
                    -ms(now - *expires)
                },
                renewed_ms_ago: ms(now - *renewed),
            }))
    }

    fn check_in(&mut self, me: &NodeIdentity, role: MemberRole) -> Result<(), LeaseError> {
        let mut rows = self.rows()?;
        let addresses = LeaderAddresses {
            node: me.node.clone(),
            ..me.addresses.clone()
        };
        rows.members
            .insert(me.node.clone(), (role, addresses, Instant::now()));
        Ok(())
    }

    fn members(&mut self, seen_within: Duration) -> Result<Vec<Member>, LeaseError> {
        let now = Instant::now();
        let rows = self.rows()?;
        let mut members: Vec<Member> = rows
            .members
            .iter()
            .filter(|(_, (_, _, seen))| now - *seen <= seen_within)
            .map(|(node, (role, addresses, seen))| Member {
                node: node.clone(),
                role: *role,
                addresses: addresses.clone(),
                seen_ms_ago: ms(now - *seen),
            })
            .collect();
        members.sort_by_key(|m| m.role != MemberRole::Leader);
        Ok(members)
    }

    fn wait_for_change(&mut self, timeout: Duration) -> Result<(), LeaseError> {
        let rows = self.rows()?;
        let seen = rows.changes;
        let _ = self
            .rows
            .1
            .wait_timeout_while(rows, timeout, |r| r.changes == seen);
        Ok(())
    }
}
