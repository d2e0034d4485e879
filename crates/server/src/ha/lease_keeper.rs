//! `LeaseKeeper`: when a coordinator polls, acquires, renews and stops
//! trusting the leader lease. Pure policy on the monotonic clock: every
//! method takes the `Instant`s it needs, nothing here sleeps or does I/O.
//! The node runtime asks `due(now)` what to do, does it against the
//! `LeaseStore`, and reports the outcome back.
//!
//! Guarantees:
//! - a leader trusts its lease only until its last successful renewal's
//!   (or the acquisition's) *start* + TTL − margin: the database set the
//!   expiry to its `now()` + TTL, and its `now()` was read after that
//!   start, so the lease cannot end before the trust does unless the two
//!   clocks' rates differ by more than the margin allows;
//! - a refused renewal (someone else holds the lease) or a fenced commit
//!   steps down at once; a failed renewal (database unreachable) is retried
//!   every `retry_every` and steps down when the trust ends;
//! - a standby polls every `poll_every` (sooner when woken by a change
//!   notification) and tries to acquire only a lease that is free.

use crate::ha::LeaderRecord;
use std::time::{Duration, Instant};

/// Shortest pause between attempts after a renewal failed.
pub const MIN_RETRY: Duration = Duration::from_millis(50);

/// The lease's timings, all derived from `leader-lease-millis`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTiming {
    /// How long an acquisition or renewal holds the lease (on the
    /// database's clock).
    pub ttl: Duration,
    /// Renewal cadence of a leader, and poll cadence of a standby: TTL/3.
    pub poll_every: Duration,
    /// Pause before a failed renewal is tried again: TTL/10 (at least
    /// `MIN_RETRY`), so several tries fit in the trust left.
    pub retry_every: Duration,
    /// Subtracted from the TTL for the leader's own trust: TTL/5. It
    /// covers a database clock that runs up to 20% faster than ours over
    /// one TTL, and the time a step-down takes to close the sessions.
    pub margin: Duration,
}

impl LeaseTiming {
    /// The timings for a lease of `ttl`.
    pub fn from_ttl(ttl: Duration) -> LeaseTiming {
        LeaseTiming {
            ttl,
            poll_every: ttl / 3,
            retry_every: (ttl / 10).max(MIN_RETRY),
            margin: ttl / 5,
        }
    }

    /// How long after a successful renewal's start the leader trusts it.
    pub fn trust(&self) -> Duration {
        self.ttl.saturating_sub(self.margin)
    }
}

/// Why a leader stops leading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepDownReason {
    /// No renewal succeeded in time: the lease may have expired.
    TrustEnded,
    /// The database refused a renewal: another node holds the lease.
    Refused,
    /// A commit failed its epoch check: another node holds the lease.
    Fenced,
}

impl StepDownReason {
    /// For logs and `/api/cluster`.
    pub fn describe(self) -> &'static str {
        match self {
            StepDownReason::TrustEnded => "no renewal succeeded within the lease's trust",
            StepDownReason::Refused => "renewal refused: another coordinator holds the lease",
            StepDownReason::Fenced => "a commit was fenced: another coordinator holds the lease",
        }
    }
}

/// A leader that just stopped leading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepDown {
    pub epoch: u64,
    pub reason: StepDownReason,
}

/// What the runtime should do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// Standby: read the leader row (and check in), then report `polled`.
    Poll,
    /// Leader: renew the lease at `epoch`, then report `renewed`.
    Renew { epoch: u64 },
    /// Leader: the trust ended; stop leading now (already a standby here).
    StepDown(StepDown),
    /// Nothing until `until` (a standby also wakes on a notification).
    Wait { until: Instant },
}

/// How a renewal went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewal {
    /// The lease is ours until the database's now + TTL.
    Extended,
    /// We no longer hold it.
    Refused,
    /// The database could not be asked.
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Standby {
        next_poll: Instant,
    },
    Leading {
        epoch: u64,
        trusted_until: Instant,
        next_renew: Instant,
    },
}

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct LeaseKeeper {
    timing: LeaseTiming,
    phase: Phase,
}

/// True when a standby should try to take the lease: nobody ever held it,
/// its holder released it, or it expired on the database's clock.
pub fn lease_is_free(record: Option<&LeaderRecord>) -> bool {
    match record {
        None => true,
        Some(r) => r.leader.node.is_empty() || r.expires_in_ms <= 0,
    }
}

impl LeaseKeeper {
    /// A standby whose first poll is due at `now`.
    pub fn new(timing: LeaseTiming, now: Instant) -> LeaseKeeper {
        LeaseKeeper {
            timing,
            phase: Phase::Standby { next_poll: now },
        }
    }

    pub fn timing(&self) -> LeaseTiming {
        self.timing
    }

    /// The epoch we lead at, if we lead.
    pub fn epoch(&self) -> Option<u64> {
        match self.phase {
            Phase::Leading { epoch, .. } => Some(epoch),
            Phase::Standby { .. } => None,
        }
    }

    /// Until when a leader trusts its lease (`None`: a standby).
    pub fn trusted_until(&self) -> Option<Instant> {
        match self.phase {
            Phase::Leading { trusted_until, .. } => Some(trusted_until),
            Phase::Standby { .. } => None,
        }
    }

    /// True while we lead and trust the lease at `now`.
    pub fn is_trusted(&self, now: Instant) -> bool {
        self.trusted_until().is_some_and(|until| now < until)
    }

    /// What to do at `now`. A leader whose trust has ended becomes a
    /// standby (poll due at once) and is told to step down.
    pub fn due(&mut self, now: Instant) -> Due {
        match self.phase {
            Phase::Standby { next_poll } if now >= next_poll => Due::Poll,
            Phase::Standby { next_poll } => Due::Wait { until: next_poll },
            Phase::Leading { trusted_until, .. } if now >= trusted_until => {
                Due::StepDown(self.step_down(now, StepDownReason::TrustEnded))
            }
            Phase::Leading {
                epoch, next_renew, ..
            } if now >= next_renew => Due::Renew { epoch },
            Phase::Leading {
                trusted_until,
                next_renew,
                ..
            } => Due::Wait {
                until: next_renew.min(trusted_until),
            },
        }
    }

    /// A standby's poll ended at `now` (whatever it found): the next one
    /// is due `poll_every` later. Returns whether to try to acquire.
    pub fn polled(&mut self, now: Instant, record: Option<&LeaderRecord>) -> bool {
        if let Phase::Standby { next_poll } = &mut self.phase {
            *next_poll = now + self.timing.poll_every;
            return lease_is_free(record);
        }
        false
    }

    /// A standby's poll could not read the lease; tried again `poll_every`
    /// after `now`.
    pub fn poll_failed(&mut self, now: Instant) {
        self.polled(now, None);
    }

    /// A change notification arrived: a standby polls at once.
    pub fn woken(&mut self, now: Instant) {
        if let Phase::Standby { next_poll } = &mut self.phase {
            *next_poll = (*next_poll).min(now);
        }
    }

    /// An acquisition that `started` answered at `now` with `epoch` (the
    /// lease is ours) or `None` (held by another). Returns the epoch we
    /// now lead at; `None` also when the answer came so late that its
    /// trust had already ended (the lease then simply expires).
    pub fn acquired(&mut self, started: Instant, now: Instant, epoch: Option<u64>) -> Option<u64> {
        let Phase::Standby { .. } = self.phase else {
            return self.epoch();
        };
        let epoch = epoch?;
        let trusted_until = started + self.timing.trust();
        if now >= trusted_until {
            return None;
        }
        self.phase = Phase::Leading {
            epoch,
            trusted_until,
            next_renew: started + self.timing.poll_every,
        };
        Some(epoch)
    }

    /// A renewal that `started` ended at `now` with `outcome`. `Some`: we
    /// stopped leading (refused now, or no trust left).
    pub fn renewed(
        &mut self,
        started: Instant,
        now: Instant,
        outcome: Renewal,
    ) -> Option<StepDown> {
        let Phase::Leading {
            trusted_until,
            next_renew,
            ..
        } = &mut self.phase
        else {
            return None;
        };
        if now >= *trusted_until {
            // Trust that ended is never revived, even by a renewal that
            // started in time: the node runtime's watchdog has already
            // stopped serving at `trusted_until`.
            return Some(self.step_down(now, StepDownReason::TrustEnded));
        }
        match outcome {
            Renewal::Extended => {
                *trusted_until = (*trusted_until).max(started + self.timing.trust());
                *next_renew = started + self.timing.poll_every;
            }
            Renewal::Refused => return Some(self.step_down(now, StepDownReason::Refused)),
            Renewal::Failed => *next_renew = now + self.timing.retry_every,
        }
        match self.due(now) {
            Due::StepDown(down) => Some(down),
            _ => None,
        }
    }

    /// A commit failed its epoch check at `now`: step down at once.
    pub fn fenced(&mut self, now: Instant) -> Option<StepDown> {
        self.epoch()
            .map(|_| self.step_down(now, StepDownReason::Fenced))
    }

    fn step_down(&mut self, now: Instant, reason: StepDownReason) -> StepDown {
        let epoch = self.epoch().unwrap_or(0);
        self.phase = Phase::Standby { next_poll: now };
        StepDown { epoch, reason }
    }
}

#[cfg(test)]
#[path = "lease_keeper_tests.rs"]
mod tests;
