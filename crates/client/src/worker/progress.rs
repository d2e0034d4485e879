//! Progress reports from running tasks, forwarded to the coordinator as
//! `TaskProgress` frames at most once per [`PROGRESS_INTERVAL`] per task.
//! Reports in between are coalesced, never lost: when the interval has
//! passed, the latest one is sent.

use std::sync::Arc;
use std::time::Duration;
use taskyard_protocol::{JobId, LeaseId, WorkerMessage};
use tokio::sync::{mpsc, watch};

/// Shortest spacing between two progress frames of one attempt.
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(250);
/// Longest progress message sent; longer ones are cut at a character boundary.
pub const MAX_PROGRESS_MESSAGE_BYTES: usize = 1024;

/// One report: percent (0–100) and what the task is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub percent: u8,
    pub message: String,
}

/// Where a task reports progress. Cheap to clone; reporting never blocks,
/// and reports made after the attempt ended go nowhere.
#[derive(Clone, Default)]
pub struct ProgressReporter {
    latest: Option<Arc<watch::Sender<Option<Report>>>>,
}

impl ProgressReporter {
    /// Records the latest progress; `percent` above 100 counts as 100.
    pub fn report(&self, percent: u8, message: impl Into<String>) {
        let Some(latest) = &self.latest else { return };
        let mut message = message.into();
        if message.len() > MAX_PROGRESS_MESSAGE_BYTES {
            let mut end = MAX_PROGRESS_MESSAGE_BYTES;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
        }
        latest.send_replace(Some(Report {
            percent: percent.min(100),
            message,
        }));
    }
}

/// A reporter for one attempt and the receiving end for [`forward`].
pub fn channel() -> (ProgressReporter, watch::Receiver<Option<Report>>) {
    let (tx, rx) = watch::channel(None);
    let reporter = ProgressReporter {
        latest: Some(Arc::new(tx)),
    };
    (reporter, rx)
}

/// Sends each new report as a `TaskProgress` frame: the first at once, then
/// at most one per [`PROGRESS_INTERVAL`], always the latest. Returns when
/// every reporter is gone or the writer is; the pool also aborts it when the
/// attempt ends, so no progress follows a result.
pub async fn forward(
    mut latest: watch::Receiver<Option<Report>>,
    job_id: JobId,
    lease: LeaseId,
    frames: mpsc::Sender<WorkerMessage>,
) {
    while latest.changed().await.is_ok() {
        let report = latest.borrow_and_update().clone();
        if let Some(Report { percent, message }) = report {
            let frame = WorkerMessage::TaskProgress {
                job_id,
                lease,
                percent,
                message,
            };
            if frames.send(frame).await.is_err() {
                return;
            }
        }
        tokio::time::sleep(PROGRESS_INTERVAL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::Instant;

    fn percent_of(frame: Option<WorkerMessage>) -> u8 {
        match frame {
            Some(WorkerMessage::TaskProgress { percent, .. }) => percent,
            other => panic!("expected progress, got {other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn at_most_one_frame_per_interval_and_the_latest_is_kept() {
        let (reporter, rx) = channel();
        let (tx, mut frames) = mpsc::channel(16);
        let start = Instant::now();
        tokio::spawn(forward(rx, JobId::mint(), LeaseId::new_random(), tx));
        reporter.report(10, "a");
        assert_eq!(percent_of(frames.recv().await), 10);
        assert_eq!(start.elapsed(), Duration::ZERO);
        reporter.report(20, "b");
        reporter.report(30, "c");
        assert_eq!(percent_of(frames.recv().await), 30, "20 coalesced into 30");
        assert_eq!(start.elapsed(), PROGRESS_INTERVAL);
        tokio::time::sleep(PROGRESS_INTERVAL * 3).await;
        reporter.report(250, "d");
        assert_eq!(percent_of(frames.recv().await), 100, "clamped");
        assert_eq!(
            start.elapsed(),
            PROGRESS_INTERVAL * 4,
            "sent at once after a quiet spell"
        );
        drop(reporter);
        assert_eq!(
            frames.recv().await,
            None,
            "forwarding ends with the reporter"
        );
    }

    #[test]
    fn long_messages_are_cut_at_a_character_boundary() {
        let (reporter, rx) = channel();
        reporter.report(1, "é".repeat(MAX_PROGRESS_MESSAGE_BYTES));
        let report = rx.borrow().clone().expect("report");
        assert!(report.message.len() <= MAX_PROGRESS_MESSAGE_BYTES);
        assert!(report.message.chars().all(|c| c == 'é'));
        ProgressReporter::default().report(5, "nowhere");
    }
}
