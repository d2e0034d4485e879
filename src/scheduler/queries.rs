//! Read-only views of the coordinator's state: job and worker snapshots,
//! pages of jobs, and the invariant check tests run after every step.

use crate::protocol::{JobId, JobList, JobState, JobSummary, JobView, WorkerId, WorkerView};
use crate::scheduler::hash_map::HashMap;
use crate::scheduler::job::Job;
use crate::scheduler::state::CoordinatorState;
use crate::scheduler::workers::SessionId;

impl CoordinatorState {
    /// The job as a client sees it at `now`.
    pub fn status(&self, id: JobId, now: i64) -> Option<JobView> {
        self.jobs.get(&id).map(|job| self.view(job, now))
    }

    /// Up to `limit` jobs as seen at `now`, newest submission first,
    /// optionally of one state.
    pub fn list(&self, state: Option<JobState>, limit: usize, now: i64) -> Vec<JobView> {
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
        now: i64,
    ) -> JobList {
        self.list_summaries(state, task_type, None, limit, now)
    }

    /// The job as a client sees it at `now`, whether held in memory or
    /// read back from the database.
    pub fn view(&self, job: &Job, now: i64) -> JobView {
        let no_worker = !self.workers.advertised(&job.task_type);
        job.view(no_worker, now, self.policy.aging_step_ms)
    }

    /// The job's summary at `now`, whether held in memory or read back.
    pub fn summary(&self, job: &Job, now: i64) -> JobSummary {
        let no_worker = !self.workers.advertised(&job.task_type);
        job.summary(no_worker, now, self.policy.aging_step_ms)
    }

    /// True when `worker` is registered through exactly `session`.
    pub fn is_current_session(
        &self,
        worker: &crate::protocol::WorkerId,
        session: SessionId,
    ) -> bool {
        self.workers.is_current(worker, session)
    }

    pub fn worker_views(&self) -> Vec<WorkerView> {
        self.workers.views()
    }

    /// Jobs per state (non-zero only), of one task type or all: counters
    /// kept on every transition, so they include jobs evicted from memory.
    pub fn state_counts(&self, task_type: Option<&str>) -> Vec<crate::protocol::StateCount> {
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
        let queued = self
            .jobs
            .values()
            .filter(|j| j.state == JobState::Queued)
            .count();
        if queued != self.queues.len() + self.delayed.len() {
            return Err(format!(
                "{queued} QUEUED jobs but {} in queues and {} delayed",
                self.queues.len(),
                self.delayed.len()
            ));
        }
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
            if job.lease.is_none() || !worker.is_some_and(|w| w.running.contains(&job.id)) {
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
        self.check_running_sets()?;
        self.workers.check_invariants()?;
        self.check_listing_index()?;
        self.dirty.check_invariants()
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
