//! Read-only views of the coordinator's state: job and worker snapshots,
//! pages of jobs, and the invariant check tests run after every step.

use crate::scheduler::hash_map::HashMap;
use crate::scheduler::job::Job;
use crate::scheduler::state::CoordinatorState;
use crate::scheduler::workers::SessionId;
use taskyard_client::clock::Now;
use taskyard_protocol::{JobId, JobList, JobState, JobSummary, JobView, WorkerId, WorkerView};

/// How far a pending timer's stored wall time may be from when it will
/// really come due before views show the latter: more than the rounding
/// between the two clocks' readings, less than any step worth noticing.
const STEP_SHOWN_MS: u64 = 1000;

impl CoordinatorState {
    /// The job as a client sees it at `now`.
    pub fn status(&self, id: JobId, now: Now) -> Option<JobView> {
        self.jobs.get(&id).map(|job| self.view(job, now))
    }

    /// Up to `limit` jobs as seen at `now`, newest submission first,
    /// optionally of one state.
    pub fn list(&self, state: Option<JobState>, limit: usize, now: Now) -> Vec<JobView> {
        self.list_after(state, None, None, limit, now).jobs
    }

    /// Up to `limit` job summaries, newest submission first, filtered by
    /// state and task type, with the count of jobs per state (of that task
    /// type).
    pub fn list_page(
        &self,
        state: Option<JobState>,
        task_type: Option<&str>,
        limit: usize,
        now: Now,
    ) -> JobList {
        self.list_summaries(state, task_type, None, limit, now)
    }

    /// The job as a client sees it at `now`, whether held in memory or
    /// read back from the database.
    /// A pending retry or delay is shown as the wall time stored for it,
    /// the same in every answer and after a restart; once the wall clock
    /// has been stepped by more than `STEP_SHOWN_MS` since, as `now`'s wall
    /// clock plus what remains of its (monotonic) timer, which is when it
    /// will really come due.
    pub fn view(&self, job: &Job, now: Now) -> JobView {
        let no_worker = !self.workers.advertised(&job.task_type);
        let mut view = job.view(no_worker, now.wall_ms, self.policy.aging_step_ms);
        (view.next_retry_at, view.not_before) = self.shown_timers(job, now);
        view.waiting = self.waiting_reason(job);
        view
    }

    /// Why a QUEUED job waits aside: its concurrency key is full.
    pub fn waiting_reason(&self, job: &Job) -> Option<String> {
        let key = job.concurrency_key.as_deref()?;
        if job.state != JobState::Queued || !self.gate.holds(key, &job.ready_key()) {
            return None;
        }
        let limit = self.gate.limit_of(key)?;
        Some(format!(
            "waiting for concurrency key {key}: {}/{limit} running",
            self.gate.running_of(key)
        ))
    }

    /// The job's summary at `now`, whether held in memory or read back;
    /// its pending retry or delay shown as in [`CoordinatorState::view`].
    pub fn summary(&self, job: &Job, now: Now) -> JobSummary {
        let no_worker = !self.workers.advertised(&job.task_type);
        let mut summary = job.summary(no_worker, now.wall_ms, self.policy.aging_step_ms);
        (summary.next_retry_at, summary.not_before) = self.shown_timers(job, now);
        summary
    }

    /// The job's `next_retry_at` and `not_before` as shown at `now`: the
    /// pending one (by its state) through `due_shown`, the other as stored.
    fn shown_timers(&self, job: &Job, now: Now) -> (Option<i64>, Option<i64>) {
        let due = |stored| self.due_shown(job, stored, now);
        match job.state {
            JobState::RetryWait => (due(job.next_retry_at), job.not_before),
            JobState::Queued => (job.next_retry_at, due(job.not_before)),
            _ => (job.next_retry_at, job.not_before),
        }
    }

    /// When the job's pending timer is shown as due: `stored` unless the
    /// timer will really come due more than `STEP_SHOWN_MS` away from it.
    fn due_shown(&self, job: &Job, stored: Option<i64>, now: Now) -> Option<i64> {
        let Some(&at) = self.timers.get(&job.id) else {
            return stored;
        };
        let due = now.wall_at(at);
        match stored {
            Some(stored) if stored.abs_diff(due) <= STEP_SHOWN_MS => Some(stored),
            _ => Some(due),
        }
    }

    /// True when `worker` is registered through exactly `session`.
    pub fn is_current_session(
        &self,
        worker: &taskyard_protocol::WorkerId,
        session: SessionId,
    ) -> bool {
        self.workers.is_current(worker, session)
    }

    /// Every registered worker as seen at `now`: its last heartbeat is
    /// shown as a wall time, `now`'s wall clock less the heartbeat's age.
    pub fn worker_views(&self, now: Now) -> Vec<WorkerView> {
        self.workers.views(now)
    }

    /// Jobs per state (non-zero only), of one task type or all: counters
    /// kept on every transition, so they include jobs evicted from memory.
    pub fn state_counts(&self, task_type: Option<&str>) -> Vec<taskyard_protocol::StateCount> {
        self.state_counts.counts(task_type)
    }

    pub fn active_jobs(&self) -> u64 {
        self.active_jobs
    }

    pub fn job(&self, id: JobId) -> Option<&Job> {
        self.jobs.get(&id).map(|job| &**job)
    }

    /// Verifies every invariant listed on the type; for tests.
    pub fn check_invariants(&self) -> Result<(), String> {
        let non_terminal = self
            .jobs
            .values()
            .filter(|j| !j.state.is_terminal())
            .count();
        if non_terminal as u64 != self.active_jobs {
            return Err(format!(
                "active_jobs {} != {non_terminal}",
                self.active_jobs
            ));
        }
        let unstamped = self
            .jobs
            .values()
            .find(|j| j.state.is_terminal() == self.stage_started_us.contains_key(&j.id));
        if let Some(job) = unstamped {
            return Err(format!(
                "{} job {} has a wrong stage start",
                job.state, job.id
            ));
        }
        if self.stage_started_us.len() != non_terminal {
            return Err(format!(
                "{} stage starts for {non_terminal} non-terminal jobs",
                self.stage_started_us.len()
            ));
        }
        let queued = self
            .jobs
            .values()
            .filter(|j| j.state == JobState::Queued)
            .count();
        if queued != self.queues.len() + self.delayed.len() + self.gate.waiting() {
            return Err(format!(
                "{queued} QUEUED jobs but {} in queues, {} delayed and {} held by their \
                 concurrency key",
                self.queues.len(),
                self.delayed.len(),
                self.gate.waiting()
            ));
        }
        self.concurrency_consistent()?;
        let retry_wait = self
            .jobs
            .values()
            .filter(|j| j.state == JobState::RetryWait)
            .count();
        if retry_wait != self.retries.len() {
            return Err(format!(
                "{retry_wait} RETRY_WAIT jobs, {} retry timers",
                self.retries.len()
            ));
        }
        for job in self.jobs.values().filter(|j| j.state == JobState::Running) {
            let worker = job.worker_id.as_ref().and_then(|w| self.workers.get(w));
            let attached = worker.is_some_and(|w| w.running.contains(&job.id));
            if attached && self.unclaimed.contains(&job.id) {
                return Err(format!("RUNNING job {} is attached and unclaimed", job.id));
            }
            if job.lease.is_none() || !(attached || self.unclaimed.contains(&job.id)) {
                return Err(format!(
                    "RUNNING job {} has no lease or worker slot",
                    job.id
                ));
            }
        }
        let running = self
            .jobs
            .values()
            .filter(|j| j.state == JobState::Running)
            .count();
        if running != self.deadlines.len() {
            return Err(format!(
                "{running} RUNNING jobs, {} deadlines",
                self.deadlines.len()
            ));
        }
        if let Some(id) = self.unclaimed.iter().find(|id| {
            self.jobs
                .get(id)
                .is_none_or(|j| j.state != JobState::Running)
        }) {
            return Err(format!("unclaimed job {id} is not RUNNING"));
        }
        self.check_timers()?;
        self.check_running_sets()?;
        self.workers.check_invariants()?;
        self.check_listing_index()?;
        self.dirty.check_invariants()
    }

    /// `timers` holds exactly one instant per entry of the three timer
    /// indexes, the one that entry is filed under.
    fn check_timers(&self) -> Result<(), String> {
        let entries = [&self.deadlines, &self.retries, &self.delayed];
        let filed: usize = entries.iter().map(|index| index.len()).sum();
        if filed != self.timers.len() {
            return Err(format!(
                "{filed} timer entries, {} timers",
                self.timers.len()
            ));
        }
        for (id, at) in &self.timers {
            if !entries.iter().any(|index| index.contains(&(*at, *id))) {
                return Err(format!("job {id}'s timer at {at} is in no timer index"));
            }
        }
        Ok(())
    }

    /// Worker → job: every job in a worker's running set is a RUNNING job
    /// assigned to that worker, and no job is in two running sets.
    fn check_running_sets(&self) -> Result<(), String> {
        let mut owner: HashMap<JobId, &WorkerId> = HashMap::default();
        for (worker, entry) in self.workers.entries() {
            for id in &entry.running {
                let Some(job) = self.jobs.get(id) else {
                    return Err(format!("worker {worker} runs unknown job {id}"));
                };
                if job.state != JobState::Running || job.worker_id.as_ref() != Some(worker) {
                    return Err(format!(
                        "worker {worker} runs job {id}, which is {} on worker {:?}",
                        job.state,
                        job.worker_id.as_ref().map(|w| w.0.as_str())
                    ));
                }
                if let Some(other) = owner.insert(*id, worker) {
                    return Err(format!(
                        "job {id} is in the running sets of {other} and {worker}"
                    ));
                }
            }
        }
        Ok(())
    }

    /// `by_sequence` holds exactly one order key per job, its current one.
    fn check_listing_index(&self) -> Result<(), String> {
        if self.by_sequence.len() != self.jobs.len() {
            return Err(format!(
                "{} jobs, {} in submission order",
                self.jobs.len(),
                self.by_sequence.len()
            ));
        }
        match self
            .jobs
            .values()
            .find(|j| !self.by_sequence.contains(&j.order_key()))
        {
            Some(job) => Err(format!("job {} is missing from submission order", job.id)),
            None => Ok(()),
        }
    }
}

impl CoordinatorState {
    /// The concurrency gate agrees with the jobs: each key's running count
    /// is its RUNNING jobs, and a job waits aside only while its key is
    /// full (or a job of its key is ready, to be started or held at the
    /// next pass).
    fn concurrency_consistent(&self) -> Result<(), String> {
        let mut running: HashMap<&str, u32> = HashMap::default();
        let mut queued: std::collections::HashSet<&str> = std::collections::HashSet::new();
        // Keys with a job in a ready queue (not held aside).
        let mut ready: std::collections::HashSet<&str> = std::collections::HashSet::new();
        for job in self.jobs.values() {
            let Some(key) = job.concurrency_key.as_deref() else {
                continue;
            };
            match job.state {
                JobState::Running => *running.entry(key).or_insert(0) += 1,
                JobState::Queued => {
                    queued.insert(key);
                    if self
                        .queues
                        .contains(&job.task_type, job.priority, job.ready_key())
                    {
                        ready.insert(key);
                    }
                }
                _ => {}
            }
        }
        for (key, count) in &running {
            if self.gate.running_of(key) != *count {
                return Err(format!(
                    "concurrency key {key}: {count} RUNNING, the gate counts {}",
                    self.gate.running_of(key)
                ));
            }
        }
        for key in queued {
            if self.gate.waiting_of(key) == 0 {
                continue;
            }
            let full = self
                .gate
                .limit_of(key)
                .is_some_and(|limit| self.gate.running_of(key) >= limit);
            if !full && !ready.contains(key) {
                return Err(format!(
                    "concurrency key {key} has room but {} jobs wait aside",
                    self.gate.waiting_of(key)
                ));
            }
        }
        Ok(())
    }
}
