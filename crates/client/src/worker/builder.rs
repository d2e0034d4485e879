//! The public way to run a worker with task types of your own:
//!
//! ```no_run
//! use taskyard_client::worker::WorkerConfig;
//! use taskyard_client::worker::{decode_payload, TaskError, Worker};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! Worker::builder(WorkerConfig::default())
//!     .task("wordcount", |ctx, payload| async move {
//!         let text: String = decode_payload(&payload)?;
//!         ctx.progress(50, "counting");
//!         if ctx.cancel.is_cancelled() {
//!             return Err(TaskError::retryable("cancelled"));
//!         }
//!         Ok(text.split_whitespace().count().to_string().into_bytes())
//!     })
//!     .run()?; // until SIGINT/SIGTERM, then drains
//! # Ok(())
//! # }
//! ```

use crate::logging::build_logger;
use crate::worker::allow::ResolveError;
use crate::worker::drain::Shutdown;
use crate::worker::exec::{ExecSetupError, ExecTask};
use crate::worker::exec_supervisor::SupervisorError;
use crate::worker::tasks::{TaskContext, TaskError, TaskRegistry, Threads};
use crate::worker::WorkerConfig;
use crate::worker::{Refusal, WorkerHandle};
use slog::{error, Logger};
use std::future::Future;
use std::sync::Arc;
use taskyard_protocol::payloads::{PayloadError, EXEC_TASK_TYPE};
use thiserror::Error;

/// Why a worker could not be built or started, or stopped on its own.
#[derive(Debug, Error)]
pub enum BuildError {
    #[error("task type {name:?}: {source}")]
    TaskType { name: String, source: PayloadError },
    #[error("key `exec-allow`: {0}")]
    ExecAllow(#[from] ResolveError),
    #[error("key `exec-supervisor`: {0}")]
    ExecSupervisor(#[from] SupervisorError),
    #[error("cannot start the worker runtime: {0}")]
    Runtime(#[from] std::io::Error),
    /// A coordinator refused the worker for a reason retrying cannot fix.
    #[error(transparent)]
    Refused(#[from] Refusal),
}

impl From<ExecSetupError> for BuildError {
    fn from(e: ExecSetupError) -> Self {
        match e {
            ExecSetupError::Allow(e) => BuildError::ExecAllow(e),
            ExecSetupError::Supervisor(e) => BuildError::ExecSupervisor(e),
        }
    }
}

/// Entry point of the builder; see the module documentation.
pub struct Worker;

impl Worker {
    /// A worker with the built-in task types (and `exec`, if
    /// `config.exec_allow` is not empty) plus whatever `.task` adds.
    pub fn builder(config: WorkerConfig) -> WorkerBuilder {
        WorkerBuilder {
            config,
            registry: TaskRegistry::with_builtins(),
            log: None,
            observer: None,
            error: None,
        }
    }
}

/// Collects task types and options; [`run`](WorkerBuilder::run) or
/// [`spawn`](WorkerBuilder::spawn) starts the worker.
pub struct WorkerBuilder {
    config: WorkerConfig,
    registry: TaskRegistry,
    log: Option<Logger>,
    observer: Option<crate::worker::FrameObserver>,
    error: Option<BuildError>,
}

impl WorkerBuilder {
    /// Adds (or replaces) the handler for `name`. `Ok(bytes)` succeeds with
    /// `bytes` as the result; `Err(TaskError::Retryable)` is retried while
    /// the job's budget lasts; `Err(TaskError::Permanent)` fails the job at
    /// once. The handler should return soon after `ctx.cancel` fires. An
    /// invalid name is reported by `run`/`spawn`. It runs on the task
    /// threads, so it may block (see [`Threads`]).
    pub fn task<F, Fut>(self, name: &str, handler: F) -> Self
    where
        F: Fn(TaskContext, Vec<u8>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<u8>, TaskError>> + Send + 'static,
    {
        self.task_on(name, Threads::TaskThreads, handler)
    }

    /// As [`task`](Self::task), for a handler that only awaits and never
    /// blocks its thread: it runs on the connection's thread, which saves
    /// two thread hand-offs per attempt (see [`Threads::Connection`]).
    pub fn nonblocking_task<F, Fut>(self, name: &str, handler: F) -> Self
    where
        F: Fn(TaskContext, Vec<u8>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<u8>, TaskError>> + Send + 'static,
    {
        self.task_on(name, Threads::Connection, handler)
    }

    fn task_on<F, Fut>(mut self, name: &str, threads: Threads, handler: F) -> Self
    where
        F: Fn(TaskContext, Vec<u8>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<u8>, TaskError>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        let registered = self
            .registry
            .register_on(name, threads, move |ctx, payload| {
                let run = handler(ctx, payload);
                async move {
                    run.await
                        .map_or_else(Into::into, taskyard_protocol::TaskOutcome::Succeeded)
                }
            });
        if let (Err(source), None) = (registered, &self.error) {
            self.error = Some(BuildError::TaskType {
                name: name.to_string(),
                source,
            });
        }
        self
    }

    /// Logs to `log` instead of stderr in the config's level and format.
    pub fn logger(mut self, log: Logger) -> Self {
        self.log = Some(log);
        self
    }

    /// Calls `observer` with every frame the worker receives from a
    /// coordinator after `Hello`, saying whether it was acted on (a
    /// `TaskAssign` or `TaskCancel` of an epoch older than the newest seen
    /// is not): for tests that record what a worker was told.
    pub fn observe_frames(
        mut self,
        observer: impl Fn(&crate::worker::ReceivedFrame) + Send + Sync + 'static,
    ) -> Self {
        self.observer = Some(Arc::new(observer));
        self
    }

    /// Starts the worker on a thread of its own and returns at once.
    pub fn spawn(mut self) -> Result<WorkerHandle, BuildError> {
        let observer = self.observer.take();
        let (config, registry, log) = self.prepare()?;
        Ok(WorkerHandle::spawn_observed(
            config, registry, log, observer,
        ))
    }

    /// Runs the worker on the calling thread until SIGINT or SIGTERM, then
    /// drains it (see [`drain`](crate::worker::drain)); a second signal stops
    /// it at once. Returns `Ok` once it has stopped, or
    /// [`BuildError::Refused`] as soon as a coordinator refuses it for good
    /// (a wrong token, a TLS or protocol version mismatch, a refused
    /// registration). Do not call it from inside an async runtime.
    pub fn run(mut self) -> Result<(), BuildError> {
        let observer = self.observer.take();
        let (config, registry, log) = self.prepare()?;
        // One thread is enough for the connection, heartbeat, writer and
        // non-blocking handlers: the others run on the task runtime (see
        // `run_with_registry`).
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let shutdown = Shutdown::default();
        runtime.spawn(drain_on_signal(shutdown.clone(), log.clone()));
        runtime.block_on(crate::worker::run_observed(
            config, registry, log, shutdown, observer,
        ))?;
        Ok(())
    }

    fn prepare(mut self) -> Result<(WorkerConfig, TaskRegistry, Logger), BuildError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if let Some(exec) = ExecTask::from_config(&self.config)? {
            if self.registry.get(EXEC_TASK_TYPE).is_none() {
                self.registry.add_exec(exec);
            }
        }
        let log = self
            .log
            .unwrap_or_else(|| build_logger(self.config.log_level, self.config.log_format));
        Ok((self.config, self.registry, log))
    }
}

/// The built-ins, plus `exec` when `config` allows programs. An allow-list
/// or a supervisor that does not resolve is logged and `exec` left out
/// (config loading reports the allow-list as an error before this).
pub(crate) fn registry_for(config: &WorkerConfig, log: &Logger) -> TaskRegistry {
    let mut registry = TaskRegistry::with_builtins();
    match ExecTask::from_config(config) {
        Ok(Some(exec)) => registry.add_exec(exec),
        Ok(None) => {}
        Err(e) => error!(log, "exec disabled"; "reason" => %e),
    }
    registry
}

/// First SIGINT/SIGTERM: drain. Second: stop at once. If the handlers
/// cannot be installed the worker runs until killed.
async fn drain_on_signal(shutdown: Shutdown, log: Logger) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        error!(log, "cannot install signal handlers");
        return;
    };
    for token in [&shutdown.drain, &shutdown.stop] {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        token.cancel();
    }
}
