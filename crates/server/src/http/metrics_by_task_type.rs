//! The `/metrics` families labelled `task_type`: job counters, latency
//! histograms and queue gauges. Labels come from `ByTaskType`: every label
//! handed out so far is exported, zeros included, so a task type's series
//! exist from the moment it is first met (a worker offering it, a
//! submission) and `rate()` sees its first job; task types beyond
//! `metrics-max-task-types` are summed under `task_type="other"`.

use crate::http::const_metrics::{gauge, labelled, ConstHistogram};
use crate::scheduler::metrics::{Histogram, Metrics};
use crate::scheduler::task_type_metrics::JobCounters;
use crate::scheduler::StatsSnapshot;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use std::collections::HashMap;
use std::fmt;
use taskyard_protocol::Priority;

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
pub fn job_counters(out: &mut DescriptorEncoder, m: &Metrics) -> fmt::Result {
    for (name, help, read) in COUNTERS {
        let series = m.by_task_type.iter().map(|(task_type, counters)| {
            (
                task_type_label(task_type),
                ConstCounter::new(read(counters)),
            )
        });
        // The encoder appends `_total`.
        let name = format!("taskyard_jobs_{name}");
        labelled(out, &name, help, MetricType::Counter, series)?;
    }
    gauge(
        out,
        "taskyard_metrics_task_types_folded",
        "1 once a task type is counted under task_type=\"other\" (beyond metrics-max-task-types), else 0.",
        u64::from(m.by_task_type.folded()),
    )
}

/// The label set of a series of one task type label.
fn task_type_label(task_type: &str) -> [(&str, &str); 1] {
    [("task_type", task_type)]
}

/// The two latency histograms, one series per task type label.
pub fn histograms(out: &mut DescriptorEncoder, m: &Metrics) -> fmt::Result {
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
        let series = m.by_task_type.iter().map(|(task_type, counters)| {
            (task_type_label(task_type), ConstHistogram(read(counters)))
        });
        labelled(out, name, help, MetricType::Histogram, series)?;
    }
    Ok(())
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
pub fn queues(out: &mut DescriptorEncoder, s: &StatsSnapshot) -> fmt::Result {
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
    let depth = rows.iter().flat_map(|(label, t)| {
        Priority::ALL.into_iter().rev().map(|p| {
            let labels = [
                ("task_type", label.to_string()),
                ("priority", p.to_string()),
            ];
            (labels, ConstGauge::new(t.depth[usize::from(p.level())]))
        })
    });
    labelled(
        out,
        "taskyard_queue_depth",
        "Ready QUEUED jobs per task type and base priority.",
        MetricType::Gauge,
        depth,
    )?;
    let age = rows.iter().map(|(label, t)| {
        let age_ms = t
            .oldest_ready_at
            .map_or(0, |at| s.at.saturating_sub(at).max(0));
        (
            task_type_label(label),
            ConstGauge::new(age_ms as f64 / 1000.0),
        )
    });
    labelled(
        out,
        "taskyard_queue_oldest_age_seconds",
        "How long the oldest ready QUEUED job of the task type has waited; 0 with none.",
        MetricType::Gauge,
        age,
    )?;
    let unserved = rows
        .iter()
        .map(|(label, t)| (task_type_label(label), ConstGauge::new(t.unserved)));
    labelled(
        out,
        "taskyard_queue_unserved_jobs",
        "Ready QUEUED jobs of a task type that no connected, non-draining worker runs.",
        MetricType::Gauge,
        unserved,
    )
}
