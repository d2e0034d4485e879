//! Counters, histograms and the one-minute throughput window, updated by
//! `CoordinatorState` at the same places the state changes (submission,
//! assignment, every transition, stale results) and by the `Coordinator`
//! actor for persistence batches. Fixed-size storage: recording allocates
//! only when a task type is met for the first time (`ByTaskType`), so it
//! costs nothing noticeable on the scheduling hot path. Durations are
//! measured on the monotonic clock in microseconds and exported as seconds.

use crate::scheduler::job::Job;
use crate::scheduler::task_type_metrics::ByTaskType;
use taskyard_client::clock::Now;
use taskyard_protocol::JobState;

/// Buckets (upper bounds, seconds) for waits and run times: 100 µs to 1 h.
pub const SECONDS_BUCKETS: [f64; 20] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0, 60.0, 600.0, 3600.0,
];
/// Buckets for commit latency (seconds): 100 µs to 5 s.
pub const COMMIT_BUCKETS: [f64; 12] = [
    0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0,
];
/// Buckets for batch size (rows per transaction).
pub const BATCH_BUCKETS: [f64; 10] = [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0];

/// A histogram over fixed bucket bounds (the `+Inf` bucket is `count`),
/// exported cumulatively by `http::const_metrics::ConstHistogram`.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    pub bounds: &'static [f64],
    /// Observations ≤ each bound (not cumulative: summed when exported).
    pub buckets: Vec<u64>,
    pub sum: f64,
    pub count: u64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            buckets: vec![0; bounds.len()],
            sum: 0.0,
            count: 0,
        }
    }

    pub fn observe(&mut self, value: f64) {
        if let Some(i) = self.bounds.iter().position(|b| value <= *b) {
            self.buckets[i] += 1;
        }
        self.sum += value;
        self.count += 1;
    }
}

/// Jobs that reached a terminal state in each of the last 60 seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Throughput {
    slots: [u32; 60],
    /// The unix second the newest slot belongs to.
    newest: i64,
}

impl Default for Throughput {
    fn default() -> Self {
        Throughput {
            slots: [0; 60],
            newest: i64::MIN,
        }
    }
}

impl Throughput {
    /// Counts one finished job at `now` (unix milliseconds).
    pub fn record(&mut self, now: i64) {
        let second = now.div_euclid(1000);
        if second > self.newest {
            let gap = second.saturating_sub(self.newest).min(60);
            for s in 0..gap {
                self.slots[slot(second - s)] = 0;
            }
            self.newest = second;
        }
        if second > self.newest - 60 {
            self.slots[slot(second)] += 1;
        }
    }

    /// Finished jobs per second over the 60 seconds ending at `now`, oldest first.
    pub fn per_second(&self, now: i64) -> Vec<u32> {
        let second = now.div_euclid(1000);
        (second - 59..=second)
            .map(|s| {
                let live = s <= self.newest && s > self.newest - 60;
                if live {
                    self.slots[slot(s)]
                } else {
                    0
                }
            })
            .collect()
    }
}

fn slot(second: i64) -> usize {
    second.rem_euclid(60) as usize
}

/// Everything `/metrics` exports that is not derived from current state.
#[derive(Debug, Clone, PartialEq)]
pub struct Metrics {
    /// Job counters and latency histograms per task type label.
    pub by_task_type: ByTaskType,
    /// Submissions refused; not by task type: a refused one may name any.
    pub rejected: u64,
    pub stale_results: u64,
    pub batch_rows: Histogram,
    pub commit_latency: Histogram,
    /// Commits that failed (each retry counts).
    pub commit_failures: u64,
    /// True from a failed commit until one succeeds: an outage.
    pub commits_failing: bool,
    pub throughput: Throughput,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            by_task_type: ByTaskType::new(crate::config::defaults::METRICS_MAX_TASK_TYPES),
            rejected: 0,
            stale_results: 0,
            batch_rows: Histogram::new(&BATCH_BUCKETS),
            commit_latency: Histogram::new(&COMMIT_BUCKETS),
            commit_failures: 0,
            commits_failing: false,
            throughput: Throughput::default(),
        }
    }
}

impl Metrics {
    /// Metrics whose job counters label at most `max_task_types` task
    /// types by name (`metrics-max-task-types`).
    pub fn with_task_type_limit(max_task_types: usize) -> Self {
        Metrics {
            by_task_type: ByTaskType::new(max_task_types),
            ..Metrics::default()
        }
    }

    /// Counts a job admitted.
    pub fn record_submission(&mut self, task_type: &str) {
        self.by_task_type.counters_mut(task_type).submitted += 1;
    }

    /// Counts a transition `CoordinatorState::transition` just applied to
    /// `job` (already in its new state) from `from`. `stage_started_us`
    /// is the monotonic microsecond at which the job's previous stage
    /// began: for a QUEUED job, when it became ready (submitted, released
    /// from its delay, requeued or back from a retry wait), for a RUNNING
    /// one, when its attempt started. Without it (not expected) the
    /// stored wall times are used, to the millisecond.
    pub fn record_transition(
        &mut self,
        job: &Job,
        from: JobState,
        stage_started_us: Option<i64>,
        now: Now,
    ) {
        let elapsed = |fallback_wall: i64| {
            let since = stage_started_us.unwrap_or_else(|| now.mono_us_at(fallback_wall));
            micros_to_seconds(now.mono_us.saturating_sub(since))
        };
        let counters = self.by_task_type.counters_mut(&job.task_type);
        if from == JobState::Running {
            let assigned = job.assigned_at.unwrap_or(now.wall_ms);
            counters.run_time.observe(elapsed(assigned));
        }
        match job.state {
            JobState::Succeeded => counters.succeeded += 1,
            JobState::Failed => counters.failed += 1,
            JobState::Cancelled => counters.cancelled += 1,
            JobState::RetryWait => counters.retried += 1,
            JobState::Running if job.attempts == 1 => {
                counters.submit_to_start.observe(elapsed(job.ready_at()))
            }
            _ => {}
        }
        if job.state.is_terminal() {
            self.throughput.record(now.wall_ms);
        }
    }
}

/// Microseconds to seconds for histograms; a negative span counts as 0.
pub fn micros_to_seconds(us: i64) -> f64 {
    us.max(0) as f64 / 1_000_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_observation_counts_in_the_first_bucket_that_holds_it() {
        let mut h = Histogram::new(&BATCH_BUCKETS);
        h.observe(1.0);
        h.observe(3.0);
        h.observe(5000.0);
        assert_eq!(&h.buckets[..3], [1, 0, 1], "bounds 1, 2, 5");
        assert_eq!(h.buckets.iter().sum::<u64>(), 2, "5000 only in +Inf");
        assert_eq!((h.count, h.sum), (3, 5004.0));
    }

    #[test]
    fn throughput_forgets_seconds_older_than_a_minute() {
        let mut t = Throughput::default();
        t.record(1_000);
        t.record(1_500);
        t.record(3_000);
        let window = t.per_second(3_000);
        assert_eq!(window.len(), 60);
        assert_eq!(window[57], 2, "second 1");
        assert_eq!(window[59], 1, "second 3");
        assert_eq!(t.per_second(70_000).iter().sum::<u32>(), 0);
        t.record(70_000);
        assert_eq!(t.per_second(70_000), {
            let mut v = vec![0; 59];
            v.push(1);
            v
        });
    }
}
