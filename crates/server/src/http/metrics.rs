//! `GET /metrics` (and `HEAD`): the Prometheus text exposition format
//! (version 0.0.4), encoded by prometheus-client from a registry built per
//! scrape. Its collectors write constants read at that moment: the job
//! state, counters and histograms of one durable `StatsSnapshot` (the job
//! families labelled by task type in `metrics_by_task_type`), the build,
//! this process's leadership, then the standard `process_*` families.

use crate::actors::node_view::{NodeRole, NodeView};
use crate::http::api::fetch_stats;
use crate::http::bridge::CoordinatorLink;
use crate::http::const_metrics::{counter, gauge, labelled, single, ConstHistogram};
use crate::http::dto::free_capacity;
use crate::http::error::ApiError;
use crate::http::metrics_by_task_type as by_task_type;
use crate::http::openapi::Unavailable;
use crate::http::process_metrics::ProcessCollector;
use crate::scheduler::metrics::Metrics;
use crate::scheduler::schedule::SkipReason;
use crate::scheduler::StatsSnapshot;
use actix_web::http::StatusCode;
use actix_web::{get, head, web, HttpResponse};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{prometheus_text, DescriptorEncoder};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::fmt;

/// Every taskyard metric family exported by a leading coordinator, named as
/// queries name it (counters with `_total`), for the README and the tests;
/// `process_metrics::PROCESS_FAMILIES` come too.
pub const FAMILIES: [&str; 28] = [
    "taskyard_jobs",
    "taskyard_jobs_submitted_total",
    "taskyard_jobs_succeeded_total",
    "taskyard_jobs_failed_total",
    "taskyard_jobs_retried_total",
    "taskyard_jobs_cancelled_total",
    "taskyard_jobs_rejected_total",
    "taskyard_queue_depth",
    "taskyard_queue_oldest_age_seconds",
    "taskyard_queue_unserved_jobs",
    "taskyard_jobs_delayed",
    "taskyard_job_submit_to_start_seconds",
    "taskyard_job_run_seconds",
    "taskyard_workers_connected",
    "taskyard_workers_free_capacity",
    "taskyard_stale_results_total",
    "taskyard_persistence_batch_rows",
    "taskyard_persistence_commit_seconds",
    "taskyard_persistence_commit_failures_total",
    "taskyard_persistence_commits_failing",
    "taskyard_build_info",
    "taskyard_leader",
    "taskyard_leader_epoch",
    "taskyard_leader_changes_total",
    "taskyard_metrics_task_types_folded",
    "taskyard_schedule_fires_total",
    "taskyard_schedule_skipped_total",
    "taskyard_schedule_lag_seconds",
];

/// A standby (or a node still recovering) has no job state to show: it
/// exports its leadership families and the build only.
#[utoipa::path(
    summary = "Prometheus text exposition.",
    responses(
        (status = 200, description = "text/plain; version=0.0.4", body = String, content_type = "text/plain"),
        (status = 503, response = Unavailable),
    )
)]
#[get("/metrics")]
pub async fn metrics(link: web::Data<CoordinatorLink>) -> Result<HttpResponse, ApiError> {
    serve_metrics(link).await
}

#[utoipa::path(
    summary = "The headers GET /metrics would send, without the body.",
    responses(
        (status = 200, description = "text/plain; version=0.0.4 (no body)"),
        (status = 503, response = Unavailable),
    )
)]
#[head("/metrics")]
pub async fn metrics_head(link: web::Data<CoordinatorLink>) -> Result<HttpResponse, ApiError> {
    serve_metrics(link).await
}

/// The exposition, for GET and HEAD alike.
async fn serve_metrics(link: web::Data<CoordinatorLink>) -> Result<HttpResponse, ApiError> {
    let snapshot = match fetch_stats(&link).await {
        Ok(snapshot) => Some(snapshot),
        // A standby, or a node still recovering: no job state yet.
        Err(_) if link.view.term().is_none() => None,
        Err(e) => return Err(e),
    };
    let body = exposition(snapshot, Leadership::of(&link.view)).map_err(|_| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            crate::http::error::ErrorCode::Internal,
            "a metric value could not be encoded",
        )
    })?;
    // HEAD gets the same status and headers; actix-web drops the body.
    Ok(HttpResponse::Ok()
        .content_type(prometheus_text::CONTENT_TYPE)
        .body(body))
}

/// The whole exposition: the job families of `snapshot` (none without
/// one), the build, `leadership` and the process families, in that order.
pub fn exposition(
    snapshot: Option<StatsSnapshot>,
    leadership: Leadership,
) -> Result<String, fmt::Error> {
    let mut registry = Registry::default();
    if let Some(snapshot) = snapshot {
        registry.register_collector(Box::new(JobFamilies(snapshot)));
    }
    registry.register_collector(Box::new(BuildInfo));
    registry.register_collector(Box::new(leadership));
    registry.register_collector(Box::new(ProcessCollector));
    let mut out = String::with_capacity(16 * 1024);
    prometheus_text::encode(&mut out, &registry)?;
    Ok(out)
}

/// `taskyard_leader`, `taskyard_leader_epoch`, `taskyard_leader_changes_total`
/// of this process (on SQLite: always the leader, epoch 0, no changes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leadership {
    pub leading: bool,
    pub epoch: u64,
    pub changes: u64,
}

impl Leadership {
    /// As `view` says now.
    pub fn of(view: &NodeView) -> Leadership {
        let v = view.read();
        let (leading, epoch) = match v.role {
            NodeRole::Leading { epoch } => (true, epoch),
            NodeRole::Recovering { epoch } => (false, epoch),
            NodeRole::Standby => (false, v.leader.as_ref().map_or(0, |(r, _)| r.leader.epoch)),
        };
        Leadership {
            leading,
            epoch,
            changes: v.leader_changes,
        }
    }
}

impl Collector for Leadership {
    fn encode(&self, mut out: DescriptorEncoder) -> fmt::Result {
        gauge(
            &mut out,
            "taskyard_leader",
            "1 while this process leads, else 0.",
            u64::from(self.leading),
        )?;
        gauge(
            &mut out,
            "taskyard_leader_epoch",
            "The leader lease's epoch: this process's while it leads, else the leader's as last read.",
            self.epoch,
        )?;
        counter(
            &mut out,
            "taskyard_leader_changes",
            "Times this process started or stopped leading.",
            self.changes,
        )
    }
}

/// The families of one leading coordinator's snapshot.
#[derive(Debug)]
struct JobFamilies(StatsSnapshot);

impl Collector for JobFamilies {
    fn encode(&self, mut out: DescriptorEncoder) -> fmt::Result {
        let (s, out) = (&self.0, &mut out);
        let m = &s.metrics;
        let states = s.counts.iter().map(|c| {
            let state = c.state.to_string().to_ascii_lowercase();
            ([("state", state)], ConstGauge::new(c.count))
        });
        labelled(
            out,
            "taskyard_jobs",
            "Jobs in each state.",
            MetricType::Gauge,
            states,
        )?;
        by_task_type::job_counters(out, m)?;
        counter(
            out,
            "taskyard_jobs_rejected",
            "Submissions refused (invalid or over the admission limit).",
            m.rejected,
        )?;
        by_task_type::queues(out, s)?;
        gauge(
            out,
            "taskyard_jobs_delayed",
            "QUEUED jobs waiting for their not-before time.",
            s.delayed,
        )?;
        by_task_type::histograms(out, m)?;
        workers(out, s)?;
        persistence(out, m)?;
        schedules(out, s)
    }
}

fn workers(out: &mut DescriptorEncoder, s: &StatsSnapshot) -> fmt::Result {
    gauge(
        out,
        "taskyard_workers_connected",
        "Registered workers.",
        s.workers.len(),
    )?;
    gauge(
        out,
        "taskyard_workers_free_capacity",
        "Task slots free on workers that are not draining.",
        free_capacity(&s.workers),
    )?;
    counter(
        out,
        "taskyard_stale_results",
        "Results dropped because their lease was no longer current.",
        s.metrics.stale_results,
    )
}

fn persistence(out: &mut DescriptorEncoder, m: &Metrics) -> fmt::Result {
    single(
        out,
        "taskyard_persistence_batch_rows",
        "Rows committed per database transaction.",
        &ConstHistogram(&m.batch_rows),
    )?;
    single(
        out,
        "taskyard_persistence_commit_seconds",
        "Time from sending a batch to its commit.",
        &ConstHistogram(&m.commit_latency),
    )?;
    counter(
        out,
        "taskyard_persistence_commit_failures",
        "Commits that failed (each retry counts); answers wait for a later one.",
        m.commit_failures,
    )?;
    gauge(
        out,
        "taskyard_persistence_commits_failing",
        "1 while the last commit failed (an outage: requests are answered not durable), else 0.",
        u64::from(m.commits_failing),
    )
}

/// `taskyard_schedule_*`: one series per schedule (at most
/// `max-schedules`) and the lag of every slot fired.
fn schedules(out: &mut DescriptorEncoder, s: &StatsSnapshot) -> fmt::Result {
    let fired = s
        .schedules
        .iter()
        .map(|(name, fired, _)| ([("schedule", name.as_str())], ConstCounter::new(*fired)));
    labelled(
        out,
        "taskyard_schedule_fires",
        "Slots fired per schedule since the coordinator started.",
        MetricType::Counter,
        fired,
    )?;
    let skipped = s.schedules.iter().flat_map(|(name, _, skipped)| {
        SkipReason::ALL.into_iter().map(move |reason| {
            let labels = [("schedule", name.as_str()), ("reason", reason.label())];
            (labels, ConstCounter::new(skipped[reason as usize]))
        })
    });
    labelled(
        out,
        "taskyard_schedule_skipped",
        "Slots skipped per schedule and reason (overlap, catchup-window).",
        MetricType::Counter,
        skipped,
    )?;
    single(
        out,
        "taskyard_schedule_lag_seconds",
        "Fire time minus nominal slot time of each slot fired.",
        &ConstHistogram(&s.schedule_lag),
    )
}

/// `taskyard_build_info{version}`: always 1.
#[derive(Debug)]
struct BuildInfo;

impl Collector for BuildInfo {
    fn encode(&self, mut out: DescriptorEncoder) -> fmt::Result {
        // An info metric: the encoder appends `_info`, and writes it as a
        // gauge of 1 in this format.
        single(
            &mut out,
            "taskyard_build",
            "Always 1; labels name the build.",
            &Info::new([("version", env!("CARGO_PKG_VERSION"))]),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::process_metrics::PROCESS_FAMILIES;
    use crate::scheduler::metrics::Histogram;
    use crate::scheduler::schedule::book::LAG_BUCKETS;

    const LEADING: Leadership = Leadership {
        leading: true,
        epoch: 3,
        changes: 1,
    };

    fn empty_snapshot() -> StatsSnapshot {
        StatsSnapshot {
            at: 0,
            counts: Vec::new(),
            queues: Vec::new(),
            delayed: 0,
            throughput: Vec::new(),
            workers: Vec::new(),
            metrics: Metrics::default(),
            schedules: vec![("nightly".into(), 2, [1, 0])],
            schedule_lag: Histogram::new(&LAG_BUCKETS),
        }
    }

    fn declares(text: &str, family: &str) -> bool {
        text.lines().any(|l| {
            l.strip_prefix("# TYPE ")
                .and_then(|t| t.split_once(' '))
                .map(|(n, _)| n)
                == Some(family)
        })
    }

    #[test]
    fn a_leader_declares_every_family_under_the_name_queries_use() {
        let text = exposition(Some(empty_snapshot()), LEADING).expect("encodes");
        for family in FAMILIES.iter().chain(&PROCESS_FAMILIES) {
            assert!(declares(&text, family), "{family} in {text}");
        }
        for line in [
            "taskyard_leader 1\n",
            "taskyard_leader_epoch 3\n",
            "taskyard_leader_changes_total 1\n",
            "taskyard_schedule_fires_total{schedule=\"nightly\"} 2\n",
            "taskyard_schedule_skipped_total{schedule=\"nightly\",reason=\"overlap\"} 1\n",
            "taskyard_schedule_lag_seconds_bucket{le=\"+Inf\"} 0\n",
            concat!(
                "taskyard_build_info{version=\"",
                env!("CARGO_PKG_VERSION"),
                "\"} 1\n"
            ),
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        assert!(
            !text.contains("# EOF"),
            "the 0.0.4 text format has no end marker"
        );
    }

    #[test]
    fn a_standby_exports_its_build_and_leadership_but_no_job_state() {
        let standby = Leadership {
            leading: false,
            ..LEADING
        };
        let text = exposition(None, standby).expect("encodes");
        assert!(text.contains("taskyard_leader 0\n"), "{text}");
        assert!(declares(&text, "taskyard_build_info"), "{text}");
        assert!(!declares(&text, "taskyard_jobs"), "{text}");
    }
}
