//! `GroupCommit`: when the coordinator's changes go to the database and
//! when what they reveal may be released. A plain value (no actors, no
//! clock): each method takes an event and returns the `Command`s the actor
//! must apply, in order.
//!
//! Guarantees, whatever the order of events:
//! - at most one commit is in flight; batches are numbered 1, 2, … and sent
//!   in that order;
//! - an effect is released only once the batch carrying every change made
//!   before it was held is committed, and effects are released in the order
//!   they were held;
//! - rows of a failed commit (or a failed staging) are marked dirty again
//!   and go in a later batch; nothing they reveal is released meanwhile;
//! - after a stop is requested, `Stop` comes exactly once: when everything
//!   is durable, or when the stop deadline passes first (with the number of
//!   changes that were not durable);
//! - a failed commit never leaves anybody waiting: every awaited effect
//!   held then (a client's answer) is failed at once (`FailAwaited`), so
//!   its requester hears that the outcome is unknown; effects nobody waits
//!   for (worker frames) stay held until a commit succeeds;
//! - a commit the database refused for good (`refused`: a constraint, a
//!   corrupt file) ends the process (`Abandon`, once) instead of retrying
//!   what cannot succeed: memory disagrees with the database, and recovery
//!   from the database is the way back.

use std::collections::VecDeque;
use std::time::Duration;
use taskyard_protocol::JobId;

/// Pause before a failed commit is retried.
pub const COMMIT_RETRY_DELAY: Duration = Duration::from_secs(1);

/// Fewest dirty rows worth a `Stage` while the next batch is held back:
/// fewer would wake the persistence thread for too little work.
pub const STAGE_MIN_ROWS: usize = 16;

/// Where the rows to persist come from (the coordinator's state).
pub trait RowSource {
    type Row;
    /// How many rows `take_dirty` would return.
    fn dirty_count(&self) -> usize;
    /// Every row changed since the last call.
    fn take_dirty(&mut self) -> Vec<Self::Row>;
    /// The job a row belongs to.
    fn job_of(row: &Self::Row) -> JobId;
    /// Marks these jobs changed again: their write did not become durable.
    fn remark_dirty(&mut self, jobs: Vec<JobId>);
}

/// An effect held until durable.
pub trait HeldEffect {
    /// True when the effect hands a job to a worker, so a result will come
    /// back (the next batch may wait for it: coalescing).
    fn starts_attempt(&self) -> bool;
    /// True when somebody waits for the effect (a client's answer): the
    /// batch it is held behind goes without waiting for results.
    fn awaited(&self) -> bool;
}

/// The timers `GroupCommit` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Timer {
    /// The longest the next batch waits for the results of the last round.
    Coalesce,
    /// A failed commit is tried again.
    Retry,
    /// A requested stop ends now, durable or not.
    StopDeadline,
}

/// What the actor must do, in order.
#[derive(Debug, PartialEq)]
pub enum Command<R, E> {
    /// Write these rows into persistence's open transaction (not durable).
    Stage(Vec<R>),
    /// Write these rows and commit batch `batch` with everything staged
    /// since the last commit; answer with `committed`. `jobs` is the number
    /// of distinct jobs the batch makes durable.
    Commit {
        batch: u64,
        rows: Vec<R>,
        jobs: usize,
    },
    /// These effects are durable: deliver them, in order.
    Release(Vec<E>),
    /// Call `timer_fired` with this timer after the delay.
    ArmTimer(Timer, Duration),
    /// The coalescing timer is no longer wanted.
    CancelCoalesceTimer,
    /// The first commit of a failure streak failed.
    OutageBegan { batch: u64, error: String },
    /// A commit succeeded after `failures` failed in a row.
    OutageEnded { failures: u64 },
    /// Stop the process. `not_durable` changes and `held` effects were
    /// never made durable (both zero after a clean stop).
    Stop { not_durable: usize, held: usize },
    /// Answer these awaited effects with an error instead (a commit
    /// failed; whether what they answer took effect is unknown until one
    /// succeeds): `reason` says why.
    FailAwaited { effects: Vec<E>, reason: String },
    /// The database refused a commit for good: stop the process with an
    /// error naming `reason`, so recovery reads what the database holds.
    Abandon { reason: String },
}

/// A streak of failed commits: the coordinator is in an outage, answers
/// are held, readiness is false.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outage {
    /// Commits failed in a row.
    pub failures: u64,
    /// The newest failure's text.
    pub last_error: String,
}

/// Counters reported by `Inspect`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CommitStats {
    pub batches: u64,
    /// Distinct jobs made durable, summed over batches.
    pub rows: u64,
}

/// See the module documentation.
#[derive(Clone)]
pub struct GroupCommit<E> {
    coalesce_window: Duration,
    shutdown_timeout: Duration,
    /// Effects waiting for their batch, with its number, in hold order.
    held: VecDeque<(u64, E)>,
    /// The newest batch number handed to persistence.
    sent: u64,
    /// The newest batch number committed.
    durable: u64,
    /// Jobs of the batch being committed, to mark dirty again if it fails.
    in_flight: Option<Vec<JobId>>,
    /// Jobs of the next batch already staged (not durable until it commits).
    staged: Vec<JobId>,
    retry_pending: bool,
    /// Results still expected from the attempts the last commit released;
    /// while non-zero the next batch waits for them (at most the window).
    expected_results: usize,
    coalescing: bool,
    /// An awaited effect is held behind the next batch (not yet sent).
    awaited_unsent: bool,
    stopping: bool,
    stopped: bool,
    outage: Option<Outage>,
    /// Why the database refused a commit for good, once it has.
    abandoned: Option<String>,
    stats: CommitStats,
}

type Commands<R, E> = Vec<Command<R, E>>;

impl<E: HeldEffect> GroupCommit<E> {
    /// `coalesce_window` zero: a batch never waits for results.
    pub fn new(coalesce_window: Duration, shutdown_timeout: Duration) -> Self {
        GroupCommit {
            coalesce_window,
            shutdown_timeout,
            held: VecDeque::new(),
            sent: 0,
            durable: 0,
            in_flight: None,
            staged: Vec::new(),
            retry_pending: false,
            expected_results: 0,
            coalescing: false,
            awaited_unsent: false,
            stopping: false,
            stopped: false,
            outage: None,
            abandoned: None,
            stats: CommitStats::default(),
        }
    }

    pub fn set_coalesce_window(&mut self, window: Duration) {
        self.coalesce_window = window;
    }

    pub fn set_shutdown_timeout(&mut self, timeout: Duration) {
        self.shutdown_timeout = timeout;
    }

    /// A step of the coordinator ended: `effects` (what the step revealed,
    /// in order) are held behind the batch that will carry the step's
    /// changes (or the newest batch sent, if the step changed nothing
    /// unsent), then the batch is sent, staged or held back.
    pub fn step<D: RowSource>(
        &mut self,
        effects: impl IntoIterator<Item = E>,
        rows: &mut D,
    ) -> Commands<D::Row, E> {
        let mut out = Vec::new();
        let tag = if self.has_unsent(rows) {
            self.sent + 1
        } else {
            self.sent
        };
        let mut ready = Vec::new();
        for effect in effects {
            if tag <= self.durable && self.held.is_empty() {
                ready.push(effect);
            } else {
                self.awaited_unsent |= tag > self.sent && effect.awaited();
                self.held.push_back((tag, effect));
            }
        }
        if !ready.is_empty() {
            out.push(Command::Release(ready));
        }
        self.flush(rows, &mut out);
        out
    }

    /// A result of a released attempt arrived (applied or not).
    pub fn result_arrived(&mut self) {
        self.expected_results = self.expected_results.saturating_sub(1);
    }

    /// Persistence answered the commit of batch `batch`.
    pub fn committed<D: RowSource>(
        &mut self,
        batch: u64,
        result: Result<(), String>,
        rows: &mut D,
    ) -> Commands<D::Row, E> {
        let mut out = Vec::new();
        let jobs = self.in_flight.take().unwrap_or_default();
        match result {
            Ok(()) => {
                self.stats.batches += 1;
                self.stats.rows += jobs.len() as u64;
                self.durable = self.durable.max(batch);
                if let Some(outage) = self.outage.take() {
                    out.push(Command::OutageEnded {
                        failures: outage.failures,
                    });
                }
                let ready = self
                    .held
                    .iter()
                    .take_while(|(tag, _)| *tag <= self.durable)
                    .count();
                let released: Vec<E> = self.held.drain(..ready).map(|(_, e)| e).collect();
                self.expected_results = released.iter().filter(|e| e.starts_attempt()).count();
                if !released.is_empty() {
                    out.push(Command::Release(released));
                }
            }
            Err(error) => {
                rows.remark_dirty(jobs);
                self.fail_awaited(&error, &mut out);
                match &mut self.outage {
                    Some(outage) => {
                        outage.failures += 1;
                        outage.last_error = error;
                    }
                    None => {
                        out.push(Command::OutageBegan {
                            batch,
                            error: error.clone(),
                        });
                        self.outage = Some(Outage {
                            failures: 1,
                            last_error: error,
                        });
                    }
                }
                self.retry_pending = true;
                out.push(Command::ArmTimer(Timer::Retry, COMMIT_RETRY_DELAY));
            }
        }
        self.flush(rows, &mut out);
        out
    }

    /// Persistence answered the commit of batch `batch`: the database
    /// refused it for good (`reason`), so no retry can succeed. Awaited
    /// effects are failed, then the process is abandoned; nothing is sent
    /// or released after this.
    pub fn refused<R>(&mut self, batch: u64, reason: String) -> Commands<R, E> {
        let mut out = Vec::new();
        if self.abandoned.is_some() {
            return out;
        }
        self.in_flight = None;
        self.fail_awaited(&reason, &mut out);
        self.stopping = true;
        self.stopped = true;
        let reason = format!("the database refused batch {batch}: {reason}");
        self.abandoned = Some(reason.clone());
        out.push(Command::Abandon { reason });
        out
    }

    /// Why the database refused a commit for good, once it has: the
    /// coordinator is ending.
    pub fn abandoned(&self) -> Option<&str> {
        self.abandoned.as_deref()
    }

    /// Takes every awaited effect out of the held ones, to be answered
    /// with `reason` instead; the others keep their place.
    fn fail_awaited<R>(&mut self, reason: &str, out: &mut Commands<R, E>) {
        let (awaited, kept): (VecDeque<_>, VecDeque<_>) =
            self.held.drain(..).partition(|(_, e)| e.awaited());
        self.held = kept;
        self.awaited_unsent = false;
        if !awaited.is_empty() {
            out.push(Command::FailAwaited {
                effects: awaited.into_iter().map(|(_, e)| e).collect(),
                reason: reason.to_string(),
            });
        }
    }

    /// A timer asked for by `ArmTimer` fired.
    pub fn timer_fired<D: RowSource>(&mut self, timer: Timer, rows: &mut D) -> Commands<D::Row, E> {
        let mut out = Vec::new();
        match timer {
            Timer::Coalesce => {
                self.coalescing = false;
                // Whatever has not arrived by now is not waited for again.
                self.expected_results = 0;
            }
            Timer::Retry => self.retry_pending = false,
            Timer::StopDeadline => {
                if !self.stopped {
                    self.stopped = true;
                    out.push(Command::Stop {
                        not_durable: self.not_durable(rows),
                        held: self.held.len(),
                    });
                }
                return out;
            }
        }
        self.flush(rows, &mut out);
        out
    }

    /// Stop gracefully: commit what is pending without waiting for results,
    /// then `Stop`; or `Stop` anyway once the shutdown timeout has passed.
    pub fn stop_requested<D: RowSource>(&mut self, rows: &mut D) -> Commands<D::Row, E> {
        let mut out = Vec::new();
        if self.stopping {
            return out;
        }
        self.stopping = true;
        out.push(Command::ArmTimer(
            Timer::StopDeadline,
            self.shutdown_timeout,
        ));
        self.flush(rows, &mut out);
        out
    }

    /// True once a stop was requested: the coordinator takes no new work.
    pub fn is_stopping(&self) -> bool {
        self.stopping
    }

    /// The current failure streak, if the last commit failed.
    pub fn outage(&self) -> Option<&Outage> {
        self.outage.as_ref()
    }

    /// Effects still waiting for durability.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// The newest committed batch.
    pub fn durable(&self) -> u64 {
        self.durable
    }

    /// The newest batch handed to persistence. Rows dirty now go in a
    /// batch after it (the next one, unless that commit fails; then
    /// `durable` stays below the next one until a later batch carrying
    /// them commits), so `sent() + 1 <= durable()` means they are durable.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// True when nothing waits for a commit: no batch in flight, nothing
    /// staged or dirty.
    pub fn is_settled<D: RowSource>(&self, rows: &D) -> bool {
        self.in_flight.is_none() && !self.has_unsent(rows)
    }

    pub fn stats(&self) -> CommitStats {
        self.stats
    }

    /// True when changes wait for the next batch (dirty, or staged but not
    /// committed).
    fn has_unsent<D: RowSource>(&self, rows: &D) -> bool {
        rows.dirty_count() > 0 || !self.staged.is_empty()
    }

    /// Changes that are not durable: in the batch in flight, staged, or dirty.
    fn not_durable<D: RowSource>(&self, rows: &D) -> usize {
        self.in_flight.as_ref().map_or(0, Vec::len) + self.staged.len() + rows.dirty_count()
    }

    /// Sends everything dirty as the next batch unless one is in flight or
    /// a retry is pending (then rows are staged while they wait).
    ///
    /// Coalescing: when the last commit released attempts whose results
    /// have not all arrived, the batch waits until they have, or until the
    /// window has passed, whichever is first, so one transaction carries a
    /// whole round of results (and the assignments they free slots for).
    /// With no round outstanding (an idle system) a change goes at once; so
    /// does a batch somebody waits for (a client's answer is held behind
    /// it: a round's results are throughput, the answer is latency); a
    /// stopping coordinator waits for nothing.
    fn flush<D: RowSource>(&mut self, rows: &mut D, out: &mut Commands<D::Row, E>) {
        if self.stopped {
            return;
        }
        if !self.has_unsent(rows) {
            if self.stopping && self.in_flight.is_none() {
                self.stopped = true;
                out.push(Command::Stop {
                    not_durable: 0,
                    held: self.held.len(),
                });
            }
            return;
        }
        if self.in_flight.is_some() || self.retry_pending {
            self.stage(rows, out);
            return;
        }
        if self.expected_results > 0
            && !self.awaited_unsent
            && !self.stopping
            && !self.coalesce_window.is_zero()
        {
            self.stage(rows, out);
            if !self.coalescing {
                self.coalescing = true;
                out.push(Command::ArmTimer(Timer::Coalesce, self.coalesce_window));
            }
            return;
        }
        if self.coalescing {
            self.coalescing = false;
            out.push(Command::CancelCoalesceTimer);
        }
        let taken = rows.take_dirty();
        let mut jobs = std::mem::take(&mut self.staged);
        let restaged = !jobs.is_empty();
        jobs.extend(taken.iter().map(D::job_of));
        if restaged {
            // A row staged and changed again since is written twice but is
            // one job of this batch.
            jobs.sort_unstable();
            jobs.dedup();
        }
        self.sent += 1;
        self.awaited_unsent = false;
        out.push(Command::Commit {
            batch: self.sent,
            rows: taken,
            jobs: jobs.len(),
        });
        self.in_flight = Some(jobs);
    }

    /// Writes the dirty rows ahead of their batch's commit, once there are
    /// enough to be worth a message.
    fn stage<D: RowSource>(&mut self, rows: &mut D, out: &mut Commands<D::Row, E>) {
        if rows.dirty_count() < STAGE_MIN_ROWS {
            return;
        }
        let taken = rows.take_dirty();
        self.staged.extend(taken.iter().map(D::job_of));
        out.push(Command::Stage(taken));
    }
}

#[cfg(test)]
#[path = "group_commit_tests.rs"]
mod tests;
