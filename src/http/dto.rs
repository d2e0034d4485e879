//! The JSON shapes of the HTTP API and their conversions from the
//! coordinator's views. Payloads and results travel as MessagePack inside
//! taskyard; here they are JSON values.

use crate::protocol::limits::{self, OutOfRange};
use crate::protocol::payloads::{decode_value, encode_json};
use crate::protocol::{
    Attempt, JobId, JobState, JobView, Priority, Progress, SubmitRequest, WorkerId, WorkerView,
};
use crate::scheduler::StatsSnapshot;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// One job. `history` is present on the single-job endpoints only.
#[derive(Debug, Serialize)]
pub struct ApiJob {
    pub job_id: JobId,
    pub task_type: String,
    pub state: JobState,
    pub priority: Priority,
    pub effective_level: u8,
    pub sequence: u64,
    pub attempts: u32,
    pub max_attempts: u32,
    pub timeout_ms: u64,
    pub submitted_at: i64,
    pub updated_at: i64,
    pub worker_id: Option<WorkerId>,
    pub payload: Value,
    pub result: Value,
    pub error: Option<String>,
    pub next_retry_at: Option<i64>,
    pub not_before: Option<i64>,
    pub no_worker: bool,
    pub progress: Option<Progress>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<Vec<Attempt>>,
}

impl ApiJob {
    pub fn from_view(view: JobView, with_history: bool) -> Self {
        ApiJob {
            payload: decode_value(&view.payload).unwrap_or(Value::Null),
            result: view.result.as_deref().map_or(Value::Null, bytes_as_json),
            history: with_history.then_some(view.history),
            job_id: view.job_id,
            task_type: view.task_type,
            state: view.state,
            priority: view.priority,
            effective_level: view.effective_level,
            sequence: view.sequence,
            attempts: view.attempts,
            max_attempts: view.max_attempts,
            timeout_ms: view.timeout_ms,
            submitted_at: view.submitted_at,
            updated_at: view.updated_at,
            worker_id: view.worker_id,
            error: view.error,
            next_retry_at: view.next_retry_at,
            not_before: view.not_before,
            no_worker: view.no_worker,
            progress: view.progress,
        }
    }
}

/// Results are bytes a task chose: text when they are UTF-8 (as the CLI
/// prints them), else their MessagePack decoding, else lossy text.
fn bytes_as_json(bytes: &[u8]) -> Value {
    match std::str::from_utf8(bytes) {
        Ok(text) => Value::String(text.to_string()),
        Err(_) => decode_value(bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned())),
    }
}

/// `GET /api/jobs`: one page, the cursor for the next, counts per state.
#[derive(Debug, Serialize)]
pub struct ApiJobPage {
    pub jobs: Vec<ApiJob>,
    pub next_cursor: Option<String>,
    pub counts: Map<String, Value>,
}

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

/// Counts as a JSON object keyed by state name, zeros included.
pub fn counts_object(counts: &[crate::protocol::StateCount]) -> Map<String, Value> {
    JobState::ALL
        .into_iter()
        .map(|state| {
            let n = counts
                .iter()
                .find(|c| c.state == state)
                .map_or(0, |c| c.count);
            (state.to_string(), json!(n))
        })
        .collect()
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
