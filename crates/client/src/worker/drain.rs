//! Graceful drain: what a worker does between SIGTERM (or
//! [`WorkerHandle::drain`](crate::worker::WorkerHandle::drain)) and exit.
//!
//! 1. The pool starts draining: every connection sends `Draining` (the
//!    coordinator stops assigning to this worker) and refuses any
//!    `TaskAssign` still in flight with a retryable "worker is draining".
//! 2. Running attempts get `drain-timeout-millis` to finish; their results
//!    are sent as usual.
//! 3. Attempts still running then are cancelled (an `exec` group gets
//!    SIGTERM, then SIGKILL) and send no result.
//! 4. The worker stops: frames already queued are written, the connection
//!    is closed, and the coordinator retries whatever it still thought was
//!    running here on another worker.

use crate::worker::pool::PoolControl;
use slog::{info, warn, Logger};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How a running worker is asked to end. Cancelling `stop` ends it at once
/// (in-flight attempts are dropped without results); cancelling `drain`
/// drains it as described in the module documentation, then cancels `stop`.
#[derive(Debug, Clone, Default)]
pub struct Shutdown {
    pub drain: CancellationToken,
    pub stop: CancellationToken,
}

/// The drain timings of one worker.
#[derive(Debug, Clone, Copy)]
pub struct DrainLimits {
    /// How long running attempts may take to finish.
    pub timeout: Duration,
    /// How long cancelled attempts may take to clean up after that.
    pub cleanup: Duration,
}

/// Waits for a drain request and carries it out; returns at once if the
/// worker is stopped first.
pub async fn supervise(control: PoolControl, shutdown: Shutdown, limits: DrainLimits, log: Logger) {
    tokio::select! {
        _ = shutdown.stop.cancelled() => return,
        _ = shutdown.drain.cancelled() => {}
    }
    info!(log, "draining"; "in_flight" => control.in_flight(), "timeout_ms" => limits.timeout.as_millis());
    control.begin_draining();
    if tokio::time::timeout(limits.timeout, control.idle())
        .await
        .is_ok()
    {
        info!(log, "drained; every running task finished");
    } else {
        warn!(log, "drain timeout; cancelling tasks still running"; "in_flight" => control.in_flight());
        control.cancel_all();
        if tokio::time::timeout(limits.cleanup, control.idle())
            .await
            .is_err()
        {
            warn!(log, "cancelled tasks did not finish cleaning up"; "in_flight" => control.in_flight());
        }
    }
    shutdown.stop.cancel();
}
