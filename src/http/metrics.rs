//! `GET /metrics` (and `HEAD`): the Prometheus text exposition format
//! (version 0.0.4), written by hand from one durable `StatsSnapshot`.
//! Gauges come from the coordinator's state, counters and histograms from
//! its `Metrics`, the job families labelled by task type
//! (`metrics_by_task_type`), then the standard `process_*` families.

use crate::actors::node::{NodeRole, NodeView};
use crate::http::api::fetch_stats;
use crate::http::bridge::CoordinatorLink;
use crate::http::dto::free_capacity;
use crate::http::error::ApiError;
use crate::http::exposition::{family, histogram, single};
use crate::http::metrics_by_task_type as by_task_type;
use crate::http::openapi::Unavailable;
use crate::http::process_metrics;
use crate::scheduler::metrics::Metrics;
use crate::scheduler::StatsSnapshot;
use actix_web::{get, head, web, HttpResponse};
use std::fmt::Write;

/// Every taskyard metric family exported by a leading coordinator, for the
/// README and the tests; `process_metrics::PROCESS_FAMILIES` come too.
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
    exposition(link).await
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
    exposition(link).await
}

/// The exposition, for GET and HEAD alike.
async fn exposition(link: web::Data<CoordinatorLink>) -> Result<HttpResponse, ApiError> {
    let mut out = match fetch_stats(&link).await {
        Ok(snapshot) => render(&snapshot),
        // A standby, or a node still recovering: no job state yet.
        Err(_) if link.view.term().is_none() => build_info(String::new()),
        Err(e) => return Err(e),
    };
    leadership(&mut out, &link.view);
    process_metrics::render(&mut out);
    // HEAD gets the same status and headers; actix-web drops the body.
    Ok(HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(out))
}

/// `taskyard_leader`, `taskyard_leader_epoch`, `taskyard_leader_changes_total`
/// of this process (on SQLite: always the leader, epoch 0, no changes).
pub fn leadership(out: &mut String, view: &NodeView) {
    let (leading, epoch, changes) = {
        let v = view.read();
        let (leading, epoch) = match v.role {
            NodeRole::Leading { epoch } => (1, epoch),
            NodeRole::Recovering { epoch } => (0, epoch),
            NodeRole::Standby => (0, v.leader.as_ref().map_or(0, |(r, _)| r.leader.epoch)),
        };
        (leading, epoch, v.leader_changes)
    };
    family(
        out,
        "taskyard_leader",
        "gauge",
        "1 while this process leads, else 0.",
    );
    let _ = writeln!(out, "taskyard_leader {leading}");
    family(
        out,
        "taskyard_leader_epoch",
        "gauge",
        "The leader lease's epoch: this process's while it leads, else the leader's as last read.",
    );
    let _ = writeln!(out, "taskyard_leader_epoch {epoch}");
    family(
        out,
        "taskyard_leader_changes_total",
        "counter",
        "Times this process started or stopped leading.",
    );
    let _ = writeln!(out, "taskyard_leader_changes_total {changes}");
}

/// The whole exposition for one snapshot.
pub fn render(s: &StatsSnapshot) -> String {
    let mut out = String::with_capacity(4096);
    let m = &s.metrics;
    family(&mut out, "taskyard_jobs", "gauge", "Jobs in each state.");
    for c in &s.counts {
        let state = c.state.to_string().to_ascii_lowercase();
        let _ = writeln!(out, "taskyard_jobs{{state=\"{state}\"}} {}", c.count);
    }
    by_task_type::job_counters(&mut out, m);
    single(
        &mut out,
        "taskyard_jobs_rejected_total",
        "counter",
        "Submissions refused (invalid or over the admission limit).",
        m.rejected,
    );
    by_task_type::queues(&mut out, s);
    single(
        &mut out,
        "taskyard_jobs_delayed",
        "gauge",
        "QUEUED jobs waiting for their not-before time.",
        s.delayed,
    );
    by_task_type::histograms(&mut out, m);
    single(
        &mut out,
        "taskyard_workers_connected",
        "gauge",
        "Registered workers.",
        s.workers.len(),
    );
    single(
        &mut out,
        "taskyard_workers_free_capacity",
        "gauge",
        "Task slots free on workers that are not draining.",
        free_capacity(&s.workers),
    );
    single(
        &mut out,
        "taskyard_stale_results_total",
        "counter",
        "Results dropped because their lease was no longer current.",
        m.stale_results,
    );
    persistence(&mut out, m);
    schedules(&mut out, s);
    build_info(out)
}

fn persistence(out: &mut String, m: &Metrics) {
    histogram(
        out,
        "taskyard_persistence_batch_rows",
        "Rows committed per database transaction.",
        &m.batch_rows,
    );
    histogram(
        out,
        "taskyard_persistence_commit_seconds",
        "Time from sending a batch to its commit.",
        &m.commit_latency,
    );
    single(
        out,
        "taskyard_persistence_commit_failures_total",
        "counter",
        "Commits that failed (each retry counts); answers wait for a later one.",
        m.commit_failures,
    );
    single(
        out,
        "taskyard_persistence_commits_failing",
        "gauge",
        "1 while the last commit failed (an outage: requests are answered not durable), else 0.",
        u64::from(m.commits_failing),
    );
}

/// `taskyard_schedule_*`: one series per schedule (at most
/// `max-schedules`) and the lag of every slot fired.
fn schedules(out: &mut String, s: &StatsSnapshot) {
    use crate::http::exposition::{escape, histogram};
    use crate::scheduler::schedule::SkipReason;
    family(
        out,
        "taskyard_schedule_fires_total",
        "counter",
        "Slots fired per schedule since the coordinator started.",
    );
    for (name, fired, _) in &s.schedules {
        let _ = writeln!(
            out,
            "taskyard_schedule_fires_total{{schedule=\"{}\"}} {fired}",
            escape(name)
        );
    }
    family(
        out,
        "taskyard_schedule_skipped_total",
        "counter",
        "Slots skipped per schedule and reason (overlap, catchup-window).",
    );
    for (name, _, skipped) in &s.schedules {
        for reason in SkipReason::ALL {
            let _ = writeln!(
                out,
                "taskyard_schedule_skipped_total{{schedule=\"{}\",reason=\"{}\"}} {}",
                escape(name),
                reason.label(),
                skipped[reason as usize]
            );
        }
    }
    histogram(
        out,
        "taskyard_schedule_lag_seconds",
        "Fire time minus nominal slot time of each slot fired.",
        &s.schedule_lag,
    );
}

fn build_info(mut out: String) -> String {
    family(
        &mut out,
        "taskyard_build_info",
        "gauge",
        "Always 1; labels name the build.",
    );
    let _ = writeln!(
        out,
        "taskyard_build_info{{version=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION")
    );
    out
}
