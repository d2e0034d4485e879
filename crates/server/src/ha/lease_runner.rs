//! The lease's own thread: drives a `LeaseKeeper` against a `LeaseStore`
//! (polls, acquisitions, renewals, check-ins, notifications) and reports
//! what happened through a callback. Nothing of the commit path runs here,
//! and nothing here waits on the commit path.

use crate::ha::{
    Due, LeaderRecord, LeaseKeeper, LeaseStore, LeaseTiming, Member, MemberRole, NodeIdentity,
    Renewal, StepDown, StepDownReason,
};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Name of the lease thread.
pub const LEASE_THREAD: &str = "taskyard-lease";

/// Members shown are those seen within this many polls.
const MEMBER_POLLS: u32 = 3;

/// What the lease thread reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseEvent {
    /// The lease and the members as just read (`error`: why not).
    Seen {
        leader: Option<LeaderRecord>,
        members: Option<Vec<Member>>,
        error: Option<String>,
    },
    /// We hold the lease at `epoch` (committed): recover and serve.
    Won { epoch: u64 },
    /// We stopped leading (already a standby on the lease's side).
    SteppedDown(StepDown),
}

/// What the node tells the lease thread.
#[derive(Debug)]
pub enum LeaseCommand {
    /// A commit was fenced, or the node stopped trusting the lease: stop
    /// leading at `epoch` now (ignored if we no longer lead at it).
    StepDown { epoch: u64, reason: StepDownReason },
    /// A clean stop: release the lease if held, answer, and end.
    Release(Sender<()>),
    /// End without releasing.
    Stop,
}

/// Until when the leader trusts its lease, for the node's watchdog (which
/// stops serving at that instant even while the lease thread is stuck in
/// a call to the database).
#[derive(Debug, Clone, Default)]
pub struct TrustDeadline(Arc<Mutex<Option<Instant>>>);

impl TrustDeadline {
    pub fn get(&self) -> Option<Instant> {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set(&self, until: Option<Instant>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = until;
    }
}

/// See the module documentation.
pub struct LeaseRunner {
    pub store: Box<dyn LeaseStore>,
    pub me: NodeIdentity,
    pub timing: LeaseTiming,
    pub commands: Receiver<LeaseCommand>,
    pub trust: TrustDeadline,
    pub report: Box<dyn FnMut(LeaseEvent) + Send>,
}

impl LeaseRunner {
    /// Runs on the calling thread until `Release` or `Stop` (or every
    /// sender is gone).
    pub fn run(mut self) {
        let mut keeper = LeaseKeeper::new(self.timing, Instant::now());
        loop {
            if !self.take_commands(&mut keeper, Duration::ZERO) {
                return;
            }
            match keeper.due(Instant::now()) {
                Due::Poll => self.poll(&mut keeper),
                Due::Renew { epoch } => self.renew(&mut keeper, epoch),
                Due::StepDown(down) => self.stepped_down(down),
                Due::Wait { until } => {
                    let left = until.saturating_duration_since(Instant::now());
                    if keeper.epoch().is_some() {
                        if !self.take_commands(&mut keeper, left) {
                            return;
                        }
                    } else {
                        // Wakes on a notification (a release, or a new
                        // leader): the next poll comes at once.
                        let _ = self.store.wait_for_change(left);
                        keeper.woken(Instant::now());
                    }
                }
            }
        }
    }

    /// Applies commands waiting (or arriving within `wait`); false: end.
    fn take_commands(&mut self, keeper: &mut LeaseKeeper, wait: Duration) -> bool {
        let mut wait = wait;
        loop {
            let command = if wait.is_zero() {
                match self.commands.try_recv() {
                    Ok(c) => c,
                    Err(std::sync::mpsc::TryRecvError::Empty) => return true,
                    Err(std::sync::mpsc::TryRecvError::Disconnected) => return false,
                }
            } else {
                match self.commands.recv_timeout(wait) {
                    Ok(c) => c,
                    Err(RecvTimeoutError::Timeout) => return true,
                    Err(RecvTimeoutError::Disconnected) => return false,
                }
            };
            wait = Duration::ZERO;
            match command {
                LeaseCommand::StepDown { epoch, reason } => {
                    if keeper.epoch() != Some(epoch) {
                        continue;
                    }
                    if let Some(down) = keeper.fenced(Instant::now()) {
                        self.stepped_down(StepDown { reason, ..down });
                    }
                }
                LeaseCommand::Release(done) => {
                    if let Some(epoch) = keeper.epoch() {
                        let _ = self.store.release(&self.me, epoch);
                        self.trust.set(None);
                    }
                    let _ = done.send(());
                    return false;
                }
                LeaseCommand::Stop => return false,
            }
        }
    }

    fn poll(&mut self, keeper: &mut LeaseKeeper) {
        let read = self.store.leader();
        let now = Instant::now();
        let record = match read {
            Ok(record) => record,
            Err(e) => {
                keeper.poll_failed(now);
                (self.report)(LeaseEvent::Seen {
                    leader: None,
                    members: None,
                    error: Some(e.to_string()),
                });
                return;
            }
        };
        let acquire = keeper.polled(now, record.as_ref());
        self.check_in(MemberRole::Standby, record);
        if !acquire {
            return;
        }
        let started = Instant::now();
        let answer = self.store.try_acquire(&self.me, self.timing.ttl);
        let epoch = match answer {
            Ok(epoch) => epoch,
            Err(e) => {
                (self.report)(LeaseEvent::Seen {
                    leader: None,
                    members: None,
                    error: Some(e.to_string()),
                });
                None
            }
        };
        if let Some(epoch) = keeper.acquired(started, Instant::now(), epoch) {
            self.trust.set(keeper.trusted_until());
            (self.report)(LeaseEvent::Won { epoch });
            // Show ourselves as the leader at once.
            let record = self.store.leader().ok().flatten();
            self.check_in(MemberRole::Leader, record);
        }
    }

    fn renew(&mut self, keeper: &mut LeaseKeeper, epoch: u64) {
        let started = Instant::now();
        let outcome = match self.store.renew(&self.me, epoch, self.timing.ttl) {
            Ok(true) => Renewal::Extended,
            Ok(false) => Renewal::Refused,
            Err(_) => Renewal::Failed,
        };
        let down = keeper.renewed(started, Instant::now(), outcome);
        self.trust.set(keeper.trusted_until());
        if let Some(down) = down {
            self.stepped_down(down);
            return;
        }
        if outcome == Renewal::Extended {
            let record = self.store.leader().ok().flatten();
            self.check_in(MemberRole::Leader, record);
        }
    }

    fn stepped_down(&mut self, down: StepDown) {
        self.trust.set(None);
        (self.report)(LeaseEvent::SteppedDown(down));
    }

    /// Records our check-in, reads the members, and reports both with
    /// `leader` (the row just read).
    fn check_in(&mut self, role: MemberRole, leader: Option<LeaderRecord>) {
        let checked = self.store.check_in(&self.me, role);
        let members = self
            .store
            .members(self.timing.poll_every * MEMBER_POLLS)
            .map_err(|e| e.to_string());
        let error = checked.err().map(|e| e.to_string());
        let (members, error) = match members {
            Ok(m) => (Some(m), error),
            Err(e) => (None, Some(e)),
        };
        (self.report)(LeaseEvent::Seen {
            leader,
            members,
            error,
        });
    }
}

#[cfg(test)]
#[path = "lease_runner_tests.rs"]
mod tests;
