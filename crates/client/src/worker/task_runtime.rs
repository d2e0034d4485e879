//! Where task handlers that may block run: a tokio runtime of their own,
//! apart from the one running the connection, the heartbeat and the writer
//! (handlers declared never to block run on that one: `Threads`).
//!
//! A handler may block its thread (CPU-bound work, a synchronous library
//! call). On a shared runtime, as many such handlers as runtime threads
//! would leave no thread for the heartbeat, and the coordinator would
//! declare a busy — not dead — worker dead. With handlers on their own
//! threads, no handler can occupy a thread that sends heartbeats.

use std::future::Future;
use tokio::runtime::{Builder, Handle, Runtime};

/// Most threads a task runtime gets, however large the capacity: a worker
/// with hundreds of slots is running waiting tasks, not hundreds of
/// CPU-bound ones.
const MAX_TASK_THREADS: usize = 64;

/// See the module documentation. Dropping it shuts the runtime down in the
/// background (never blocking, so it may be dropped inside async code):
/// cancelled handlers are dropped at their next `.await`; one stuck in a
/// blocking loop keeps its thread until it returns.
pub struct TaskRuntime {
    runtime: Option<Runtime>,
    handle: Handle,
}

impl TaskRuntime {
    /// A multi-thread runtime with one thread per slot (up to
    /// `MAX_TASK_THREADS`), so a handler that blocks its thread delays
    /// neither the heartbeat nor the other slots.
    pub fn dedicated(capacity: u32) -> std::io::Result<TaskRuntime> {
        let threads = (capacity as usize).clamp(1, MAX_TASK_THREADS);
        let runtime = Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("taskyard-task")
            .enable_all()
            .build()?;
        Ok(TaskRuntime {
            handle: runtime.handle().clone(),
            runtime: Some(runtime),
        })
    }

    /// Handlers share the caller's runtime. Only for tests that pause
    /// tokio time, which is per runtime: there no handler blocks, and a
    /// second runtime's real clock would race the paused one.
    #[cfg(test)]
    pub fn current() -> TaskRuntime {
        TaskRuntime {
            runtime: None,
            handle: Handle::current(),
        }
    }

    /// Runs `task` on the task threads.
    pub fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.handle.spawn(task);
    }
}

impl Drop for TaskRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
