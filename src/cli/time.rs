//! Unix milliseconds to and from RFC 3339 text, and durations such as
//! `30s`, without a date-time dependency. Every duration flag of the CLI
//! parses through `parse_duration_as` (most through `duration_within`).

use crate::protocol::limits::Range;

/// Formats `millis` since the Unix epoch for people, as RFC 3339 in UTC to
/// the whole second: `YYYY-MM-DDTHH:MM:SSZ` (`--json` keeps milliseconds).
/// Correct for every instant an `i64` of milliseconds can hold whose year
/// fits in four digits; earlier or later years print with more digits or a sign.
pub fn format_millis(millis: i64) -> String {
    let days = millis.div_euclid(86_400_000);
    let secs = millis.rem_euclid(86_400_000) / 1000;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// `millis` as RFC 3339 in the IANA zone `zone`, followed by the zone's
/// name (`2026-12-08T03:00:00+01:00 Europe/Berlin`): a schedule's times in
/// the zone its cron expression is read in. No zone, UTC, or a name not
/// known here: `format_millis`.
pub fn format_millis_in(millis: i64, zone: Option<&str>) -> String {
    use chrono::TimeZone;
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

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian
/// calendar (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// (year, month, day) to days since 1970-01-01 (Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)` into unix milliseconds.
pub fn parse_rfc3339(text: &str) -> Result<i64, String> {
    let bad = || format!("{text:?} is not a time like 2026-12-03T10:00:00Z");
    let t = text.trim();
    let (date, rest) = t.split_once(['T', 't', ' ']).ok_or_else(bad)?;
    let (clock, offset_ms) = split_offset(rest).ok_or_else(bad)?;
    let ymd: Vec<i64> = numbers(date, '-').ok_or_else(bad)?;
    let (hms, fraction) = clock.split_once('.').unwrap_or((clock, ""));
    let hms: Vec<i64> = numbers(hms, ':').ok_or_else(bad)?;
    let (&[year, month, day], &[hour, minute, second]) = (&ymd[..], &hms[..]) else {
        return Err(bad());
    };
    // RFC 3339 years have four digits; the bound also keeps the arithmetic
    // below far from overflowing.
    let valid = (0..=9999).contains(&year)
        && (1..=12).contains(&month)
        && (1..=31).contains(&day)
        && hour < 24
        && minute < 60
        && second < 61
        && fraction.len() <= 9
        && fraction.chars().all(|c| c.is_ascii_digit());
    if !valid {
        return Err(bad());
    }
    if day > days_in_month(year, month) {
        return Err(format!("{text:?}: {year}-{month:02} has no day {day}"));
    }
    let millis_part = format!("{fraction:0<3}")[..3]
        .parse::<i64>()
        .map_err(|_| bad())?;
    let days = days_from_civil(year, month, day);
    Ok(((days * 86_400 + hour * 3600 + minute * 60 + second) * 1000 + millis_part) - offset_ms)
}

/// Days in `month` (1–12) of the proleptic Gregorian `year`.
fn days_in_month(year: i64, month: i64) -> i64 {
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Splits `HH:MM:SS[.fff]` from its `Z` or `±HH:MM` suffix, returning the
/// offset in milliseconds.
fn split_offset(rest: &str) -> Option<(&str, i64)> {
    if let Some(clock) = rest.strip_suffix(['Z', 'z']) {
        return Some((clock, 0));
    }
    let at = rest.rfind(['+', '-'])?;
    let (clock, offset) = rest.split_at(at);
    let sign = if offset.starts_with('-') { -1 } else { 1 };
    let hm = numbers(&offset[1..], ':')?;
    let [h, m] = hm[..] else { return None };
    if h > 23 || m > 59 {
        return None;
    }
    Some((clock, sign * (h * 3600 + m * 60) * 1000))
}

fn numbers(text: &str, separator: char) -> Option<Vec<i64>> {
    text.split(separator)
        .map(|part| {
            (!part.is_empty() && part.chars().all(|c| c.is_ascii_digit()))
                .then(|| part.parse().ok())
                .flatten()
        })
        .collect()
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
        let parse = duration_within(crate::protocol::limits::TIMEOUT_MS, 1000);
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
