//! What `Queues` (TCP) and `GET /api/queues` (HTTP) answer: per ready
//! queue (task type × base priority) its depth and how long its head has
//! waited, and per task type what waits, what runs and who can run it.
//! The same struct is the JSON shape of both.

use crate::priority::Priority;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The queues at one instant.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = Queues)]
pub struct QueueStats {
    /// Unix milliseconds when it was taken.
    pub at: i64,
    /// Non-empty ready queues, by task type, then HIGH before LOW.
    #[schema(inline)]
    pub queues: Vec<QueueRow>,
    /// Every task type with a job not finished or a connected worker, by name.
    #[schema(inline)]
    pub task_types: Vec<TaskTypeRow>,
}

/// One ready queue: QUEUED jobs of one task type and base priority that
/// may run now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct QueueRow {
    pub task_type: String,
    pub priority: Priority,
    pub depth: u64,
    /// Submission time of the job at the head (the one ready longest).
    pub oldest_submitted_at: i64,
    /// `at` less `oldest_submitted_at` (0 if the clock went back).
    pub oldest_age_ms: u64,
    /// How long the head has been ready to run: its age less any delay it
    /// was submitted with or waited out as a retry (Sidekiq's "latency").
    pub latency_ms: u64,
}

/// One task type across its queues.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TaskTypeRow {
    pub task_type: String,
    /// QUEUED jobs ready to run.
    pub ready: u64,
    /// QUEUED jobs waiting for their not-before time.
    pub delayed: u64,
    /// Jobs waiting out a retry backoff.
    pub retry_wait: u64,
    pub running: u64,
    /// The largest `oldest_age_ms` of its queues; null when none is ready.
    #[schema(required = true)]
    pub oldest_age_ms: Option<u64>,
    /// The largest `latency_ms` of its queues; null when none is ready.
    #[schema(required = true)]
    pub latency_ms: Option<u64>,
    /// Connected workers that advertise it (draining ones included).
    pub workers: u32,
    /// Free slots of those workers that are not draining.
    pub free_slots: u64,
    /// True when jobs wait (ready, delayed or retry_wait) and no connected
    /// worker runs the type: they wait until one does.
    pub no_worker: bool,
}
