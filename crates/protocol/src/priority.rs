//! Base scheduling priority.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use utoipa::ToSchema;

/// Base scheduling priority chosen at submission. Read from its lowercase
/// name, so an unknown name is refused naming `priority` over TCP and HTTP
/// alike.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    ToSchema,
)]
#[serde(rename_all = "lowercase", try_from = "String")]
pub enum Priority {
    Low = 0,
    #[default]
    Normal = 1,
    High = 2,
}

impl Priority {
    pub const ALL: [Priority; 3] = [Priority::Low, Priority::Normal, Priority::High];

    /// The numeric level: LOW 0, NORMAL 1, HIGH 2.
    pub fn level(self) -> u8 {
        self as u8
    }

    pub fn from_level(level: i64) -> Option<Priority> {
        Priority::ALL
            .into_iter()
            .find(|p| i64::from(p.level()) == level)
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Priority::Low => "low",
            Priority::Normal => "normal",
            Priority::High => "high",
        })
    }
}

impl FromStr for Priority {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "low" => Ok(Priority::Low),
            "normal" => Ok(Priority::Normal),
            "high" => Ok(Priority::High),
            _ => Err(unknown_level(s)),
        }
    }
}

/// The wire (and JSON) form: exactly one of the three lowercase names, as
/// the OpenAPI document lists them; only the CLI's `FromStr` ignores case.
impl TryFrom<String> for Priority {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Priority::ALL
            .into_iter()
            .find(|p| p.to_string() == s)
            .ok_or_else(|| unknown_level(&s))
    }
}

fn unknown_level(s: &str) -> String {
    format!("priority: unknown level {s:?} (expected high, normal or low)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_reads_back_from_its_wire_name_and_an_unknown_name_is_named() {
        for p in Priority::ALL {
            let bytes = rmp_serde::to_vec_named(&p).expect("encode");
            assert_eq!(rmp_serde::from_slice::<Priority>(&bytes).ok(), Some(p));
            assert_eq!(Priority::from_level(i64::from(p.level())), Some(p));
        }
        let err = serde_json::from_str::<Priority>("\"urgent\"").expect_err("unknown");
        assert!(
            err.to_string().starts_with("priority: unknown level"),
            "{err}"
        );
        assert_eq!(Priority::from_level(3), None);
    }
}
