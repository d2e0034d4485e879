//! Flow control's vocabulary, checked the same way by every interface:
//! the keys a job may carry (concurrency, unique, fairness), the patterns a
//! limit is set on, and a limit's rate. Each refusal names the field.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use thiserror::Error;

/// Longest key a job may carry, in bytes (`concurrency_key`, `unique_key`,
/// `fairness_key`), and longest limit pattern.
pub const MAX_FLOW_KEY_BYTES: usize = 256;

/// Why a key, a pattern, a rate or a limit was refused. `field` is the
/// name the value had where it was given.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{field}: {reason}")]
pub struct FlowRefused {
    pub field: String,
    pub reason: String,
}

fn refused(field: &str, reason: impl Into<String>) -> FlowRefused {
    FlowRefused {
        field: field.to_string(),
        reason: reason.into(),
    }
}

/// Checks a key a job carries: not empty, at most `MAX_FLOW_KEY_BYTES`, no
/// control characters (keys are shown in status lines and metrics).
pub fn validate_key(field: &str, key: &str) -> Result<(), FlowRefused> {
    if key.is_empty() {
        return Err(refused(field, "is empty"));
    }
    if key.len() > MAX_FLOW_KEY_BYTES {
        return Err(refused(
            field,
            format!("is {} bytes, more than {MAX_FLOW_KEY_BYTES}", key.len()),
        ));
    }
    if key.chars().any(char::is_control) {
        return Err(refused(field, "contains a control character"));
    }
    Ok(())
}

/// What a limit is set on: one exact key (`stripe:acct_42`), or every key
/// starting with a prefix (`stripe:*`: one `*`, at the end). A limit on a
/// pattern applies to each matching key on its own: `stripe:*` with at most
/// 5 running allows 5 for `stripe:a` and 5 for `stripe:b`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum LimitPattern {
    Exact(String),
    /// The prefix, without its `*`; empty: every key.
    Prefix(String),
}

impl LimitPattern {
    /// Parses `text` as given in field `field`.
    pub fn parse(field: &str, text: &str) -> Result<LimitPattern, FlowRefused> {
        if text.is_empty() {
            return Err(refused(field, "is empty"));
        }
        if text.len() > MAX_FLOW_KEY_BYTES {
            return Err(refused(
                field,
                format!("is {} bytes, more than {MAX_FLOW_KEY_BYTES}", text.len()),
            ));
        }
        if text.chars().any(char::is_control) {
            return Err(refused(field, "contains a control character"));
        }
        match text.matches('*').count() {
            0 => Ok(LimitPattern::Exact(text.to_string())),
            1 if text.ends_with('*') => {
                Ok(LimitPattern::Prefix(text[..text.len() - 1].to_string()))
            }
            1 => Err(refused(
                field,
                format!("{text:?}: a `*` may only end a pattern (`prefix*`)"),
            )),
            n => Err(refused(
                field,
                format!("{text:?} has {n} `*`; a pattern has at most one, at its end"),
            )),
        }
    }

    /// Whether `key` is one this pattern covers.
    pub fn matches(&self, key: &str) -> bool {
        match self {
            LimitPattern::Exact(exact) => exact == key,
            LimitPattern::Prefix(prefix) => key.starts_with(prefix.as_str()),
        }
    }
}

impl fmt::Display for LimitPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LimitPattern::Exact(exact) => f.write_str(exact),
            LimitPattern::Prefix(prefix) => write!(f, "{prefix}*"),
        }
    }
}

impl TryFrom<String> for LimitPattern {
    type Error = FlowRefused;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        LimitPattern::parse("pattern", &text)
    }
}

impl From<LimitPattern> for String {
    fn from(pattern: LimitPattern) -> String {
        pattern.to_string()
    }
}

/// A rate: `count` starts per `per_ms` milliseconds (`100/s`, `5/m`,
/// `1000/h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rate {
    pub count: u32,
    pub per_ms: u64,
}

impl Rate {
    /// The interval between two tokens, in microseconds (at least 1).
    pub fn emission_interval_us(&self) -> u64 {
        (self.per_ms.saturating_mul(1000) / u64::from(self.count.max(1))).max(1)
    }
}

impl FromStr for Rate {
    type Err = FlowRefused;

    /// `COUNT/s`, `COUNT/m` or `COUNT/h`, COUNT a whole number from 1.
    fn from_str(text: &str) -> Result<Rate, FlowRefused> {
        let field = "rate";
        let Some((count, unit)) = text.trim().split_once('/') else {
            return Err(refused(
                field,
                format!("{text:?} is not COUNT/s, COUNT/m or COUNT/h"),
            ));
        };
        let per_ms = match unit {
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            other => {
                return Err(refused(
                    field,
                    format!("unit {other:?} is not s, m or h (as in 100/s)"),
                ))
            }
        };
        let count: u32 = count.parse().map_err(|_| {
            refused(
                field,
                format!("{count:?} is not a whole number (as in 100/s)"),
            )
        })?;
        if count == 0 {
            return Err(refused(field, "a rate of 0 would never start a job"));
        }
        Ok(Rate { count, per_ms })
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self.per_ms {
            1_000 => "s",
            60_000 => "m",
            3_600_000 => "h",
            _ => return write!(f, "{}/{}ms", self.count, self.per_ms),
        };
        write!(f, "{}/{unit}", self.count)
    }
}

/// A limit as a user sets it: on a pattern, at most `max_running` jobs of
/// each matching key running at once, `rate` starts with bursts of
/// `burst`, and a fairness `weight`. At least one of the three is set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitSpec {
    pub pattern: LimitPattern,
    #[serde(default)]
    pub max_running: Option<u32>,
    #[serde(default)]
    pub rate: Option<Rate>,
    /// Starts allowed at once after a quiet spell; `None`: 1.
    #[serde(default)]
    pub burst: Option<u32>,
    #[serde(default)]
    pub weight: Option<u32>,
}

impl LimitSpec {
    /// Refuses a limit that limits nothing or could never start a job,
    /// naming the field.
    pub fn validate(&self) -> Result<(), FlowRefused> {
        if self.max_running.is_none() && self.rate.is_none() && self.weight.is_none() {
            return Err(refused(
                "limit",
                format!("{} sets none of max_running, rate or weight", self.pattern),
            ));
        }
        if self.max_running == Some(0) {
            return Err(refused(
                "max_running",
                "0 would never start a job (delete the limit to lift it)",
            ));
        }
        if let Some(rate) = self.rate {
            if rate.count == 0 || rate.per_ms == 0 {
                return Err(refused("rate", "a rate of 0 would never start a job"));
            }
        }
        if self.burst == Some(0) {
            return Err(refused("burst", "0 would never start a job"));
        }
        if self.burst.is_some() && self.rate.is_none() {
            return Err(refused("burst", "a burst needs a rate"));
        }
        if self.weight == Some(0) {
            return Err(refused("weight", "0 would never start a job"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_are_exact_or_one_trailing_star() {
        assert_eq!(
            LimitPattern::parse("pattern", "stripe:acct_42"),
            Ok(LimitPattern::Exact("stripe:acct_42".into()))
        );
        let prefix = LimitPattern::parse("pattern", "stripe:*").expect("prefix");
        assert_eq!(prefix, LimitPattern::Prefix("stripe:".into()));
        assert!(prefix.matches("stripe:acct_42"));
        assert!(!prefix.matches("github:x"));
        assert_eq!(prefix.to_string(), "stripe:*");
        let every = LimitPattern::parse("pattern", "*").expect("every key");
        assert!(every.matches("anything"));
        let two = LimitPattern::parse("pattern", "a*b*").expect_err("two stars");
        assert_eq!(two.field, "pattern");
        assert!(two.reason.contains("2 `*`"), "{}", two.reason);
        assert!(LimitPattern::parse("pattern", "*b").is_err());
        assert!(LimitPattern::parse("pattern", "").is_err());
        let long = "k".repeat(MAX_FLOW_KEY_BYTES + 1);
        assert!(LimitPattern::parse("pattern", &long).is_err());
    }

    #[test]
    fn keys_are_bounded_and_printable() {
        assert!(validate_key("concurrency_key", "stripe:acct_42").is_ok());
        let long = "k".repeat(MAX_FLOW_KEY_BYTES + 1);
        let err = validate_key("concurrency_key", &long).expect_err("too long");
        assert_eq!(err.field, "concurrency_key");
        assert!(validate_key("unique_key", "").is_err());
        assert!(validate_key("fairness_key", "a\nb").is_err());
        assert!(validate_key("concurrency_key", &"k".repeat(MAX_FLOW_KEY_BYTES)).is_ok());
    }

    #[test]
    fn rates_are_count_per_second_minute_or_hour() {
        assert_eq!(
            "100/s".parse(),
            Ok(Rate {
                count: 100,
                per_ms: 1_000
            })
        );
        assert_eq!(
            "5/m".parse(),
            Ok(Rate {
                count: 5,
                per_ms: 60_000
            })
        );
        assert_eq!(
            "1000/h".parse::<Rate>().map(|r| r.to_string()),
            Ok("1000/h".into())
        );
        for bad in ["0/s", "100", "100/d", "x/s", "-1/s", "/s"] {
            let err = bad.parse::<Rate>().expect_err(bad);
            assert_eq!(err.field, "rate", "{bad}");
        }
        assert_eq!(
            Rate {
                count: 100,
                per_ms: 1_000
            }
            .emission_interval_us(),
            10_000
        );
        assert_eq!(
            Rate {
                count: 3,
                per_ms: 1_000
            }
            .emission_interval_us(),
            333_333
        );
    }

    #[test]
    fn a_limit_limits_something_and_can_start_a_job() {
        let pattern = LimitPattern::parse("pattern", "stripe:*").expect("pattern");
        let limit = |max_running, rate, burst, weight| LimitSpec {
            pattern: pattern.clone(),
            max_running,
            rate,
            burst,
            weight,
        };
        assert!(limit(Some(5), None, None, None).validate().is_ok());
        let rate = Some(Rate {
            count: 100,
            per_ms: 1_000,
        });
        assert!(limit(None, rate, Some(20), None).validate().is_ok());
        assert!(limit(Some(5), rate, None, Some(3)).validate().is_ok());
        let none = limit(None, None, None, None)
            .validate()
            .expect_err("nothing");
        assert_eq!(none.field, "limit");
        assert_eq!(
            limit(Some(0), None, None, None)
                .validate()
                .map_err(|e| e.field),
            Err("max_running".into())
        );
        assert_eq!(
            limit(Some(1), None, Some(2), None)
                .validate()
                .map_err(|e| e.field),
            Err("burst".into())
        );
        assert_eq!(
            limit(None, None, None, Some(0))
                .validate()
                .map_err(|e| e.field),
            Err("weight".into())
        );
    }

    #[test]
    fn a_pattern_travels_as_its_text() {
        let spec = LimitSpec {
            pattern: LimitPattern::parse("pattern", "tenant:*").expect("pattern"),
            max_running: Some(2),
            rate: None,
            burst: None,
            weight: Some(3),
        };
        let json = serde_json::to_value(&spec).expect("json");
        assert_eq!(json["pattern"], "tenant:*");
        let back: LimitSpec = serde_json::from_value(json).expect("back");
        assert_eq!(back, spec);
        let bad = serde_json::json!({"pattern": "a**", "max_running": 1});
        assert!(serde_json::from_value::<LimitSpec>(bad).is_err());
    }
}
