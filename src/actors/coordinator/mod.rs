//! The `Coordinator` actor: the single writer of all job and worker state.
//! Handlers never block: the state is in memory, SQLite work goes to
//! `Persistence` as numbered batches (one in flight at a time: group
//! commit), and every outbound effect waits in the outbox until the batch
//! holding its state is durable. While a batch waits to be sent, its rows
//! are staged into persistence's open transaction as they gather, so the
//! commit that ends it has little left to write.

mod handlers;
pub mod messages;

use crate::actors::outbox::{Delivery, Outbox, SendToWorker};
use crate::actors::persistence::{CommitBatch, PersistenceLink, StageRows};
use crate::clock::Clock;
use crate::protocol::{CoordinatorToWorker, JobId};
use crate::scheduler::{CoordinatorState, Effect, SessionId};
use crate::store::StoreError;
use actix::{Actor, ActorFutureExt, AsyncContext, Context, Recipient, SpawnHandle, WrapFuture};
use slog::{error, info, Logger};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

pub use messages::*;

/// Pause before a failed commit is retried.
const COMMIT_RETRY_DELAY: Duration = Duration::from_secs(1);

/// Longest a batch is held back to gather the results of the `TaskAssign`s
/// the last commit released (see `Coordinator::flush`).
pub const DEFAULT_COALESCE_WINDOW: Duration = Duration::from_millis(1);

/// Fewest dirty rows worth a `StageRows` message while the next batch is
/// held back: fewer would wake the persistence thread for too little work.
const STAGE_MIN_ROWS: usize = 16;

/// See the module documentation.
pub struct Coordinator {
    state: CoordinatorState,
    clock: Arc<dyn Clock>,
    persistence: PersistenceLink,
    outbox: Outbox,
    /// Write handles of live worker sessions, including replaced ones
    /// until their disconnect arrives.
    sessions: HashMap<SessionId, Recipient<SendToWorker>>,
    /// Rows of the batch being committed, to re-mark if it fails.
    in_flight: Option<Vec<JobId>>,
    /// Rows of the next batch already staged in persistence's open
    /// transaction (not durable until that batch commits).
    staged: Vec<JobId>,
    commit_retry_pending: bool,
    /// Results still expected from the `TaskAssign`s the last commit
    /// released; while it is non-zero, the next batch waits for them (at
    /// most `coalesce_window`).
    expected_results: usize,
    /// The armed coalescing timer, if a batch is being held back.
    coalescing: Option<SpawnHandle>,
    coalesce_window: Duration,
    stopping: bool,
    stats: CommitStats,
    log: Logger,
}

/// Group-commit counters, reported by `Inspect`.
#[derive(Debug, Default, Clone, Copy)]
struct CommitStats {
    batches: u64,
    rows: u64,
}

impl Coordinator {
    /// `state` is already recovered from the database.
    pub fn new(
        state: CoordinatorState,
        clock: Arc<dyn Clock>,
        persistence: PersistenceLink,
        log: Logger,
    ) -> Self {
        Coordinator {
            state,
            clock,
            persistence,
            outbox: Outbox::default(),
            sessions: HashMap::new(),
            in_flight: None,
            staged: Vec::new(),
            commit_retry_pending: false,
            expected_results: 0,
            coalescing: None,
            coalesce_window: DEFAULT_COALESCE_WINDOW,
            stopping: false,
            stats: CommitStats::default(),
            log,
        }
    }

    /// Sets the longest time a batch waits for the results of the last
    /// released round (zero: never wait).
    pub fn with_coalesce_window(mut self, window: Duration) -> Self {
        self.coalesce_window = window;
        self
    }

    fn now(&self) -> i64 {
        self.clock.now_millis()
    }

    /// Ends every handler: holds the step's effects (and `answer`, if any)
    /// behind the batch carrying its changes, then sends that batch if none
    /// is in flight.
    fn finish(&mut self, answer: Option<Delivery>, ctx: &mut Context<Self>) {
        let tag = self.outbox.tag(self.has_unsent());
        for effect in self.state.take_effects() {
            if let Some(delivery) = self.delivery_for(effect) {
                self.outbox.hold(tag, delivery);
            }
        }
        if let Some(answer) = answer {
            self.outbox.hold(tag, answer);
        }
        self.flush(ctx);
    }

    fn delivery_for(&self, effect: Effect) -> Option<Delivery> {
        let (session, message) = match effect {
            Effect::SendWorker { session, frame } => (
                session,
                SendToWorker {
                    frame,
                    then_close: false,
                },
            ),
            Effect::CloseWorker { session, reason } => (
                session,
                SendToWorker {
                    frame: CoordinatorToWorker::Error { message: reason },
                    then_close: true,
                },
            ),
        };
        let to = self.sessions.get(&session)?.clone();
        Some(Delivery::Worker(to, message))
    }

    /// True when changes wait for the next batch (dirty, or staged but not
    /// committed).
    fn has_unsent(&self) -> bool {
        self.state.has_dirty() || !self.staged.is_empty()
    }

    /// A worker result arrived: one fewer result of the last released round
    /// to wait for.
    fn result_arrived(&mut self) {
        self.expected_results = self.expected_results.saturating_sub(1);
    }

    /// Sends everything dirty as the next batch unless one is in flight (it
    /// will be sent when that one is answered).
    ///
    /// Commit coalescing: when the last commit released `TaskAssign`s whose
    /// results have not all arrived, the batch waits until they have, or
    /// until `coalesce_window` has passed, whichever is first, so one
    /// transaction carries a whole round of results (and the assignments
    /// they free slots for) instead of the first few. Nothing is released
    /// early: held effects still wait for the batch that carries their state.
    /// With no round outstanding (an idle system) a change goes at once.
    /// While the batch is held back, its rows are staged as they gather.
    fn flush(&mut self, ctx: &mut Context<Self>) {
        if !self.has_unsent() {
            self.stop_if_frozen();
            return;
        }
        if self.in_flight.is_some() || self.commit_retry_pending {
            self.stage();
            return;
        }
        if self.expected_results > 0 && !self.stopping && !self.coalesce_window.is_zero() {
            self.stage();
            if self.coalescing.is_none() {
                let handle = ctx.run_later(self.coalesce_window, |act, ctx| {
                    act.coalescing = None;
                    // Whatever has not arrived by now is not waited for again.
                    act.expected_results = 0;
                    act.flush(ctx);
                });
                self.coalescing = Some(handle);
            }
            return;
        }
        if let Some(handle) = self.coalescing.take() {
            ctx.cancel_future(handle);
        }
        let rows = self.state.take_dirty();
        let number = self.outbox.next_batch();
        let mut in_flight = std::mem::take(&mut self.staged);
        let restaged = !in_flight.is_empty();
        in_flight.extend(rows.iter().map(|j| j.id));
        if restaged {
            // A row staged and changed again since is written twice but is
            // one job of this batch.
            in_flight.sort_unstable();
            in_flight.dedup();
        }
        self.state
            .metrics_mut()
            .batch_rows
            .observe(in_flight.len() as f64);
        self.in_flight = Some(in_flight);
        let started = actix::clock::Instant::now();
        let commit = self.persistence.commit.send(CommitBatch { number, rows });
        ctx.spawn(commit.into_actor(self).map(move |result, act, ctx| {
            let latency = started.elapsed().as_secs_f64();
            act.state.metrics_mut().commit_latency.observe(latency);
            let result = result.unwrap_or_else(|e| {
                Err(StoreError {
                    path: Default::default(),
                    reason: format!("persistence unavailable: {e}"),
                })
            });
            act.committed(number, result, ctx);
        }));
    }

    /// Writes the dirty rows into persistence's open transaction ahead of
    /// the batch's commit, once there are enough to be worth a message.
    fn stage(&mut self) {
        if self.state.dirty_rows() < STAGE_MIN_ROWS {
            return;
        }
        let rows = self.state.take_dirty();
        self.staged.extend(rows.iter().map(|j| j.id));
        self.persistence.stage.do_send(StageRows { rows });
    }

    fn committed(&mut self, number: u64, result: Result<(), StoreError>, ctx: &mut Context<Self>) {
        let rows = self.in_flight.take().unwrap_or_default();
        match result {
            Ok(()) => {
                self.stats.batches += 1;
                self.stats.rows += rows.len() as u64;
                let released = self.outbox.committed(number);
                self.expected_results = released.iter().filter(|d| d.is_task_assign()).count();
                released.into_iter().for_each(Delivery::deliver);
            }
            Err(e) => {
                error!(self.log, "commit failed; answers held until it succeeds";
                       "batch" => number, "error" => %e);
                self.state.remark_dirty(rows);
                self.commit_retry_pending = true;
                ctx.run_later(COMMIT_RETRY_DELAY, |act, ctx| {
                    act.commit_retry_pending = false;
                    act.flush(ctx);
                });
            }
        }
        self.flush(ctx);
    }

    /// After `Shutdown`, stops the system once nothing is left to commit.
    fn stop_if_frozen(&self) {
        if self.stopping && self.in_flight.is_none() && !self.has_unsent() {
            info!(self.log, "state frozen and durable; stopping");
            actix::System::current().stop();
        }
    }
}

impl Actor for Coordinator {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        // Recovery may have rewritten rows (interrupted attempts).
        self.flush(ctx);
    }
}
