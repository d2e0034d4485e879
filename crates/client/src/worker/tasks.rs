//! What a worker can run: a registry from task type name to handler, the
//! context and error types handlers use, and the built-in `echo`, `sleep`
//! and `fail` tasks (`exec` lives in `exec.rs`).

use crate::worker::exec::ExecTask;
use crate::worker::progress::ProgressReporter;
use futures_util::future::BoxFuture;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use taskyard_protocol::payloads::{decode_builtin, validate_task_type, BuiltinTask, PayloadError};
use taskyard_protocol::payloads::{BUILTIN_TASK_TYPES, EXEC_TASK_TYPE};
use taskyard_protocol::{JobId, LeaseId, TaskOutcome};
use tokio_util::sync::CancellationToken;

/// Everything a handler learns about the attempt it runs.
#[derive(Clone)]
pub struct TaskContext {
    pub job_id: JobId,
    pub lease: LeaseId,
    /// Cancelled when the coordinator cancels this attempt, the connection
    /// is lost or the worker stops. A handler should return soon after; the
    /// pool drops its future anyway and no result is sent for it.
    pub cancel: CancellationToken,
    /// Already carries `job` and `lease`.
    pub log: slog::Logger,
    pub(crate) progress: ProgressReporter,
}

impl TaskContext {
    /// Reports how far the attempt has got (0–100; more counts as 100) and
    /// what it is doing. Never blocks. At most one report per 250 ms reaches
    /// the coordinator, but the latest is always sent once that window has
    /// passed; reports after the attempt ended are dropped.
    pub fn progress(&self, percent: u8, message: impl Into<String>) {
        self.progress.report(percent, message);
    }

    /// A context for running a handler outside a worker (in a unit test):
    /// fresh ids, a token nobody cancels, a discarding logger, progress
    /// reports dropped.
    pub fn detached() -> TaskContext {
        TaskContext {
            job_id: JobId::mint(),
            lease: LeaseId::new_random(),
            cancel: CancellationToken::new(),
            log: slog::Logger::root(slog::Discard, slog::o!()),
            progress: ProgressReporter::default(),
        }
    }
}

/// How a custom task fails. A retryable failure is retried while the job's
/// attempt budget lasts; a permanent one (bad input, a missing file every
/// attempt would miss) fails the job at once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskError {
    #[error("{0}")]
    Retryable(String),
    #[error("{0}")]
    Permanent(String),
}

impl TaskError {
    pub fn retryable(message: impl Into<String>) -> Self {
        TaskError::Retryable(message.into())
    }

    pub fn permanent(message: impl Into<String>) -> Self {
        TaskError::Permanent(message.into())
    }
}

impl From<TaskError> for TaskOutcome {
    fn from(e: TaskError) -> Self {
        match e {
            TaskError::Retryable(error) => TaskOutcome::failed(error),
            TaskError::Permanent(error) => TaskOutcome::failed_permanently(error),
        }
    }
}

/// Decodes a MessagePack payload into `T` (any `serde` type); a payload of
/// the wrong shape is a permanent failure naming what did not match.
pub fn decode_payload<T: serde::de::DeserializeOwned>(payload: &[u8]) -> Result<T, TaskError> {
    rmp_serde::from_slice(payload).map_err(|e| TaskError::permanent(format!("payload: {e}")))
}

/// A task handler: given the attempt and its raw MessagePack payload,
/// produce the outcome. Where it runs is its task type's [`Threads`].
pub type TaskHandler =
    Arc<dyn Fn(TaskContext, Vec<u8>) -> BoxFuture<'static, TaskOutcome> + Send + Sync>;

/// Where the handlers of a task type run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    /// On the worker's task runtime, one thread per slot (up to 64), apart
    /// from the connection and heartbeat: a handler that blocks its thread
    /// (CPU-bound work, a synchronous call) costs only its own slot.
    TaskThreads,
    /// On the connection's runtime (its one thread when the worker runs
    /// through `Worker::run`/`spawn`), beside the heartbeat. For handlers
    /// that only await and never block: each attempt skips two hand-offs
    /// between threads (in `taskyard bench`, a fifth more jobs/s and a
    /// quarter less CPU). One that blocks there stalls the heartbeat and
    /// every attempt.
    Connection,
}

/// Task type name → handler. Names are kept sorted, which is the order the
/// worker advertises them in `Register`.
#[derive(Clone, Default)]
pub struct TaskRegistry {
    handlers: BTreeMap<String, (TaskHandler, Threads)>,
}

impl TaskRegistry {
    /// A registry with no task types at all.
    pub fn empty() -> Self {
        TaskRegistry::default()
    }

    /// A registry with the built-in `echo`, `sleep` and `fail` tasks, which
    /// never block and so run on the connection's thread.
    pub fn with_builtins() -> Self {
        let mut registry = TaskRegistry::empty();
        for name in BUILTIN_TASK_TYPES {
            let handler: TaskHandler =
                Arc::new(move |ctx, payload| Box::pin(run_builtin(name, ctx, payload)));
            registry
                .handlers
                .insert(name.to_string(), (handler, Threads::Connection));
        }
        registry
    }

    /// Adds (or replaces, built-ins included) the handler for `name`, run on
    /// the task threads. The name must be a valid task type; otherwise
    /// nothing changes.
    pub fn register<F, Fut>(&mut self, name: &str, handler: F) -> Result<(), PayloadError>
    where
        F: Fn(TaskContext, Vec<u8>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = TaskOutcome> + Send + 'static,
    {
        self.register_on(name, Threads::TaskThreads, handler)
    }

    /// As [`register`](Self::register), with the handler run on `threads`.
    pub fn register_on<F, Fut>(
        &mut self,
        name: &str,
        threads: Threads,
        handler: F,
    ) -> Result<(), PayloadError>
    where
        F: Fn(TaskContext, Vec<u8>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = TaskOutcome> + Send + 'static,
    {
        validate_task_type(name)?;
        let handler: TaskHandler = Arc::new(move |ctx, payload| Box::pin(handler(ctx, payload)));
        self.handlers.insert(name.to_string(), (handler, threads));
        Ok(())
    }

    /// Adds the `exec` task with `exec`'s allow-list and limits.
    pub fn add_exec(&mut self, exec: ExecTask) {
        let exec = Arc::new(exec);
        let handler: TaskHandler = Arc::new(move |ctx, payload| {
            let exec = exec.clone();
            Box::pin(async move { exec.run(ctx, payload).await })
        });
        // Starting a process and cleaning up its group are blocking calls.
        self.handlers
            .insert(EXEC_TASK_TYPE.to_string(), (handler, Threads::TaskThreads));
    }

    /// The handler for `task_type`, if this worker runs it.
    pub fn get(&self, task_type: &str) -> Option<TaskHandler> {
        self.handlers.get(task_type).map(|(h, _)| h.clone())
    }

    /// Where `task_type`'s handlers run; the task threads for a type this
    /// worker does not run (its attempt only fails).
    pub fn threads(&self, task_type: &str) -> Threads {
        self.handlers
            .get(task_type)
            .map_or(Threads::TaskThreads, |(_, threads)| *threads)
    }

    /// Every registered task type, sorted.
    pub fn task_types(&self) -> Vec<String> {
        self.handlers.keys().cloned().collect()
    }
}

/// Runs one built-in task. The payload is validated again here: the worker
/// does not trust the wire, and a bad payload fails with the field's name.
async fn run_builtin(task_type: &str, ctx: TaskContext, payload: Vec<u8>) -> TaskOutcome {
    match decode_builtin(task_type, &payload) {
        Err(e) => TaskOutcome::failed_permanently(e.to_string()),
        Ok(None) => TaskOutcome::failed(format!("{task_type} is not a built-in task type")),
        Ok(Some(BuiltinTask::Echo { message })) => TaskOutcome::Succeeded(message.into_bytes()),
        Ok(Some(BuiltinTask::Fail { message })) => TaskOutcome::failed(message),
        Ok(Some(BuiltinTask::Sleep { millis })) => {
            sleep_unless_cancelled(millis, &ctx.cancel).await
        }
        Ok(Some(BuiltinTask::Exec(_))) => {
            TaskOutcome::failed_permanently("exec is not enabled on this worker")
        }
    }
}

/// Returns as soon as `cancel` fires rather than after the full sleep.
async fn sleep_unless_cancelled(millis: u64, cancel: &CancellationToken) -> TaskOutcome {
    tokio::select! {
        _ = cancel.cancelled() => TaskOutcome::failed("cancelled"),
        _ = tokio::time::sleep(Duration::from_millis(millis)) => TaskOutcome::Succeeded(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};
    use taskyard_protocol::payloads::encode_json;

    fn context() -> TaskContext {
        TaskContext::detached()
    }

    async fn run(task_type: &str, payload: Value, ctx: TaskContext) -> TaskOutcome {
        let handler = TaskRegistry::with_builtins()
            .get(task_type)
            .expect("built-in");
        handler(ctx, encode_json(&payload)).await
    }

    #[test]
    fn built_ins_run_on_the_connection_thread_and_custom_handlers_on_task_threads() {
        let mut registry = TaskRegistry::with_builtins();
        for name in BUILTIN_TASK_TYPES {
            assert_eq!(registry.threads(name), Threads::Connection, "{name}");
        }
        registry
            .register("custom", |_, _| async {
                TaskOutcome::Succeeded(Vec::new())
            })
            .expect("valid task type");
        assert_eq!(registry.threads("custom"), Threads::TaskThreads);
        assert_eq!(registry.threads("unknown"), Threads::TaskThreads);
    }

    #[tokio::test]
    async fn echo_succeeds_with_its_message() {
        let outcome = run("echo", json!({"message": "hi"}), context()).await;
        assert_eq!(outcome, TaskOutcome::Succeeded(b"hi".to_vec()));
    }

    #[tokio::test]
    async fn fail_fails_with_its_message() {
        let outcome = run("fail", json!({"message": "boom"}), context()).await;
        assert_eq!(outcome, TaskOutcome::failed("boom"));
    }

    #[tokio::test]
    async fn invalid_payload_fails_naming_the_field() {
        let outcome = run("sleep", json!({"millis": "soon"}), context()).await;
        match outcome {
            TaskOutcome::Failed {
                error,
                retryable: false,
            } => {
                assert!(error.starts_with("payload.millis: "), "{error}")
            }
            other => panic!("expected failure, got {other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn sleep_waits_its_full_time() {
        let start = tokio::time::Instant::now();
        let outcome = run("sleep", json!({"millis": 250}), context()).await;
        assert_eq!(outcome, TaskOutcome::Succeeded(vec![]));
        assert_eq!(start.elapsed(), Duration::from_millis(250));
    }

    #[tokio::test(start_paused = true)]
    async fn sleep_stops_promptly_when_cancelled() {
        let ctx = context();
        let cancel = ctx.cancel.clone();
        let start = tokio::time::Instant::now();
        let task = tokio::spawn(run("sleep", json!({"millis": 60_000}), ctx));
        tokio::time::sleep(Duration::from_millis(10)).await;
        cancel.cancel();
        let outcome = task.await.expect("task");
        assert!(matches!(outcome, TaskOutcome::Failed { .. }), "{outcome:?}");
        assert!(
            start.elapsed() < Duration::from_millis(100),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn task_types_are_sorted_and_names_validated() {
        let mut registry = TaskRegistry::with_builtins();
        registry
            .register("thumbnail", |_ctx, _payload| async {
                TaskOutcome::Succeeded(vec![])
            })
            .expect("valid name");
        assert_eq!(
            registry.task_types(),
            ["echo", "fail", "sleep", "thumbnail"]
        );
        let err = registry
            .register("bad name", |_ctx, _payload| async {
                TaskOutcome::Succeeded(vec![])
            })
            .expect_err("space is not allowed");
        assert_eq!(err.field, "task_type");
    }
}
