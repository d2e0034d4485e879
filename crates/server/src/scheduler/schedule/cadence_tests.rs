//! The next-fire computation against a table of known answers (DST in two
//! zones, leap days, `L`, `#`, `W`, seconds, intervals), and properties
//! over random expressions: fire times strictly increase and each one
//! matches the expression, except a slot carried past a skipped hour.

use super::cadence::{cron_matches, slot_label, Cadence, CadenceError};
use chrono::DateTime;
use chrono_tz::Tz;
use proptest::prelude::*;
use std::str::FromStr;

fn ms(rfc3339: &str) -> i64 {
    DateTime::parse_from_rfc3339(rfc3339)
        .expect("a valid test time")
        .timestamp_millis()
}

/// (expression, zone, after, the next slots expected, why)
const TABLE: &[(&str, &str, &str, &[&str], &str)] = &[
    (
        "30 2 * * *",
        "Europe/Berlin",
        "2026-03-28T12:00:00Z",
        &["2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"],
        "Berlin spring forward: 02:30 does not exist, fires at 03:00 CEST",
    ),
    (
        "30 2 * * *",
        "Europe/Berlin",
        "2026-10-24T12:00:00Z",
        &["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"],
        "Berlin fall back: 02:30 happens twice, fires once (CEST)",
    ),
    (
        "*/30 * * * *",
        "Europe/Berlin",
        "2026-10-25T00:15:00Z",
        &[
            "2026-10-25T00:30:00Z",
            "2026-10-25T01:00:00Z",
            "2026-10-25T01:30:00Z",
            "2026-10-25T02:00:00Z",
        ],
        "Berlin fall back: a stepped job keeps real-time rhythm",
    ),
    (
        "0 * * * *",
        "Europe/Berlin",
        "2026-03-29T00:30:00Z",
        &["2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z"],
        "Berlin spring forward: hourly goes 01:00 CET to 03:00 CEST",
    ),
    (
        "30 2 * * *",
        "America/New_York",
        "2026-03-07T12:00:00Z",
        &["2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"],
        "New York spring forward: 02:30 fires at 03:00 EDT",
    ),
    (
        "30 1 * * *",
        "America/New_York",
        "2026-10-31T12:00:00Z",
        &["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"],
        "New York fall back: 01:30 happens twice, fires once (EDT)",
    ),
    (
        "0 12 29 2 *",
        "UTC",
        "2026-01-01T00:00:00Z",
        &["2028-02-29T12:00:00Z", "2032-02-29T12:00:00Z"],
        "29 February only in leap years",
    ),
    (
        "0 0 L * *",
        "UTC",
        "2028-01-15T00:00:00Z",
        &["2028-01-31T00:00:00Z", "2028-02-29T00:00:00Z"],
        "L: the last day of the month",
    ),
    (
        "0 9 * * MON#2",
        "UTC",
        "2026-12-01T00:00:00Z",
        &["2026-12-14T09:00:00Z"],
        "#: the second Monday",
    ),
    (
        "0 0 * * FRI#L",
        "UTC",
        "2026-12-01T00:00:00Z",
        &["2026-12-25T00:00:00Z"],
        "#L: the last Friday",
    ),
    (
        "0 0 15W * *",
        "UTC",
        "2026-08-01T00:00:00Z",
        &["2026-08-14T00:00:00Z"],
        "W: 15 August 2026 is a Saturday, the nearest weekday Friday",
    ),
    (
        "*/10 * * * * *",
        "UTC",
        "2026-01-01T00:00:05Z",
        &["2026-01-01T00:00:10Z", "2026-01-01T00:00:20Z"],
        "six fields: seconds first",
    ),
    (
        "0 3 * * *",
        "UTC",
        "2026-01-01T03:00:00Z",
        &["2026-01-02T03:00:00Z"],
        "strictly after: a slot equal to `after` is not next",
    ),
];

#[test]
fn next_fire_times_match_the_table() {
    for (expression, zone, after, expected, why) in TABLE {
        let cadence = Cadence::cron(expression, zone).expect("a valid table entry");
        let got: Vec<String> = cadence
            .upcoming(ms(after), expected.len())
            .into_iter()
            .map(slot_label)
            .collect();
        assert_eq!(got, *expected, "{why} ({expression} in {zone})");
    }
}

#[test]
fn interval_slots_count_from_the_anchor_and_are_strictly_after() {
    let every_30s = Cadence::every(30_000, 0).expect("valid");
    assert_eq!(every_30s.next_after(1000), Some(30_000));
    assert_eq!(every_30s.next_after(30_000), Some(60_000), "strictly after");
    assert_eq!(every_30s.next_after(-1), Some(0));
    let anchored = Cadence::every(60_000, 5000).expect("valid");
    assert_eq!(anchored.next_after(0), Some(5000), "before the anchor");
    assert_eq!(anchored.upcoming(5000, 2), vec![65_000, 125_000]);
    assert_eq!(anchored.slot_length_ms(0), 60_000);
}

#[test]
fn bad_cadences_are_refused_naming_the_field() {
    let zone = Cadence::cron("0 3 * * *", "Mars/Olympus").unwrap_err();
    assert_eq!(zone, CadenceError::Zone("Mars/Olympus".into()));
    assert!(zone.to_string().starts_with("tz:"));
    let expr = Cadence::cron("61 * * * *", "UTC").unwrap_err();
    assert!(expr.to_string().starts_with("cron:"), "{expr}");
    let never = Cadence::cron("0 0 30 2 *", "UTC").unwrap_err();
    assert!(never.to_string().contains("matches no time"), "{never}");
    assert_eq!(Cadence::every(0, 0).unwrap_err(), CadenceError::Interval);
    assert_eq!(Cadence::every(1500, 0).unwrap_err(), CadenceError::Interval);
    assert!(Cadence::every(1000, 0).is_ok());
}

#[test]
fn slot_labels_are_rfc3339_utc() {
    assert_eq!(slot_label(0), "1970-01-01T00:00:00Z");
    assert_eq!(slot_label(1_500), "1970-01-01T00:00:01.500Z");
}

const ZONES: &[&str] = &[
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
];

/// A random cron expression: each field a wildcard, a value, a step or a
/// list, drawn so that every expression matches some time.
fn expression() -> impl Strategy<Value = String> {
    fn field(max: u32, min: u32) -> impl Strategy<Value = String> {
        prop_oneof![
            Just("*".to_string()),
            (min..=max).prop_map(|v| v.to_string()),
            (2..=(max / 2).max(2)).prop_map(|s| format!("*/{s}")),
            (min..=max, min..=max).prop_map(|(a, b)| format!("{},{}", a.min(b), a.max(b))),
        ]
    }
    (
        field(59, 0),
        field(59, 0),
        field(23, 0),
        field(28, 1),
        field(12, 1),
        prop_oneof![
            Just("*".to_string()),
            (0u32..=6).prop_map(|d| d.to_string())
        ],
    )
        .prop_map(|(s, m, h, dom, mon, dow)| format!("{s} {m} {h} {dom} {mon} {dow}"))
}

/// Whether the wall-clock offset changed in the second before `at_ms`:
/// a slot carried past a skipped hour lands there.
fn just_after_a_jump(zone: &str, at_ms: i64) -> bool {
    use chrono::{Offset, TimeZone};
    let tz = Tz::from_str(zone).expect("a test zone");
    let offset = |t: i64| {
        tz.timestamp_millis_opt(t)
            .single()
            .map(|d| d.offset().fix().local_minus_utc())
    };
    offset(at_ms) != offset(at_ms - 1000)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn fire_times_strictly_increase_and_match_the_expression(
        expr in expression(),
        zone in prop::sample::select(ZONES),
        start in 1_600_000_000_000i64..1_900_000_000_000,
    ) {
        let cadence = Cadence::cron(&expr, zone).expect("generated expressions are valid");
        let mut previous = start;
        for slot in cadence.upcoming(start, 12) {
            prop_assert!(slot > previous, "{expr} in {zone}: {slot} after {previous}");
            prop_assert!(
                cron_matches(&cadence, slot) || just_after_a_jump(zone, slot),
                "{expr} in {zone}: {} does not match", slot_label(slot)
            );
            previous = slot;
        }
    }

    #[test]
    fn interval_slots_are_evenly_spaced_and_strictly_after(
        every_s in 1u64..100_000,
        anchor in -1_000_000_000i64..1_000_000_000,
        after in -2_000_000_000i64..2_000_000_000,
    ) {
        let cadence = Cadence::every(every_s * 1000, anchor).expect("valid");
        let slots = cadence.upcoming(after, 5);
        prop_assert!(slots[0] > after);
        prop_assert!(slots[0] == anchor || slots[0] - (every_s as i64 * 1000) <= after);
        for pair in slots.windows(2) {
            prop_assert_eq!(pair[1] - pair[0], every_s as i64 * 1000);
        }
        prop_assert!(slots.iter().all(|s| cron_matches(&cadence, *s)));
    }
}
