//! `CoordinatorState`: every job, the queues and the worker registry, with
//! the transitions the coordinator applies to them. Pure: no actors, no I/O;
//! time comes in as `now`, a reading of both clocks (`taskyard_client::clock::Now`):
//! stored and shown times are wall times, the timers (deadlines, retries,
//! delays, heartbeat age) monotonic ones. Outbound effects and the rows to
//! persist are collected and taken by the caller after each step.

use crate::scheduler::concurrency_gate::{ConcurrencyGate, ConcurrencyLimits};
use crate::scheduler::counts::StateCounts;
use crate::scheduler::dirty::DirtyRows;
use crate::scheduler::hash_map::HashMap;
use crate::scheduler::job::ReadyKey;
use crate::scheduler::job::{Job, OrderKey};
use crate::scheduler::metrics::Metrics;
use crate::scheduler::queues::ReadyQueues;
use crate::scheduler::retention::{FinishedJobs, Retention};
use crate::scheduler::retry::RetryPolicy;
use crate::scheduler::sharded_map::ShardedMap;
use crate::scheduler::timeline::Timeline;
use crate::scheduler::workers::{SessionId, WorkerRegistry};
use slog::{error, Logger};
use std::collections::BTreeSet;
use taskyard_client::clock::Now;
use taskyard_protocol::{CoordinatorToWorker, JobId, JobState};

/// The coordinator's policy settings, taken from its config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub aging_step_ms: u64,
    pub max_active_jobs: u64,
    pub retry: RetryPolicy,
    pub default_max_attempts: u32,
    pub default_timeout_ms: u64,
    pub heartbeat_timeout_ms: u64,
    pub max_payload_bytes: usize,
    pub max_result_bytes: usize,
}

impl Policy {
    pub fn from_config(c: &crate::config::CoordinatorConfig) -> Policy {
        Policy {
            aging_step_ms: c.aging_step_millis,
            max_active_jobs: c.max_active_jobs,
            retry: RetryPolicy {
                base_ms: c.retry_base_millis,
                cap_ms: c.retry_cap_millis,
            },
            default_max_attempts: c.default_max_attempts,
            default_timeout_ms: c.task_timeout_millis,
            heartbeat_timeout_ms: c.heartbeat_timeout_millis,
            max_payload_bytes: c.max_payload_bytes,
            max_result_bytes: c.max_result_bytes,
        }
    }
}

/// Something the coordinator must do outside its state once the rows of the
/// same step are durable.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Write a frame to the worker connected through `session`.
    SendWorker {
        session: SessionId,
        frame: CoordinatorToWorker,
    },
    /// Send an error frame and close the connection.
    CloseWorker { session: SessionId, reason: String },
}

/// Why `CoordinatorState::transition` changed nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TransitionRefused {
    #[error("job {0} is unknown")]
    UnknownJob(JobId),
    /// The state machine (`JobState::transition`) does not allow the move.
    #[error("job {job} may not move from {from} to {to}")]
    Illegal {
        job: JobId,
        from: JobState,
        to: JobState,
    },
}

impl TransitionRefused {
    /// The job the refused move was asked for.
    pub fn job(&self) -> JobId {
        match self {
            TransitionRefused::UnknownJob(job) | TransitionRefused::Illegal { job, .. } => *job,
        }
    }
}

/// All scheduling state. Invariants (checked by `check_invariants`):
/// `active_jobs` equals the number of non-terminal jobs; `queues` holds
/// exactly the QUEUED jobs; each RUNNING job has a lease and a registered
/// worker whose running set contains it, and each job in a running set is
/// a RUNNING job of that worker, in no other worker's set; `deadlines` and
/// `retries` index exactly the RUNNING and RETRY_WAIT jobs; `by_sequence`
/// holds every job once; `timers` holds exactly the entries of
/// `deadlines`, `retries` and `delayed`; the worker registry's own indexes
/// are right (`WorkerRegistry::check_invariants`); each dirty job is
/// tracked once. A RUNNING job recovered from the store may instead be
/// awaiting its claim: in `unclaimed` and in no running set.
#[derive(Debug)]
pub struct CoordinatorState {
    pub(super) policy: Policy,
    pub(super) log: Logger,
    pub(super) jobs: HashMap<JobId, Box<Job>>,
    pub(super) queues: ReadyQueues,
    /// Per-key concurrency: running counts, and the ready jobs of full
    /// keys, held here instead of in `queues` (see `concurrency_gate`).
    pub(super) gate: ConcurrencyGate,
    pub(super) workers: WorkerRegistry,
    /// Every job in submission order, for newest-first listing.
    pub(super) by_sequence: BTreeSet<OrderKey>,
    /// RUNNING jobs by the monotonic instant their attempt times out.
    pub(super) deadlines: BTreeSet<(i64, JobId)>,
    /// RETRY_WAIT jobs by the monotonic instant their backoff ends.
    pub(super) retries: BTreeSet<(i64, JobId)>,
    /// The monotonic instant of each job's entry in `deadlines`, `retries`
    /// or `delayed` (a job has at most one), to find it again. Monotonic
    /// readings mean nothing to another process, so none is stored: each
    /// timer is set from the job's stored wall time (`Now::mono_at`) when
    /// the job enters its state, which is the wall time of that very step
    /// plus the duration, or, at recovery, relative to the wall clock at
    /// start.
    pub(super) timers: HashMap<JobId, i64>,
    /// The monotonic microsecond each non-terminal job entered its current
    /// state (a delayed job: when its delay ran out), for the latency
    /// histograms; memory only, like `timers`. Exactly the non-terminal
    /// jobs have one.
    pub(super) stage_started_us: HashMap<JobId, i64>,
    /// Jobs per (task type, state), for list footers.
    pub(super) state_counts: StateCounts,
    /// QUEUED jobs whose `not_before` is still ahead, by the monotonic
    /// instant it comes.
    pub(super) delayed: BTreeSet<(i64, JobId)>,
    pub(super) next_sequence: u64,
    /// The latest `submitted_at` of any job held; see `admit`.
    pub(super) latest_submission: i64,
    pub(super) active_jobs: u64,
    /// Idempotency key → the job first submitted with it, for every job
    /// the database still holds, evicted ones included. A compact map
    /// (key and id, no job) rather than a database lookup on a miss: a
    /// submission is then decided by the single writer in one step, so
    /// two concurrent submissions with one key can never both create a
    /// job, and no submit answer waits on a read. It is bounded by
    /// retention: a key leaves with its job when the job expires, and
    /// recovery loads only the keys of stored jobs. Sharded, so its growth
    /// never stalls a step for a rehash of every key.
    pub(super) idempotency: ShardedMap<String, JobId>,
    /// Jobs changed since the last `take_dirty`; see `DirtyRows`.
    pub(super) dirty: DirtyRows,
    pub(super) effects: Vec<Effect>,
    /// Counters and histograms for `/metrics`; never read by scheduling.
    pub(super) metrics: Metrics,
    /// The last hour per task type and minute, for the dashboard; never
    /// read by scheduling.
    pub(super) timeline: Timeline,
    /// How many finished jobs memory keeps; see `retention`.
    pub(super) retention: Retention,
    /// The finished jobs in memory, in finishing order.
    pub(super) finished: FinishedJobs,
    /// One "stale result dropped" line per second at most.
    pub(super) stale_warnings: crate::scheduler::rate_limit::LogLimiter,
    /// RUNNING jobs recovered from the store whose worker has not claimed
    /// them yet (see `claims`): no worker slot holds them, and at
    /// `claim_deadline` the ones left are treated as interrupted.
    pub(super) unclaimed: std::collections::HashSet<JobId>,
    /// Monotonic instant the attempts in `unclaimed` stop waiting.
    pub(super) claim_deadline: i64,
    /// The leader lease's epoch, stamped on every frame to workers (0 on
    /// SQLite).
    pub(super) epoch: u64,
    /// Finished jobs whose deletion the database has not answered yet
    /// (see `deletion`): at most `MAX_BULK_JOBS` per deletion in flight.
    pub(super) deleting: std::collections::HashSet<JobId>,
    /// Every schedule, at most `max-schedules`, with when each is due.
    pub(super) schedules: crate::scheduler::schedule::ScheduleBook,
}

impl CoordinatorState {
    pub fn new(policy: Policy, log: Logger) -> Self {
        CoordinatorState {
            policy,
            log,
            jobs: HashMap::default(),
            queues: ReadyQueues::default(),
            gate: ConcurrencyGate::default(),
            workers: WorkerRegistry::default(),
            by_sequence: BTreeSet::new(),
            deadlines: BTreeSet::new(),
            retries: BTreeSet::new(),
            timers: HashMap::default(),
            stage_started_us: HashMap::default(),
            delayed: BTreeSet::new(),
            state_counts: StateCounts::default(),
            next_sequence: 1,
            latest_submission: i64::MIN,
            active_jobs: 0,
            idempotency: ShardedMap::default(),
            dirty: DirtyRows::default(),
            effects: Vec::new(),
            metrics: Metrics::default(),
            timeline: Timeline::new(crate::config::defaults::TIMELINE_TASK_TYPES),
            retention: Retention::UNBOUNDED,
            finished: FinishedJobs::default(),
            stale_warnings: crate::scheduler::rate_limit::LogLimiter::new(1000),
            unclaimed: std::collections::HashSet::new(),
            claim_deadline: i64::MIN,
            epoch: 0,
            deleting: std::collections::HashSet::new(),
            schedules: crate::scheduler::schedule::ScheduleBook::new(
                crate::config::defaults::MAX_SCHEDULES,
            ),
        }
    }

    /// The state a coordinator with `config` starts from: its policy,
    /// and metrics labelling at most `metrics-max-task-types` task types.
    pub fn for_config(config: &crate::config::CoordinatorConfig, log: Logger) -> Self {
        let mut state = CoordinatorState::new(Policy::from_config(config), log);
        state.metrics = Metrics::with_task_type_limit(config.metrics_max_task_types);
        state.set_timeline_task_types(config.timeline_task_types);
        state.set_max_schedules(config.max_schedules);
        // Checked when the config was loaded (`check_limits`); a config
        // built in code with a bad limit runs without limits.
        if let Ok(limits) = config.concurrency_limits() {
            state.set_concurrency_limits(ConcurrencyLimits::new(limits));
        }
        state
    }

    /// Adds a job in whatever state it is in to every index that state
    /// needs. The counts per state are the caller's: a new submission adds
    /// one, recovery sets them from the stored counts.
    pub(super) fn insert(&mut self, job: Job, now: Now) {
        if let Some(key) = &job.idempotency_key {
            self.idempotency.insert(key.clone(), job.id);
        }
        self.latest_submission = self.latest_submission.max(job.submitted_at);
        self.by_sequence.insert(job.order_key());
        self.metrics.by_task_type.register(&job.task_type);
        if let Some(started) = stage_started(&job, now) {
            self.stage_started_us.insert(job.id, started);
        }
        self.index(&job, now);
        self.jobs.insert(job.id, Box::new(job));
    }

    /// Adds the job to the queue or timer index its state calls for: a
    /// QUEUED job that never ran waits in `delayed` until its
    /// `not_before`, then in the ready queues (a job that ran once was
    /// released already: its `not_before` orders it, and, seen from a wall
    /// clock set back since, must not hold it again). Each timer is the
    /// job's wall time as a monotonic instant (`Now::mono_at`).
    pub(super) fn index(&mut self, job: &Job, now: Now) {
        let timer = match job.state {
            JobState::Queued => {
                let pending = job
                    .not_before
                    .filter(|t| *t > now.wall_ms && job.history.is_empty());
                if pending.is_none() {
                    self.make_ready(job);
                }
                pending.map(|t| (&mut self.delayed, t))
            }
            JobState::RetryWait => {
                let due = job.next_retry_at.unwrap_or(job.updated_at);
                Some((&mut self.retries, due))
            }
            JobState::Running => {
                if let Some(key) = &job.concurrency_key {
                    self.gate.started(key);
                }
                job.deadline().map(|d| (&mut self.deadlines, d))
            }
            _ => None,
        };
        if let Some((index, wall)) = timer {
            let at = now.mono_at(wall);
            index.insert((at, job.id));
            self.timers.insert(job.id, at);
        }
    }

    /// Removes the job from the queue or timer index of its current state.
    pub(super) fn unindex(&mut self, id: JobId) {
        let Some(job) = self.jobs.get(&id) else {
            return;
        };
        let timer = self.timers.remove(&id);
        match job.state {
            JobState::Queued => {
                if let Some(at) = timer {
                    self.delayed.remove(&(at, id));
                }
                let held = job
                    .concurrency_key
                    .as_deref()
                    .is_some_and(|key| self.gate.forget(key, &job.ready_key()));
                if !held {
                    self.queues
                        .remove(&job.task_type, job.priority, job.ready_key());
                }
            }
            JobState::RetryWait => {
                if let Some(at) = timer {
                    self.retries.remove(&(at, id));
                }
            }
            JobState::Running => {
                if let Some(at) = timer {
                    self.deadlines.remove(&(at, id));
                }
                self.unclaimed.remove(&id);
                let released = match &job.concurrency_key {
                    Some(key) => self.gate.stopped(key),
                    None => None,
                };
                self.release(released);
            }
            _ => {}
        }
    }

    /// Puts a ready QUEUED job into its ready queue, or aside if its
    /// concurrency key is full (it goes back when a job of the key stops
    /// running).
    pub(super) fn make_ready(&mut self, job: &Job) {
        match &job.concurrency_key {
            Some(key) if !self.gate.may_start(key) => self.gate.hold(key, job.ready_key()),
            _ => self
                .queues
                .push(&job.task_type, job.priority, job.ready_key()),
        }
    }

    /// A job the concurrency gate let go goes back to its ready queue.
    fn release(&mut self, released: Option<ReadyKey>) {
        let Some(ready) = released else {
            return;
        };
        if let Some(job) = self.jobs.get(&ready.2) {
            self.queues.push(&job.task_type, job.priority, ready);
        }
    }

    /// Moves the best ready job aside if its concurrency key is full;
    /// returns whether it did (the caller then looks for the next best).
    pub(super) fn held_back(&mut self, id: JobId) -> bool {
        let Some(job) = self.jobs.get(&id) else {
            return false;
        };
        match &job.concurrency_key {
            Some(key) if !self.gate.may_start(key) => {
                let (key, ready) = (key.clone(), job.ready_key());
                self.queues.remove(&job.task_type, job.priority, ready);
                self.gate.hold(&key, ready);
                true
            }
            _ => false,
        }
    }

    /// Replaces the concurrency limits; jobs waiting aside that now have
    /// room go back to their ready queues (the next assignment pass starts
    /// them).
    pub fn set_concurrency_limits(&mut self, limits: ConcurrencyLimits) {
        for ready in self.gate.set_limits(limits) {
            self.release(Some(ready));
        }
    }

    /// Moves a job to `to` through the state machine, keeping every index
    /// and the admission count right. `update` sets the fields that go with
    /// the new state. The one place a job becomes terminal (or, requeued,
    /// stops being terminal). A refused move changes nothing: the job, its
    /// indexes and the dirty rows are as they were, and `update` is not run.
    pub(super) fn transition(
        &mut self,
        id: JobId,
        to: JobState,
        now: Now,
        update: impl FnOnce(&mut Job),
    ) -> Result<(), TransitionRefused> {
        let Some(from) = self.jobs.get(&id).map(|j| j.state) else {
            return Err(TransitionRefused::UnknownJob(id));
        };
        if from.transition(to).is_err() {
            return Err(TransitionRefused::Illegal { job: id, from, to });
        }
        self.unindex(id);
        // Taken out of the map while it changes, so it can be re-indexed
        // without cloning it.
        let Some(mut job) = self.jobs.remove(&id) else {
            return Err(TransitionRefused::UnknownJob(id));
        };
        let attempts_from = job.history.len().saturating_sub(1);
        job.state = to;
        job.updated_at = now.wall_ms;
        update(&mut job);
        self.state_counts.moved(&job.task_type, from, to);
        if to.is_terminal() {
            job.finished_at = Some(now.wall_ms);
            self.active_jobs -= 1;
            let bytes = crate::scheduler::retention::held_bytes(&job);
            self.finished.finished(id, now.wall_ms, bytes);
        } else if from.is_terminal() {
            // A requeue: the job counts against admission again.
            self.active_jobs += 1;
            self.finished.forget(id);
        }
        let stage_started = self.stage_started_us.remove(&id);
        self.metrics
            .record_transition(&job, from, stage_started, now);
        if !to.is_terminal() {
            self.stage_started_us.insert(id, now.mono_us);
        }
        self.timeline.record_transition(&job, from, now.wall_ms);
        self.index(&job, now);
        // A ready job of a key that leaves without starting (cancelled)
        // may leave room that no stop would use.
        let vacated = match (from, to) {
            (JobState::Queued, JobState::Running) => None,
            (JobState::Queued, _) => job.concurrency_key.clone(),
            _ => None,
        };
        self.jobs.insert(id, job);
        if let Some(key) = vacated {
            let released = self.gate.next_if_room(&key);
            self.release(released);
        }
        self.mark_dirty_from(id, attempts_from);
        Ok(())
    }

    /// Logs a move `transition` refused. Every caller asks only for moves
    /// the job's state allows, so a refusal is a bug; `step` names the
    /// caller for whoever reads the log.
    pub(super) fn log_refused(&self, step: &'static str, refused: &TransitionRefused) {
        error!(self.log, "job transition refused"; "job" => %refused.job(), "step" => step,
               "error" => %refused);
    }

    /// The effects produced since the last call, in order.
    pub fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.effects)
    }
}

/// When a job that is being added (submitted or recovered) entered its
/// state, on `now`'s monotonic clock in microseconds, from its stored wall
/// times and never after `now`: a QUEUED job when it became ready, a
/// RUNNING one when its attempt started. `None` for a terminal job.
fn stage_started(job: &Job, now: Now) -> Option<i64> {
    let wall = match job.state {
        JobState::Queued => job.ready_at(),
        JobState::Running => job.assigned_at.unwrap_or(job.updated_at),
        state if state.is_terminal() => return None,
        _ => job.updated_at,
    };
    Some(now.mono_us_at(wall).min(now.mono_us))
}
