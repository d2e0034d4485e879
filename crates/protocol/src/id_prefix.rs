//! Job id prefixes: what an operator types instead of a whole id (`0193a1b2`
//! or `0193a1b2-c3d4`), normalised to the canonical lowercase, hyphenated
//! text so it can be compared with `JobId::to_string()` and matched by a
//! database `LIKE 'prefix%'`.

use crate::ids::JobId;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Where the canonical text of a UUID has its hyphens.
const HYPHENS_AT: [usize; 4] = [8, 13, 18, 23];

/// Length of a whole id's text.
pub const ID_TEXT_LEN: usize = 36;

/// Fewest hex digits a prefix must have to name one job (`Resolve`); a
/// search (`List`'s `id_prefix`) takes any length from 1.
pub const MIN_RESOLVE_DIGITS: usize = 4;

/// At most this many candidates are listed when a prefix is ambiguous.
pub const MAX_CANDIDATES: usize = 10;

/// A normalised prefix of a job id's canonical text: lowercase hex with
/// hyphens where a whole id has them; 1 to 36 characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct IdPrefix(String);

/// Why text is not an id prefix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdPrefixError {
    #[error("{0:?} is not a job id or id prefix: use hex digits (0-9, a-f), with or without single '-' between them")]
    NotHex(String),
    #[error("{0:?} is not a job id or id prefix: it is empty")]
    Empty(String),
    #[error("{0:?} is not a job id or id prefix: a job id has 32 hex digits")]
    TooLong(String),
    #[error("{text:?} is too short to name one job: give at least {min} hex digits")]
    TooShort { text: String, min: usize },
}

impl IdPrefix {
    /// Normalises `text`: hyphens dropped and put back where a whole id has
    /// them, letters lowercased. Refuses anything but hex digits and hyphens.
    pub fn parse(text: &str) -> Result<IdPrefix, IdPrefixError> {
        let mut digits = String::with_capacity(32);
        let mut last = '-';
        for c in text.chars() {
            match c {
                // Hyphens only between digits, one at a time.
                '-' if last != '-' => {}
                c if c.is_ascii_hexdigit() => digits.push(c.to_ascii_lowercase()),
                _ => return Err(IdPrefixError::NotHex(text.to_string())),
            }
            last = c;
        }
        if last == '-' && !digits.is_empty() {
            return Err(IdPrefixError::NotHex(text.to_string()));
        }
        if digits.is_empty() {
            return Err(IdPrefixError::Empty(text.to_string()));
        }
        if digits.len() > 32 {
            return Err(IdPrefixError::TooLong(text.to_string()));
        }
        let mut canonical = String::with_capacity(ID_TEXT_LEN);
        for c in digits.chars() {
            if HYPHENS_AT.contains(&canonical.len()) {
                canonical.push('-');
            }
            canonical.push(c);
        }
        Ok(IdPrefix(canonical))
    }

    /// `parse`, and at least `MIN_RESOLVE_DIGITS` digits, for naming one job.
    pub fn parse_to_resolve(text: &str) -> Result<IdPrefix, IdPrefixError> {
        let prefix = IdPrefix::parse(text)?;
        if prefix.digits() < MIN_RESOLVE_DIGITS {
            return Err(IdPrefixError::TooShort {
                text: text.to_string(),
                min: MIN_RESOLVE_DIGITS,
            });
        }
        Ok(prefix)
    }

    /// The whole id, when the prefix has all 32 digits.
    pub fn whole(&self) -> Option<JobId> {
        match self.0.len() == ID_TEXT_LEN {
            true => self.0.parse().ok(),
            false => None,
        }
    }

    /// The lowest and the highest id starting with the prefix: the ids
    /// with it are exactly those between the two (inclusive), in the
    /// canonical text's order as in the UUIDs' byte order.
    pub fn bounds(&self) -> (JobId, JobId) {
        let digits: String = self.0.chars().filter(|c| *c != '-').collect();
        let bound = |fill: char| {
            let mut all = digits.clone();
            while all.len() < 32 {
                all.push(fill);
            }
            uuid::Uuid::parse_str(&all).map_or(JobId(uuid::Uuid::nil()), JobId)
        };
        (bound('0'), bound('f'))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// How many hex digits it has.
    pub fn digits(&self) -> usize {
        self.0.chars().filter(|c| *c != '-').count()
    }

    /// True when `id`'s canonical text starts with this prefix.
    pub fn matches(&self, id: &JobId) -> bool {
        let mut buffer = uuid::Uuid::encode_buffer();
        id.0.hyphenated()
            .encode_lower(&mut buffer)
            .starts_with(&self.0)
    }
}

impl fmt::Display for IdPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for IdPrefix {
    type Error = IdPrefixError;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        IdPrefix::parse(&text)
    }
}

impl From<IdPrefix> for String {
    fn from(prefix: IdPrefix) -> String {
        prefix.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_normalised_to_the_canonical_text() {
        let id = JobId::mint();
        let text = id.to_string();
        let undashed: String = text.chars().filter(|c| *c != '-').collect();
        for given in [&text[..10], &undashed[..12], &text.to_uppercase()[..20]] {
            let prefix = IdPrefix::parse(given).expect("a prefix");
            assert!(text.starts_with(prefix.as_str()), "{given} -> {prefix}");
            assert!(prefix.matches(&id));
        }
        assert_eq!(IdPrefix::parse(&undashed).unwrap().whole(), Some(id));
        assert_eq!(IdPrefix::parse(&text[..35]).unwrap().whole(), None);
    }

    #[test]
    fn bounds_enclose_exactly_the_ids_with_the_prefix() {
        let prefix = IdPrefix::parse("0193-ab").expect("prefix");
        let (low, high) = prefix.bounds();
        assert_eq!(low.to_string(), "0193ab00-0000-0000-0000-000000000000");
        assert_eq!(high.to_string(), "0193abff-ffff-ffff-ffff-ffffffffffff");
        let inside: JobId = "0193ab12-0000-7000-8000-000000000000".parse().unwrap();
        let outside: JobId = "0193ac00-0000-7000-8000-000000000000".parse().unwrap();
        assert!(low <= inside && inside <= high && prefix.matches(&inside));
        assert!(outside > high && !prefix.matches(&outside));
    }

    #[test]
    fn bad_prefixes_are_refused_naming_the_text() {
        assert!(matches!(
            IdPrefix::parse("0193zz"),
            Err(IdPrefixError::NotHex(_))
        ));
        assert!(matches!(IdPrefix::parse(""), Err(IdPrefixError::Empty(_))));
        assert!(matches!(
            IdPrefix::parse("--"),
            Err(IdPrefixError::NotHex(_))
        ));
        assert!(matches!(
            IdPrefix::parse(&"a".repeat(33)),
            Err(IdPrefixError::TooLong(_))
        ));
        let short = IdPrefix::parse_to_resolve("019").unwrap_err();
        assert!(short.to_string().contains("at least 4"), "{short}");
        assert!(IdPrefix::parse("0193zz")
            .unwrap_err()
            .to_string()
            .contains("\"0193zz\""));
        let fixed: JobId = "01930000-0000-7000-8000-000000000000".parse().unwrap();
        assert!(!IdPrefix::parse("ffff").unwrap().matches(&fixed));
        assert!(IdPrefix::parse("0193-0000-0").unwrap().matches(&fixed));
    }
}
