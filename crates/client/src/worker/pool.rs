//! The task pool: runs assigned attempts, at most `capacity` at once, each
//! under its own cancellation token keyed by (job, lease), on the task
//! runtime — or, for task types that never block, on the connection's.

use crate::worker::progress;
use crate::worker::task_runtime::TaskRuntime;
use crate::worker::tasks::{TaskContext, TaskHandler, TaskRegistry, Threads};
use futures_util::FutureExt;
use slog::{debug, o, warn, Logger};
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use taskyard_protocol::{JobId, LeaseId, RunningAttempt, TaskOutcome, WorkerId, WorkerMessage};
use tokio::sync::{mpsc, watch, Semaphore};
use tokio_util::sync::CancellationToken;

type Key = (JobId, LeaseId);

/// Room left in a frame for everything of a `TaskResult` but the result
/// bytes (ids, field names, MessagePack headers), with margin.
pub const RESULT_FRAME_OVERHEAD: usize = 512;
/// Longest failure message sent; longer ones are cut.
pub const MAX_ERROR_BYTES: usize = 16 * 1024;

/// One `TaskAssign`, as the pool needs it.
#[derive(Debug, Clone)]
pub struct Assignment {
    pub job_id: JobId,
    pub lease: LeaseId,
    pub task_type: String,
    pub payload: Vec<u8>,
    /// The attempt's deadline, counted from its arrival: the coordinator
    /// revokes the lease then, and the worker cancels it itself as a
    /// backstop in case the `TaskCancel` is lost.
    pub timeout_ms: u64,
}

/// Bounds the pool applies to every attempt.
#[derive(Debug, Clone, Copy)]
pub struct PoolLimits {
    /// A result that cannot fit in a frame fails permanently instead.
    pub max_frame_bytes: usize,
    /// How long a cancelled handler is still polled so that it can clean
    /// up (an `exec` task killing its process group) before it is dropped.
    pub cleanup_grace: Duration,
}

/// How many attempts a pool runs and holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolSize {
    /// Most handlers running at once.
    pub capacity: u32,
    /// Attempts accepted beyond `capacity`, each waiting for a slot.
    pub prefetch: u32,
}

impl PoolSize {
    /// A pool that takes no more attempts than it runs.
    #[cfg(test)]
    pub fn new(capacity: u32) -> PoolSize {
        PoolSize {
            capacity,
            prefetch: 0,
        }
    }

    /// Attempts the pool accepts: running and waiting.
    pub fn slots(&self) -> u32 {
        self.capacity.saturating_add(self.prefetch)
    }
}

/// An assignment refused because every slot is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("is at its capacity ({running} running): an assignment beyond capacity is refused")]
pub struct AtCapacity {
    pub running: usize,
}

/// Shared by every connection of one worker, so the capacity bound holds
/// across reconnects. Owns the task runtime: dropping the pool shuts it
/// down (see [`TaskRuntime`]).
pub struct TaskPool {
    slots: Slots,
    runtime: TaskRuntime,
}

/// What running attempts share with the pool. Cloning is cheap; attempts
/// hold a clone, never the runtime they run on.
#[derive(Clone)]
struct Slots {
    registry: Arc<TaskRegistry>,
    /// The slots registered (capacity and prefetch): attempts assigned
    /// and not yet reported.
    capacity: usize,
    permits: Arc<Semaphore>,
    running: Arc<Mutex<HashMap<Key, CancellationToken>>>,
    /// Attempts whose result has not been written to a connection yet.
    unreported: Ledger,
    /// Attempts started and not yet completely finished (result queued or
    /// dropped, clean-up done).
    in_flight: Arc<watch::Sender<usize>>,
    draining: CancellationToken,
    limits: PoolLimits,
    worker_id: WorkerId,
    log: Logger,
}

/// The attempts a worker holds whose result no connection has written yet:
/// running, or finished with the result kept here until a writer has
/// flushed it. A new connection lists them in its `Register`, so that a
/// new coordinator re-attaches them instead of running them again, and
/// writes the kept results first: a result lost with a connection (taken
/// from the queue, then the write failed) is sent again. Cheap to clone.
#[derive(Clone, Default)]
pub struct Ledger(Arc<Mutex<HashMap<Key, Option<WorkerMessage>>>>);

impl Ledger {
    fn held(&self) -> MutexGuard<'_, HashMap<Key, Option<WorkerMessage>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn hold(&self, key: Key) {
        self.held().insert(key, None);
    }

    /// The attempt (job, lease) ended with `result`, a `TaskResult` about
    /// to be queued: kept until it is written.
    pub fn finished(&self, job_id: JobId, lease: LeaseId, result: WorkerMessage) {
        self.held().insert((job_id, lease), Some(result));
    }

    /// The result of (job, lease) was written to a connection (or the
    /// attempt was cancelled): it is no longer held.
    pub fn reported(&self, job_id: JobId, lease: LeaseId) {
        self.held().remove(&(job_id, lease));
    }

    /// True while the attempt is held: a queued result of an attempt no
    /// longer held was written already.
    pub fn holds(&self, job_id: JobId, lease: LeaseId) -> bool {
        self.held().contains_key(&(job_id, lease))
    }

    /// Every attempt held, by job id.
    pub fn unreported(&self) -> Vec<RunningAttempt> {
        let mut held: Vec<RunningAttempt> = self
            .held()
            .keys()
            .map(|&(job_id, lease)| RunningAttempt { job_id, lease })
            .collect();
        held.sort_by_key(|a| a.job_id);
        held
    }

    /// The results kept, by job id.
    pub fn results(&self) -> Vec<WorkerMessage> {
        let held = self.held();
        let mut kept: Vec<(&Key, &WorkerMessage)> = held
            .iter()
            .filter_map(|(key, result)| Some((key, result.as_ref()?)))
            .collect();
        kept.sort_by_key(|(key, _)| **key);
        kept.into_iter().map(|(_, result)| result.clone()).collect()
    }
}

/// The pool's controls for draining, usable while the connection owns the pool.
#[derive(Clone)]
pub struct PoolControl {
    slots: Slots,
}

impl TaskPool {
    /// At most `size.capacity` handlers run at once (those of
    /// [`Threads::TaskThreads`] task types on `runtime`, the others on the
    /// runtime that calls [`assign`](Self::assign)), and at most
    /// `size.prefetch` more attempts wait for a slot.
    pub fn new(
        size: PoolSize,
        registry: TaskRegistry,
        runtime: TaskRuntime,
        limits: PoolLimits,
        worker_id: WorkerId,
        log: Logger,
    ) -> Self {
        let slots = Slots {
            registry: Arc::new(registry),
            capacity: size.slots() as usize,
            permits: Arc::new(Semaphore::new(size.capacity as usize)),
            running: Arc::default(),
            unreported: Ledger::default(),
            in_flight: Arc::new(watch::Sender::new(0)),
            draining: CancellationToken::new(),
            limits,
            worker_id,
            log,
        };
        TaskPool { slots, runtime }
    }

    pub fn control(&self) -> PoolControl {
        PoolControl {
            slots: self.slots.clone(),
        }
    }

    /// Every task type this pool runs, sorted.
    pub fn task_types(&self) -> Vec<String> {
        self.slots.registry.task_types()
    }

    /// The attempts whose results are not written yet; see [`Ledger`].
    pub fn ledger(&self) -> Ledger {
        self.slots.unreported.clone()
    }

    /// Cancelled once the worker drains: no new attempt is accepted.
    pub fn draining(&self) -> &CancellationToken {
        &self.slots.draining
    }

    /// Starts the attempt in the background. It waits for a free slot, runs,
    /// and sends exactly one `TaskResult` to `results` unless its token (a
    /// child of `parent`) is cancelled first — by `cancel`, the worker
    /// stopping or its deadline passing — in which case it sends nothing.
    /// A lost connection does not stop it: its result waits in `results`
    /// for the next connection.
    /// A second assignment of a (job, lease) already running is ignored.
    /// One beyond the capacity (every slot holds an attempt whose result
    /// is not yet sent) is a coordinator's protocol error: it is refused
    /// with `AtCapacity` and not started, so nothing queues up behind the
    /// slots. Called on the connection's runtime, where attempts of
    /// [`Threads::Connection`] task types run.
    pub fn assign(
        &self,
        a: Assignment,
        parent: &CancellationToken,
        results: mpsc::Sender<WorkerMessage>,
    ) -> Result<(), AtCapacity> {
        let log = self
            .slots
            .log
            .new(o!("job" => a.job_id, "lease" => a.lease));
        let token = parent.child_token();
        let key = (a.job_id, a.lease);
        {
            let mut running = self.slots.running();
            if running.contains_key(&key) {
                warn!(log, "duplicate task assignment ignored");
                return Ok(());
            }
            if running.len() >= self.slots.capacity {
                return Err(AtCapacity {
                    running: running.len(),
                });
            }
            running.insert(key, token.clone());
            self.slots.unreported.hold(key);
        }
        debug!(log, "task assigned"; "task_type" => &a.task_type);
        self.slots.in_flight.send_modify(|n| *n += 1);
        let done = InFlight(self.slots.in_flight.clone());
        let threads = self.slots.registry.threads(&a.task_type);
        let attempt = self.slots.clone().run(a, token, results, log, done);
        match threads {
            Threads::TaskThreads => self.runtime.spawn(attempt),
            Threads::Connection => drop(tokio::spawn(attempt)),
        }
        Ok(())
    }

    /// Cancels the attempt under `lease`; no result will be sent for it
    /// (one already queued may still go: the coordinator drops it).
    /// Returns false when no such attempt is running (already finished).
    pub fn cancel(&self, job_id: JobId, lease: LeaseId) -> bool {
        self.slots.unreported.reported(job_id, lease);
        let token = self.slots.running().remove(&(job_id, lease));
        token.map(|t| t.cancel()).is_some()
    }
}

impl PoolControl {
    /// From now on the connection refuses assignments and tells the
    /// coordinator; attempts already running go on.
    pub fn begin_draining(&self) {
        self.slots.draining.cancel();
    }

    pub fn in_flight(&self) -> usize {
        *self.slots.in_flight.borrow()
    }

    /// Cancels every running attempt; none of them sends a result.
    pub fn cancel_all(&self) {
        for (_, token) in self.slots.running().drain() {
            token.cancel();
        }
    }

    /// Returns once no attempt is in flight (finished and cleaned up).
    pub async fn idle(&self) {
        let mut in_flight = self.slots.in_flight.subscribe();
        let _ = in_flight.wait_for(|n| *n == 0).await;
    }
}

/// Counts an attempt out of `in_flight` when dropped, however it ends
/// (also when the runtime drops it at shutdown).
struct InFlight(Arc<watch::Sender<usize>>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl Slots {
    async fn run(
        self,
        a: Assignment,
        token: CancellationToken,
        results: mpsc::Sender<WorkerMessage>,
        log: Logger,
        _done: InFlight,
    ) {
        let Assignment {
            job_id,
            lease,
            task_type,
            payload,
            timeout_ms,
        } = a;
        let (reporter, reports) = progress::channel();
        let ctx = TaskContext {
            job_id,
            lease,
            cancel: token.clone(),
            log: log.clone(),
            progress: reporter,
        };
        let attempt = self.run_until_cancelled(ctx, &task_type, payload, timeout_ms, &token, &log);
        // Progress is forwarded by this same task (no task of its own per
        // attempt) and stops with the attempt, so no progress follows a result.
        let forwarding = progress::forward(reports, job_id, lease, results.clone());
        tokio::pin!(attempt, forwarding);
        let outcome = tokio::select! {
            biased;
            outcome = &mut attempt => outcome,
            _ = &mut forwarding => attempt.await,
        };
        self.running().remove(&(job_id, lease));
        match outcome {
            Some(outcome) if !token.is_cancelled() => {
                debug!(log, "task finished"; "succeeded" => matches!(outcome, TaskOutcome::Succeeded(_)));
                let result = WorkerMessage::TaskResult {
                    job_id,
                    lease,
                    outcome: fit_in_frame(outcome, self.limits.max_frame_bytes),
                };
                // While no connection is up the result waits here; the
                // ledger keeps a copy until a writer has written it.
                self.unreported.finished(job_id, lease, result.clone());
                if results.send(result).await.is_err() {
                    debug!(log, "worker stopping; result dropped");
                    self.unreported.reported(job_id, lease);
                }
            }
            _ => {
                debug!(log, "task cancelled; no result sent");
                self.unreported.reported(job_id, lease);
            }
        }
    }

    /// The handler's outcome, or `None` if the attempt was cancelled or
    /// reached its deadline first. A cancelled handler is polled for up to
    /// `cleanup_grace` more, so it can stop what it started.
    async fn run_until_cancelled(
        &self,
        ctx: TaskContext,
        task_type: &str,
        payload: Vec<u8>,
        timeout_ms: u64,
        token: &CancellationToken,
        log: &Logger,
    ) -> Option<TaskOutcome> {
        let handler = self.acquire_and_run(ctx, task_type, payload);
        tokio::pin!(handler);
        let deadline = tokio::time::sleep(Duration::from_millis(timeout_ms));
        tokio::select! {
            biased;
            _ = token.cancelled() => {}
            _ = deadline => {
                debug!(log, "deadline passed; cancelling"; "timeout_ms" => timeout_ms);
                token.cancel();
            }
            outcome = &mut handler => return Some(outcome),
        }
        if tokio::time::timeout(self.limits.cleanup_grace, handler)
            .await
            .is_err()
        {
            debug!(log, "cancelled handler did not return in time; dropped");
        }
        None
    }

    /// Holds a slot only while the handler runs; a panicking handler fails
    /// the attempt instead of leaving the coordinator waiting for a timeout.
    async fn acquire_and_run(
        &self,
        ctx: TaskContext,
        task_type: &str,
        payload: Vec<u8>,
    ) -> TaskOutcome {
        let Some(handler) = self.registry.get(task_type) else {
            return TaskOutcome::failed(format!(
                "worker {} does not run task type {task_type}",
                self.worker_id
            ));
        };
        let Ok(_permit) = self.permits.clone().acquire_owned().await else {
            return TaskOutcome::failed("worker is shutting down");
        };
        run_handler(handler, ctx, payload).await
    }

    fn running(&self) -> MutexGuard<'_, HashMap<Key, CancellationToken>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

async fn run_handler(handler: TaskHandler, ctx: TaskContext, payload: Vec<u8>) -> TaskOutcome {
    match AssertUnwindSafe(handler(ctx, payload)).catch_unwind().await {
        Ok(outcome) => outcome,
        Err(_) => TaskOutcome::failed("task panicked"),
    }
}

/// A result that cannot fit in a frame becomes a permanent failure (sending
/// it would get the connection closed), and a failure message is cut to
/// `MAX_ERROR_BYTES`, so every outcome can be sent.
pub fn fit_in_frame(outcome: TaskOutcome, max_frame_bytes: usize) -> TaskOutcome {
    let room = max_frame_bytes.saturating_sub(RESULT_FRAME_OVERHEAD);
    match outcome {
        TaskOutcome::Succeeded(bytes) if bytes.len() > room => {
            TaskOutcome::failed_permanently(format!(
                "result of {} bytes exceeds what fits in a frame: max-frame-bytes ({max_frame_bytes}) less {RESULT_FRAME_OVERHEAD} bytes of framing",
                bytes.len()
            ))
        }
        TaskOutcome::Failed { mut error, retryable } if error.len() > MAX_ERROR_BYTES.min(room) => {
            let mut end = MAX_ERROR_BYTES.min(room);
            while !error.is_char_boundary(end) {
                end -= 1;
            }
            error.truncate(end);
            error.push_str(" [truncated]");
            TaskOutcome::Failed { error, retryable }
        }
        outcome => outcome,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_oversized_result_fails_permanently_and_a_long_error_is_cut() {
        let ok = TaskOutcome::Succeeded(vec![0; 2048 - RESULT_FRAME_OVERHEAD]);
        assert_eq!(fit_in_frame(ok.clone(), 2048), ok);
        let big = TaskOutcome::Succeeded(vec![0; 2049 - RESULT_FRAME_OVERHEAD]);
        match fit_in_frame(big, 2048) {
            TaskOutcome::Failed {
                error,
                retryable: false,
            } => {
                assert!(error.starts_with("result of 1537 bytes exceeds"), "{error}")
            }
            other => panic!("expected a permanent failure, got {other:?}"),
        }
        let long = TaskOutcome::failed("é".repeat(MAX_ERROR_BYTES));
        let TaskOutcome::Failed {
            error,
            retryable: true,
        } = fit_in_frame(long, 1 << 20)
        else {
            panic!("still a retryable failure")
        };
        assert!(error.len() <= MAX_ERROR_BYTES + 12 && error.ends_with("[truncated]"));
    }

    /// The name of the thread each handler ran on, as its result.
    fn thread_name() -> TaskOutcome {
        let name = std::thread::current()
            .name()
            .unwrap_or_default()
            .to_string();
        TaskOutcome::Succeeded(name.into_bytes())
    }

    #[test]
    fn nonblocking_task_types_run_on_the_connection_thread_and_others_on_task_threads() {
        let mut registry = TaskRegistry::empty();
        registry
            .register_on("inline", Threads::Connection, |_, _| async {
                thread_name()
            })
            .expect("valid task type");
        registry
            .register("threaded", |_, _| async { thread_name() })
            .expect("valid task type");
        let limits = PoolLimits {
            max_frame_bytes: 1 << 20,
            cleanup_grace: Duration::from_secs(1),
        };
        let log = Logger::root(slog::Discard, o!());
        let runtime = TaskRuntime::dedicated(2).expect("task runtime");
        let pool = TaskPool::new(
            PoolSize::new(2),
            registry,
            runtime,
            limits,
            WorkerId("w".into()),
            log,
        );
        let connection = std::thread::Builder::new()
            .name("connection".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                rt.block_on(async move {
                    let (tx, mut rx) = mpsc::channel(4);
                    let parent = CancellationToken::new();
                    let mut ran_on = HashMap::new();
                    for task_type in ["inline", "threaded"] {
                        let job_id = JobId::mint();
                        let a = Assignment {
                            job_id,
                            lease: LeaseId::new_random(),
                            task_type: task_type.into(),
                            payload: Vec::new(),
                            timeout_ms: 10_000,
                        };
                        pool.assign(a, &parent, tx.clone()).expect("a free slot");
                        let Some(WorkerMessage::TaskResult { outcome, .. }) = rx.recv().await
                        else {
                            panic!("no result for {task_type}");
                        };
                        ran_on.insert(task_type, outcome);
                    }
                    ran_on
                })
            })
            .expect("thread");
        let ran_on = connection.join().expect("connection thread");
        let name = |s: &str| TaskOutcome::Succeeded(s.as_bytes().to_vec());
        assert_eq!(ran_on["inline"], name("connection"));
        assert_eq!(ran_on["threaded"], name("taskyard-task"));
    }
}
