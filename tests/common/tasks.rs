//! Task types for fault tests, registered on real workers: a `sleep` that
//! records every attempt it completes and answers with who ran it, and a
//! `spin` that occupies its thread like CPU-bound work.

use serde::Deserialize;
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use taskyard::protocol::{JobId, LeaseId, TaskOutcome};
use taskyard::worker::TaskRegistry;

/// Every attempt that some worker ran to completion, as (job, lease,
/// worker). Shared by all workers of a test.
#[derive(Clone, Default)]
pub struct Executions(Arc<Mutex<Vec<(JobId, LeaseId, String)>>>);

impl Executions {
    /// Records a completed attempt. Panics if the same (job, lease) was
    /// already run to completion: a lease is one attempt, run once.
    fn record(&self, job: JobId, lease: LeaseId, worker: &str) {
        let mut all = self.0.lock().expect("executions");
        assert!(
            !all.iter().any(|(j, l, _)| (*j, *l) == (job, lease)),
            "job {job} lease {lease} ran twice"
        );
        all.push((job, lease, worker.to_string()));
    }

    pub fn all(&self) -> Vec<(JobId, LeaseId, String)> {
        self.0.lock().expect("executions").clone()
    }

    pub fn of(&self, job: JobId) -> Vec<(LeaseId, String)> {
        self.all()
            .into_iter()
            .filter(|(j, _, _)| *j == job)
            .map(|(_, l, w)| (l, w))
            .collect()
    }

    pub fn distinct_pairs(&self) -> HashSet<(JobId, LeaseId)> {
        self.all().into_iter().map(|(j, l, _)| (j, l)).collect()
    }
}

/// The result a recording task answers with: `"<worker> <lease>"`, so the
/// coordinator's stored result names the attempt that was applied.
pub fn recorded_result(worker: &str, lease: LeaseId) -> Vec<u8> {
    format!("{worker} {lease}").into_bytes()
}

#[derive(Deserialize)]
struct SleepPayload {
    millis: u64,
}

/// The built-ins, with `sleep` replaced by one that, when it runs to the
/// end (not cancelled), records the attempt in `executions` and succeeds
/// with [`recorded_result`]. Same payload as the built-in `sleep`.
pub fn recording_registry(worker: &str, executions: &Executions) -> TaskRegistry {
    let mut registry = TaskRegistry::with_builtins();
    let (worker, executions) = (worker.to_string(), executions.clone());
    registry
        .register("sleep", move |ctx, payload| {
            let (worker, executions) = (worker.clone(), executions.clone());
            async move {
                let Ok(SleepPayload { millis }) = rmp_serde::from_slice(&payload) else {
                    return TaskOutcome::failed("bad sleep payload");
                };
                tokio::select! {
                    _ = ctx.cancel.cancelled() => TaskOutcome::failed("cancelled"),
                    _ = tokio::time::sleep(Duration::from_millis(millis)) => {
                        executions.record(ctx.job_id, ctx.lease, &worker);
                        TaskOutcome::Succeeded(recorded_result(&worker, ctx.lease))
                    }
                }
            }
        })
        .expect("valid task type");
    registry
}

/// How many `spin` tasks run right now, and the most that ever ran at once.
#[derive(Clone, Default)]
pub struct Spinning {
    pub now: Arc<AtomicUsize>,
    pub peak: Arc<AtomicUsize>,
}

/// The built-ins plus `spin`: a busy loop that never yields to the async
/// runtime for `duration`, like CPU-bound work; then succeeds.
pub fn spinning_registry(duration: Duration, spinning: &Spinning) -> TaskRegistry {
    let mut registry = TaskRegistry::with_builtins();
    let spinning = spinning.clone();
    registry
        .register("spin", move |_ctx, _payload| {
            let spinning = spinning.clone();
            async move {
                let running = spinning.now.fetch_add(1, Ordering::SeqCst) + 1;
                spinning.peak.fetch_max(running, Ordering::SeqCst);
                let start = Instant::now();
                while start.elapsed() < duration {
                    std::hint::spin_loop();
                }
                spinning.now.fetch_sub(1, Ordering::SeqCst);
                TaskOutcome::Succeeded(b"spun".to_vec())
            }
        })
        .expect("valid task type");
    registry
}
