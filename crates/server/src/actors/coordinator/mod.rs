//! The `Coordinator` actor: the single writer of all job and worker state.
//! Handlers never block: the state is in memory, SQLite work goes to
//! `Persistence`, and every outbound effect waits until the batch holding
//! its state is durable. When batches go and when effects are released is
//! decided by `GroupCommit` (a plain value); the actor applies its commands.

mod eviction_steps;
mod expiry;
mod handlers;
mod job_admin;
pub mod messages;
mod schedule_passes;
mod schedules;
mod stored_reads;

use crate::actors::outbox::{Delivery, SendToWorker};
use crate::actors::persistence::{CommitBatch, DeleteJobs, ExpireJobs, PersistenceLink, StageRows};
use crate::actors::stored_reads::{ReadShares, StoredReadLink};
use crate::scheduler::deletion_queue::DeletionQueue;
use crate::scheduler::{CoordinatorState, Effect, JobRow, Retention, SessionId};
use actix::{
    Actor, ActorContext, ActorFutureExt, AsyncContext, Context, Recipient, SpawnHandle, WrapFuture,
};
use slog::{debug, error, info, Logger};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use taskyard_client::clock::{Clock, Now};
use taskyard_protocol::CoordinatorToWorker;

pub use crate::scheduler::expiry_run::ExpiryPolicy;
pub use crate::scheduler::group_commit::{
    Command, CommitStats, GroupCommit, HeldEffect, Outage, RowSource, Timer, COMMIT_RETRY_DELAY,
    STAGE_MIN_ROWS,
};
pub use messages::*;

/// Longest a batch is held back to gather the results of the `TaskAssign`s
/// the last commit released (see `GroupCommit`).
pub const DEFAULT_COALESCE_WINDOW: Duration = Duration::from_millis(1);

/// Longest a graceful stop waits for pending changes to become durable
/// unless configured (`shutdown-timeout-millis`).
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);

/// Exit code of a stop that left changes not durable.
pub const NOT_DURABLE_EXIT_CODE: i32 = 1;

/// Exit code of a coordinator that ended because the database refused a
/// commit for good (see `GroupCommit::refused`).
pub const COMMIT_REFUSED_EXIT_CODE: i32 = 3;

/// How long an abandoning coordinator lets its sessions write the failed
/// answers before its actor system stops.
const ABANDON_GRACE: Duration = Duration::from_secs(1);

/// See the module documentation.
pub struct Coordinator {
    state: CoordinatorState,
    clock: Arc<dyn Clock>,
    persistence: PersistenceLink,
    commits: GroupCommit<Delivery>,
    /// Write handles of live worker sessions, including replaced ones
    /// until their disconnect arrives.
    sessions: HashMap<SessionId, Recipient<SendToWorker>>,
    /// The armed coalescing timer, if a batch is being held back.
    coalesce_timer: Option<SpawnHandle>,
    /// The history reader pool and the reads waiting for it. Without
    /// one, every finished job stays in memory and every read is answered
    /// from it.
    history: Option<stored_reads::StoredReadPool>,
    /// Deletion of expired jobs; none: finished jobs are kept forever.
    expiry: Option<expiry::Expiry>,
    /// Where deletions asked for by clients go; none: they are refused.
    deletion: Option<Recipient<DeleteJobs>>,
    /// Deletions sent and not yet answered (at most
    /// `job_admin::MAX_DELETIONS_IN_FLIGHT`), parked ones included.
    deletions: DeletionQueue<job_admin::Deletion>,
    /// Where schedule changes are stored; none: they are refused.
    schedule_writes: Option<Recipient<crate::actors::persistence::WriteSchedule>>,
    /// Schedule passes between sweeps: the slot timer, and passes waiting
    /// for a commit.
    passes: schedule_passes::Passes,

    /// Told when a commit is fenced (another coordinator took the lease);
    /// none on SQLite, where nothing is fenced.
    on_fenced: Option<Recipient<Fenced>>,
    /// Set once deposed: nothing more is released, committed or answered.
    deposed: bool,
    /// Until when the leader lease is trusted (PostgreSQL); none on
    /// SQLite. Nothing is released once it has passed, even before the
    /// node's watchdog deposes this coordinator (a leader paused past its
    /// lease wakes with requests queued ahead of the watchdog's).
    trust: Option<crate::ha::TrustDeadline>,
    log: Logger,
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
            commits: GroupCommit::new(DEFAULT_COALESCE_WINDOW, DEFAULT_SHUTDOWN_TIMEOUT),
            sessions: HashMap::new(),
            coalesce_timer: None,
            history: None,
            expiry: None,
            deletion: None,
            deletions: DeletionQueue::new(job_admin::MAX_DELETIONS_IN_FLIGHT),
            schedule_writes: None,
            passes: schedule_passes::Passes::default(),

            on_fenced: None,
            deposed: false,
            trust: None,
            log,
        }
    }

    /// Tells `on_fenced` when a commit fails its epoch check; the
    /// coordinator has then already deposed itself (see `Depose`).
    pub fn with_fence_watch(mut self, on_fenced: Recipient<Fenced>) -> Self {
        self.on_fenced = Some(on_fenced);
        self
    }

    /// Releases nothing once `trust` has passed (or is unset): the
    /// coordinator deposes itself instead.
    pub fn with_trust(mut self, trust: crate::ha::TrustDeadline) -> Self {
        self.trust = Some(trust);
        self
    }

    /// The lease's trust ended (never, without a lease).
    fn untrusted(&self) -> bool {
        self.trust.as_ref().is_some_and(|t| {
            t.get()
                .is_none_or(|until| std::time::Instant::now() >= until)
        })
    }

    /// Stops leading at once: every held effect and answer is dropped
    /// unsent, nothing more is committed, and the actor stops. Nothing
    /// held is released, so a deposed leader reveals nothing that was not
    /// durable under its own epoch.
    fn depose(&mut self, why: &str, ctx: &mut Context<Self>) {
        if self.deposed {
            return;
        }
        self.deposed = true;
        error!(self.log, "deposed: stopping without releasing held answers";
               "reason" => why, "held_effects" => self.commits.held());
        ctx.stop();
    }

    /// Reads jobs that are not in memory through `history`, and keeps in
    /// memory only the finished jobs `retention` allows (evicted by the
    /// sweep once their rows are durable).
    /// `shares`: how the readers are shared among connections.
    pub fn with_history(
        mut self,
        history: StoredReadLink,
        shares: ReadShares,
        retention: Retention,
    ) -> Self {
        self.history = Some(stored_reads::StoredReadPool::new(history, shares));
        self.state.set_retention(retention);
        self
    }

    /// Deletes finished jobs (through `expire`, the persistence thread)
    /// once `policy` says they have expired; the sweep looks for them.
    pub fn with_expiry(mut self, expire: Recipient<ExpireJobs>, policy: ExpiryPolicy) -> Self {
        self.expiry = Some(expiry::Expiry {
            link: expire,
            run: crate::scheduler::expiry_run::ExpiryRun::new(policy),
        });
        self
    }

    /// Deletes finished jobs clients ask to delete through `delete` (the
    /// persistence thread).
    /// Stores schedule changes through `writes`.
    pub fn with_schedule_writes(
        mut self,
        writes: Recipient<crate::actors::persistence::WriteSchedule>,
    ) -> Self {
        self.schedule_writes = Some(writes);
        self
    }

    pub fn with_deletion(mut self, delete: Recipient<DeleteJobs>) -> Self {
        self.deletion = Some(delete);
        self
    }

    /// Stamps `epoch` (the leader lease's, given by whoever won it; 0, the
    /// default, on SQLite) on every frame to workers: `Registered`,
    /// `TaskAssign`, `TaskCancel`. A worker ignores assignments and
    /// cancellations of an epoch older than the newest it has seen.
    pub fn with_epoch(mut self, epoch: u64) -> Self {
        self.state.set_epoch(epoch);
        self
    }

    /// Sets the longest time a batch waits for the results of the last
    /// released round (zero: never wait).
    pub fn with_coalesce_window(mut self, window: Duration) -> Self {
        self.commits.set_coalesce_window(window);
        self
    }

    /// Sets the longest a graceful stop waits for pending changes to
    /// become durable before stopping anyway (with exit code 1).
    pub fn with_shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.commits.set_shutdown_timeout(timeout);
        self
    }

    /// Both clocks, read once per handler.
    fn now(&self) -> Now {
        self.clock.now()
    }

    /// Ends every handler: holds the step's effects (and `answer`, if any)
    /// behind the batch carrying its changes, and applies what the group
    /// commit decides.
    fn finish(&mut self, answer: Option<Delivery>, ctx: &mut Context<Self>) {
        // Jobs finished in this step are durable once the batch after the
        // newest one sent is (see `GroupCommit::sent`).
        self.state.seal_finished(self.commits.sent() + 1);
        let sessions = &self.sessions;
        let effects = self.state.take_effects();
        let deliveries = effects
            .into_iter()
            .filter_map(|effect| delivery_for(sessions, effect))
            .chain(answer);
        let commands = self.commits.step(deliveries, &mut self.state);
        self.apply(commands, ctx);
    }

    fn apply(&mut self, commands: Vec<Command<JobRow, Delivery>>, ctx: &mut Context<Self>) {
        if self.deposed {
            return;
        }
        for command in commands {
            match command {
                Command::Stage(rows) => self.persistence.stage.do_send(StageRows { rows }),
                Command::Commit { batch, rows, jobs } => {
                    self.state.metrics_mut().batch_rows.observe(jobs as f64);
                    self.send_commit(batch, rows, ctx);
                    self.schedule_pass_on_commit_sent(ctx);
                }
                Command::Release(_) if self.untrusted() => {
                    self.depose("the leader lease's trust ended", ctx);
                    return;
                }
                Command::Release(deliveries) => deliveries.into_iter().for_each(Delivery::deliver),
                Command::ArmTimer(timer, after) => self.arm(timer, after, ctx),
                Command::CancelCoalesceTimer => {
                    if let Some(handle) = self.coalesce_timer.take() {
                        ctx.cancel_future(handle);
                    }
                }
                Command::OutageBegan { batch, error } => {
                    error!(self.log, "commit failed; answers held until a commit succeeds";
                           "batch" => batch, "error" => error);
                    self.state.metrics_mut().commits_failing = true;
                }
                Command::OutageEnded { failures } => {
                    info!(self.log, "commits succeed again; held answers released";
                          "failed_commits" => failures);
                    self.state.metrics_mut().commits_failing = false;
                }
                Command::Stop { not_durable, held } => self.stop(not_durable, held),
                Command::FailAwaited { effects, reason } => {
                    effects.into_iter().for_each(|e| e.fail(&reason))
                }
                Command::Abandon { reason } => self.abandon(&reason, ctx),
            }
        }
    }

    fn arm(&mut self, timer: Timer, after: Duration, ctx: &mut Context<Self>) {
        let handle = ctx.run_later(after, move |act, ctx| {
            if timer == Timer::Coalesce {
                act.coalesce_timer = None;
            }
            let commands = act.commits.timer_fired(timer, &mut act.state);
            act.apply(commands, ctx);
        });
        if timer == Timer::Coalesce {
            self.coalesce_timer = Some(handle);
        }
    }

    fn send_commit(&mut self, batch: u64, rows: Vec<JobRow>, ctx: &mut Context<Self>) {
        let started = actix::clock::Instant::now();
        let commit = self.persistence.commit.send(CommitBatch {
            number: batch,
            rows,
        });
        ctx.spawn(commit.into_actor(self).map(move |answer, act, ctx| {
            let latency = started.elapsed().as_secs_f64();
            act.state.metrics_mut().commit_latency.observe(latency);
            match &answer {
                Ok(Err(e)) if e.is_fenced() => {
                    let reason = e.to_string();
                    act.depose(&reason, ctx);
                    if let Some(to) = &act.on_fenced {
                        to.do_send(Fenced {
                            reason,
                            epoch: act.state.epoch(),
                        });
                    }
                    return;
                }
                Ok(Err(e)) if e.is_refused() => {
                    act.state.metrics_mut().commit_failures += 1;
                    act.give_up_parked_deletions(ctx);
                    let commands = act.commits.refused(batch, e.to_string());
                    return act.apply(commands, ctx);
                }
                _ => {}
            }
            let result = match answer {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(e.to_string()),
                Err(e) => Err(format!("persistence unavailable: {e}")),
            };
            if let Err(e) = &result {
                act.state.metrics_mut().commit_failures += 1;
                debug!(act.log, "commit failed"; "batch" => batch, "error" => e);
            }
            let commands = act.commits.committed(batch, result, &mut act.state);
            act.apply(commands, ctx);
            // Large results are evicted as soon as they are durable, not
            // at the next sweep, so a burst cannot hold much past the bound.
            if act.state.finished_over_bytes() {
                act.evict_step(ctx);
            }
            act.schedule_pass_if_settled(ctx);
            act.wake_deletions(ctx);
        }));
    }

    /// The database refused a commit for good: memory no longer matches
    /// it. Ends the actor system with `COMMIT_REFUSED_EXIT_CODE` once the
    /// failed answers had time to go out, so the process exits and a
    /// restart's recovery reads what the database really holds.
    fn abandon(&mut self, reason: &str, ctx: &mut Context<Self>) {
        error!(self.log, "the database refused a commit; stopping so recovery reads it again";
               "reason" => reason, "exit_code" => COMMIT_REFUSED_EXIT_CODE);
        self.state.metrics_mut().commits_failing = true;
        ctx.run_later(ABANDON_GRACE, |_, _| {
            actix::System::current().stop_with_code(COMMIT_REFUSED_EXIT_CODE);
        });
    }

    /// Stops the actor system: cleanly when everything is durable, else
    /// with `NOT_DURABLE_EXIT_CODE` and a line saying what was lost.
    fn stop(&self, not_durable: usize, held: usize) {
        if not_durable == 0 && held == 0 {
            info!(self.log, "state frozen and durable; stopping");
            actix::System::current().stop();
        } else {
            error!(self.log, "shutdown timeout passed; stopping with changes not durable";
                   "not_durable_changes" => not_durable, "unsent_answers" => held);
            actix::System::current().stop_with_code(NOT_DURABLE_EXIT_CODE);
        }
    }
}

fn delivery_for(
    sessions: &HashMap<SessionId, Recipient<SendToWorker>>,
    effect: Effect,
) -> Option<Delivery> {
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
    let to = sessions.get(&session)?.clone();
    Some(Delivery::Worker(to, message))
}

impl Actor for Coordinator {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        // Recovery may have rewritten rows (interrupted attempts).
        self.finish(None, ctx);
    }
}
