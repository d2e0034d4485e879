//! Where a page of jobs stopped: the cursor both the TCP `List` and the
//! HTTP API's `GET /api/jobs` hand back and take to resume.

use crate::ids::JobId;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// The listing order key of the last job of a page: (sequence, submission
/// time, id). The next page holds the jobs listed after it (older ones).
/// Opaque to clients; round-trips through `Display`/`FromStr`, and travels
/// on the wire as that same text, so a cursor from the HTTP API resumes a
/// TCP `List` and the other way round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageCursor(pub (u64, i64, JobId));

impl fmt::Display for PageCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (sequence, submitted_at, id) = self.0;
        write!(f, "{sequence}.{submitted_at}.{id}")
    }
}

impl FromStr for PageCursor {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("cursor {s:?} is not one returned by this API");
        let mut parts = s.splitn(3, '.');
        let sequence = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
        let submitted_at = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
        let id: JobId = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
        Ok(PageCursor((sequence, submitted_at, id)))
    }
}

impl Serialize for PageCursor {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PageCursor {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_round_trips_as_text_and_on_the_wire() {
        let cursor = PageCursor((7, -3, JobId::mint()));
        assert_eq!(cursor.to_string().parse::<PageCursor>(), Ok(cursor));
        let bytes = rmp_serde::to_vec_named(&cursor).expect("encodes");
        let back: PageCursor = rmp_serde::from_slice(&bytes).expect("decodes");
        assert_eq!(back, cursor);
        assert!("garbage".parse::<PageCursor>().is_err());
        let bad = rmp_serde::to_vec_named("1.2.not-an-id").expect("encodes");
        assert!(rmp_serde::from_slice::<PageCursor>(&bad).is_err());
    }
}
