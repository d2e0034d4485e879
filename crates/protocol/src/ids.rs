//! Identifiers that cross the wire: jobs, attempt leases and workers.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use utoipa::ToSchema;
use uuid::Uuid;

/// A job's identity: a UUID v7 minted by the coordinator at admission. Ids
/// minted later compare greater (millisecond time, then a counter), so the
/// store's primary-key index grows at its end and the rows a drain updates
/// together sit on the same few pages; 74 bits stay random.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema,
)]
#[serde(transparent)]
#[schema(description = "A job's id: a UUID.")]
pub struct JobId(pub Uuid);

/// One assignment of a job to a worker. A fresh lease is minted per attempt;
/// a result is applied only while the job is RUNNING under that same lease.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema,
)]
#[serde(transparent)]
#[schema(description = "An attempt's lease: a UUID.")]
pub struct LeaseId(pub Uuid);

/// A worker's self-chosen, stable name; it survives reconnects so the
/// coordinator recognises a worker coming back.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(transparent)]
#[schema(description = "A worker's self-chosen name.")]
pub struct WorkerId(pub String);

impl JobId {
    /// A fresh id, greater than every id minted before it in this process.
    pub fn mint() -> Self {
        JobId(Uuid::now_v7())
    }
}

impl LeaseId {
    pub fn new_random() -> Self {
        LeaseId(Uuid::new_v4())
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Ids are logged as text, formatted only if the line is written.
macro_rules! loggable_as_text {
    ($($id:ty),*) => {$(
        impl slog::Value for $id {
            fn serialize(
                &self,
                _: &slog::Record<'_>,
                key: slog::Key,
                serializer: &mut dyn slog::Serializer,
            ) -> slog::Result {
                serializer.emit_arguments(key, &format_args!("{}", self.0))
            }
        }
    )*};
}

loggable_as_text!(JobId, LeaseId);

impl fmt::Display for WorkerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for JobId {
    type Err = uuid::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Uuid::parse_str(s.trim()).map(JobId)
    }
}

impl FromStr for LeaseId {
    type Err = uuid::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Uuid::parse_str(s.trim()).map(LeaseId)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids_minted_later_sort_after_earlier_ones_as_text_too() {
        let ids: Vec<JobId> = (0..10_000).map(|_| JobId::mint()).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        let text: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
        assert!(text.windows(2).all(|w| w[0] < w[1]));
    }
}
