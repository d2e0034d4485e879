//! The JSON shapes of the HTTP API besides the job's (which is shared with
//! the CLI: `protocol::job_json`): submissions, workers, stats.

use crate::protocol::job_json::counts_object;
use crate::protocol::limits::{self, OutOfRange};
use crate::protocol::payloads::encode_json;
use crate::protocol::{Priority, SubmitRequest, WorkerId, WorkerView};
use crate::scheduler::StatsSnapshot;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// `POST /api/jobs` body; the same fields, limits and defaults as a TCP
/// submission. The numbers are read as any JSON value and checked against
/// `protocol::limits`, so a negative, fractional, too large or quoted number
/// is refused naming its field and range (serde's own error would name
/// neither).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitBody {
    pub task_type: String,
    #[serde(default)]
    pub payload: Value,
    #[serde(default)]
    pub priority: Option<Priority>,
    #[serde(default)]
    pub max_attempts: Option<Value>,
    #[serde(default)]
    pub timeout_ms: Option<Value>,
    #[serde(default)]
    pub delay_ms: Option<Value>,
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

impl SubmitBody {
    /// The wire submission, or the first number outside its range.
    pub fn into_request(self) -> Result<SubmitRequest, OutOfRange> {
        let number = |value: &Option<Value>, range: limits::Range| {
            value.as_ref().map(|v| range.check_json(v)).transpose()
        };
        let max_attempts = number(&self.max_attempts, limits::MAX_ATTEMPTS_RANGE)?
            .map(|n| limits::MAX_ATTEMPTS_RANGE.check_u32(n))
            .transpose()?;
        Ok(SubmitRequest {
            max_attempts,
            timeout_ms: number(&self.timeout_ms, limits::TIMEOUT_MS)?,
            delay_ms: number(&self.delay_ms, limits::DELAY_MS)?,
            task_type: self.task_type,
            payload: encode_json(&self.payload),
            priority: self.priority.unwrap_or_default(),
            idempotency_key: self.idempotency_key,
        })
    }
}

/// One connected worker, with what a dashboard wants derived.
#[derive(Debug, Serialize)]
pub struct ApiWorker {
    pub worker_id: WorkerId,
    pub capacity: u32,
    pub active: u32,
    pub free: u32,
    pub task_types: Vec<String>,
    pub registered_at: i64,
    pub last_heartbeat_at: i64,
    pub heartbeat_age_ms: i64,
    pub draining: bool,
}

impl ApiWorker {
    pub fn from_view(w: WorkerView, now: i64) -> Self {
        ApiWorker {
            free: if w.draining {
                0
            } else {
                w.capacity.saturating_sub(w.active)
            },
            heartbeat_age_ms: now.saturating_sub(w.last_heartbeat_at).max(0),
            worker_id: w.worker_id,
            capacity: w.capacity,
            active: w.active,
            task_types: w.task_types,
            registered_at: w.registered_at,
            last_heartbeat_at: w.last_heartbeat_at,
            draining: w.draining,
        }
    }
}

/// `GET /api/stats`.
pub fn stats_json(s: &StatsSnapshot) -> Value {
    let mut by_priority = Map::new();
    let mut by_type: Map<String, Value> = Map::new();
    for (p, n) in s.depth_by_priority() {
        by_priority.insert(p.to_string(), json!(n));
    }
    for q in &s.queues {
        let entry = by_type
            .entry(q.task_type.clone())
            .or_insert_with(|| json!({}));
        entry[q.priority.to_string()] = json!(q.depth);
    }
    let capacity: u64 = s.workers.iter().map(|w| u64::from(w.capacity)).sum();
    let active: u64 = s.workers.iter().map(|w| u64::from(w.active)).sum();
    json!({
        "at": s.at,
        "jobs": counts_object(&s.counts),
        "queue_depth": {
            "by_priority": by_priority,
            "by_task_type": by_type,
            "ready": s.queues.iter().map(|q| q.depth).sum::<u64>(),
            "delayed": s.delayed,
        },
        "throughput": {
            "per_second": s.throughput,
            "last_minute": s.throughput.iter().map(|n| u64::from(*n)).sum::<u64>(),
        },
        "workers": {
            "connected": s.workers.len(),
            "capacity": capacity,
            "active": active,
            "free": free_capacity(&s.workers),
        },
    })
}

/// Slots that could take a task now: draining workers offer none.
pub fn free_capacity(workers: &[WorkerView]) -> u64 {
    workers
        .iter()
        .filter(|w| !w.draining)
        .map(|w| u64::from(w.capacity.saturating_sub(w.active)))
        .sum()
}
