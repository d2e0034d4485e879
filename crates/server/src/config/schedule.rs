//! `[[schedule]]` in the coordinator's TOML: a schedule declared in the
//! file, in the file's spelling (kebab-case keys, durations like `30s`,
//! RFC 3339 times, the payload as a table), turned into the
//! `ScheduleSpec` the coordinator reconciles at start-up.

use serde::Deserialize;
use taskyard_client::clock::text::{parse_duration, parse_rfc3339};
use taskyard_protocol::{payloads, Overlap, Priority, ScheduleSpec};

/// One `[[schedule]]` table; see docs/guide/schedules.md for each key.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct DeclaredSchedule {
    pub name: String,
    #[serde(default)]
    pub cron: Option<String>,
    #[serde(default)]
    pub tz: Option<String>,
    #[serde(default)]
    pub every: Option<String>,
    pub task_type: String,
    #[serde(default)]
    pub payload: Option<serde_json::Value>,
    #[serde(default)]
    pub priority: Option<Priority>,
    #[serde(default)]
    pub max_attempts: Option<u32>,
    #[serde(default)]
    pub timeout: Option<String>,
    #[serde(default)]
    pub overlap: Option<String>,
    #[serde(default)]
    pub catchup_window: Option<String>,
    #[serde(default)]
    pub jitter: Option<String>,
    #[serde(default)]
    pub paused: bool,
    #[serde(default)]
    pub start: Option<String>,
    #[serde(default)]
    pub end: Option<String>,
}

impl DeclaredSchedule {
    /// The definition this table declares; the error is (key, reason).
    pub fn to_spec(&self) -> Result<ScheduleSpec, (&'static str, String)> {
        let duration = |key: &'static str, v: &Option<String>| {
            v.as_deref()
                .map(parse_duration)
                .transpose()
                .map_err(|e| (key, e))
        };
        let time = |key: &'static str, v: &Option<String>| {
            v.as_deref()
                .map(parse_rfc3339)
                .transpose()
                .map_err(|e| (key, e))
        };
        let overlap = match &self.overlap {
            Some(o) => o.parse::<Overlap>().map_err(|e| ("overlap", e))?,
            None => Overlap::default(),
        };
        let payload = self.payload.clone().unwrap_or(serde_json::json!({}));
        Ok(ScheduleSpec {
            name: self.name.clone(),
            cron: self.cron.clone(),
            tz: self.tz.clone(),
            every_ms: duration("every", &self.every)?,
            task_type: self.task_type.clone(),
            payload: payloads::encode_json(&payload),
            priority: self.priority.unwrap_or_default(),
            max_attempts: self.max_attempts,
            timeout_ms: duration("timeout", &self.timeout)?,
            overlap,
            catchup_window_ms: duration("catchup-window", &self.catchup_window)?,
            jitter_ms: duration("jitter", &self.jitter)?.unwrap_or(0),
            paused: self.paused,
            start_at: time("start", &self.start)?,
            end_at: time("end", &self.end)?,
            from_config: true,
        })
    }
}

impl std::str::FromStr for DeclaredSchedule {
    type Err = String;

    /// One inline TOML table (the `--schedule` flag).
    fn from_str(text: &str) -> Result<DeclaredSchedule, String> {
        crate::config::inline_table("schedule", text)
    }
}
