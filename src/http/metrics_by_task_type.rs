//! The `/metrics` families labelled `task_type`: job counters, latency
//! histograms and queue gauges. Labels come from `ByTaskType`: every label
//! handed out so far is exported, zeros included, so a task type's series
//! exist from the moment it is first met (a worker offering it, a
//! submission) and `rate()` sees its first job; task types beyond
//! `metrics-max-task-types` are summed under `task_type="other"`.

use crate::http::exposition::{family, histogram_series, labels, single};
use crate::protocol::Priority;
use crate::scheduler::metrics::{Histogram, Metrics};
use crate::scheduler::task_type_metrics::JobCounters;
use crate::scheduler::StatsSnapshot;
use std::collections::HashMap;
use std::fmt::Write;

type Counter = fn(&JobCounters) -> u64;
type HistogramOf = fn(&JobCounters) -> &Histogram;

const COUNTERS: [(&str, &str, Counter); 5] = [
    ("submitted", "Jobs admitted.", |c| c.submitted),
    ("succeeded", "Jobs that ended SUCCEEDED.", |c| c.succeeded),
    ("failed", "Jobs that ended FAILED.", |c| c.failed),
    (
        "retried",
        "Attempts that failed and were scheduled for retry.",
        |c| c.retried,
    ),
    ("cancelled", "Jobs cancelled by a client.", |c| c.cancelled),
];

/// `taskyard_jobs_{submitted,succeeded,failed,retried,cancelled}_total`.
pub fn job_counters(out: &mut String, m: &Metrics) {
    for (name, help, read) in COUNTERS {
        let full = format!("taskyard_jobs_{name}_total");
        family(out, &full, "counter", help);
        for (task_type, counters) in m.by_task_type.iter() {
            let tags = labels(&[("task_type", task_type)]);
            let _ = writeln!(out, "{full}{tags} {}", read(counters));
        }
    }
    single(
        out,
        "taskyard_metrics_task_types_folded",
        "gauge",
        "1 once a task type is counted under task_type=\"other\" (beyond metrics-max-task-types), else 0.",
        u64::from(m.by_task_type.folded()),
    );
}

/// The two latency histograms, one series per task type label.
pub fn histograms(out: &mut String, m: &Metrics) {
    let families: [(&str, &str, HistogramOf); 2] = [
        (
            "taskyard_job_submit_to_start_seconds",
            "From the moment a job became ready (submitted; a delayed job: its delay over; \
             a requeued job: its requeue) to the start of its first attempt.",
            |c| &c.submit_to_start,
        ),
        (
            "taskyard_job_run_seconds",
            "Assignment to the end of an attempt, however it ended.",
            |c| &c.run_time,
        ),
    ];
    for (name, help, read) in families {
        family(out, name, "histogram", help);
        for (task_type, counters) in m.by_task_type.iter() {
            histogram_series(out, name, &[("task_type", task_type)], read(counters));
        }
    }
}

/// What the queue gauges show of one label.
#[derive(Debug, Default)]
struct QueueTotals {
    /// Ready jobs per base level (LOW, NORMAL, HIGH).
    depth: [u64; 3],
    oldest_ready_at: Option<i64>,
    unserved: u64,
}

/// `taskyard_queue_depth`, `taskyard_queue_oldest_age_seconds` and
/// `taskyard_queue_unserved_jobs` per task type label.
pub fn queues(out: &mut String, s: &StatsSnapshot) {
    let by = &s.metrics.by_task_type;
    let mut totals: HashMap<&str, QueueTotals> = HashMap::new();
    for q in &s.queues {
        let served = s
            .workers
            .iter()
            .any(|w| !w.draining && w.task_types.contains(&q.task_type));
        let t = totals.entry(by.label(&q.task_type)).or_default();
        t.depth[usize::from(q.priority.level())] += q.depth;
        t.oldest_ready_at = Some(
            t.oldest_ready_at
                .map_or(q.oldest_ready_at, |o| o.min(q.oldest_ready_at)),
        );
        if !served {
            t.unserved += q.depth;
        }
    }
    let none = QueueTotals::default();
    let rows: Vec<(&str, &QueueTotals)> = by
        .iter()
        .map(|(label, _)| (label, totals.get(label).unwrap_or(&none)))
        .collect();
    family(
        out,
        "taskyard_queue_depth",
        "gauge",
        "Ready QUEUED jobs per task type and base priority.",
    );
    for (label, t) in &rows {
        for p in Priority::ALL.into_iter().rev() {
            let tags = labels(&[("task_type", label), ("priority", &p.to_string())]);
            let depth = t.depth[usize::from(p.level())];
            let _ = writeln!(out, "taskyard_queue_depth{tags} {depth}");
        }
    }
    family(
        out,
        "taskyard_queue_oldest_age_seconds",
        "gauge",
        "How long the oldest ready QUEUED job of the task type has waited; 0 with none.",
    );
    for (label, t) in &rows {
        let age_ms = t
            .oldest_ready_at
            .map_or(0, |at| s.at.saturating_sub(at).max(0));
        let tags = labels(&[("task_type", label)]);
        let _ = writeln!(
            out,
            "taskyard_queue_oldest_age_seconds{tags} {}",
            age_ms as f64 / 1000.0
        );
    }
    family(
        out,
        "taskyard_queue_unserved_jobs",
        "gauge",
        "Ready QUEUED jobs of a task type that no connected, non-draining worker runs.",
    );
    for (label, t) in &rows {
        let tags = labels(&[("task_type", label)]);
        let _ = writeln!(out, "taskyard_queue_unserved_jobs{tags} {}", t.unserved);
    }
}
