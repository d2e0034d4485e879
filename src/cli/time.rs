//! Unix milliseconds as RFC 3339 UTC text, without a date-time dependency.

/// Formats `millis` since the Unix epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC).
/// Correct for every instant an `i64` of milliseconds can hold whose year
/// fits in four digits; earlier or later years print with more digits or a sign.
pub fn format_millis(millis: i64) -> String {
    let days = millis.div_euclid(86_400_000);
    let in_day = millis.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    let (secs, ms) = (in_day / 1000, in_day % 1000);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
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

#[cfg(test)]
mod tests {
    use super::format_millis;

    #[test]
    fn epoch_is_midnight_first_of_january_1970() {
        assert_eq!(format_millis(0), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn known_instants_format_exactly() {
        assert_eq!(format_millis(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(format_millis(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(format_millis(4_107_542_399_999), "2100-02-28T23:59:59.999Z");
    }

    #[test]
    fn instants_before_the_epoch_count_backwards() {
        assert_eq!(format_millis(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(format_millis(-86_400_000), "1969-12-31T00:00:00.000Z");
    }
}
