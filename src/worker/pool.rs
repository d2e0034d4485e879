//! The task pool: runs assigned attempts, at most `capacity` at once, each
//! under its own cancellation token keyed by (job, lease), on the task
//! runtime — never on the threads of the connection and the heartbeat.

use crate::protocol::{JobId, LeaseId, TaskOutcome, WorkerId, WorkerMessage};
use crate::worker::task_runtime::TaskRuntime;
use crate::worker::tasks::{TaskContext, TaskHandler, TaskRegistry};
use futures_util::FutureExt;
use slog::{debug, o, warn, Logger};
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::{mpsc, Semaphore};
use tokio_util::sync::CancellationToken;

type Key = (JobId, LeaseId);

/// One `TaskAssign`, as the pool needs it.
#[derive(Debug, Clone)]
pub struct Assignment {
    pub job_id: JobId,
    pub lease: LeaseId,
    pub task_type: String,
    pub payload: Vec<u8>,
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
    permits: Arc<Semaphore>,
    running: Arc<Mutex<HashMap<Key, CancellationToken>>>,
    worker_id: WorkerId,
    log: Logger,
}

impl TaskPool {
    /// Handlers run on `runtime`, at most `capacity` at once.
    pub fn new(
        capacity: u32,
        registry: TaskRegistry,
        runtime: TaskRuntime,
        worker_id: WorkerId,
        log: Logger,
    ) -> Self {
        let slots = Slots {
            registry: Arc::new(registry),
            permits: Arc::new(Semaphore::new(capacity as usize)),
            running: Arc::default(),
            worker_id,
            log,
        };
        TaskPool { slots, runtime }
    }

    /// Every task type this pool runs, sorted.
    pub fn task_types(&self) -> Vec<String> {
        self.slots.registry.task_types()
    }

    /// Starts the attempt in the background. It waits for a free slot, runs,
    /// and sends exactly one `TaskResult` to `results` unless its token (a
    /// child of `parent`) is cancelled first, in which case it sends nothing.
    /// A second assignment of a (job, lease) already running is ignored.
    pub fn assign(
        &self,
        a: Assignment,
        parent: &CancellationToken,
        results: mpsc::Sender<WorkerMessage>,
    ) {
        let log = self
            .slots
            .log
            .new(o!("job" => a.job_id.to_string(), "lease" => a.lease.to_string()));
        let token = parent.child_token();
        let key = (a.job_id, a.lease);
        {
            let mut running = self.slots.running();
            if running.contains_key(&key) {
                warn!(log, "duplicate task assignment ignored");
                return;
            }
            running.insert(key, token.clone());
        }
        debug!(log, "task assigned"; "task_type" => &a.task_type);
        self.runtime
            .spawn(self.slots.clone().run(a, token, results, log));
    }

    /// Cancels the attempt under `lease`; no result will be sent for it.
    /// Returns false when no such attempt is running (already finished).
    pub fn cancel(&self, job_id: JobId, lease: LeaseId) -> bool {
        let token = self.slots.running().remove(&(job_id, lease));
        token.map(|t| t.cancel()).is_some()
    }
}

impl Slots {
    async fn run(
        self,
        a: Assignment,
        token: CancellationToken,
        results: mpsc::Sender<WorkerMessage>,
        log: Logger,
    ) {
        let key = (a.job_id, a.lease);
        let ctx = TaskContext {
            job_id: a.job_id,
            lease: a.lease,
            cancel: token.clone(),
            log: log.clone(),
        };
        let outcome = tokio::select! {
            biased;
            _ = token.cancelled() => None,
            outcome = self.acquire_and_run(ctx, &a.task_type, a.payload) => Some(outcome),
        };
        self.running().remove(&key);
        match outcome {
            Some(outcome) if !token.is_cancelled() => {
                debug!(log, "task finished"; "succeeded" => matches!(outcome, TaskOutcome::Succeeded(_)));
                let result = WorkerMessage::TaskResult {
                    job_id: a.job_id,
                    lease: a.lease,
                    outcome,
                };
                if results.send(result).await.is_err() {
                    debug!(log, "connection gone; result dropped");
                }
            }
            _ => debug!(log, "task cancelled; no result sent"),
        }
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
