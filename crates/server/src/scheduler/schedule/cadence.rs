//! When a schedule fires: a cron expression read in an IANA time zone, or
//! a fixed interval. Pure: a `Cadence` answers "the first slot strictly
//! after this instant" and nothing else; slots are unix milliseconds (UTC).
//!
//! Daylight-saving time follows Vixie cron, through `croner`:
//! - a slot whose wall-clock time falls in a skipped hour (spring forward)
//!   fires at the first instant after the jump;
//! - a fixed-time slot (seconds, minute and hour each one value, such as
//!   `30 2 * * *`) in a repeated hour (fall back) fires once, at its first
//!   occurrence;
//! - a wildcard or stepped slot (such as `*/15 * * * *`) keeps its rhythm
//!   in real time, so it fires in both passes of a repeated hour: each is a
//!   distinct instant, hence a distinct slot.
//!
//! An interval's slots are `anchor + k × every` for whole `k`: the anchor
//! is the schedule's start time if it has one, else the unix epoch, so the
//! slots do not move when the coordinator restarts.

use super::cron_fields::explain;
use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::parser::CronParser;
use croner::Cron;
use std::str::FromStr;

/// croner's parse with the options every cadence uses.
fn parse_cron(expression: &str) -> Result<Cron, croner::errors::CronError> {
    CronParser::builder().build().parse(expression)
}

/// No two slots of any cadence are closer: cron slots are whole seconds,
/// and an interval is at least one second.
pub const SHORTEST_SLOT_MS: i64 = 1000;

/// The longest interval accepted: one year, in milliseconds.
pub const MAX_EVERY_MS: u64 = 366 * 24 * 3_600_000;

/// Why a cadence was refused; the message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CadenceError {
    #[error("cron: {0}")]
    Expression(String),
    #[error("tz: unknown time zone {0:?} (an IANA name such as Europe/Berlin)")]
    Zone(String),
    #[error("every: must be at least 1 s, in whole seconds, and at most 366 days")]
    Interval,
    #[error("cron and every: give exactly one of them")]
    Neither,
}

/// A validated cadence. Build with `Cadence::cron` or `Cadence::every`.
#[derive(Debug, Clone)]
pub enum Cadence {
    Cron { cron: Box<Cron>, tz: Tz },
    Every { every_ms: i64, anchor_ms: i64 },
}

impl Cadence {
    /// Parses a cron expression (5 fields, or 6 with seconds first; `L`,
    /// `W`, `#`, names like `MON`) to be read in the zone `tz`.
    pub fn cron(expression: &str, tz: &str) -> Result<Cadence, CadenceError> {
        let tz = Tz::from_str(tz).map_err(|_| CadenceError::Zone(tz.to_string()))?;
        let cron = parse_cron(expression).map_err(|e| {
            let parses = |pattern: &str| parse_cron(pattern).is_ok();
            CadenceError::Expression(explain(expression, parses).unwrap_or_else(|| e.to_string()))
        })?;
        let cadence = Cadence::Cron {
            cron: Box::new(cron),
            tz,
        };
        // An expression that never matches (`0 0 30 2 *`) is refused here,
        // not discovered at the first sweep.
        if cadence.next_after(0).is_none() {
            return Err(CadenceError::Expression(format!(
                "{expression:?} matches no time"
            )));
        }
        Ok(cadence)
    }

    /// A fixed interval of `every_ms` (whole seconds, 1 s to 366 days),
    /// slots counted from `anchor_ms`.
    pub fn every(every_ms: u64, anchor_ms: i64) -> Result<Cadence, CadenceError> {
        let shortest = SHORTEST_SLOT_MS as u64;
        if every_ms < shortest || !every_ms.is_multiple_of(shortest) || every_ms > MAX_EVERY_MS {
            return Err(CadenceError::Interval);
        }
        Ok(Cadence::Every {
            every_ms: every_ms as i64,
            anchor_ms,
        })
    }

    /// The first slot strictly after `after_ms`, or `None` if there is none
    /// before year 5000 (croner's search limit).
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        match self {
            Cadence::Every {
                every_ms,
                anchor_ms,
            } => Some(next_interval_slot(*every_ms, *anchor_ms, after_ms)),
            Cadence::Cron { cron, tz } => next_cron_slot(cron, *tz, after_ms),
        }
    }

    /// The next `count` slots after `after_ms`, in order.
    pub fn upcoming(&self, after_ms: i64, count: usize) -> Vec<i64> {
        let mut slots = Vec::with_capacity(count);
        let mut cursor = after_ms;
        while slots.len() < count {
            match self.next_after(cursor) {
                Some(slot) => {
                    slots.push(slot);
                    cursor = slot;
                }
                None => break,
            }
        }
        slots
    }

    /// The nominal length of one slot, for the default catch-up window
    /// ("one slot"): the interval, or the gap between the two slots after
    /// `around_ms` for a cron cadence.
    pub fn slot_length_ms(&self, around_ms: i64) -> i64 {
        match self {
            Cadence::Every { every_ms, .. } => *every_ms,
            Cadence::Cron { .. } => match self.upcoming(around_ms, 2).as_slice() {
                [a, b] => b - a,
                _ => 0,
            },
        }
    }
}

fn next_interval_slot(every_ms: i64, anchor_ms: i64, after_ms: i64) -> i64 {
    if after_ms < anchor_ms {
        return anchor_ms;
    }
    let k = (after_ms - anchor_ms).div_euclid(every_ms) + 1;
    anchor_ms.saturating_add(k.saturating_mul(every_ms))
}

fn next_cron_slot(cron: &Cron, tz: Tz, after_ms: i64) -> Option<i64> {
    // Cron slots are whole seconds: searching from the second that holds
    // `after_ms` (exclusive) gives the first slot strictly after it.
    let second = after_ms.div_euclid(1000);
    let start: DateTime<Utc> = Utc.timestamp_opt(second, 0).single()?;
    let next = cron
        .find_next_occurrence(&start.with_timezone(&tz), false)
        .ok()?;
    Some(next.timestamp_millis())
}

/// `slot_ms` as the SLOT of an idempotency key: RFC 3339 in UTC, to the
/// millisecond only when the slot is not a whole second
/// (`2026-03-29T01:00:00Z`).
pub fn slot_label(slot_ms: i64) -> String {
    match Utc.timestamp_millis_opt(slot_ms).single() {
        Some(t) if slot_ms.rem_euclid(1000) == 0 => t.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
        Some(t) => t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
        None => slot_ms.to_string(),
    }
}

/// Whether `tz` is a known IANA zone name.
pub fn known_zone(tz: &str) -> bool {
    Tz::from_str(tz).is_ok()
}

/// Whether `at_ms` matches the cron expression's wall-clock fields in
/// `tz`: for tests, which check fire times against the expression.
pub fn cron_matches(cadence: &Cadence, at_ms: i64) -> bool {
    match cadence {
        Cadence::Every {
            every_ms,
            anchor_ms,
        } => (at_ms - anchor_ms).rem_euclid(*every_ms) == 0,
        Cadence::Cron { cron, tz } => Utc
            .timestamp_millis_opt(at_ms)
            .single()
            .is_some_and(|t| cron.is_time_matching(&t.with_timezone(tz)).unwrap_or(false)),
    }
}
