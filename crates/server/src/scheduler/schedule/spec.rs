//! Validation of a schedule's definition: every field checked, the first
//! bad one named, before anything is stored. A valid definition comes with
//! its parsed cadence.

use crate::scheduler::schedule::cadence::{Cadence, MAX_EVERY_MS};
use taskyard_protocol::{limits, payloads, ScheduleSpec};

/// Longest schedule name, in bytes.
pub const MAX_NAME_LEN: usize = 64;
/// Longest jitter and catch-up window: one year.
pub const MAX_WINDOW_MS: u64 = MAX_EVERY_MS;

/// A definition refused: `field` names what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct SpecError {
    pub field: &'static str,
    pub reason: String,
}

fn refuse(field: &'static str, reason: impl Into<String>) -> SpecError {
    SpecError {
        field,
        reason: reason.into(),
    }
}

/// What validation needs from the coordinator's config.
#[derive(Debug, Clone, Copy)]
pub struct SpecLimits {
    pub max_payload_bytes: usize,
}

/// Checks every field of `spec` and parses its cadence.
pub fn validate(spec: &ScheduleSpec, limits: SpecLimits) -> Result<Cadence, SpecError> {
    validate_name(&spec.name)?;
    let cadence = cadence_of(spec)?;
    validate_template(spec, limits)?;
    validate_times(spec)?;
    Ok(cadence)
}

/// A name is 1 to 64 characters of `A-Z a-z 0-9 . _ -`: never a `:`, so
/// the idempotency key `schedule:NAME:SLOT` splits one way only.
pub fn validate_name(name: &str) -> Result<(), SpecError> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(refuse(
            "name",
            format!("must be 1 to {MAX_NAME_LEN} characters"),
        ));
    }
    match name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        Some(c) => Err(refuse(
            "name",
            format!("{c:?} is not allowed (letters, digits, '.', '_', '-')"),
        )),
        None => Ok(()),
    }
}

/// The cadence a definition describes: its cron expression in its zone,
/// or its interval anchored at its start time (else the unix epoch).
pub fn cadence_of(spec: &ScheduleSpec) -> Result<Cadence, SpecError> {
    let as_field = |e: crate::scheduler::schedule::CadenceError| {
        let field = match e {
            crate::scheduler::schedule::CadenceError::Expression(_) => "cron",
            crate::scheduler::schedule::CadenceError::Zone(_) => "tz",
            crate::scheduler::schedule::CadenceError::Interval => "every",
            crate::scheduler::schedule::CadenceError::Neither => "cron",
        };
        let text = e.to_string();
        let reason = text
            .split_once(": ")
            .map_or(text.clone(), |(_, r)| r.to_string());
        refuse(field, reason)
    };
    match (&spec.cron, spec.every_ms) {
        (Some(cron), None) => {
            Cadence::cron(cron, spec.tz.as_deref().unwrap_or("UTC")).map_err(as_field)
        }
        (None, Some(every)) if spec.tz.is_none() => {
            Cadence::every(every, spec.start_at.unwrap_or(0)).map_err(as_field)
        }
        (None, Some(_)) => Err(refuse("tz", "only with cron (an interval has no zone)")),
        _ => Err(refuse("cron", "give exactly one of cron and every")),
    }
}

fn validate_template(spec: &ScheduleSpec, limits: SpecLimits) -> Result<(), SpecError> {
    payloads::validate_task_type(&spec.task_type)
        .map_err(|e| refuse("task_type", strip_field(&e.to_string())))?;
    if spec.payload.len() > limits.max_payload_bytes {
        return Err(refuse(
            "payload",
            format!(
                "{} bytes exceeds max-payload-bytes ({})",
                spec.payload.len(),
                limits.max_payload_bytes
            ),
        ));
    }
    payloads::validate(&spec.task_type, &spec.payload)
        .map_err(|e| refuse("payload", e.to_string()))?;
    if let Some(n) = spec.max_attempts {
        limits::MAX_ATTEMPTS_RANGE
            .check_u32(n.into())
            .map_err(|e| refuse("max_attempts", strip_field(&e.to_string())))?;
    }
    if let Some(ms) = spec.timeout_ms {
        limits::TIMEOUT_MS
            .check(ms)
            .map_err(|e| refuse("timeout_ms", strip_field(&e.to_string())))?;
    }
    Ok(())
}

fn validate_times(spec: &ScheduleSpec) -> Result<(), SpecError> {
    if spec.jitter_ms > MAX_WINDOW_MS {
        return Err(refuse("jitter", "must be at most 366 days"));
    }
    match spec.catchup_window_ms {
        Some(0) => return Err(refuse("catchup_window", "must be at least 1 ms")),
        Some(w) if w > MAX_WINDOW_MS => {
            return Err(refuse("catchup_window", "must be at most 366 days"))
        }
        _ => {}
    }
    match (spec.start_at, spec.end_at) {
        (Some(start), Some(end)) if end <= start => Err(refuse("end", "must be after start")),
        _ => Ok(()),
    }
}

/// A library error's text without its own `field: ` prefix.
fn strip_field(text: &str) -> String {
    text.split_once(": ")
        .map_or(text.to_string(), |(_, r)| r.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo_spec(name: &str) -> ScheduleSpec {
        let payload = rmp_serde::to_vec_named(&serde_json::json!({"message": "hi"}));
        ScheduleSpec {
            cron: Some("0 3 * * *".into()),
            tz: Some("Europe/Berlin".into()),
            ..ScheduleSpec::new(name, "echo", payload.expect("encodes"))
        }
    }

    const LIMITS: SpecLimits = SpecLimits {
        max_payload_bytes: 1 << 20,
    };

    fn field_of(spec: ScheduleSpec) -> &'static str {
        validate(&spec, LIMITS).expect_err("refused").field
    }

    #[test]
    fn a_good_definition_is_accepted() {
        assert!(validate(&echo_spec("nightly"), LIMITS).is_ok());
    }

    #[test]
    fn each_bad_field_is_named() {
        let mut s = echo_spec("a:b");
        assert_eq!(field_of(s.clone()), "name");
        s.name = "ok".into();
        s.cron = Some("0 3 * *".into());
        assert_eq!(field_of(s.clone()), "cron");
        s.cron = Some("0 3 * * *".into());
        s.tz = Some("Nowhere/Special".into());
        assert_eq!(field_of(s.clone()), "tz");
        s.tz = None;
        s.cron = None;
        s.every_ms = Some(0);
        assert_eq!(field_of(s.clone()), "every");
        s.every_ms = Some(30_000);
        s.payload = rmp_serde::to_vec_named(&serde_json::json!({"nope": 1})).expect("encodes");
        assert_eq!(field_of(s.clone()), "payload");
        s.payload = echo_spec("x").payload;
        s.max_attempts = Some(0);
        assert_eq!(field_of(s.clone()), "max_attempts");
        s.max_attempts = None;
        s.start_at = Some(10);
        s.end_at = Some(5);
        assert_eq!(field_of(s.clone()), "end");
        s.end_at = None;
        s.cron = Some("* * * * *".into());
        assert_eq!(field_of(s), "cron", "both cron and every");
    }
}
