//! The worker's defence against a deposed coordinator: it remembers the
//! newest leader epoch it has seen (for as long as the process lives,
//! across reconnects) and ignores a `TaskAssign` or `TaskCancel` from an
//! older epoch. An observer hook sees every frame the worker received and
//! whether it acted on it, so a test can check that nothing a deposed
//! leader sent was acted on.

use std::sync::Arc;
use taskyard_protocol::CoordinatorToWorker;

/// The newest epoch seen so far. Pure: no clock, no I/O.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct EpochFilter {
    newest: u64,
}

impl EpochFilter {
    /// The newest epoch seen.
    pub fn newest(&self) -> u64 {
        self.newest
    }

    /// Records `epoch` and says whether a frame carrying it may be acted
    /// on: an epoch at least as new as every one seen before.
    pub fn admit(&mut self, epoch: u64) -> bool {
        if epoch < self.newest {
            return false;
        }
        self.newest = epoch;
        true
    }

    /// `admit` for the epoch `frame` carries; frames without one
    /// (`Hello`, `Error`, `NotLeader`) are always admitted.
    pub fn admit_frame(&mut self, frame: &CoordinatorToWorker) -> bool {
        match frame_epoch(frame) {
            Some(epoch) => self.admit(epoch),
            None => true,
        }
    }
}

/// The epoch a frame carries, if it is one that carries one.
pub fn frame_epoch(frame: &CoordinatorToWorker) -> Option<u64> {
    match frame {
        CoordinatorToWorker::Registered { epoch, .. }
        | CoordinatorToWorker::TaskAssign { epoch, .. }
        | CoordinatorToWorker::TaskCancel { epoch, .. } => Some(*epoch),
        _ => None,
    }
}

/// One frame as a worker received it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedFrame {
    /// The coordinator address it came from.
    pub from: String,
    pub frame: CoordinatorToWorker,
    /// False when the worker ignored it for its old epoch.
    pub acted_on: bool,
    /// The newest epoch the worker had seen once this frame was counted.
    pub newest_epoch: u64,
}

/// Called with every frame a worker receives after `Hello`, on the
/// connection's thread: keep it short (record and return).
pub type FrameObserver = Arc<dyn Fn(&ReceivedFrame) + Send + Sync>;

#[cfg(test)]
mod tests {
    use super::*;
    use taskyard_protocol::{JobId, LeaseId, WorkerId};

    fn assign(epoch: u64) -> CoordinatorToWorker {
        CoordinatorToWorker::TaskAssign {
            job_id: JobId::mint(),
            lease: LeaseId::new_random(),
            task_type: "echo".into(),
            payload: Vec::new(),
            timeout_ms: 1000,
            epoch,
            attempt: 1,
        }
    }

    fn cancel(epoch: u64) -> CoordinatorToWorker {
        CoordinatorToWorker::TaskCancel {
            job_id: JobId::mint(),
            lease: LeaseId::new_random(),
            epoch,
        }
    }

    #[test]
    fn frames_of_an_older_epoch_are_refused_once_a_newer_one_was_seen() {
        let mut filter = EpochFilter::default();
        assert!(filter.admit_frame(&assign(3)));
        assert!(filter.admit_frame(&cancel(3)), "the same epoch goes on");
        assert!(!filter.admit_frame(&assign(2)), "an older assignment");
        assert!(!filter.admit_frame(&cancel(1)), "an older cancellation");
        assert_eq!(filter.newest(), 3, "an old frame does not lower it");
        assert!(filter.admit_frame(&assign(4)));
        assert!(!filter.admit_frame(&assign(3)));
    }

    #[test]
    fn registered_raises_the_epoch_and_frames_without_one_pass() {
        let mut filter = EpochFilter::default();
        let registered = CoordinatorToWorker::Registered {
            worker_id: WorkerId("w".into()),
            epoch: 7,
        };
        assert!(filter.admit_frame(&registered));
        assert!(!filter.admit_frame(&assign(6)));
        let error = CoordinatorToWorker::Error {
            message: "bye".into(),
        };
        assert!(filter.admit_frame(&error));
        assert_eq!(filter.newest(), 7);
    }

    #[test]
    fn epoch_zero_everywhere_as_on_sqlite_is_always_admitted() {
        let mut filter = EpochFilter::default();
        assert!((0..5).all(|_| filter.admit_frame(&assign(0))));
    }
}
