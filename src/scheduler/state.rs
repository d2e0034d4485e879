//! `CoordinatorState`: every job, the queues and the worker registry, with
//! the transitions the coordinator applies to them. Pure: no actors, no I/O;
//! time comes in as `now` (unix milliseconds). Outbound effects and the rows
//! to persist are collected and taken by the caller after each step.

use crate::protocol::payloads;
use crate::protocol::{
    CoordinatorToWorker, JobId, JobState, SubmitAnswer, SubmitRejected, SubmitRequest,
};
use crate::scheduler::counts::StateCounts;
use crate::scheduler::hash_map::HashMap;
use crate::scheduler::job::{Job, OrderKey};
use crate::scheduler::metrics::Metrics;
use crate::scheduler::queues::ReadyQueues;
use crate::scheduler::retry::RetryPolicy;
use crate::scheduler::row::JobRow;
use crate::scheduler::workers::{SessionId, WorkerRegistry};
use slog::{debug, error, Logger};
use std::collections::BTreeSet;

/// Largest attempt budget a submission may ask for.
pub const MAX_ATTEMPTS_LIMIT: u32 = 100;
/// Longest accepted idempotency key, in bytes.
pub const MAX_IDEMPOTENCY_KEY_BYTES: usize = 256;
/// Furthest a submission may be delayed: one year.
pub const MAX_DELAY_MS: u64 = 366 * 24 * 60 * 60 * 1000;

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
/// holds every job once; the worker registry's own indexes are right
/// (`WorkerRegistry::check_invariants`); each dirty job is tracked once.
#[derive(Debug)]
pub struct CoordinatorState {
    pub(super) policy: Policy,
    pub(super) log: Logger,
    pub(super) jobs: HashMap<JobId, Box<Job>>,
    pub(super) queues: ReadyQueues,
    pub(super) workers: WorkerRegistry,
    /// Every job in submission order, for newest-first listing.
    pub(super) by_sequence: BTreeSet<OrderKey>,
    pub(super) deadlines: BTreeSet<(i64, JobId)>,
    pub(super) retries: BTreeSet<(i64, JobId)>,
    /// Jobs per (task type, state), for list footers.
    pub(super) state_counts: StateCounts,
    /// QUEUED jobs whose `not_before` is still ahead, by that time.
    pub(super) delayed: BTreeSet<(i64, JobId)>,
    pub(super) next_sequence: u64,
    /// The latest `submitted_at` of any job held; see `admit`.
    latest_submission: i64,
    pub(super) active_jobs: u64,
    /// Idempotency key → the job first submitted with it.
    idempotency: HashMap<String, JobId>,
    /// Jobs changed since the last `take_dirty`, in the order they first
    /// changed, each with the index of the first attempt that may have
    /// changed: only the last attempt ever changes, so attempts before the
    /// one that was last when the job was first marked are already stored.
    dirty: Vec<(JobId, usize)>,
    /// Each dirty job's position in `dirty`. Cleared, not replaced, by
    /// `take_dirty`, so it keeps its capacity from batch to batch.
    dirty_at: HashMap<JobId, usize>,
    pub(super) effects: Vec<Effect>,
    /// Counters and histograms for `/metrics`; never read by scheduling.
    pub(super) metrics: Metrics,
}

impl CoordinatorState {
    pub fn new(policy: Policy, log: Logger) -> Self {
        CoordinatorState {
            policy,
            log,
            jobs: HashMap::default(),
            queues: ReadyQueues::default(),
            workers: WorkerRegistry::default(),
            by_sequence: BTreeSet::new(),
            deadlines: BTreeSet::new(),
            retries: BTreeSet::new(),
            delayed: BTreeSet::new(),
            state_counts: StateCounts::default(),
            next_sequence: 1,
            latest_submission: i64::MIN,
            active_jobs: 0,
            idempotency: HashMap::default(),
            dirty: Vec::new(),
            dirty_at: HashMap::default(),
            effects: Vec::new(),
            metrics: Metrics::default(),
        }
    }

    /// Admits a job if it is valid and below `max-active-jobs`. A rejected
    /// submission changes nothing.
    /// A key seen before returns the original job's id and creates nothing.
    pub fn submit(&mut self, req: SubmitRequest, now: i64) -> SubmitAnswer {
        let existing = req
            .idempotency_key
            .as_ref()
            .and_then(|key| self.idempotency.get(key))
            .and_then(|id| self.jobs.get(id));
        if let Some(job) = existing {
            return SubmitAnswer::Accepted {
                job_id: job.id,
                no_worker: !self.workers.advertised(&job.task_type),
            };
        }
        let job = match self.admit(req, now) {
            Ok(job) => job,
            Err(reason) => {
                self.metrics.rejected += 1;
                return SubmitAnswer::Rejected(SubmitRejected { reason });
            }
        };
        self.metrics.submitted += 1;
        let (job_id, no_worker) = (job.id, !self.workers.advertised(&job.task_type));
        // debug, not info: one line per job is a formatted write per job
        // at full load, and release builds compile debug lines out.
        debug!(self.log, "job submitted"; "job" => %job_id, "task_type" => &job.task_type,
              "priority" => %job.priority, "sequence" => job.sequence);
        self.next_sequence += 1;
        self.active_jobs += 1;
        self.insert(job, now);
        self.mark_dirty(job_id);
        SubmitAnswer::Accepted { job_id, no_worker }
    }

    fn admit(&self, req: SubmitRequest, now: i64) -> Result<Job, String> {
        let (max_attempts, timeout_ms) = self.validate(&req)?;
        if self.active_jobs >= self.policy.max_active_jobs {
            return Err(self.admission_refusal());
        }
        // Scheduling compares only the head of each FIFO, which is right only
        // while sequence order is also submission-time order (the oldest job
        // of a level is then its highest effective level). A wall clock that
        // steps back must not break that, so submission time never decreases.
        let submitted_at = now.max(self.latest_submission);
        let not_before = req
            .delay_ms
            .map(|d| submitted_at.saturating_add(i64::try_from(d).unwrap_or(i64::MAX)));
        Ok(Job {
            id: JobId::mint(),
            task_type: req.task_type,
            payload: req.payload.into(),
            priority: req.priority,
            sequence: self.next_sequence,
            submitted_at,
            state: JobState::Queued,
            attempts: 0,
            max_attempts,
            timeout_ms,
            lease: None,
            worker_id: None,
            assigned_at: None,
            next_retry_at: None,
            result: None,
            error: None,
            idempotency_key: req.idempotency_key,
            not_before,
            updated_at: submitted_at,
            finished_at: None,
            history: Vec::new(),
            progress: None,
        })
    }

    /// Checks every field of a submission; the error names the field.
    /// Returns the effective attempt budget and per-attempt timeout.
    fn validate(&self, req: &SubmitRequest) -> Result<(u32, u64), String> {
        if req.payload.len() > self.policy.max_payload_bytes {
            return Err(format!(
                "payload: {} bytes exceeds max-payload-bytes ({})",
                req.payload.len(),
                self.policy.max_payload_bytes
            ));
        }
        payloads::validate(&req.task_type, &req.payload).map_err(|e| e.to_string())?;
        let max_attempts = req.max_attempts.unwrap_or(self.policy.default_max_attempts);
        if !(1..=MAX_ATTEMPTS_LIMIT).contains(&max_attempts) {
            return Err(format!(
                "max_attempts: {max_attempts} is outside 1..={MAX_ATTEMPTS_LIMIT}"
            ));
        }
        let timeout_ms = req.timeout_ms.unwrap_or(self.policy.default_timeout_ms);
        if timeout_ms == 0 {
            return Err("timeout_ms: must be at least 1".to_string());
        }
        if req.delay_ms.is_some_and(|d| d > MAX_DELAY_MS) {
            return Err(format!(
                "delay_ms: more than {MAX_DELAY_MS} ms (a year) ahead"
            ));
        }
        match &req.idempotency_key {
            Some(key) if key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY_BYTES => Err(format!(
                "idempotency_key: must be 1 to {MAX_IDEMPOTENCY_KEY_BYTES} bytes"
            )),
            _ => Ok((max_attempts, timeout_ms)),
        }
    }

    /// The typed reason a submission or requeue is refused at the limit.
    pub(super) fn admission_refusal(&self) -> String {
        format!("max-active-jobs ({}) reached", self.policy.max_active_jobs)
    }

    /// Adds a job in whatever state it is in to every index that state needs.
    pub(super) fn insert(&mut self, job: Job, now: i64) {
        if let Some(key) = &job.idempotency_key {
            self.idempotency.insert(key.clone(), job.id);
        }
        self.latest_submission = self.latest_submission.max(job.submitted_at);
        self.by_sequence.insert(job.order_key());
        self.state_counts.add(&job.task_type, job.state);
        self.index(&job, now);
        self.jobs.insert(job.id, Box::new(job));
    }

    /// Adds the job to the queue or timer index its state calls for: a
    /// QUEUED job waits in `delayed` until its `not_before`, then in the
    /// ready queues.
    pub(super) fn index(&mut self, job: &Job, now: i64) {
        match job.state {
            JobState::Queued => match job.not_before.filter(|t| *t > now) {
                Some(t) => {
                    self.delayed.insert((t, job.id));
                }
                None => self
                    .queues
                    .push(&job.task_type, job.priority, job.ready_key()),
            },
            JobState::RetryWait => {
                let due = job.next_retry_at.unwrap_or(job.updated_at);
                self.retries.insert((due, job.id));
            }
            JobState::Running => {
                if let Some(deadline) = job.deadline() {
                    self.deadlines.insert((deadline, job.id));
                }
            }
            _ => {}
        }
    }

    /// Removes the job from the queue or timer index of its current state.
    pub(super) fn unindex(&mut self, id: JobId) {
        let Some(job) = self.jobs.get(&id) else {
            return;
        };
        match job.state {
            JobState::Queued => {
                if let Some(t) = job.not_before {
                    self.delayed.remove(&(t, id));
                }
                self.queues
                    .remove(&job.task_type, job.priority, job.ready_key());
            }
            JobState::RetryWait => {
                let due = job.next_retry_at.unwrap_or(job.updated_at);
                self.retries.remove(&(due, id));
            }
            JobState::Running => {
                if let Some(deadline) = job.deadline() {
                    self.deadlines.remove(&(deadline, id));
                }
            }
            _ => {}
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
        now: i64,
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
        job.updated_at = now;
        update(&mut job);
        self.state_counts.moved(&job.task_type, from, to);
        if to.is_terminal() {
            job.finished_at = Some(now);
            self.active_jobs -= 1;
        } else if from.is_terminal() {
            // A requeue: the job counts against admission again.
            self.active_jobs += 1;
        }
        self.metrics.record_transition(&job, from, now);
        self.index(&job, now);
        self.jobs.insert(id, job);
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

    /// Marks the whole job, every attempt included, for the next batch.
    pub(super) fn mark_dirty(&mut self, id: JobId) {
        self.mark_dirty_from(id, 0);
    }

    /// Marks the job for the next batch; attempts from index `from` on
    /// may have changed.
    fn mark_dirty_from(&mut self, id: JobId, from: usize) {
        match self.dirty_at.entry(id) {
            std::collections::hash_map::Entry::Occupied(e) => {
                let earliest = &mut self.dirty[*e.get()].1;
                *earliest = (*earliest).min(from);
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(self.dirty.len());
                self.dirty.push((id, from));
            }
        }
    }

    /// True when transitions are waiting to be persisted.
    pub fn has_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// How many rows the next `take_dirty` returns.
    pub fn dirty_rows(&self) -> usize {
        self.dirty.len()
    }

    /// The rows changed since the last call, in the order they first
    /// changed. Each row carries only the attempts that may have changed
    /// since the row was last taken (earlier ones are stored already and
    /// never change), so a commit rewrites no old attempt; it always
    /// carries the last attempt, if the job has one (see `JobRow`).
    pub fn take_dirty(&mut self) -> Vec<JobRow> {
        self.dirty_at.clear();
        let jobs = &self.jobs;
        self.dirty
            .drain(..)
            .filter_map(|(id, first)| {
                let job = jobs.get(&id)?;
                Some(JobRow::with_attempts_from(job, first))
            })
            .collect()
    }

    /// Verifies the dirty-row tracking; for tests: `dirty_at` gives each
    /// dirty job's position in `dirty`, and each job is dirty at most once.
    pub(super) fn check_dirty_index(&self) -> Result<(), String> {
        if self.dirty.len() != self.dirty_at.len() {
            return Err(format!(
                "{} dirty rows, {} positions",
                self.dirty.len(),
                self.dirty_at.len()
            ));
        }
        for (at, (id, _)) in self.dirty.iter().enumerate() {
            if self.dirty_at.get(id) != Some(&at) {
                return Err(format!("dirty job {id} at {at} is indexed elsewhere"));
            }
        }
        Ok(())
    }

    /// Marks rows dirty again (their commit failed and must be retried).
    pub fn remark_dirty(&mut self, ids: impl IntoIterator<Item = JobId>) {
        for id in ids {
            self.mark_dirty(id);
        }
    }

    /// The effects produced since the last call, in order.
    pub fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.effects)
    }
}
