//! What a worker connection may make the coordinator hold: the bounds on
//! the capacity and task types it registers with, checked before the
//! coordinator hears of it, and on the error strings it reports, cut
//! before they are stored.

use crate::payloads::{validate_task_type, PayloadError};
use crate::WorkerId;
use thiserror::Error;

/// Default for `max-task-types-per-worker`.
pub const DEFAULT_MAX_TASK_TYPES_PER_WORKER: usize = 256;
/// Default for `max-worker-capacity`.
pub const DEFAULT_MAX_WORKER_CAPACITY: u32 = 10_000;
/// How the `Error` frame refusing a `Register` begins (the reason
/// follows); a worker that gets it stops instead of retrying.
pub const REGISTRATION_REFUSED: &str = "registration refused";

/// Default for `max-error-bytes`.
pub const DEFAULT_MAX_ERROR_BYTES: usize = 8 * 1024;

/// The coordinator's bounds on one worker connection, from its config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerLimits {
    /// `max-task-types-per-worker`: distinct task types one `Register` may list.
    pub max_task_types: usize,
    /// `max-worker-capacity`: the largest capacity a worker may claim.
    pub max_capacity: u32,
    /// `max-error-bytes`: the longest failure text kept from a worker.
    pub max_error_bytes: usize,
    /// `max-unwritten-worker-bytes`: assignment bytes a worker may be owed
    /// before it must show it is reading.
    pub max_unwritten_bytes: usize,
    /// How long a worker over that budget may take no bytes before it is
    /// dropped (`heartbeat-timeout-millis`).
    pub stall_patience: std::time::Duration,
}

impl Default for WorkerLimits {
    fn default() -> Self {
        WorkerLimits {
            max_task_types: DEFAULT_MAX_TASK_TYPES_PER_WORKER,
            max_capacity: DEFAULT_MAX_WORKER_CAPACITY,
            max_error_bytes: DEFAULT_MAX_ERROR_BYTES,
            max_unwritten_bytes: 64 * 1024 * 1024,
            stall_patience: std::time::Duration::from_secs(6),
        }
    }
}

impl WorkerLimits {
    /// A worker's failure text as the coordinator keeps it: unchanged when
    /// it fits `max_error_bytes`, else its first `max_error_bytes` bytes (cut
    /// back to a character boundary) and a marker saying how many bytes
    /// were cut.
    pub fn cap_error(&self, mut error: String) -> String {
        let total = error.len();
        if total <= self.max_error_bytes {
            return error;
        }
        cut_at_char_boundary(&mut error, self.max_error_bytes);
        let cut = total - error.len();
        error.push_str(&format!(
            "… [{cut} more bytes cut: max-error-bytes is {}]",
            self.max_error_bytes
        ));
        error
    }
}

/// Shortens `text` to at most `max` bytes, ending at a character boundary.
pub fn cut_at_char_boundary(text: &mut String, max: usize) {
    if text.len() > max {
        let end = (0..=max)
            .rev()
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(0);
        text.truncate(end);
    }
}

/// Why a `Register` was refused. The text names the field and, for a
/// bound, the config key that sets it; the session sends it in the error
/// frame that closes the connection.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RegisterRefused {
    #[error("worker_id: {}", .0.reason)]
    WorkerId(PayloadError),
    #[error("capacity: {capacity} is outside 1..={max} (max-worker-capacity)")]
    Capacity { capacity: u32, max: u32 },
    #[error("task_types: {count} listed, more than max-task-types-per-worker ({max})")]
    TooManyTaskTypes { count: usize, max: usize },
    #[error("{0}")]
    TaskType(PayloadError),
    #[error("running: {count} attempts listed, more than the capacity ({capacity})")]
    TooManyClaims { count: usize, capacity: u32 },
}

/// Accepts the attempts a registering worker says it still runs only if
/// they fit the capacity it registers with: each takes a slot.
pub fn validate_claims(claims: usize, capacity: u32) -> Result<(), RegisterRefused> {
    if claims as u64 > u64::from(capacity) {
        return Err(RegisterRefused::TooManyClaims {
            count: claims,
            capacity,
        });
    }
    Ok(())
}

/// Accepts a registration only within `limits`: a valid worker id, a
/// capacity from 1 to `max_capacity`, at most `max_task_types` entries in
/// `task_types` (counted before deduplication, so the check costs nothing
/// per entry beyond the limit), each a valid task type name.
pub fn validate_register(
    worker_id: &WorkerId,
    capacity: u32,
    task_types: &[String],
    limits: &WorkerLimits,
) -> Result<(), RegisterRefused> {
    validate_task_type(&worker_id.0).map_err(RegisterRefused::WorkerId)?;
    if capacity == 0 || capacity > limits.max_capacity {
        return Err(RegisterRefused::Capacity {
            capacity,
            max: limits.max_capacity,
        });
    }
    if task_types.len() > limits.max_task_types {
        return Err(RegisterRefused::TooManyTaskTypes {
            count: task_types.len(),
            max: limits.max_task_types,
        });
    }
    task_types
        .iter()
        .try_for_each(|t| validate_task_type(t))
        .map_err(RegisterRefused::TaskType)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(capacity: u32, task_types: &[String]) -> Result<(), String> {
        let worker = WorkerId("w1".into());
        validate_register(&worker, capacity, task_types, &WorkerLimits::default())
            .map_err(|e| e.to_string())
    }

    fn types(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("t{i}")).collect()
    }

    #[test]
    fn an_error_within_max_error_bytes_is_kept_whole() {
        let error = "x".repeat(DEFAULT_MAX_ERROR_BYTES);
        assert_eq!(WorkerLimits::default().cap_error(error.clone()), error);
    }

    #[test]
    fn a_longer_error_is_cut_at_a_char_boundary_with_a_marker_saying_how_much() {
        let limits = WorkerLimits {
            max_error_bytes: 5,
            ..WorkerLimits::default()
        };
        // "aé" is 3 bytes; a cut at 5 would split the third 'é'.
        let capped = limits.cap_error("aéééé".into());
        assert_eq!(capped, "aéé… [4 more bytes cut: max-error-bytes is 5]");
        let huge = WorkerLimits::default().cap_error("e".repeat(70_000));
        assert!(huge.len() < DEFAULT_MAX_ERROR_BYTES + 80);
        assert!(
            huge.ends_with("[61808 more bytes cut: max-error-bytes is 8192]"),
            "{}",
            &huge[8000..]
        );
    }

    #[test]
    fn capacity_must_be_from_one_to_max_worker_capacity() {
        assert_eq!(check(1, &types(1)), Ok(()));
        assert_eq!(check(DEFAULT_MAX_WORKER_CAPACITY, &types(1)), Ok(()));
        for bad in [0, DEFAULT_MAX_WORKER_CAPACITY + 1, u32::MAX] {
            let err = check(bad, &types(1)).expect_err("refused");
            assert!(
                err.starts_with("capacity: ") && err.contains("max-worker-capacity"),
                "{err}"
            );
        }
    }

    #[test]
    fn task_types_are_bounded_by_max_task_types_per_worker() {
        assert_eq!(check(1, &types(DEFAULT_MAX_TASK_TYPES_PER_WORKER)), Ok(()));
        let err = check(1, &types(100_000)).expect_err("refused");
        assert_eq!(
            err,
            "task_types: 100000 listed, more than max-task-types-per-worker (256)"
        );
    }

    #[test]
    fn a_worker_may_claim_at_most_its_capacity() {
        assert_eq!(validate_claims(0, 1), Ok(()));
        assert_eq!(validate_claims(4, 4), Ok(()));
        let err = validate_claims(5, 4).expect_err("refused").to_string();
        assert_eq!(
            err,
            "running: 5 attempts listed, more than the capacity (4)"
        );
    }

    #[test]
    fn names_are_checked_like_submitted_task_types() {
        let long = vec!["x".repeat(crate::payloads::MAX_TASK_TYPE_LEN + 1)];
        let err = check(1, &long).expect_err("refused");
        assert!(err.starts_with("task_type: must be 1 to 64"), "{err}");
        let err = validate_register(&WorkerId(String::new()), 1, &[], &WorkerLimits::default())
            .expect_err("refused")
            .to_string();
        assert!(err.starts_with("worker_id: "), "{err}");
    }
}
