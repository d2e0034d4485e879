//! The wire shape of a schedule: its definition (`ScheduleSpec`, what a
//! client creates, updates and reads back) and its view (`ScheduleView`,
//! the definition with what the coordinator knows of its firing).

use crate::byte_fields;
use crate::{JobId, JobState, Priority};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What happens to a slot when the previous run of the same schedule is
/// still active (QUEUED, RUNNING or RETRY_WAIT).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Overlap {
    /// The slot is skipped (counted, reason `overlap`).
    #[default]
    Skip,
    /// The slot fires anyway; runs may overlap.
    Allow,
    /// The slot fires once the current run ends; at most one slot waits,
    /// a later one replacing it (the replaced one counted as skipped).
    BufferOne,
    /// The current run is cancelled, then the slot fires.
    CancelPrevious,
}

impl Overlap {
    pub const ALL: [Overlap; 4] = [
        Overlap::Skip,
        Overlap::Allow,
        Overlap::BufferOne,
        Overlap::CancelPrevious,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::Allow => "allow",
            Overlap::BufferOne => "buffer-one",
            Overlap::CancelPrevious => "cancel-previous",
        }
    }
}

impl std::str::FromStr for Overlap {
    type Err = String;
    fn from_str(s: &str) -> Result<Overlap, String> {
        Overlap::ALL
            .into_iter()
            .find(|o| o.as_str() == s)
            .ok_or_else(|| {
                format!("overlap: {s:?} is not one of skip, allow, buffer-one, cancel-previous")
            })
    }
}

/// A schedule's definition. Exactly one of `cron` and `every_ms`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ScheduleSpec {
    /// Unique; 1 to 64 characters of `A-Z a-z 0-9 . _ -`.
    pub name: String,
    /// A cron expression: 5 fields, or 6 with seconds first.
    #[serde(default)]
    pub cron: Option<String>,
    /// The IANA time zone the expression is read in; null: UTC.
    #[serde(default)]
    pub tz: Option<String>,
    /// A fixed interval in milliseconds (whole seconds).
    #[serde(default)]
    pub every_ms: Option<u64>,
    pub task_type: String,
    /// Each job's payload as JSON.
    #[serde(with = "byte_fields")]
    #[schema(value_type = serde_json::Value)]
    pub payload: Vec<u8>,
    #[serde(default)]
    #[schema(required = true)]
    pub priority: Priority,
    /// null: the coordinator's `default-max-attempts`.
    #[serde(default)]
    pub max_attempts: Option<u32>,
    /// null: the coordinator's `task-timeout-millis`.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    #[serde(default)]
    #[schema(required = true)]
    pub overlap: Overlap,
    /// How far back missed slots still fire after downtime, in
    /// milliseconds; null: one slot (only the most recent missed slot).
    #[serde(default)]
    pub catchup_window_ms: Option<u64>,
    /// Each job waits a pseudo-random 0 to `jitter_ms` (fixed per slot).
    #[serde(default)]
    pub jitter_ms: u64,
    #[serde(default)]
    #[schema(required = true)]
    pub paused: bool,
    /// No slot before this time (unix ms); also an interval's anchor.
    #[serde(default)]
    pub start_at: Option<i64>,
    /// No slot after this time (unix ms).
    #[serde(default)]
    pub end_at: Option<i64>,
    /// Declared in the coordinator's TOML (`[[schedule]]`): paused, not
    /// deleted, when a start-up finds it gone from the file.
    #[serde(default)]
    pub from_config: bool,
}

impl ScheduleSpec {
    /// A schedule of `task_type` jobs with `payload` and every option at
    /// its default; the caller sets `cron` or `every_ms`.
    pub fn new(name: impl Into<String>, task_type: impl Into<String>, payload: Vec<u8>) -> Self {
        ScheduleSpec {
            name: name.into(),
            cron: None,
            tz: None,
            every_ms: None,
            task_type: task_type.into(),
            payload,
            priority: Priority::Normal,
            max_attempts: None,
            timeout_ms: None,
            overlap: Overlap::Skip,
            catchup_window_ms: None,
            jitter_ms: 0,
            paused: false,
            start_at: None,
            end_at: None,
            from_config: false,
        }
    }
}

/// One job a schedule fired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ScheduleRun {
    /// The nominal slot, unix ms; null for a manual trigger.
    pub slot: Option<i64>,
    pub job_id: JobId,
    /// null: no longer in the coordinator's memory (finished long ago).
    pub state: Option<JobState>,
}

/// A schedule as the coordinator sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = Schedule, description = "A schedule: its definition and what the coordinator knows of its firing (the CLI's `schedule show --json`).")]
pub struct ScheduleView {
    #[schema(inline)]
    pub spec: ScheduleSpec,
    /// The next slots that will be considered (unix ms), up to 5.
    pub next_fires: Vec<i64>,
    /// The most recent slot decided (fired or skipped), unix ms.
    #[schema(required = true)]
    pub last_slot: Option<i64>,
    /// The most recent runs, newest first, up to 10.
    #[schema(inline)]
    pub recent_runs: Vec<ScheduleRun>,
    /// Slots fired and skipped since the coordinator started.
    pub fired: u64,
    pub skipped: u64,
}

impl ScheduleView {
    /// The JSON shape of a schedule (CLI `--json`, HTTP): the definition,
    /// its payload as JSON, times as unix milliseconds, and what the
    /// coordinator knows of its firing.
    pub fn to_json(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(self).unwrap_or_default();
        if let Some(spec) = value.get_mut("spec") {
            spec["payload"] = crate::payloads::decode_value(&self.spec.payload)
                .map(|p| serde_json::to_value(p).unwrap_or_default())
                .unwrap_or(serde_json::Value::Null);
        }
        value
    }
}

/// How many runs a view lists.
pub const MAX_RECENT_RUNS_LIMIT: usize = 10;
