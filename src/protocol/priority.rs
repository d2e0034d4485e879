//! Base scheduling priority.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Base scheduling priority chosen at submission.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
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
            _ => Err(format!(
                "unknown priority {s:?} (expected high, normal or low)"
            )),
        }
    }
}
