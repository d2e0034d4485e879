//! The documented range of every number a client or worker sends, in one
//! place. The coordinator's submission check, the worker session, the HTTP
//! API and the CLI's argument parsers all check through these, so a value is
//! accepted or refused the same way over every interface, and the refusal
//! names the field and its range.
//!
//! Every range keeps what is stored in SQLite (a signed 64-bit integer)
//! exact: a value accepted here reads back unchanged after a restart.
//!
//! | field | range | checked by |
//! |---|---|---|
//! | `max_attempts` | [`MAX_ATTEMPTS_RANGE`] | submission, HTTP, CLI |
//! | `timeout_ms` | [`TIMEOUT_MS`] | submission, HTTP, CLI, `task-timeout-millis` |
//! | `delay_ms` | [`DELAY_MS`] | submission, HTTP, CLI (`--delay`, `--at`) |
//! | `limit` | [`LIST_LIMIT`] | HTTP, CLI; a TCP `List` is cut to [`MAX_LIST_JOBS`] |
//! | `percent` | [`PROGRESS_PERCENT`] | worker session |
//! | `capacity` | 1..=`max-worker-capacity` | `register::validate_register` |
//!
//! `request_id` may be any `u64` (it is only echoed back); `priority` is one
//! of three names (`Priority`), `protocol_version` must equal
//! `PROTOCOL_VERSION`.

use serde_json::Value;
use thiserror::Error;

/// A year of 366 days, in milliseconds.
pub const YEAR_MS: u64 = 366 * 24 * 60 * 60 * 1000;
/// Largest attempt budget a submission may ask for.
pub const MAX_ATTEMPTS: u32 = 100;
/// Longest per-attempt timeout: a year.
pub const MAX_TIMEOUT_MS: u64 = YEAR_MS;
/// Furthest a submission may be delayed: a year. Admission time plus this
/// stays far inside `i64` milliseconds, so `not_before` is stored exactly.
pub const MAX_DELAY_MS: u64 = YEAR_MS;
/// The most jobs one `List` answers with (the HTTP API's largest page).
pub const MAX_LIST_JOBS: u32 = 500;
/// Longest the CLI's `wait` waits: a year, in seconds.
pub const MAX_WAIT_SECS: u64 = YEAR_MS / 1000;

/// `max_attempts`: 1..=100.
pub const MAX_ATTEMPTS_RANGE: Range = Range::new("max_attempts", 1, MAX_ATTEMPTS as u64);
/// `timeout_ms`: 1 ms to a year.
pub const TIMEOUT_MS: Range = Range::new("timeout_ms", 1, MAX_TIMEOUT_MS);
/// `delay_ms`: none to a year.
pub const DELAY_MS: Range = Range::new("delay_ms", 0, MAX_DELAY_MS);
/// A page of jobs: 1..=500.
pub const LIST_LIMIT: Range = Range::new("limit", 1, MAX_LIST_JOBS as u64);
/// A progress report: 0..=100 percent.
pub const PROGRESS_PERCENT: Range = Range::new("percent", 0, 100);
/// The CLI's `--timeout-secs` / `--wait-timeout-secs`: 0 to a year.
pub const WAIT_SECS: Range = Range::new("timeout_secs", 0, MAX_WAIT_SECS);
/// The CLI's wait timeouts as durations (`wait --timeout`, `submit
/// --wait-timeout`): 0 to a year, in milliseconds.
pub const WAIT_MS: Range = Range::new("wait_ms", 0, MAX_WAIT_SECS * 1000);

/// One numeric field's accepted values, `min..=max`, and the field's name
/// as it appears on the wire (and in every refusal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub field: &'static str,
    pub min: u64,
    pub max: u64,
}

/// A number refused by its `Range`; the text names the field and the range.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum OutOfRange {
    /// An integer, but outside the range (`value` as it was given).
    #[error("{field}: {value} is outside {min}..={max}")]
    Outside {
        field: &'static str,
        value: String,
        min: u64,
        max: u64,
    },
    /// Not an integer at all: text, a fraction, a JSON string or float.
    #[error("{field}: {value} is not an integer in {min}..={max}")]
    NotInteger {
        field: &'static str,
        value: String,
        min: u64,
        max: u64,
    },
}

impl Range {
    /// A range of `field` from `min` to `max`, both included.
    pub const fn new(field: &'static str, min: u64, max: u64) -> Range {
        Range { field, min, max }
    }

    /// `value` if it lies in the range.
    pub fn check(self, value: u64) -> Result<u64, OutOfRange> {
        if (self.min..=self.max).contains(&value) {
            Ok(value)
        } else {
            Err(self.outside(value))
        }
    }

    /// `value` as the field's `u32` if it lies in the range (every `u32`
    /// range here has a `max` that fits).
    pub fn check_u32(self, value: u64) -> Result<u32, OutOfRange> {
        let value = self.check(value)?;
        u32::try_from(value).map_err(|_| self.outside(value))
    }

    /// Parses decimal text (a CLI argument, a query parameter). Digits too
    /// many for a `u64` are out of range, not "not a number".
    pub fn parse(self, text: &str) -> Result<u64, OutOfRange> {
        let t = text.trim();
        match t.parse::<u64>() {
            Ok(value) => self.check(value),
            Err(_) if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) => {
                Err(self.outside(t))
            }
            Err(_) if t.starts_with('-') && t[1..].bytes().all(|b| b.is_ascii_digit()) => {
                Err(self.outside(t))
            }
            Err(_) => Err(self.not_integer(format!("{t:?}"))),
        }
    }

    /// A JSON value as the field's number: an integer in the range, or
    /// the refusal naming the field (negative, too big, fraction, string).
    pub fn check_json(self, value: &Value) -> Result<u64, OutOfRange> {
        match value {
            Value::Number(n) => match (n.as_u64(), n.as_i64()) {
                (Some(v), _) => self.check(v),
                (None, Some(negative)) => Err(self.outside(negative)),
                // serde_json reads integers beyond u64 as floats; 5.0 is
                // a float within range, refused as not an integer.
                (None, None)
                    if n.as_f64()
                        .is_some_and(|f| f.fract() == 0.0 && (f < 0.0 || f >= u64::MAX as f64)) =>
                {
                    Err(self.outside(n))
                }
                (None, None) => Err(self.not_integer(n)),
            },
            other => Err(self.not_integer(other)),
        }
    }

    /// A clap value parser for this range (the CLI's numeric flags).
    pub fn parser(self) -> impl Fn(&str) -> Result<u64, String> + Clone + Send + Sync + 'static {
        move |text: &str| self.parse(text).map_err(|e| e.to_string())
    }

    /// A clap value parser for a `u32` flag in this range.
    pub fn parser_u32(
        self,
    ) -> impl Fn(&str) -> Result<u32, String> + Clone + Send + Sync + 'static {
        move |text: &str| {
            self.parse(text)
                .and_then(|v| self.check_u32(v))
                .map_err(|e| e.to_string())
        }
    }

    fn outside(self, value: impl ToString) -> OutOfRange {
        OutOfRange::Outside {
            field: self.field,
            value: value.to_string(),
            min: self.min,
            max: self.max,
        }
    }

    fn not_integer(self, value: impl ToString) -> OutOfRange {
        OutOfRange::NotInteger {
            field: self.field,
            value: value.to_string(),
            min: self.min,
            max: self.max,
        }
    }
}

/// Serde `deserialize_with` for `SubmitRequest::max_attempts`: a number
/// too wide for a `u32` is refused naming the field and its range (serde's
/// own error says only "expected u32"). In-`u32` values are checked later,
/// by the submission's validation, so they are answered with `Rejected`.
pub fn deserialize_max_attempts<'de, D>(d: D) -> Result<Option<u32>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let wide: Option<u64> = serde::Deserialize::deserialize(d)?;
    wide.map(|v| u32::try_from(v).map_err(|_| MAX_ATTEMPTS_RANGE.outside(v)))
        .transpose()
        .map_err(serde::de::Error::custom)
}

/// What the OpenAPI document says of a field: these functions build the
/// schemas of the ranged fields from the same `Range`s the server checks
/// (`#[schema(schema_with = ...)]` takes only a function).
pub mod schemas {
    use super::*;
    use utoipa::openapi::schema::{Object, ObjectBuilder, SchemaType, Type};

    impl Range {
        /// An integer from `min` to `max`; `nullable` adds `null` (read as
        /// the field left out).
        pub fn schema(self, nullable: bool) -> Object {
            let integer = match nullable {
                true => SchemaType::from_iter([Type::Integer, Type::Null]),
                false => SchemaType::new(Type::Integer),
            };
            ObjectBuilder::new()
                .schema_type(integer)
                .minimum(Some(self.min))
                .maximum(Some(self.max))
                .build()
        }
    }

    pub fn max_attempts_schema() -> Object {
        MAX_ATTEMPTS_RANGE.schema(false)
    }

    pub fn timeout_ms_schema() -> Object {
        TIMEOUT_MS.schema(false)
    }

    pub fn progress_percent_schema() -> Object {
        PROGRESS_PERCENT.schema(false)
    }
}

pub use schemas::{max_attempts_schema, progress_percent_schema, timeout_ms_schema};

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const EVERY_RANGE: [Range; 7] = [
        MAX_ATTEMPTS_RANGE,
        TIMEOUT_MS,
        DELAY_MS,
        LIST_LIMIT,
        PROGRESS_PERCENT,
        WAIT_SECS,
        WAIT_MS,
    ];

    #[test]
    fn every_range_accepts_its_ends_and_refuses_one_beyond_naming_field_and_range() {
        for range in EVERY_RANGE {
            assert_eq!(range.check(range.min), Ok(range.min));
            assert_eq!(range.check(range.max), Ok(range.max));
            let err = range.check(range.max + 1).expect_err("max + 1").to_string();
            let bounds = format!("{}..={}", range.min, range.max);
            assert!(
                err.starts_with(range.field) && err.contains(&bounds),
                "{err}"
            );
            if range.min > 0 {
                assert!(range.check(range.min - 1).is_err());
            }
        }
    }

    #[test]
    fn every_range_fits_a_signed_64_bit_column_with_room_for_a_timestamp() {
        for range in EVERY_RANGE {
            let far_future = 4_102_444_800_000_i64; // 2100-01-01
            assert!(i64::try_from(range.max).is_ok_and(|m| m.checked_add(far_future).is_some()));
        }
    }

    #[test]
    fn text_too_long_for_u64_is_out_of_range_and_words_are_not_numbers() {
        assert_eq!(TIMEOUT_MS.parse(" 1500 "), Ok(1500));
        let err = TIMEOUT_MS
            .parse("18446744073709551616")
            .expect_err("beyond u64");
        assert!(matches!(err, OutOfRange::Outside { .. }), "{err}");
        assert!(TIMEOUT_MS.parse("-5").is_err());
        let err = TIMEOUT_MS.parse("soon").expect_err("a word");
        assert_eq!(
            err.to_string(),
            format!("timeout_ms: \"soon\" is not an integer in 1..={MAX_TIMEOUT_MS}")
        );
    }

    #[test]
    fn json_numbers_are_checked_whatever_their_shape() {
        assert_eq!(MAX_ATTEMPTS_RANGE.check_json(&json!(100)), Ok(100));
        for bad in [
            json!(101),
            json!(-1),
            json!(1e30),
            json!(2.5),
            json!("5"),
            json!(null),
        ] {
            let err = MAX_ATTEMPTS_RANGE
                .check_json(&bad)
                .expect_err("refused")
                .to_string();
            assert!(
                err.starts_with("max_attempts: ") && err.contains("1..=100"),
                "{err}"
            );
        }
        let huge: Value = serde_json::from_str("18446744073709551616").expect("json");
        assert!(matches!(
            TIMEOUT_MS.check_json(&huge),
            Err(OutOfRange::Outside { .. })
        ));
    }

    #[test]
    fn a_wire_max_attempts_wider_than_u32_is_refused_naming_the_field() {
        #[derive(serde::Deserialize, Debug)]
        struct Body {
            #[serde(default, deserialize_with = "deserialize_max_attempts")]
            max_attempts: Option<u32>,
        }
        let ok: Body = serde_json::from_str(r#"{"max_attempts": 101}"#).expect("u32");
        assert_eq!(ok.max_attempts, Some(101));
        let err = serde_json::from_str::<Body>(r#"{"max_attempts": 4294967296}"#)
            .expect_err("wider than u32");
        assert!(
            err.to_string()
                .starts_with("max_attempts: 4294967296 is outside 1..=100"),
            "{err}"
        );
    }

    #[test]
    fn u32_fields_convert_only_within_range() {
        assert_eq!(MAX_ATTEMPTS_RANGE.check_u32(100), Ok(100));
        assert!(MAX_ATTEMPTS_RANGE
            .check_u32(u64::from(u32::MAX) + 1)
            .is_err());
    }
}
