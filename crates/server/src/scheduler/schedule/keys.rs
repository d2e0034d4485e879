//! The idempotency keys of a schedule's jobs. A slot's job has key
//! `schedule:NAME:SLOT`, SLOT the nominal slot in RFC 3339 UTC
//! (`schedule:nightly:2026-12-05T02:00:00Z`): a second submission of the
//! same slot, after a crash or from a second coordinator, returns the first
//! job. A manual trigger's key is `schedule:NAME:trigger:TIME`, which names
//! no slot and so never counts as one fired.

use crate::scheduler::schedule::cadence::slot_label;
use crate::scheduler::schedule::spec::validate_name;
use chrono::DateTime;

const PREFIX: &str = "schedule:";
const TRIGGER: &str = "trigger:";

/// The idempotency key of `name`'s job for `slot_ms`.
pub fn slot_key(name: &str, slot_ms: i64) -> String {
    labelled_slot_key(name, &slot_label(slot_ms))
}

/// The idempotency key of `name`'s job for the slot labelled `label`
/// (`slot_label` of the slot).
pub fn labelled_slot_key(name: &str, label: &str) -> String {
    format!("{PREFIX}{name}:{label}")
}

/// The idempotency key of a manual trigger of `name` at `now_ms`.
pub fn trigger_key(name: &str, now_ms: i64) -> String {
    format!("{PREFIX}{name}:{TRIGGER}{}", slot_label(now_ms))
}

/// The schedule and slot a key names, or `None` for any other key
/// (including a manual trigger's).
pub fn parse_slot_key(key: &str) -> Option<(&str, i64)> {
    let (name, slot) = key.strip_prefix(PREFIX)?.split_once(':')?;
    Some((name, rfc3339_ms(slot)?))
}

/// Which schedule submitted a job, as its idempotency key tells: read off
/// the key, never stored. A key only a schedule writes names one (a slot's
/// or a trigger's, with a name a schedule may have); any other key, or
/// none, names no schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyOrigin<'a> {
    /// The job of the slot `slot_ms` (unix milliseconds) of `schedule`.
    Slot { schedule: &'a str, slot_ms: i64 },
    /// A manual trigger of `schedule` at `at_ms` (unix milliseconds).
    Trigger { schedule: &'a str, at_ms: i64 },
}

impl<'a> KeyOrigin<'a> {
    /// The origin `key` names, if it is a slot's or a trigger's key.
    pub fn of(key: &'a str) -> Option<KeyOrigin<'a>> {
        let (schedule, rest) = key.strip_prefix(PREFIX)?.split_once(':')?;
        validate_name(schedule).ok()?;
        match rest.strip_prefix(TRIGGER) {
            Some(at) => Some(KeyOrigin::Trigger {
                schedule,
                at_ms: rfc3339_ms(at)?,
            }),
            None => Some(KeyOrigin::Slot {
                schedule,
                slot_ms: rfc3339_ms(rest)?,
            }),
        }
    }

    pub fn schedule(self) -> &'a str {
        match self {
            KeyOrigin::Slot { schedule, .. } | KeyOrigin::Trigger { schedule, .. } => schedule,
        }
    }

    /// The slot, for a slot's job; a trigger fires no slot.
    pub fn slot_ms(self) -> Option<i64> {
        match self {
            KeyOrigin::Slot { slot_ms, .. } => Some(slot_ms),
            KeyOrigin::Trigger { .. } => None,
        }
    }
}

fn rfc3339_ms(text: &str) -> Option<i64> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.timestamp_millis())
}

/// The schedule a key belongs to (a slot's or a trigger's job).
pub fn schedule_of(key: &str) -> Option<&str> {
    key.strip_prefix(PREFIX)?.split_once(':').map(|(n, _)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_keys_round_trip_and_trigger_keys_name_no_slot() {
        let key = slot_key("nightly", 1_764_900_000_000);
        assert_eq!(key, "schedule:nightly:2025-12-05T02:00:00Z");
        assert_eq!(parse_slot_key(&key), Some(("nightly", 1_764_900_000_000)));
        let trigger = trigger_key("nightly", 1_764_900_000_123);
        assert_eq!(parse_slot_key(&trigger), None);
        assert_eq!(schedule_of(&trigger), Some("nightly"));
        assert_eq!(parse_slot_key("client-key"), None);
        assert_eq!(parse_slot_key("schedule:x:not-a-time"), None);
    }

    #[test]
    fn a_key_names_the_schedule_and_slot_or_trigger_that_submitted_its_job() {
        let slot = slot_key("nightly", 1_764_900_000_000);
        assert_eq!(
            KeyOrigin::of(&slot),
            Some(KeyOrigin::Slot {
                schedule: "nightly",
                slot_ms: 1_764_900_000_000
            })
        );
        let trigger = trigger_key("nightly", 1_764_900_000_123);
        let origin = KeyOrigin::of(&trigger);
        assert_eq!(
            origin,
            Some(KeyOrigin::Trigger {
                schedule: "nightly",
                at_ms: 1_764_900_000_123
            })
        );
        assert_eq!(origin.map(KeyOrigin::schedule), Some("nightly"));
        assert_eq!(origin.and_then(KeyOrigin::slot_ms), None);
    }

    #[test]
    fn other_keys_name_no_schedule() {
        for key in [
            "order-42",
            "schedule:",
            "schedule:nightly",
            "schedule:nightly:tomorrow",
            "schedule:nightly:trigger:soon",
            "schedule:no spaces:2025-12-05T02:00:00Z",
            "schedule::2025-12-05T02:00:00Z",
        ] {
            assert_eq!(KeyOrigin::of(key), None, "{key}");
        }
    }
}
