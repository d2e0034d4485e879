//! Times and durations as people write them: unix milliseconds to and
//! from RFC 3339 text (through chrono, the one date-time library), and
//! durations such as `30s`. Every duration flag of the CLI parses through
//! `parse_duration_as` (most through `duration_within`), every duration
//! key of the configuration through `millis_of`.

use chrono::{DateTime, Datelike, NaiveDate, TimeZone, Utc};
use taskyard_protocol::limits::Range;

/// Formats `millis` since the Unix epoch for people, as RFC 3339 in UTC to
/// the whole second: `YYYY-MM-DDTHH:MM:SSZ` (`--json` keeps milliseconds).
/// An instant beyond what the calendar library holds (±262,000 years)
/// prints as its milliseconds.
pub fn format_millis(millis: i64) -> String {
    match DateTime::<Utc>::from_timestamp_millis(millis) {
        Some(at) => at.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
        None => format!("{millis} ms after 1970-01-01T00:00:00Z"),
    }
}

/// `millis` as RFC 3339 in the IANA zone `zone`, followed by the zone's
/// name (`2026-12-08T03:00:00+01:00 Europe/Berlin`): a schedule's times in
/// the zone its cron expression is read in. No zone, UTC, or a name not
/// known here: `format_millis`.
pub fn format_millis_in(millis: i64, zone: Option<&str>) -> String {
    let tz = zone
        .filter(|z| *z != "UTC")
        .and_then(|z| z.parse::<chrono_tz::Tz>().ok());
    let local = tz.and_then(|tz| tz.timestamp_millis_opt(millis).single());
    match local {
        Some(local) => format!(
            "{} {}",
            local.format("%Y-%m-%dT%H:%M:%S%:z"),
            local.timezone()
        ),
        None => format_millis(millis),
    }
}

/// Parses RFC 3339 (`YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)`, years of four
/// digits) into unix milliseconds.
pub fn parse_rfc3339(text: &str) -> Result<i64, String> {
    let t = text.trim();
    match DateTime::parse_from_rfc3339(t) {
        Ok(at) => Ok(at.timestamp_millis()),
        Err(_) => Err(no_such_day(t)
            .unwrap_or_else(|| format!("{text:?} is not a time like 2026-12-03T10:00:00Z"))),
    }
}

/// Says so when `text` starts with a real year and month whose month has
/// no such day (`2027-02-30`), the one refusal worth its own words.
fn no_such_day(text: &str) -> Option<String> {
    let mut parts = text.get(..10)?.splitn(3, '-');
    let year: i32 = parts.next()?.parse().ok()?;
    let month: u32 = parts.next()?.parse().ok()?;
    let day: u32 = parts.next()?.parse().ok()?;
    let first = NaiveDate::from_ymd_opt(year, month, 1)?;
    ((1..=31).contains(&day) && first.with_day(day).is_none())
        .then(|| format!("{text:?}: {year}-{month:02} has no day {day}"))
}

/// Parses a duration such as `1500ms`, `30s`, `5m`, `2h` or `1d` into
/// milliseconds. A bare number is seconds.
pub fn parse_duration(text: &str) -> Result<u64, String> {
    parse_duration_as(text, 1000)
}

/// A clap value parser for a duration flag: `250ms`, `30s`, `5m`, `1h`,
/// `1d`, a bare number counting `bare_unit_ms` each (the unit the flag
/// had when it took only numbers); milliseconds within `range`.
pub fn duration_within(
    range: Range,
    bare_unit_ms: u64,
) -> impl Fn(&str) -> Result<u64, String> + Clone + Send + Sync + 'static {
    move |text: &str| match millis_of(text, bare_unit_ms) {
        Ok(millis) => range.check(millis).map_err(|e| e.to_string()),
        // Too long for 64 bits is beyond every range: said like any value beyond it.
        Err(DurationError::TooLong) => Err(format!(
            "{}: {} is outside {}..={} (milliseconds)",
            range.field,
            text.trim(),
            range.min,
            range.max
        )),
        Err(DurationError::Invalid(reason)) => Err(reason),
    }
}

/// Why text is no duration.
pub(crate) enum DurationError {
    /// More milliseconds than 64 bits hold.
    TooLong,
    Invalid(String),
}

/// `parse_duration` with a bare number counting `bare_unit_ms` each.
pub fn parse_duration_as(text: &str, bare_unit_ms: u64) -> Result<u64, String> {
    millis_of(text, bare_unit_ms).map_err(|e| match e {
        DurationError::TooLong => format!("{text:?} is too long"),
        DurationError::Invalid(reason) => reason,
    })
}

/// Milliseconds of a duration, a bare number counting `bare_unit_ms` each.
pub(crate) fn millis_of(text: &str, bare_unit_ms: u64) -> Result<u64, DurationError> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let unit_ms: u64 = match unit {
        "" => bare_unit_ms,
        "ms" => 1,
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => {
            return Err(DurationError::Invalid(format!(
                "{text:?}: unknown unit {unit:?} (use ms, s, m, h or d)"
            )))
        }
    };
    if digits.is_empty() {
        return Err(DurationError::Invalid(format!(
            "{text:?} is not a duration like 30s, 5m or 2h"
        )));
    }
    digits
        .parse::<u64>()
        .ok()
        .and_then(|amount| amount.checked_mul(unit_ms))
        .ok_or(DurationError::TooLong)
}

/// Milliseconds as the shortest duration text `parse_duration` reads back:
/// `250ms`, `30s`, `5m`, `2h`, `1d`.
pub fn format_duration(millis: u64) -> String {
    let units = [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1000, "s"),
    ];
    match units
        .iter()
        .find(|(unit, _)| millis > 0 && millis.is_multiple_of(*unit))
    {
        Some((unit, name)) => format!("{}{name}", millis / unit),
        None => format!("{millis}ms"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_parses_back_what_format_prints_to_the_second() {
        for millis in [
            0_i64,
            1_700_000_000_123,
            951_782_400_000,
            4_107_542_399_999,
            -1,
        ] {
            let second = millis.div_euclid(1000) * 1000;
            assert_eq!(parse_rfc3339(&format_millis(millis)), Ok(second));
        }
        assert_eq!(
            parse_rfc3339("2026-12-03T10:00:00.250Z"),
            Ok(1_796_292_000_250)
        );
        assert_eq!(parse_rfc3339("2026-12-03T10:00:00Z"), Ok(1_796_292_000_000));
        assert_eq!(
            parse_rfc3339("2026-12-03T11:00:00+01:00"),
            Ok(1_796_292_000_000)
        );
        for bad in [
            "tomorrow",
            "2026-13-01T00:00:00Z",
            "2026-12-03T10:00:00",
            "2026-12-03",
        ] {
            assert!(parse_rfc3339(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn dates_that_are_not_in_the_calendar_are_refused() {
        for bad in [
            "2027-02-30T00:00:00Z",
            "2027-02-29T00:00:00Z",
            "2026-04-31T00:00:00Z",
            "1900-02-29T00:00:00Z",
        ] {
            let err = parse_rfc3339(bad).expect_err(bad);
            assert!(err.contains("has no day"), "{err}");
        }
        for good in [
            "2028-02-29T00:00:00Z",
            "2000-02-29T00:00:00Z",
            "2026-12-31T23:59:59Z",
        ] {
            assert!(parse_rfc3339(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn years_beyond_four_digits_and_offsets_beyond_a_day_are_refused_without_overflow() {
        for bad in [
            "99999999999-01-01T00:00:00Z",
            "10000-01-01T00:00:00Z",
            "2027-01-01T00:00:00+99999999999999:00",
            "2027-01-01T00:00:00+24:00",
            "2027-01-01T00:00:00-01:60",
        ] {
            assert!(parse_rfc3339(bad).is_err(), "{bad}");
        }
        assert!(parse_rfc3339("9999-12-31T23:59:59.999-23:59").is_ok());
    }

    #[test]
    fn durations_take_a_unit() {
        assert_eq!(parse_duration("1500ms"), Ok(1500));
        assert_eq!(parse_duration("30s"), Ok(30_000));
        assert_eq!(parse_duration("30"), Ok(30_000));
        assert_eq!(parse_duration("5m"), Ok(300_000));
        assert_eq!(parse_duration("2h"), Ok(7_200_000));
        assert!(parse_duration("-5s").is_err());
        assert!(parse_duration("5 years").is_err());
        assert!(parse_duration("s").is_err());
    }

    #[test]
    fn a_bare_number_counts_the_flag_s_own_unit() {
        assert_eq!(parse_duration_as("250", 1), Ok(250));
        assert_eq!(parse_duration_as("250", 1000), Ok(250_000));
        assert_eq!(parse_duration_as("250ms", 1000), Ok(250));
        assert_eq!(parse_duration_as("1h", 1), Ok(3_600_000));
        let err = parse_duration_as("99999999999999999999s", 1).expect_err("beyond u64");
        assert!(err.contains("too long"), "{err}");
        let err = parse_duration_as("5 min", 1000).expect_err("unknown unit");
        assert!(err.contains("unknown unit"), "{err}");
    }

    #[test]
    fn duration_within_refuses_beyond_the_range_naming_the_field() {
        let parse = duration_within(taskyard_protocol::limits::TIMEOUT_MS, 1000);
        assert_eq!(parse("30s"), Ok(30_000));
        assert_eq!(parse("366d"), Ok(366 * 86_400_000));
        let err = parse("367d").expect_err("over a year");
        assert!(
            err.starts_with("timeout_ms: ") && err.contains("..="),
            "{err}"
        );
        assert!(parse("0ms").is_err(), "a timeout is at least 1 ms");
    }

    #[test]
    fn durations_format_in_their_largest_whole_unit() {
        for (millis, text) in [
            (250, "250ms"),
            (1500, "1500ms"),
            (30_000, "30s"),
            (300_000, "5m"),
            (7_200_000, "2h"),
            (86_400_000, "1d"),
            (0, "0ms"),
        ] {
            assert_eq!(format_duration(millis), text);
            assert_eq!(parse_duration(text), Ok(millis));
        }
    }

    #[test]
    fn epoch_is_midnight_first_of_january_1970() {
        assert_eq!(format_millis(0), "1970-01-01T00:00:00Z");
    }

    #[test]
    fn known_instants_format_to_the_second() {
        assert_eq!(format_millis(1_700_000_000_123), "2023-11-14T22:13:20Z");
        assert_eq!(format_millis(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(format_millis(4_107_542_399_999), "2100-02-28T23:59:59Z");
    }

    #[test]
    fn instants_before_the_epoch_count_backwards() {
        assert_eq!(format_millis(-1), "1969-12-31T23:59:59Z");
        assert_eq!(format_millis(-86_400_000), "1969-12-31T00:00:00Z");
    }

    #[test]
    fn a_zoned_time_shows_its_offset_and_zone_name() {
        let winter = 1_796_695_200_000; // 2026-12-08T02:00:00Z
        assert_eq!(format_millis(winter), "2026-12-08T02:00:00Z");
        assert_eq!(
            format_millis_in(winter, Some("Europe/Berlin")),
            "2026-12-08T03:00:00+01:00 Europe/Berlin"
        );
        let summer = 1_782_871_200_000; // 2026-07-01T02:00:00Z
        assert_eq!(
            format_millis_in(summer, Some("Europe/Berlin")),
            "2026-07-01T04:00:00+02:00 Europe/Berlin"
        );
        assert_eq!(
            format_millis_in(winter, Some("America/New_York")),
            "2026-12-07T21:00:00-05:00 America/New_York"
        );
        for zone in [None, Some("UTC"), Some("Mars/Base")] {
            assert_eq!(format_millis_in(winter, zone), "2026-12-08T02:00:00Z");
        }
    }
}
