//! The one JSON shape of a job, shared by the HTTP API and the CLI's
//! `--json` (and any client in another language): the same field names
//! for the same job wherever it is shown. Times are unix milliseconds.
//!
//! - `JobJson`: one job whole (status, the HTTP single-job routes).
//! - `JobSummaryJson`: a list row, the `JobSummary` fields under the same
//!   names (no payload, result or history; `error` cut to 128 bytes).
//! - `JobPageJson`: a page of summaries, every state's count, the cursor.
//! - `BulkJson`: what a bulk retry or delete did.
//!
//! Bytes are shown losslessly: `payload` is the payload decoded from
//! MessagePack (`payload_hex` instead when it does not decode); `result` is
//! the result as text when it is UTF-8 (`result_hex` instead when not).

use crate::protocol::ids::{JobId, LeaseId, WorkerId};
use crate::protocol::job_state::JobState;
use crate::protocol::messages::BulkAnswer;
use crate::protocol::payloads::decode_value;
use crate::protocol::priority::Priority;
use crate::protocol::views::{Attempt, JobList, JobSummary, JobView, Progress, StateCount};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt::Write as _;

/// One job, whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobJson {
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
    pub lease: Option<LeaseId>,
    pub error: Option<String>,
    pub next_retry_at: Option<i64>,
    pub not_before: Option<i64>,
    pub no_worker: bool,
    pub progress: Option<Progress>,
    /// The payload decoded to JSON; `null` when left out or not decodable.
    pub payload: Value,
    /// Lowercase hex of a payload that is not MessagePack.
    pub payload_hex: Option<String>,
    pub payload_bytes: u64,
    pub payload_omitted: bool,
    /// The result as text when it is UTF-8.
    pub result: Option<String>,
    /// Lowercase hex of a result that is not UTF-8.
    pub result_hex: Option<String>,
    pub result_bytes: Option<u64>,
    pub result_omitted: bool,
    pub history: Vec<Attempt>,
    pub history_omitted: u32,
    /// As `JobView`: the submission's key, and the schedule and slot it
    /// names (a manual trigger's job: `schedule` with `schedule_slot` null).
    pub idempotency_key: Option<String>,
    pub schedule: Option<String>,
    pub schedule_slot: Option<i64>,
    /// As `JobView` (always false over HTTP).
    pub key_omitted: bool,
}

impl JobJson {
    /// The shape of `job`.
    pub fn of(job: &JobView) -> JobJson {
        let (payload, payload_hex) = match decode_value(&job.payload) {
            _ if job.payload_omitted => (Value::Null, None),
            Ok(value) => (value, None),
            Err(_) => (Value::Null, Some(hex(&job.payload))),
        };
        let (result, result_hex) = match job.result.as_deref().map(std::str::from_utf8) {
            None => (None, None),
            Some(Ok(text)) => (Some(text.to_string()), None),
            Some(Err(_)) => (None, job.result.as_deref().map(hex)),
        };
        JobJson {
            job_id: job.job_id,
            task_type: job.task_type.clone(),
            state: job.state,
            priority: job.priority,
            effective_level: job.effective_level,
            sequence: job.sequence,
            attempts: job.attempts,
            max_attempts: job.max_attempts,
            timeout_ms: job.timeout_ms,
            submitted_at: job.submitted_at,
            updated_at: job.updated_at,
            worker_id: job.worker_id.clone(),
            lease: job.lease,
            error: job.error.clone(),
            next_retry_at: job.next_retry_at,
            not_before: job.not_before,
            no_worker: job.no_worker,
            progress: job.progress.clone(),
            payload,
            payload_hex,
            payload_bytes: job.payload_bytes,
            payload_omitted: job.payload_omitted,
            result,
            result_hex,
            result_bytes: job.result_bytes,
            result_omitted: job.result_omitted,
            history: job.history.clone(),
            history_omitted: job.history_omitted,
            idempotency_key: job.idempotency_key.clone(),
            schedule: job.schedule.clone(),
            schedule_slot: job.schedule_slot,
            key_omitted: job.key_omitted,
        }
    }

    /// As a JSON value (serializing plain data cannot fail).
    pub fn value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// A list row: exactly the `JobSummary` fields, under their names.
pub type JobSummaryJson = JobSummary;

/// A page of summaries, newest (or oldest) first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobPageJson {
    pub jobs: Vec<JobSummaryJson>,
    /// Pass as `cursor` for the next page; `null` when none follows.
    pub next_cursor: Option<String>,
    /// Every state, zeros included, keyed by its name.
    pub counts: Map<String, Value>,
}

impl JobPageJson {
    pub fn of(page: &JobList) -> JobPageJson {
        JobPageJson {
            jobs: page.jobs.clone(),
            next_cursor: page.next.map(|c| c.to_string()),
            counts: counts_object(&page.counts),
        }
    }

    pub fn value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// What a bulk retry or delete did: the same fields as `BulkAnswer`.
pub type BulkJson = BulkAnswer;

/// Counts as a JSON object keyed by state name, every state, zeros included.
pub fn counts_object(counts: &[StateCount]) -> Map<String, Value> {
    JobState::ALL
        .into_iter()
        .map(|state| {
            let n = counts
                .iter()
                .find(|c| c.state == state)
                .map_or(0, |c| c.count);
            (state.to_string(), Value::from(n))
        })
        .collect()
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}
