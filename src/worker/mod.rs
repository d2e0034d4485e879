//! The worker process: a connection to the coordinator, a heartbeat on its
//! own timer and a bounded task pool, on plain tokio. The connection, the
//! heartbeat and the frame writer run on the caller's runtime; task handlers
//! run on a runtime of their own, so no task can hold up a heartbeat.
//!
//! [`run`] is the whole worker as a future; [`WorkerHandle`] runs it on a
//! thread of its own, for `taskyard dev`, tests and benchmarks.

mod connection;
mod heartbeat;
mod pool;
mod task_runtime;
pub mod tasks;
pub mod transport;

#[cfg(test)]
mod peer_tests;

pub use connection::ConnectionError;
pub use tasks::{TaskContext, TaskHandler, TaskRegistry};

use task_runtime::TaskRuntime;

use crate::config::WorkerConfig;
use crate::protocol::WorkerId;
use slog::{error, info, o, Logger};
use std::thread::JoinHandle;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A worker running on its own OS thread and tokio runtime.
pub struct WorkerHandle {
    worker_id: WorkerId,
    shutdown: CancellationToken,
    thread: Option<JoinHandle<()>>,
}

impl WorkerHandle {
    /// Starts the worker on its own OS thread with its own multi-thread tokio
    /// runtime (plus the task runtime [`run`] creates); returns at once. The worker id is fixed here (generated if
    /// `config.worker_id` is empty), so [`WorkerHandle::worker_id`] is the id
    /// the coordinator will see. If the thread or runtime cannot be created
    /// the failure is logged at error level and the handle does nothing.
    pub fn spawn(config: WorkerConfig, log: Logger) -> WorkerHandle {
        WorkerHandle::spawn_with_registry(config, TaskRegistry::with_builtins(), log)
    }

    /// [`WorkerHandle::spawn`] running the task types of `registry` instead
    /// of the built-ins.
    pub fn spawn_with_registry(
        mut config: WorkerConfig,
        registry: TaskRegistry,
        log: Logger,
    ) -> WorkerHandle {
        let worker_id = resolve_worker_id(&config);
        config.worker_id = worker_id.0.clone();
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        let thread_log = log.clone();
        let thread = std::thread::Builder::new()
            .name(format!("taskyard-{worker_id}"))
            .spawn(move || run_on_own_runtime(config, registry, thread_log, token));
        let thread = thread
            .map_err(|e| error!(log, "cannot start worker thread"; "error" => %e))
            .ok();
        WorkerHandle {
            worker_id,
            shutdown,
            thread,
        }
    }

    pub fn worker_id(&self) -> &WorkerId {
        &self.worker_id
    }

    /// Cancels in-flight tasks (no results are sent for them), closes the
    /// connection and joins the thread. Blocks the caller until then, so do
    /// not call it from inside an async task. A handler stuck in blocking
    /// code keeps its task thread until it returns, but cannot send a result.
    pub fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for WorkerHandle {
    /// A handle dropped without `stop` still shuts the worker down, but in
    /// the background.
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

fn run_on_own_runtime(
    config: WorkerConfig,
    registry: TaskRegistry,
    log: Logger,
    shutdown: CancellationToken,
) {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(run_with_registry(config, registry, log, shutdown)),
        Err(e) => error!(log, "cannot start worker runtime"; "error" => %e),
    }
}

/// Runs until `shutdown` is cancelled, reconnecting whenever the connection
/// is lost. Runs the built-in task types. Used by the binary and by
/// [`WorkerHandle`].
pub async fn run(config: WorkerConfig, log: Logger, shutdown: CancellationToken) {
    run_with_registry(config, TaskRegistry::with_builtins(), log, shutdown).await
}

/// [`run`] with the task types of `registry` instead of the built-ins.
///
/// Task handlers run on a runtime of their own (one thread per slot), while
/// the connection, the heartbeat and the writer stay on the caller's: a
/// handler that blocks its thread cannot delay a heartbeat. If that runtime
/// cannot be created the failure is logged at error level and this returns.
pub async fn run_with_registry(
    config: WorkerConfig,
    registry: TaskRegistry,
    log: Logger,
    shutdown: CancellationToken,
) {
    match TaskRuntime::dedicated(config.capacity) {
        Ok(tasks) => run_with_task_runtime(config, registry, tasks, log, shutdown).await,
        Err(e) => error!(log, "cannot start the task runtime"; "error" => %e),
    }
}

async fn run_with_task_runtime(
    config: WorkerConfig,
    registry: TaskRegistry,
    tasks: TaskRuntime,
    log: Logger,
    shutdown: CancellationToken,
) {
    let worker_id = resolve_worker_id(&config);
    let log = log.new(o!("worker" => worker_id.to_string()));
    info!(log, "worker starting"; "coordinator" => &config.coordinator, "task_types" => registry.task_types().join(","));
    let pool = pool::TaskPool::new(
        config.capacity,
        registry,
        tasks,
        worker_id.clone(),
        log.clone(),
    );
    let transport = match transport::Transport::from_config(&config) {
        Ok(transport) => transport,
        Err(e) => return slog::error!(log, "cannot start worker"; "error" => e),
    };
    let worker = connection::Worker {
        pool,
        transport,
        coordinator: config.coordinator,
        worker_id,
        capacity: config.capacity,
        heartbeat: Duration::from_millis(config.heartbeat_interval_millis),
        reconnect_max: Duration::from_millis(config.reconnect_max_millis),
        max_frame_bytes: config.max_frame_bytes,
        log,
    };
    connection::run(worker, shutdown).await
}

/// `config.worker_id`, or a fresh `worker-` + 8 hex digits when it is empty.
/// Called once per worker, so the id is kept across reconnects.
fn resolve_worker_id(config: &WorkerConfig) -> WorkerId {
    if !config.worker_id.is_empty() {
        return WorkerId(config.worker_id.clone());
    }
    let hex = uuid::Uuid::new_v4().simple().to_string();
    WorkerId(format!("worker-{}", &hex[..8]))
}
