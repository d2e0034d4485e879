//! A property test: random sequences of every event the coordinator
//! applies to `CoordinatorState` (submissions, scheduling, workers coming,
//! heartbeating, draining and vanishing, results under current, stale and
//! forged leases, client control, sweeps as time passes, batches taken
//! (and committed), finished jobs evicted from memory, requeues of evicted
//! jobs read back, restarts recovered from the stored rows, and workers
//! registering again with claims on the attempts they still run, right
//! and wrong ones), with every invariant checked after every step; and
//! client requests about any job routed by `plan`, which must send a job
//! memory holds to the state and one it no longer holds to the database.
//!
//! The coordinator actor's pure machines join in (see `machines`): expiry
//! batches asked for at sweeps and after pauses, client deletions parked
//! on a busy database and sent again, schedule passes queued by commits
//! and by the slot timer, with the database's answers (answered, busy,
//! failed, refused), commits answered apart from being sent, timers
//! firing as time passes, the actor's mailbox and stops; each machine's
//! guarantees are checked after every step too.

use super::tests::{echo, stored_rows, w};
use super::*;
use crate::scheduler::concurrency_gate::ConcurrencyLimits;
use crate::scheduler::hash_map::HashMap;
use machines::{CommitReply, DeletionReply, ExpiryReply, Machines};
use proptest::prelude::*;
use proptest::sample::Index;
use taskyard_client::clock::Now;
use taskyard_protocol::flow::LimitPattern;
use taskyard_protocol::*;

const TASK_TYPES: [&str; 2] = ["echo", "custom"];
const WORKERS: [&str; 3] = ["a", "b", "c"];
const MAX_RESULT_BYTES: usize = 16;

#[path = "invariant_machines.rs"]
mod machines;

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
        max_bytes: u64::MAX,
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

/// What a registering worker says it still runs.
#[derive(Debug, Clone, Copy)]
enum Claims {
    Nothing,
    /// Every RUNNING attempt the coordinator has on this worker, as a
    /// worker that kept running them would.
    Held,
    /// Those, a made-up lease and another worker's attempt.
    HeldAndWrong,
}

#[derive(Debug, Clone)]
enum Event {
    Submit {
        task: usize,
        level: i64,
        delay_ms: Option<u64>,
        max_attempts: Option<u32>,
        idempotency_key: Option<u8>,
        /// `k:N`: `k:0` may run 1 at a time, `k:1` and `k:2` 2 each.
        concurrency_key: Option<u8>,
    },
    AssignQueued,
    /// Registers `worker` under a fresh session, replacing any current one.
    Register {
        worker: usize,
        capacity: u32,
        /// Bit `i` set: advertises `TASK_TYPES[i]`.
        types: usize,
        claims: Claims,
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
    /// Takes the dirty rows as the next batch and sends its commit (none
    /// while one is out, after a refused one, or with nothing dirty).
    TakeDirty,
    /// The database answers the commit out, if any.
    CommitAnswered {
        reply: CommitReply,
    },
    /// Evicts the finished jobs beyond the window whose rows are committed.
    Evict,
    /// A new `CoordinatorState` recovered from every job's stored row.
    Restart,
    /// Requests about a job (held or evicted) and a list, routed by `plan`
    /// (which changes nothing); `finished_list`: of FAILED jobs, else of
    /// QUEUED ones.
    Route {
        job: Index,
        finished_list: bool,
    },
    /// Time passes without a sweep: the timers due fire.
    Wait {
        ms: i64,
    },
    /// The database answers the expiry batch out, if any, `took_ms`
    /// after (time passes meanwhile).
    ExpiryAnswered {
        reply: ExpiryReply,
        took_ms: i64,
    },
    /// A client asks to delete a job that may be deleted now (finished,
    /// stored, not being deleted; any job when none may), or (`None`) one
    /// memory does not hold; `plan` sends it to the database.
    Delete {
        job: Option<Index>,
    },
    /// The database answers one deletion sent, if any.
    DeletionAnswered {
        which: Index,
        reply: DeletionReply,
    },
    /// The `SchedulePass` in the mailbox, if any, is handled; `left_due`:
    /// more schedules were due than the pass decides.
    PassRuns {
        left_due: bool,
    },
    /// A schedule change is stored: the earliest slot is this far from
    /// now (none: no schedule left).
    ScheduleStored {
        due_in_ms: Option<i64>,
    },
    /// A graceful stop: the coordinator stops, and restarts once every
    /// change is durable.
    Stop,
}

fn event() -> impl Strategy<Value = Event> {
    let worker = 0..WORKERS.len();
    prop_oneof![
        4 => (0..TASK_TYPES.len(), 0..3i64, prop::option::of(0..2_000u64),
              prop::option::of(1..4u32), prop::option::weighted(0.2, 0..3u8),
              prop::option::weighted(0.5, 0..3u8))
            .prop_map(|(task, level, delay_ms, max_attempts, idempotency_key, concurrency_key)| {
                Event::Submit { task, level, delay_ms, max_attempts, idempotency_key, concurrency_key }
            }),
        3 => Just(Event::AssignQueued),
        2 => (worker.clone(), 0..4u32, 1..4usize, prop_oneof![
                Just(Claims::Nothing), Just(Claims::Held), Just(Claims::HeldAndWrong),
            ])
            .prop_map(|(worker, capacity, types, claims)| Event::Register {
                worker, capacity, types, claims,
            }),
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
        2 => (any::<Index>(), any::<bool>())
            .prop_map(|(job, finished_list)| Event::Route { job, finished_list }),
        2 => prop_oneof![
                8 => Just(CommitReply::Committed),
                2 => Just(CommitReply::Failed),
                1 => Just(CommitReply::Refused),
            ]
            .prop_map(|reply| Event::CommitAnswered { reply }),
        2 => (0..3_000i64).prop_map(|ms| Event::Wait { ms }),
        2 => (prop_oneof![
                Just(ExpiryReply::Full),
                Just(ExpiryReply::Partial),
                Just(ExpiryReply::Busy),
                Just(ExpiryReply::Failed),
            ], 0..1_000i64)
            .prop_map(|(reply, took_ms)| Event::ExpiryAnswered { reply, took_ms }),
        3 => prop::option::of(any::<Index>()).prop_map(|job| Event::Delete { job }),
        3 => (any::<Index>(), prop_oneof![
                Just(DeletionReply::Answered),
                Just(DeletionReply::Busy),
                Just(DeletionReply::Failed),
            ])
            .prop_map(|(which, reply)| Event::DeletionAnswered { which, reply }),
        2 => prop::bool::weighted(0.3).prop_map(|left_due| Event::PassRuns { left_due }),
        1 => prop::option::weighted(0.8, -2_000..70_000i64)
            .prop_map(|due_in_ms| Event::ScheduleStored { due_in_ms }),
        1 => Just(Event::Stop),
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
    /// The newest batch sent.
    sent: u64,
    /// The batch being committed, with each job as its row has it.
    commit_out: Option<(u64, Vec<Job>)>,
    /// The coordinator actor's pure machines.
    machines: Machines,
    /// Ids named that were never accepted, so far.
    unknown_ids: u64,
    /// Each job as its newest committed row has it: what the database
    /// holds, and all that is left of an evicted job.
    stored: HashMap<JobId, Job>,
}

impl Harness {
    fn new() -> Self {
        Harness {
            state: limited_state(),
            now: Now::both(0),
            jobs: Vec::new(),
            sessions: [None; WORKERS.len()],
            replaced: [None; WORKERS.len()],
            next_session: 1,
            durable: 0,
            sent: 0,
            commit_out: None,
            machines: Machines::new(),
            unknown_ids: 0,
            stored: HashMap::default(),
        }
    }

    /// One accepted job still in memory (an evicted one receives no
    /// events but a requeue).
    fn pick(&self, job: &Index) -> Option<JobId> {
        self.pick_any(job).filter(|id| self.state.holds(*id))
    }

    /// One job that may be deleted now, or any accepted job if none may.
    fn pick_deletable(&self, job: &Index) -> Option<JobId> {
        let deletable = self.state.deletable(&self.jobs).0;
        match deletable.is_empty() {
            true => self.pick_any(job),
            false => Some(deletable[job.index(deletable.len())]),
        }
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
            Event::AssignQueued => self.state.assign_queued(now),
            Event::Register {
                worker,
                capacity,
                types,
                claims,
            } => self.register(*worker, *capacity, *types, *claims)?,
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
                self.state.requeue_failed(
                    task_type,
                    None,
                    taskyard_protocol::MAX_REQUEUE_JOBS,
                    now,
                );
            }
            Event::Sweep { advance_ms } => {
                self.advance(*advance_ms)?;
                // A stopping coordinator's sweep does nothing.
                if !self.machines.is_stopping() {
                    let more = self.state.sweep(self.now);
                    let settled = self.settled();
                    self.machines.swept(more, settled, self.now)?;
                }
            }
            Event::StepWall { ms } => {
                self.now.wall_ms += ms;
            }
            Event::TakeDirty => self.take_dirty()?,
            Event::CommitAnswered { reply } => self.commit_answered(*reply)?,
            Event::Evict => self.evict()?,
            Event::Restart => self.restart()?,
            Event::Route { job, finished_list } => self.route(job, *finished_list)?,
            Event::Wait { ms } => self.advance(*ms)?,
            Event::ExpiryAnswered { reply, took_ms } => {
                self.advance(*took_ms)?;
                self.machines.expiry_answered(*reply, self.now)?;
            }
            Event::Delete { job } => {
                let id = match job {
                    Some(job) => self.pick_deletable(job),
                    None => {
                        self.unknown_ids += 1;
                        Some(JobId(uuid::Uuid::from_u128(u128::from(self.unknown_ids))))
                    }
                };
                if let Some(id) = id {
                    self.machines.delete(&mut self.state, &[id])?;
                }
            }
            Event::DeletionAnswered { which, reply } => {
                self.machines
                    .deletion_answered(which, *reply, &mut self.state)?;
            }
            Event::PassRuns { left_due } => {
                let settled = |s: &CoordinatorState| self.commit_out.is_none() && !s.has_dirty();
                self.machines
                    .pass_runs(&mut self.state, *left_due, settled, now)?;
            }
            Event::ScheduleStored { due_in_ms } => {
                let due = due_in_ms.map(|ms| now.wall_ms + ms);
                self.machines.schedule_stored(due, now)?;
            }
            Event::Stop => {
                if !self.machines.is_stopping() {
                    self.machines.stop(&mut self.state)?;
                }
            }
        }
        self.state.take_effects();
        // A stop ends once every change is durable; the process starts
        // again.
        if self.machines.is_stopping() && !self.machines.is_abandoned() && self.settled() {
            self.restart()?;
        }
        Ok(())
    }

    /// Nothing waits for a commit: none out, nothing dirty.
    fn settled(&self) -> bool {
        self.commit_out.is_none() && !self.state.has_dirty()
    }

    /// Time passes: the timers due fire. An abandoned coordinator's
    /// process has exited meanwhile, and starts again.
    fn advance(&mut self, ms: i64) -> Result<(), TestCaseError> {
        self.now = self.now.plus(ms);
        if self.machines.is_abandoned() {
            return self.restart();
        }
        self.machines.tick(self.now)
    }

    /// `plan` sends requests about a job memory holds to the state, about
    /// one it no longer holds to the database (none without one), a
    /// deletion to the database always, and a list to the database only
    /// when it may show finished jobs.
    fn route(&self, job: &Index, finished_list: bool) -> Result<(), TestCaseError> {
        use crate::scheduler::plan::{plan, Plan};
        use crate::scheduler::stored_read::StoredRead;
        let Some(id) = self.pick_any(job) else {
            return Ok(());
        };
        let (held, wall) = (self.state.holds(id), self.now.wall_ms);
        for request in [
            ClientRequest::Status { job_id: id },
            ClientRequest::Cancel { job_id: id },
            ClientRequest::Requeue { job_id: id },
        ] {
            let planned = plan(request.clone(), &self.state, true, wall);
            let routed_right = match &planned {
                Plan::Apply(applied) => held && *applied == request,
                Plan::ReadStored(
                    StoredRead::Status(read) | StoredRead::Cancel(read) | StoredRead::Requeue(read),
                ) => !held && *read == id,
                _ => false,
            };
            prop_assert!(routed_right, "held {held}: {request:?} went {planned:?}");
            let alone = plan(request.clone(), &self.state, false, wall);
            prop_assert_eq!(alone, Plan::Apply(request), "no database: memory answers");
        }
        let delete = ClientRequest::Delete { job_ids: vec![id] };
        prop_assert_eq!(
            plan(delete, &self.state, true, wall),
            Plan::Delete(vec![id])
        );
        let list = ClientRequest::List {
            state: Some(match finished_list {
                true => JobState::Failed,
                false => JobState::Queued,
            }),
            limit: 10,
            task_type: None,
            cursor: None,
        };
        let planned = plan(list, &self.state, true, wall);
        let stored = matches!(planned, Plan::ReadStored(StoredRead::List { .. }));
        prop_assert_eq!(stored, finished_list, "{:?}", planned);
        Ok(())
    }

    /// Registers `worker` under a fresh session with `claims`. Every
    /// claimed attempt of its own (awaiting its claim, or held by the
    /// replaced session) that fits the capacity is running on it after,
    /// under the same lease; nothing claimed is started anew.
    fn register(
        &mut self,
        worker: usize,
        capacity: u32,
        types: usize,
        claims: Claims,
    ) -> Result<(), TestCaseError> {
        let session = SessionId(self.next_session);
        self.next_session += 1;
        self.replaced[worker] = self.sessions[worker].replace(session);
        let types = (0..TASK_TYPES.len())
            .filter(|i| types & (1 << i) != 0)
            .map(|i| TASK_TYPES[i].to_string())
            .collect();
        let name = w(WORKERS[worker]);
        let held: Vec<RunningAttempt> = self
            .jobs
            .iter()
            .filter_map(|id| self.state.job(*id))
            .filter(|j| j.state == JobState::Running && j.worker_id.as_ref() == Some(&name))
            .filter_map(|j| {
                Some(RunningAttempt {
                    job_id: j.id,
                    lease: j.lease?,
                })
            })
            .collect();
        let mut running = match claims {
            Claims::Nothing => Vec::new(),
            _ => held.clone(),
        };
        if let Claims::HeldAndWrong = claims {
            if let Some(first) = self.jobs.first() {
                running.push(RunningAttempt {
                    job_id: *first,
                    lease: LeaseId::new_random(),
                });
            }
        }
        running.truncate(capacity as usize);
        let before: Vec<(JobId, u32)> = running
            .iter()
            .filter_map(|a| self.state.job(a.job_id).map(|j| (j.id, j.attempts)))
            .collect();
        self.state.register_worker_claiming(
            name.clone(),
            session,
            capacity,
            types,
            running.clone(),
            self.now,
        );
        for (id, attempts) in before {
            let job = self.state.job(id);
            prop_assert_eq!(
                job.map(|j| j.attempts),
                Some(attempts),
                "a claim starts nothing"
            );
        }
        for claim in running.iter().filter(|c| held.contains(c)) {
            let job = self.state.job(claim.job_id);
            prop_assert!(
                job.is_some_and(|j| j.state == JobState::Running && j.lease == Some(claim.lease)),
                "a held attempt claimed stays RUNNING under its lease"
            );
        }
        Ok(())
    }

    fn submit(&mut self, event: &Event) {
        let Event::Submit {
            task,
            level,
            delay_ms,
            max_attempts,
            idempotency_key,
            concurrency_key,
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
            concurrency_key: concurrency_key.map(|k| format!("k:{k}")),
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
        let current = job.state == JobState::Running && !self.state.awaiting_claim(id);
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

    /// Takes a batch and sends its commit: every row names an accepted
    /// job and carries the job's last attempt; nothing is left dirty.
    /// As `GroupCommit` does: one commit out at a time, none with nothing
    /// to commit, none after a refused one.
    fn take_dirty(&mut self) -> Result<(), TestCaseError> {
        if self.commit_out.is_some() || self.machines.is_abandoned() || !self.state.has_dirty() {
            return Ok(());
        }
        let batch = self.sent + 1;
        self.state.seal_finished(batch);
        let mut rows = Vec::new();
        for row in self.state.take_dirty() {
            if let Some(job) = self.state.job(row.id) {
                rows.push(Job {
                    progress: None,
                    ..job.clone()
                });
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
        self.sent = batch;
        self.commit_out = Some((batch, rows));
        self.machines.commit_sent(self.now)
    }

    /// The database answers the commit out: committed, its rows are what
    /// the database holds; failed or refused, they are dirty again.
    fn commit_answered(&mut self, reply: CommitReply) -> Result<(), TestCaseError> {
        let Some((batch, rows)) = self.commit_out.take() else {
            return Ok(());
        };
        match reply {
            CommitReply::Committed => {
                for job in rows {
                    self.stored.insert(job.id, job);
                }
                self.durable = batch;
            }
            CommitReply::Failed | CommitReply::Refused => {
                self.state.remark_dirty(rows.into_iter().map(|job| job.id));
            }
        }
        let settled = self.settled();
        self.machines
            .commit_answered(reply, settled, &mut self.state, self.now)
    }

    /// Restarts from every job's row as the database returns it (progress
    /// is never stored), evicted ones included; workers must register again.
    /// The old process stopped first (giving up its parked deletions);
    /// whatever it had out (commit, expiry batch, deletions, timers,
    /// queued passes) ends with it, and the machines start anew.
    fn restart(&mut self) -> Result<(), TestCaseError> {
        if !self.machines.is_stopping() {
            self.machines.stop(&mut self.state)?;
        }
        self.machines = Machines::new();
        self.commit_out = None;
        let mut rows = stored_rows(&self.state);
        let evicted = self.jobs.iter().filter(|id| !self.state.holds(**id));
        rows.extend(evicted.filter_map(|id| self.stored.get(id).cloned()));
        // The restart stands for a clean stop: every row is committed.
        self.stored = rows.iter().map(|job| (job.id, job.clone())).collect();
        self.state = limited_state();
        // A new process: its monotonic clock starts elsewhere.
        self.now.mono_ms -= 1_000_000;
        let summary = self.state.recover(rows, self.now);
        prop_assert_eq!(summary.loaded, self.jobs.len());
        self.replaced = self.sessions;
        self.sessions = [None; WORKERS.len()];
        Ok(())
    }
}

/// The limits the harness's state runs under: `k:0` at most 1 running,
/// every other `k:` key at most 2.
fn concurrency_limits() -> ConcurrencyLimits {
    ConcurrencyLimits::new([
        (LimitPattern::Exact("k:0".into()), 1),
        (LimitPattern::Prefix("k:".into()), 2),
    ])
}

fn limited_state() -> CoordinatorState {
    let mut state = state();
    state.set_concurrency_limits(concurrency_limits());
    state
}

/// No concurrency key has more jobs RUNNING than its limit (the limits
/// never change in this test, so not even a recovered job may exceed it).
fn within_concurrency_limits(state: &CoordinatorState) -> Result<(), String> {
    let limits = concurrency_limits();
    for key in ["k:0", "k:1", "k:2"] {
        let running = state.gate.running_of(key);
        let limit = limits.limit_of(key).unwrap_or(u32::MAX);
        if running > limit {
            return Err(format!("{key}: {running} RUNNING, limit {limit}"));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_event_sequences_keep_every_invariant(
        events in prop::collection::vec(event(), 1..80),
    ) {
        let mut harness = Harness::new();
        for (step, event) in events.iter().enumerate() {
            harness.apply(event).map_err(|failed| {
                TestCaseError::fail(format!("at step {step} ({event:?}): {failed}"))
            })?;
            let checked = harness
                .state
                .check_invariants()
                .and_then(|()| within_concurrency_limits(&harness.state))
                .and_then(|()| harness.machines.check(&harness.state, harness.settled()));
            if let Err(broken) = checked {
                return Err(TestCaseError::fail(format!(
                    "after step {step} ({event:?}): {broken}"
                )));
            }
        }
    }
}
