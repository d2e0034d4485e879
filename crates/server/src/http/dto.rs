//! The JSON shapes of the HTTP API besides the job's (which is shared with
//! the CLI: `protocol::job_json`): submissions, workers, stats. Each is
//! also the OpenAPI schema of that shape (`ToSchema`).

use crate::scheduler::StatsSnapshot;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::borrow::Cow;
use std::collections::BTreeMap;
use taskyard_protocol::job_json::{counts_object, StateCounts};
use taskyard_protocol::limits::{self, OutOfRange};
use taskyard_protocol::payloads::{
    encode_json, BUILTIN_TASK_TYPES, MAX_MESSAGE_BYTES, MAX_SLEEP_MILLIS, MAX_TASK_TYPE_LEN,
};
use taskyard_protocol::{JobId, Priority, SubmitRequest, WorkerId, WorkerView};
use utoipa::openapi::extensions::Extensions;
use utoipa::openapi::schema::{
    AdditionalProperties, AllOfBuilder, AnyOfBuilder, Object, ObjectBuilder, Schema, SchemaType,
    Type,
};
use utoipa::openapi::RefOr;
use utoipa::{PartialSchema, ToSchema};

/// `POST /api/jobs` body; the same fields, limits and defaults as a TCP
/// submission. The numbers are read as any JSON value and checked against
/// `protocol::limits`, so a negative, fractional, too large or quoted number
/// is refused naming its field and range (serde's own error would name
/// neither). Documented as `Submit`, with the payloads of the built-in
/// task types.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(
    description = "A job to submit: the same fields, limits and defaults as a TCP submission."
)]
pub struct SubmitBody {
    #[schema(schema_with = task_type_schema)]
    pub task_type: String,
    /// The payload as JSON. Built-in task types take exactly: `echo` and `fail` `{"message":
    /// string}` (at most 65,536 bytes of UTF-8), `sleep` `{"millis": 0..86400000}`, `exec`
    /// `{"program", "args"?, "env"?, "cwd"?, "stdin"?}` (strings without NUL; `env` names
    /// non-empty, without `=`; at most 4096 args). Other task types take any JSON value. The
    /// whole payload is at most `max-payload-bytes` as MessagePack.
    #[serde(default)]
    #[schema(value_type = Option<Value>)]
    pub payload: Value,
    #[serde(default)]
    #[schema(schema_with = submit_priority_schema)]
    pub priority: Option<Priority>,
    #[serde(default)]
    #[schema(schema_with = submit_max_attempts_schema)]
    pub max_attempts: Option<Value>,
    #[serde(default)]
    #[schema(schema_with = submit_timeout_ms_schema)]
    pub timeout_ms: Option<Value>,
    #[serde(default)]
    #[schema(schema_with = submit_delay_ms_schema)]
    pub delay_ms: Option<Value>,
    /// null: as if absent.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 256)]
    pub idempotency_key: Option<String>,
    /// At most the limit set on this key (or a pattern matching it) of the
    /// jobs carrying it run at once. null: as if absent.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 256)]
    pub concurrency_key: Option<String>,
}

/// A task type name, as `payloads::validate_task_type` accepts it.
pub fn task_type_schema() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(MAX_TASK_TYPE_LEN))
        .pattern(Some("^[A-Za-z0-9_.:-]+$"))
        .description(Some(format!(
            "1 to {MAX_TASK_TYPE_LEN} of letters, digits, `_`, `-`, `.`, `:`."
        )))
        .build()
}

pub fn submit_priority_schema() -> Object {
    let names = Priority::ALL
        .into_iter()
        .rev()
        .map(|p| json!(p.to_string()));
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .enum_values(Some(names.chain([Value::Null])))
        .default(Some(json!(Priority::default().to_string())))
        .description(Some("null: as if absent."))
        .build()
}

/// `range` as a submission field that may be null (as if absent).
fn nullable(range: limits::Range, description: &str) -> Object {
    let mut schema = range.schema(true);
    schema.description = Some(description.to_string());
    schema
}

fn submit_max_attempts_schema() -> Object {
    nullable(limits::MAX_ATTEMPTS_RANGE, "null: as if absent.")
}

fn submit_timeout_ms_schema() -> Object {
    nullable(
        limits::TIMEOUT_MS,
        "Per-attempt timeout, at most 366 days. null: as if absent.",
    )
}

fn submit_delay_ms_schema() -> Object {
    nullable(
        limits::DELAY_MS,
        "Not to run before this many ms after admission, at most 366 days. null: as if absent.",
    )
}

/// The `Submit` schema: `SubmitBody`'s fields, and which payload each
/// built-in task type takes (`payloads::validate`'s rules that a schema
/// can say).
pub struct Submit;

impl PartialSchema for Submit {
    fn schema() -> RefOr<Schema> {
        AllOfBuilder::new()
            .item(SubmitBody::schema())
            .item(builtin_payloads())
            .into()
    }
}

impl ToSchema for Submit {
    fn name() -> Cow<'static, str> {
        "Submit".into()
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        SubmitBody::schemas(schemas);
    }
}

/// A submission of `task_types` with `payload`.
fn task_with(task_types: &[&str], payload: Object) -> Object {
    let task_type = ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(task_types.iter().copied()));
    ObjectBuilder::new()
        .required("payload")
        .property("task_type", task_type)
        .property("payload", payload)
        .build()
}

/// A payload object of exactly one required `field`.
fn payload_of(field: &str, schema: ObjectBuilder) -> Object {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .required(field)
        .property(field, schema)
        .additional_properties(Some(AdditionalProperties::FreeForm(false)))
        .build()
}

fn builtin_payloads() -> Schema {
    let message = ObjectBuilder::new()
        .schema_type(Type::String)
        .max_length(Some(MAX_MESSAGE_BYTES));
    let millis = ObjectBuilder::new()
        .schema_type(Type::Integer)
        .minimum(Some(0))
        .maximum(Some(MAX_SLEEP_MILLIS));
    let mut echo = task_with(&["echo", "fail"], payload_of("message", message));
    echo.description = Some("echo and fail".into());
    let mut sleep = task_with(&["sleep"], payload_of("millis", millis));
    sleep.description = Some("sleep".into());
    // utoipa's `Object` has no `not`; extensions are written out as given.
    let not_builtin = json!({ "type": "string", "enum": BUILTIN_TASK_TYPES });
    let not = Extensions::from_iter([("not", not_builtin)]);
    let other = ObjectBuilder::new()
        .property(
            "task_type",
            ObjectBuilder::new()
                .schema_type(SchemaType::AnyValue)
                .extensions(Some(not)),
        )
        .description(Some(
            "any other task type (`exec` included: its rules, in `payload`, are more than a schema can say)",
        ));
    Schema::AnyOf(
        AnyOfBuilder::new()
            .item(echo)
            .item(sleep)
            .item(other)
            .build(),
    )
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
            concurrency_key: self.concurrency_key,
        })
    }
}

/// One connected worker, with what a dashboard wants derived.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Worker)]
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

/// `201` of a submission (and of a schedule's trigger).
#[derive(Debug, Serialize, ToSchema)]
pub struct Submitted {
    pub job_id: JobId,
    pub no_worker: bool,
}

/// Counts per state, queue depth per priority and task type, throughput
/// over the last minute, worker capacity (`GET /api/stats`).
#[derive(Debug, Serialize, ToSchema)]
pub struct Stats {
    pub at: i64,
    #[schema(value_type = StateCounts)]
    pub jobs: Map<String, Value>,
    #[schema(inline)]
    pub queue_depth: QueueDepth,
    #[schema(inline)]
    pub throughput: Throughput,
    #[schema(inline)]
    pub workers: WorkerTotals,
}

/// Ready jobs by base priority and by task type, and delayed ones.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueueDepth {
    pub by_priority: BTreeMap<String, u64>,
    /// Per task type, per base priority.
    pub by_task_type: BTreeMap<String, BTreeMap<String, u64>>,
    pub ready: u64,
    pub delayed: u64,
}

/// Jobs finished per second over the last minute, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct Throughput {
    pub per_second: Vec<u32>,
    pub last_minute: u64,
}

/// Connected workers and their slots (draining workers offer none free).
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkerTotals {
    pub connected: u64,
    pub capacity: u64,
    pub active: u64,
    pub free: u64,
}

impl Stats {
    pub fn of(s: &StatsSnapshot) -> Stats {
        let by_priority = s
            .depth_by_priority()
            .into_iter()
            .map(|(p, n)| (p.to_string(), n))
            .collect();
        let mut by_task_type: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        for q in &s.queues {
            by_task_type
                .entry(q.task_type.clone())
                .or_default()
                .insert(q.priority.to_string(), q.depth);
        }
        Stats {
            at: s.at,
            jobs: counts_object(&s.counts),
            queue_depth: QueueDepth {
                by_priority,
                by_task_type,
                ready: s.queues.iter().map(|q| q.depth).sum(),
                delayed: s.delayed,
            },
            throughput: Throughput {
                per_second: s.throughput.clone(),
                last_minute: s.throughput.iter().map(|n| u64::from(*n)).sum(),
            },
            workers: WorkerTotals {
                connected: s.workers.len() as u64,
                capacity: s.workers.iter().map(|w| u64::from(w.capacity)).sum(),
                active: s.workers.iter().map(|w| u64::from(w.active)).sum(),
                free: free_capacity(&s.workers),
            },
        }
    }
}

/// Slots that could take a task now: draining workers offer none.
pub fn free_capacity(workers: &[WorkerView]) -> u64 {
    workers
        .iter()
        .filter(|w| !w.draining)
        .map(|w| u64::from(w.capacity.saturating_sub(w.active)))
        .sum()
}
