//! Job counters and latency histograms per task type, under a bounded set
//! of labels: the first `metrics-max-task-types` task types the coordinator
//! meets (submitted, recovered or offered by a worker) are exported under
//! their own name, every later one under [`OTHER`]. Prometheus keeps one
//! series per label value for ever, so a client inventing task types can
//! grow the exposition by at most that many sets of series.

use crate::scheduler::hash_map::HashMap;
use crate::scheduler::metrics::{Histogram, SECONDS_BUCKETS};

/// The label of every task type beyond the limit, and of a task type that
/// is itself named `other` (so the two never make duplicate series).
pub const OTHER: &str = "other";

/// What is counted for the jobs of one label.
#[derive(Debug, Clone, PartialEq)]
pub struct JobCounters {
    pub submitted: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub retried: u64,
    pub cancelled: u64,
    /// From the moment the job became ready to the start of its first
    /// attempt (see `Metrics::record_transition`).
    pub submit_to_start: Histogram,
    /// Assignment to the end of an attempt, however it ended.
    pub run_time: Histogram,
}

impl Default for JobCounters {
    fn default() -> Self {
        JobCounters {
            submitted: 0,
            succeeded: 0,
            failed: 0,
            retried: 0,
            cancelled: 0,
            submit_to_start: Histogram::new(&SECONDS_BUCKETS),
            run_time: Histogram::new(&SECONDS_BUCKETS),
        }
    }
}

/// `JobCounters` per label. Labels are handed out in the order task types
/// are first met and never taken back while the process runs, so a task
/// type's series never changes label between scrapes.
#[derive(Debug, Clone, PartialEq)]
pub struct ByTaskType {
    limit: usize,
    slots: HashMap<String, usize>,
    labelled: Vec<(String, JobCounters)>,
    other: JobCounters,
    /// Whether any task type has been folded into `other` yet: until then
    /// `other` is not exported.
    other_used: bool,
}

impl ByTaskType {
    /// At most `limit` task types get a label of their own.
    pub fn new(limit: usize) -> Self {
        ByTaskType {
            limit,
            slots: HashMap::default(),
            labelled: Vec::new(),
            other: JobCounters::default(),
            other_used: false,
        }
    }

    /// Gives `task_type` its own label if it has none and the limit leaves
    /// room; otherwise (and for `other` itself) it is folded into `other`.
    pub fn register(&mut self, task_type: &str) {
        if task_type == OTHER {
            self.other_used = true;
        } else if !self.slots.contains_key(task_type) {
            if self.labelled.len() < self.limit {
                self.slots
                    .insert(task_type.to_string(), self.labelled.len());
                self.labelled
                    .push((task_type.to_string(), JobCounters::default()));
            } else {
                self.other_used = true;
            }
        }
    }

    /// The counters `task_type` is counted in, registering it first.
    pub fn counters_mut(&mut self, task_type: &str) -> &mut JobCounters {
        self.register(task_type);
        match self.slots.get(task_type) {
            Some(&slot) => &mut self.labelled[slot].1,
            None => &mut self.other,
        }
    }

    /// The label `task_type` is exported under: its own name once
    /// registered within the limit, else `other`.
    pub fn label<'a>(&self, task_type: &'a str) -> &'a str {
        if self.slots.contains_key(task_type) {
            task_type
        } else {
            OTHER
        }
    }

    /// Whether any task type has been counted under `other`.
    pub fn folded(&self) -> bool {
        self.other_used
    }

    /// Every exported label with its counters, in registration order,
    /// `other` last once anything was folded into it.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &JobCounters)> + '_ {
        let other = self.other_used.then_some((OTHER, &self.other));
        self.labelled
            .iter()
            .map(|(label, counters)| (label.as_str(), counters))
            .chain(other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(by: &ByTaskType) -> Vec<&str> {
        by.iter().map(|(label, _)| label).collect()
    }

    #[test]
    fn task_types_beyond_the_limit_fold_into_other() {
        let mut by = ByTaskType::new(2);
        by.counters_mut("echo").submitted += 1;
        by.counters_mut("sleep").submitted += 1;
        assert_eq!(labels(&by), ["echo", "sleep"], "no `other` until needed");
        by.counters_mut("exec").submitted += 1;
        by.counters_mut("mail").submitted += 2;
        by.counters_mut("echo").submitted += 1;
        let counted: Vec<(&str, u64)> = by.iter().map(|(l, c)| (l, c.submitted)).collect();
        assert_eq!(counted, [("echo", 2), ("sleep", 1), ("other", 3)]);
        assert_eq!(by.label("exec"), "other");
        assert_eq!(by.label("sleep"), "sleep");
    }

    #[test]
    fn a_task_type_named_other_shares_the_fold_and_makes_no_second_series() {
        let mut by = ByTaskType::new(5);
        by.counters_mut("other").succeeded += 1;
        by.counters_mut("echo").succeeded += 1;
        assert_eq!(labels(&by), ["echo", "other"]);
        assert_eq!(by.iter().last().map(|(_, c)| c.succeeded), Some(1));
    }

    #[test]
    fn a_limit_of_zero_counts_everything_as_other() {
        let mut by = ByTaskType::new(0);
        by.counters_mut("echo").failed += 1;
        by.counters_mut("sleep").failed += 1;
        let counted: Vec<(&str, u64)> = by.iter().map(|(l, c)| (l, c.failed)).collect();
        assert_eq!(counted, [("other", 2)]);
    }
}
