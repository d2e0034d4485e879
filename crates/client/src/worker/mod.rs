//! The worker process: a connection to the coordinator, a heartbeat on its
//! own timer and a bounded task pool, on plain tokio. The connection, the
//! heartbeat and the frame writer run on the caller's runtime; task handlers
//! run on a runtime of their own, so no task can hold up a heartbeat, except
//! those of task types declared never to block ([`Threads::Connection`]),
//! which run on the caller's runtime beside the connection.
//!
//! [`Worker::builder`] is the public way in (custom task types, `run` with
//! signal handling, `spawn`); [`run_with_registry`] is the whole worker as a
//! future; [`WorkerHandle`] runs it on a thread of its own, for `taskyard
//! dev`, tests and benchmarks. [`drain`] says how a worker stops gracefully.

mod allow;
mod builder;
mod config;
mod connection;
pub(crate) mod drain;
pub(crate) mod epoch;
mod exec;
pub mod exec_supervisor;
mod heartbeat;
mod output;
mod pool;
pub(crate) mod process_group;
mod progress;
mod task_runtime;
pub(crate) mod tasks;
pub(crate) mod transport;

#[cfg(test)]
mod peer_tests;

pub use allow::{AllowList, NotAllowed, ResolveError};
pub use builder::{BuildError, Worker, WorkerBuilder};
pub use config::{WorkerConfig, WorkerOptions};
pub use connection::{ConnectionError, Refusal};
pub use drain::Shutdown;
pub use epoch::{frame_epoch, EpochFilter, FrameObserver, ReceivedFrame};
pub use exec::{ExecSetupError, ExecTask};
pub use exec_supervisor::{Supervisor, SupervisorError};
pub use progress::{ProgressReporter, PROGRESS_INTERVAL};
pub use tasks::{decode_payload, TaskContext, TaskError, TaskHandler, TaskRegistry, Threads};

use task_runtime::TaskRuntime;

use slog::{error, info, o, Logger};
use std::thread::JoinHandle;
use std::time::Duration;
use taskyard_protocol::WorkerId;

/// A worker running on its own OS thread and tokio runtime.
pub struct WorkerHandle {
    worker_id: WorkerId,
    shutdown: Shutdown,
    thread: Option<JoinHandle<()>>,
}

impl WorkerHandle {
    /// Starts the worker on its own OS thread with its own single-thread tokio
    /// runtime (plus the task runtime [`run`] creates); returns at once. The worker id is fixed here (generated if
    /// `config.worker_id` is empty), so [`WorkerHandle::worker_id`] is the id
    /// the coordinator will see. If the thread or runtime cannot be created
    /// the failure is logged at error level and the handle does nothing.
    /// Runs the built-ins, plus `exec` if `config.exec_allow` resolves (an
    /// allow-list that does not is logged and `exec` left out; use
    /// [`Worker::builder`] to get it as an error instead).
    pub fn spawn(config: WorkerConfig, log: Logger) -> WorkerHandle {
        let registry = builder::registry_for(&config, &log);
        WorkerHandle::spawn_with_registry(config, registry, log)
    }

    /// [`WorkerHandle::spawn`] running exactly the task types of `registry`.
    pub fn spawn_with_registry(
        config: WorkerConfig,
        registry: TaskRegistry,
        log: Logger,
    ) -> WorkerHandle {
        WorkerHandle::spawn_observed(config, registry, log, None)
    }

    /// [`WorkerHandle::spawn_with_registry`] telling `observer` about every
    /// frame the worker receives (see [`FrameObserver`]).
    pub fn spawn_observed(
        mut config: WorkerConfig,
        registry: TaskRegistry,
        log: Logger,
        observer: Option<FrameObserver>,
    ) -> WorkerHandle {
        let worker_id = resolve_worker_id(&config);
        config.worker_id = worker_id.0.clone();
        let shutdown = Shutdown::default();
        let token = shutdown.clone();
        let thread_log = log.clone();
        let thread = std::thread::Builder::new()
            .name(format!("taskyard-{worker_id}"))
            .spawn(move || run_on_own_runtime(config, registry, thread_log, token, observer));
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
        self.shutdown.stop.cancel();
        self.join();
    }

    /// Drains the worker — it says `Draining`, takes no new task, lets
    /// running ones finish within `drain-timeout-millis`, cancels the rest —
    /// and joins its thread: the same path as SIGTERM to `taskyard-worker`
    /// (see [`drain`]). Blocks the caller until the worker has stopped.
    pub fn drain(mut self) {
        self.shutdown.drain.cancel();
        self.join();
    }

    fn join(&mut self) {
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for WorkerHandle {
    /// A handle dropped without `stop` or `drain` still shuts the worker
    /// down at once, but in the background.
    fn drop(&mut self) {
        self.shutdown.stop.cancel();
    }
}

fn run_on_own_runtime(
    config: WorkerConfig,
    registry: TaskRegistry,
    log: Logger,
    shutdown: Shutdown,
    observer: Option<FrameObserver>,
) {
    // One thread: blocking handlers run on the task runtime, and the
    // connection's own work (frames, heartbeat, non-blocking handlers) is
    // light. Fewer threads to wake per frame.
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => {
            let ran = runtime.block_on(run_observed(
                config,
                registry,
                log.clone(),
                shutdown,
                observer,
            ));
            if let Err(refusal) = ran {
                error!(log, "worker stopped: giving up on the coordinator"; "coordinator" => &refusal.addr, "reason" => %refusal.cause);
            }
        }
        Err(e) => error!(log, "cannot start worker runtime"; "error" => %e),
    }
}

/// Runs the task types of `registry` until `shutdown.stop` is cancelled
/// (or a drain requested by `shutdown.drain` completes), reconnecting
/// whenever the connection is lost. A coordinator's definitive refusal (a
/// wrong token, a TLS or protocol version mismatch, a refused `Register`:
/// see [`ConnectionError::is_definitive`]) stops the worker and is
/// returned, not logged; its running tasks are cancelled.
///
/// Task handlers run on a runtime of their own (one thread per slot), while
/// the connection, the heartbeat and the writer stay on the caller's: a
/// handler that blocks its thread cannot delay a heartbeat. Handlers of
/// [`Threads::Connection`] task types run on the caller's runtime instead.
/// If the task runtime cannot be created the failure is logged at error
/// level and this returns.
pub async fn run_with_registry(
    config: WorkerConfig,
    registry: TaskRegistry,
    log: Logger,
    shutdown: Shutdown,
) -> Result<(), Refusal> {
    run_observed(config, registry, log, shutdown, None).await
}

/// [`run_with_registry`] telling `observer` about every frame received.
pub async fn run_observed(
    config: WorkerConfig,
    registry: TaskRegistry,
    log: Logger,
    shutdown: Shutdown,
    observer: Option<FrameObserver>,
) -> Result<(), Refusal> {
    match TaskRuntime::dedicated(config.capacity) {
        Ok(tasks) => {
            let run = Run {
                config,
                registry,
                tasks,
                observer,
            };
            run_with_task_runtime(run, log, shutdown).await
        }
        Err(e) => {
            error!(log, "cannot start the task runtime"; "error" => %e);
            Ok(())
        }
    }
}

/// Everything one worker run is made of.
struct Run {
    config: WorkerConfig,
    registry: TaskRegistry,
    tasks: TaskRuntime,
    observer: Option<FrameObserver>,
}

async fn run_with_task_runtime(run: Run, log: Logger, shutdown: Shutdown) -> Result<(), Refusal> {
    let Run {
        config,
        registry,
        tasks,
        observer,
    } = run;
    let worker_id = resolve_worker_id(&config);
    let log = log.new(o!("worker" => worker_id.to_string()));
    info!(log, "worker starting"; "coordinator" => &config.coordinator, "task_types" => registry.task_types().join(","));
    let cleanup = exec::cleanup_time(&config);
    let limits = pool::PoolLimits {
        max_frame_bytes: config.max_frame_bytes,
        cleanup_grace: cleanup,
    };
    let size = pool::PoolSize {
        capacity: config.capacity,
        prefetch: config.prefetch,
    };
    let pool = pool::TaskPool::new(
        size,
        registry,
        tasks,
        limits,
        worker_id.clone(),
        log.clone(),
    );
    let transport = match transport::Transport::from_config(&config) {
        Ok(transport) => transport,
        Err(e) => {
            slog::error!(log, "cannot start worker"; "error" => e);
            return Ok(());
        }
    };
    let drain_limits = drain::DrainLimits {
        timeout: Duration::from_millis(config.drain_timeout_millis),
        cleanup,
    };
    let supervise = drain::supervise(pool.control(), shutdown.clone(), drain_limits, log.clone());
    let worker = connection::Worker {
        pool,
        transport,
        observer,
        worker_id,
        // Prefetched jobs count against the slots registered.
        capacity: size.slots(),
        heartbeat: Duration::from_millis(config.heartbeat_interval_millis),
        coordinator_timeout: Duration::from_millis(config.coordinator_timeout_millis),
        reconnect_max: Duration::from_millis(config.reconnect_max_millis),
        max_frame_bytes: config.max_frame_bytes,
        log,
    };
    let connect = async {
        let ran = connection::run(worker, shutdown.stop.clone()).await;
        // A refusal ends the drain supervisor and the running tasks too.
        shutdown.stop.cancel();
        ran
    };
    tokio::join!(connect, supervise).0
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
