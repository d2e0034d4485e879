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

use crate::ids::{JobId, LeaseId, WorkerId};
use crate::job_state::JobState;
use crate::messages::BulkAnswer;
use crate::payloads::decode_value;
use crate::priority::Priority;
use crate::views::{Attempt, JobList, JobSummary, JobView, Progress, StateCount};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt::Write as _;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::RefOr;
use utoipa::{PartialSchema, ToSchema};

/// One job, whole. Every field is always present (`null` when it has no
/// value), so the OpenAPI schema requires them all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = Job, description = "One job whole: the same shape as `taskyard status --json`.")]
pub struct JobJson {
    pub job_id: JobId,
    pub task_type: String,
    pub state: JobState,
    pub priority: Priority,
    /// The level the job is scheduled at now: its base priority, raised by aging only while it
    /// is QUEUED; its base level in any other state.
    #[schema(maximum = 2)]
    pub effective_level: u8,
    pub sequence: u64,
    pub attempts: u32,
    #[schema(schema_with = crate::limits::max_attempts_schema)]
    pub max_attempts: u32,
    #[schema(schema_with = crate::limits::timeout_ms_schema)]
    pub timeout_ms: u64,
    /// Unix ms.
    pub submitted_at: i64,
    /// Unix ms.
    pub updated_at: i64,
    #[schema(required = true)]
    pub worker_id: Option<WorkerId>,
    #[schema(required = true)]
    pub lease: Option<LeaseId>,
    #[schema(required = true)]
    pub error: Option<String>,
    #[schema(required = true)]
    pub next_retry_at: Option<i64>,
    #[schema(required = true)]
    pub not_before: Option<i64>,
    /// No connected worker runs the task type.
    pub no_worker: bool,
    #[schema(required = true)]
    pub progress: Option<Progress>,
    /// The payload decoded from MessagePack to JSON; null when it does not decode (see
    /// payload_hex).
    pub payload: Value,
    /// Lowercase hex of a payload that is not MessagePack.
    #[schema(required = true)]
    pub payload_hex: Option<String>,
    pub payload_bytes: u64,
    /// Always false over HTTP.
    pub payload_omitted: bool,
    /// The result as text when it is UTF-8.
    #[schema(required = true)]
    pub result: Option<String>,
    /// Lowercase hex of a result that is not UTF-8.
    #[schema(required = true)]
    pub result_hex: Option<String>,
    #[schema(required = true)]
    pub result_bytes: Option<u64>,
    /// Always false over HTTP.
    pub result_omitted: bool,
    pub history: Vec<Attempt>,
    /// Always 0 over HTTP.
    pub history_omitted: u32,
    /// The key the job was submitted with.
    #[schema(required = true)]
    pub idempotency_key: Option<String>,
    /// The schedule that submitted the job, read off its idempotency key (`schedule:NAME:SLOT`,
    /// or `schedule:NAME:trigger:TIME` for a manual trigger); null for any other job.
    #[schema(required = true)]
    pub schedule: Option<String>,
    /// Unix ms: the slot whose job this is; null for a manual trigger and for a job no schedule
    /// submitted.
    #[schema(required = true)]
    pub schedule_slot: Option<i64>,
    /// Always false over HTTP.
    pub key_omitted: bool,
    /// The concurrency key the job was submitted with.
    #[schema(required = true)]
    pub concurrency_key: Option<String>,
    /// Why a ready QUEUED job does not start ("waiting for concurrency key
    /// K: 2/2 running"); null otherwise.
    #[schema(required = true)]
    pub waiting: Option<String>,
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
            concurrency_key: job.concurrency_key.clone(),
            waiting: job.waiting.clone(),
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = JobPage)]
pub struct JobPageJson {
    pub jobs: Vec<JobSummaryJson>,
    /// Pass as `cursor` for the next page (same filters and order).
    #[schema(required = true)]
    pub next_cursor: Option<String>,
    /// Every state, zeros included, keyed by its name.
    #[schema(value_type = StateCounts)]
    pub counts: Map<String, Value>,
}

/// The schema of `counts_object`: every state's name, each a count.
pub struct StateCounts;

impl PartialSchema for StateCounts {
    fn schema() -> RefOr<Schema> {
        let count = || {
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(0))
        };
        JobState::ALL
            .into_iter()
            .fold(
                ObjectBuilder::new()
                    .schema_type(Type::Object)
                    .additional_properties(Some(ObjectBuilder::new().schema_type(Type::Integer))),
                |object, state| {
                    object
                        .property(state.to_string(), count())
                        .required(state.to_string())
                },
            )
            .into()
    }
}

impl ToSchema for StateCounts {
    fn name() -> std::borrow::Cow<'static, str> {
        "Counts".into()
    }
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
