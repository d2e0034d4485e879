//! The idempotency keys of a schedule's jobs. A slot's job has key
//! `schedule:NAME:SLOT`, SLOT the nominal slot in RFC 3339 UTC
//! (`schedule:nightly:2026-12-05T02:00:00Z`): a second submission of the
//! same slot, after a crash or from a second coordinator, returns the first
//! job. A manual trigger's key is `schedule:NAME:trigger:TIME`, which names
//! no slot and so never counts as one fired.

use crate::scheduler::schedule::cadence::slot_label;
use chrono::DateTime;

const PREFIX: &str = "schedule:";

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
    format!("{PREFIX}{name}:trigger:{}", slot_label(now_ms))
}

/// The schedule and slot a key names, or `None` for any other key
/// (including a manual trigger's).
pub fn parse_slot_key(key: &str) -> Option<(&str, i64)> {
    let (name, slot) = key.strip_prefix(PREFIX)?.split_once(':')?;
    let slot = DateTime::parse_from_rfc3339(slot).ok()?;
    Some((name, slot.timestamp_millis()))
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
}
