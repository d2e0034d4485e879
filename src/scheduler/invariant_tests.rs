//! A property test: random sequences of every event the coordinator
//! applies to `CoordinatorState` (submissions, scheduling, workers coming,
//! heartbeating, draining and vanishing, results under current, stale and
//! forged leases, client control, sweeps as time passes, batches taken
//! (and committed), finished jobs evicted from memory, requeues of evicted
//! jobs read back, and restarts recovered from the stored rows), with
//! every invariant checked after every step.

use super::tests::{echo, stored_rows, w};
use super::*;
use crate::clock::Now;
use crate::protocol::*;
use crate::scheduler::hash_map::HashMap;
use proptest::prelude::*;
use proptest::sample::Index;

const TASK_TYPES: [&str; 2] = ["echo", "custom"];
const WORKERS: [&str; 3] = ["a", "b", "c"];
const MAX_RESULT_BYTES: usize = 16;

/// Small limits and short times, so admission refusals, oversized results,
/// exhausted budgets, dead workers and expired deadlines all happen within
/// a few dozen events.
fn policy() -> Policy {
    Policy {
        aging_step_ms: 1000,
        max_active_jobs: 12,
        retry: RetryPolicy {
            base_ms: 100,
            cap_ms: 1000,
        },
        default_max_attempts: 2,
        default_timeout_ms: 3000,
        heartbeat_timeout_ms: 5000,
        max_payload_bytes: 1024,
        max_result_bytes: MAX_RESULT_BYTES,
    }
}

/// A small retention window, so evictions happen within a few events.
fn state() -> CoordinatorState {
    let mut s = CoordinatorState::new(policy(), slog::Logger::root(slog::Discard, slog::o!()));
    s.set_retention(Retention {
        max_finished: 2,
        max_age_ms: 3000,
    });
    s
}

#[derive(Debug, Clone, Copy)]
enum Reported {
    Succeeded,
    Oversized,
    FailedRetryable,
    FailedPermanently,
}

#[derive(Debug, Clone)]
enum Event {
    Submit {
        task: usize,
        level: i64,
        delay_ms: Option<u64>,
        max_attempts: Option<u32>,
        idempotency_key: Option<u8>,
    },
    Schedule,
    /// Registers `worker` under a fresh session, replacing any current one.
    Register {
        worker: usize,
        capacity: u32,
        /// Bit `i` set: advertises `TASK_TYPES[i]`.
        types: usize,
    },
    /// Through the current session, or the one it replaced.
    Heartbeat {
        worker: usize,
        replaced_session: bool,
    },
    /// A result under the job's current lease (a stale one if it is not
    /// running).
    Result {
        job: Index,
        reported: Reported,
    },
    /// A result under an earlier attempt's lease, or a made-up one.
    StaleResult {
        job: Index,
        forged: bool,
    },
    WorkerLost {
        worker: usize,
        replaced_session: bool,
    },
    WorkerDraining {
        worker: usize,
    },
    Cancel {
        job: Index,
    },
    Requeue {
        job: Index,
    },
    RequeueFailed {
        task: Option<usize>,
    },
    /// Advances the clock, then sweeps.
    Sweep {
        advance_ms: i64,
    },
    /// Someone sets the wall clock `ms` ahead (negative: back); the
    /// monotonic clock does not move.
    StepWall {
        ms: i64,
    },
    /// Takes the dirty rows as the next batch and commits it.
    TakeDirty,
    /// Evicts the finished jobs beyond the window whose rows are committed.
    Evict,
    /// A new `CoordinatorState` recovered from every job's stored row.
    Restart,
}

fn event() -> impl Strategy<Value = Event> {
    let worker = 0..WORKERS.len();
    prop_oneof![
        4 => (0..TASK_TYPES.len(), 0..3i64, prop::option::of(0..2_000u64),
              prop::option::of(1..4u32), prop::option::weighted(0.2, 0..3u8))
            .prop_map(|(task, level, delay_ms, max_attempts, idempotency_key)| Event::Submit {
                task, level, delay_ms, max_attempts, idempotency_key,
            }),
        3 => Just(Event::Schedule),
        2 => (worker.clone(), 0..4u32, 1..4usize)
            .prop_map(|(worker, capacity, types)| Event::Register { worker, capacity, types }),
        3 => (worker.clone(), prop::bool::weighted(0.2))
            .prop_map(|(worker, replaced_session)| Event::Heartbeat { worker, replaced_session }),
        5 => (any::<Index>(), prop_oneof![
                Just(Reported::Succeeded),
                Just(Reported::Oversized),
                Just(Reported::FailedRetryable),
                Just(Reported::FailedPermanently),
            ])
            .prop_map(|(job, reported)| Event::Result { job, reported }),
        1 => (any::<Index>(), any::<bool>())
            .prop_map(|(job, forged)| Event::StaleResult { job, forged }),
        1 => (worker.clone(), prop::bool::weighted(0.3))
            .prop_map(|(worker, replaced_session)| Event::WorkerLost { worker, replaced_session }),
        1 => worker.prop_map(|worker| Event::WorkerDraining { worker }),
        1 => any::<Index>().prop_map(|job| Event::Cancel { job }),
        1 => any::<Index>().prop_map(|job| Event::Requeue { job }),
        1 => prop::option::of(0..TASK_TYPES.len()).prop_map(|task| Event::RequeueFailed { task }),
        3 => (0..7_000i64).prop_map(|advance_ms| Event::Sweep { advance_ms }),
        1 => (-7_200_000..7_200_000i64).prop_map(|ms| Event::StepWall { ms }),
        2 => Just(Event::TakeDirty),
        2 => Just(Event::Evict),
        1 => Just(Event::Restart),
    ]
}

/// The coordinator's state and what its peers know: the jobs accepted, the
/// time, and each worker's current and replaced session.
struct Harness {
    state: CoordinatorState,
    now: Now,
    jobs: Vec<JobId>,
    sessions: [Option<SessionId>; WORKERS.len()],
    replaced: [Option<SessionId>; WORKERS.len()],
    next_session: u64,
    /// The newest batch committed.
    durable: u64,
    /// Each job as its newest committed row has it: what the database
    /// holds, and all that is left of an evicted job.
    stored: HashMap<JobId, Job>,
}

impl Harness {
    fn new() -> Self {
        Harness {
            state: state(),
            now: Now::both(0),
            jobs: Vec::new(),
            sessions: [None; WORKERS.len()],
            replaced: [None; WORKERS.len()],
            next_session: 1,
            durable: 0,
            stored: HashMap::default(),
        }
    }

    /// One accepted job still in memory (an evicted one receives no
    /// events but a requeue).
    fn pick(&self, job: &Index) -> Option<JobId> {
        self.pick_any(job).filter(|id| self.state.holds(*id))
    }

    fn pick_any(&self, job: &Index) -> Option<JobId> {
        (!self.jobs.is_empty()).then(|| self.jobs[job.index(self.jobs.len())])
    }

    /// The session an event from `worker` arrives through; a never-used
    /// one if the worker has none.
    fn session(&self, worker: usize, replaced: bool) -> SessionId {
        let known = if replaced {
            self.replaced
        } else {
            self.sessions
        };
        known[worker].unwrap_or(SessionId(0))
    }

    fn apply(&mut self, event: &Event) -> Result<(), TestCaseError> {
        let now = self.now;
        match event {
            Event::Submit { .. } => self.submit(event),
            Event::Schedule => self.state.schedule(now),
            Event::Register {
                worker,
                capacity,
                types,
            } => {
                let session = SessionId(self.next_session);
                self.next_session += 1;
                self.replaced[*worker] = self.sessions[*worker].replace(session);
                let types = (0..TASK_TYPES.len())
                    .filter(|i| types & (1 << i) != 0)
                    .map(|i| TASK_TYPES[i].to_string())
                    .collect();
                let name = w(WORKERS[*worker]);
                self.state
                    .register_worker(name, session, *capacity, types, now);
            }
            Event::Heartbeat {
                worker,
                replaced_session,
            } => {
                let session = self.session(*worker, *replaced_session);
                self.state.heartbeat(&w(WORKERS[*worker]), session, now);
            }
            Event::Result { job, reported } => self.report(job, *reported)?,
            Event::StaleResult { job, forged } => self.report_stale(job, *forged)?,
            Event::WorkerLost {
                worker,
                replaced_session,
            } => {
                let session = self.session(*worker, *replaced_session);
                let name = w(WORKERS[*worker]);
                self.state
                    .worker_lost(&name, session, "connection closed", now);
            }
            Event::WorkerDraining { worker } => {
                self.state.worker_draining(&w(WORKERS[*worker]));
            }
            Event::Cancel { job } => {
                if let Some(id) = self.pick(job) {
                    let _ = self.state.cancel(id, now);
                }
            }
            Event::Requeue { job } => self.requeue(job)?,
            Event::RequeueFailed { task } => {
                let task_type = task.map(|t| TASK_TYPES[t]);
                self.state
                    .requeue_failed(task_type, None, crate::protocol::MAX_REQUEUE_JOBS, now);
            }
            Event::Sweep { advance_ms } => {
                self.now = self.now.plus(*advance_ms);
                self.state.sweep(self.now);
            }
            Event::StepWall { ms } => {
                self.now.wall_ms += ms;
            }
            Event::TakeDirty => self.take_dirty()?,
            Event::Evict => self.evict()?,
            Event::Restart => self.restart()?,
        }
        self.state.take_effects();
        Ok(())
    }

    fn submit(&mut self, event: &Event) {
        let Event::Submit {
            task,
            level,
            delay_ms,
            max_attempts,
            idempotency_key,
        } = event
        else {
            return;
        };
        let req = SubmitRequest {
            task_type: TASK_TYPES[*task].to_string(),
            priority: Priority::from_level(*level).unwrap_or_default(),
            delay_ms: *delay_ms,
            max_attempts: *max_attempts,
            idempotency_key: idempotency_key.map(|k| format!("key-{k}")),
            ..echo("m")
        };
        if let SubmitAnswer::Accepted { job_id, .. } = self.state.submit(req, self.now) {
            if !self.jobs.contains(&job_id) {
                self.jobs.push(job_id);
            }
        }
    }

    /// Reports on the job's current attempt as its worker would; a job
    /// not running is reported on under its last lease, which is stale.
    fn report(&mut self, job: &Index, reported: Reported) -> Result<(), TestCaseError> {
        let Some(id) = self.pick(job) else {
            return Ok(());
        };
        let Some(job) = self.state.job(id) else {
            return Err(TestCaseError::fail(format!("accepted job {id} is gone")));
        };
        let current = job.state == JobState::Running;
        let Some(last) = job.history.last() else {
            return Ok(());
        };
        let (worker, lease) = (last.worker_id.clone(), last.lease);
        let outcome = match reported {
            Reported::Succeeded => TaskOutcome::Succeeded(b"done".to_vec()),
            Reported::Oversized => TaskOutcome::Succeeded(vec![0; MAX_RESULT_BYTES + 1]),
            Reported::FailedRetryable => TaskOutcome::failed("transient"),
            Reported::FailedPermanently => TaskOutcome::failed_permanently("bad input"),
        };
        let applied = self
            .state
            .task_result(&worker, id, lease, outcome, self.now);
        prop_assert_eq!(
            applied.is_ok(),
            current,
            "a result counts exactly when it is for the running attempt"
        );
        prop_assert!(
            !current
                || self
                    .state
                    .job(id)
                    .is_some_and(|j| j.state != JobState::Running),
            "an applied result ends the attempt"
        );
        Ok(())
    }

    /// Reports under an earlier attempt's lease or a made-up one: dropped,
    /// and the job is left exactly as it was.
    fn report_stale(&mut self, job: &Index, forged: bool) -> Result<(), TestCaseError> {
        let Some(id) = self.pick(job) else {
            return Ok(());
        };
        let before = self.state.job(id).cloned();
        let earlier = before.as_ref().and_then(|j| {
            let n = j.history.len();
            (n >= 2).then(|| j.history[n - 2].lease)
        });
        let lease = match earlier {
            Some(lease) if !forged => lease,
            _ => LeaseId::new_random(),
        };
        let worker = before
            .as_ref()
            .and_then(|j| j.worker_id.clone())
            .unwrap_or_else(|| w(WORKERS[0]));
        let outcome = TaskOutcome::Succeeded(b"late".to_vec());
        let dropped = self
            .state
            .task_result(&worker, id, lease, outcome, self.now);
        prop_assert!(dropped.is_err(), "a stale result is dropped");
        prop_assert_eq!(self.state.job(id).cloned(), before, "and changes nothing");
        Ok(())
    }

    /// Requeues as the coordinator does: a job no longer in memory is
    /// read back from its stored row first.
    fn requeue(&mut self, job: &Index) -> Result<(), TestCaseError> {
        let Some(id) = self.pick_any(job) else {
            return Ok(());
        };
        if !self.state.holds(id) {
            let stored = self.stored.get(&id).cloned();
            prop_assert!(stored.is_some(), "evicted job {} was never stored", id);
            if let Some(job) = stored {
                self.state.restore(job, self.now);
            }
        }
        let _ = self.state.requeue(id, self.now);
        Ok(())
    }

    /// Evicts what retention allows; every evicted job is finished and
    /// exactly as its committed row has it.
    fn evict(&mut self) -> Result<(), TestCaseError> {
        let before: Vec<Job> = self
            .jobs
            .iter()
            .filter_map(|id| self.state.job(*id).cloned())
            .collect();
        self.state.evict_finished(self.now, self.durable);
        for job in before.iter().filter(|j| !self.state.holds(j.id)) {
            prop_assert!(
                job.state.is_terminal(),
                "evicted job {} is {}",
                job.id,
                job.state
            );
            let stored = self.stored.get(&job.id).map(|s| Job {
                progress: None,
                ..s.clone()
            });
            prop_assert_eq!(
                stored.as_ref(),
                Some(job),
                "evicted job {} is durable",
                job.id
            );
        }
        Ok(())
    }

    /// Takes a batch and commits it: every row names an accepted job and
    /// carries the job's last attempt; nothing is left dirty.
    fn take_dirty(&mut self) -> Result<(), TestCaseError> {
        let batch = self.durable + 1;
        self.state.seal_finished(batch);
        for row in self.state.take_dirty() {
            if let Some(job) = self.state.job(row.id) {
                self.stored.insert(
                    row.id,
                    Job {
                        progress: None,
                        ..job.clone()
                    },
                );
            }
            let job = self.state.job(row.id);
            prop_assert!(job.is_some(), "row for unknown job {}", row.id);
            let last = job.and_then(|j| j.history.last());
            prop_assert_eq!(
                row.changed_attempts.last(),
                last,
                "job {}: last attempt",
                row.id
            );
        }
        prop_assert!(!self.state.has_dirty());
        self.durable = batch;
        Ok(())
    }

    /// Restarts from every job's row as the database returns it (progress
    /// is never stored), evicted ones included; workers must register again.
    fn restart(&mut self) -> Result<(), TestCaseError> {
        let mut rows = stored_rows(&self.state);
        let evicted = self.jobs.iter().filter(|id| !self.state.holds(**id));
        rows.extend(evicted.filter_map(|id| self.stored.get(id).cloned()));
        // The restart stands for a clean stop: every row is committed.
        self.stored = rows.iter().map(|job| (job.id, job.clone())).collect();
        self.state = state();
        // A new process: its monotonic clock starts elsewhere.
        self.now.mono_ms -= 1_000_000;
        let summary = self.state.recover(rows, self.now);
        prop_assert_eq!(summary.loaded, self.jobs.len());
        self.replaced = self.sessions;
        self.sessions = [None; WORKERS.len()];
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_event_sequences_keep_every_invariant(
        events in prop::collection::vec(event(), 1..80),
    ) {
        let mut harness = Harness::new();
        for (step, event) in events.iter().enumerate() {
            harness.apply(event)?;
            if let Err(broken) = harness.state.check_invariants() {
                return Err(TestCaseError::fail(format!(
                    "after step {step} ({event:?}): {broken}"
                )));
            }
        }
    }
}
