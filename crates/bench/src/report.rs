//! What `taskyard bench` reports, as one serializable document and as text.

use crate::cpu::CpuUsed;
use crate::idle::IdleCost;
use crate::latency::{Latency, Percentiles};
use serde::Serialize;
use std::fmt::Write;

/// The whole report (`--json` prints it as one JSON document).
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub setup: Setup,
    pub throughput: Throughput,
    /// Group commit during the throughput phase; own coordinator only.
    pub persistence: Option<Persistence>,
    /// CPU during the throughput phase. Thread figures need the coordinator
    /// in this process; `process_ms` includes workers and load generator.
    pub cpu: CpuUsed,
    /// Coordinator-thread CPU per drained job, in microseconds.
    pub coordinator_cpu_us_per_job: Option<f64>,
    pub latency: Option<Latency>,
    pub preload: Option<Preload>,
    pub idle: Option<IdleCost>,
    /// Memory once the drain settled; own coordinator only.
    pub settled: Option<Settled>,
    pub recovery: Option<Recovery>,
}

/// The parameters the run used.
#[derive(Debug, Clone, Serialize)]
pub struct Setup {
    /// `in-process` or the address of the coordinator benchmarked.
    pub coordinator: String,
    /// `sqlite` or `postgres`: the own coordinator's store (`None` for a
    /// remote one).
    pub store: Option<String>,
    pub synchronous: Option<String>,
    pub jobs: u64,
    pub workers: u32,
    pub capacity: u32,
    pub prefetch: u32,
    /// With store `postgres`: its write connections.
    pub write_connections: Option<usize>,
    /// Jobs were all submitted before the workers started.
    pub backlog: bool,
    pub clients: u32,
    pub batch: u32,
    pub window: u32,
    pub payload_bytes: usize,
    /// Jobs carried concurrency keys `bench:0` .. this less one; 0: none.
    pub concurrency_keys: u32,
    /// Each `bench:` key was limited to this many running jobs; 0: none.
    pub limit: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct Throughput {
    pub accepted: u64,
    pub rejected: u64,
    pub first_rejection: Option<String>,
    /// Jobs that reached a terminal state, and of those, SUCCEEDED.
    pub terminal: u64,
    pub succeeded: u64,
    /// First submission written to last answer read.
    pub submit_secs: f64,
    pub submit_jobs_per_sec: f64,
    /// First submission written to every job seen terminal (workers
    /// running throughout); with `backlog`, the workers' start to every
    /// job seen terminal.
    pub drain_secs: f64,
    pub drain_jobs_per_sec: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Persistence {
    pub batches: u64,
    pub rows: u64,
    pub mean_rows_per_batch: f64,
}

/// `--preload`: jobs queued behind the measurement and what they cost.
#[derive(Debug, Clone, Serialize)]
pub struct Preload {
    pub jobs: u64,
    pub secs: f64,
    pub rss_before_bytes: Option<u64>,
    pub rss_after_bytes: Option<u64>,
    /// Growth of this process's RSS per queued job.
    pub rss_bytes_per_job: Option<f64>,
}

/// The coordinator after the drain, left idle for `idle_ms` (a few sweeps).
#[derive(Debug, Clone, Serialize)]
pub struct Settled {
    pub idle_ms: u64,
    /// This process's RSS: the coordinator, workers and load generator.
    pub rss_bytes: Option<u64>,
    /// Jobs the coordinator holds in memory, and of those finished ones.
    pub jobs_in_memory: Option<usize>,
    pub finished_in_memory: Option<usize>,
    /// `--seed-finished` jobs still stored (expiry deletes expired ones).
    pub seeded_left: Option<u64>,
}

/// `--recovery`: a graceful stop, then a start on the same database.
#[derive(Debug, Clone, Serialize)]
pub struct Recovery {
    pub rows: usize,
    pub ready_ms: f64,
}

/// Jobs per second, 0 for an empty interval.
pub fn rate(jobs: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        jobs as f64 / secs
    } else {
        0.0
    }
}

impl BenchReport {
    /// The human-readable form.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let s = &self.setup;
        let t = &self.throughput;
        let _ = writeln!(
            out,
            "taskyard bench: {} jobs, {} workers x {} slots (prefetch {}), {} clients, batch {}, window {}, payload {} B, coordinator {} ({})",
            s.jobs, s.workers, s.capacity, s.prefetch, s.clients, s.batch, s.window, s.payload_bytes, s.coordinator,
            match (s.store.as_deref(), s.synchronous.as_deref()) {
                (Some("postgres"), _) => "store postgres".to_string(),
                (_, Some(sync)) => format!("synchronous={sync}"),
                _ => "synchronous as configured".to_string(),
            }
        );
        if s.concurrency_keys > 0 {
            let _ = writeln!(
                out,
                "  {} concurrency keys, limit {}",
                s.concurrency_keys,
                if s.limit > 0 {
                    s.limit.to_string()
                } else {
                    "none".into()
                }
            );
        }
        let _ = writeln!(
            out,
            "  submit   {:>10.0} jobs/s  ({} accepted, {} rejected in {:.3} s)",
            t.submit_jobs_per_sec, t.accepted, t.rejected, t.submit_secs
        );
        let _ = writeln!(
            out,
            "  drain    {:>10.0} jobs/s  ({} terminal, {} succeeded in {:.3} s{})",
            t.drain_jobs_per_sec,
            t.terminal,
            t.succeeded,
            t.drain_secs,
            if s.backlog { ", from a backlog" } else { "" }
        );
        if let Some(p) = &self.persistence {
            let _ = writeln!(
                out,
                "  commits  {:>10} batches, {:.1} rows per batch",
                p.batches, p.mean_rows_per_batch
            );
        }
        let _ = writeln!(out, "  cpu      coordinator thread {}, persistence thread {}, whole process {} over {:.0} ms{}",
            ms(self.cpu.coordinator_thread_ms), ms(self.cpu.persistence_thread_ms), ms(self.cpu.process_ms),
            self.cpu.wall_ms,
            self.coordinator_cpu_us_per_job.map(|u| format!(" ({u:.1} us per job)")).unwrap_or_default());
        if let Some(l) = &self.latency {
            latency_line(
                &mut out,
                "submit-to-start",
                &l.submit_to_start,
                l.interval_ms,
            );
            latency_line(
                &mut out,
                "submit-to-done ",
                &l.submit_to_done,
                l.interval_ms,
            );
        }
        if let Some(p) = &self.preload {
            let _ = writeln!(
                out,
                "  preload  {} jobs queued in {:.1} s; RSS {} -> {} ({} per job)",
                p.jobs,
                p.secs,
                mib(p.rss_before_bytes),
                mib(p.rss_after_bytes),
                p.rss_bytes_per_job
                    .map(|b| format!("{b:.0} B"))
                    .unwrap_or_else(|| "n/a".into())
            );
        }
        if let Some(i) = &self.idle {
            let _ = writeln!(out, "  idle     {} workers heartbeating every {} ms: coordinator thread {} of one core over {:.0} ms",
                i.connections, i.heartbeat_ms,
                i.coordinator_cpu_percent.map(|p| format!("{p:.2}%")).unwrap_or_else(|| "n/a".into()),
                i.cpu.wall_ms);
        }
        if let Some(m) = &self.settled {
            let count = |n: Option<usize>| n.map_or_else(|| "n/a".into(), |n| n.to_string());
            let _ = writeln!(
                out,
                "  settled  after {} ms idle: RSS {}, {} jobs in memory ({} finished){}",
                m.idle_ms,
                mib(m.rss_bytes),
                count(m.jobs_in_memory),
                count(m.finished_in_memory),
                m.seeded_left
                    .map(|n| format!(", {n} seeded jobs still stored"))
                    .unwrap_or_default()
            );
        }
        if let Some(r) = &self.recovery {
            let _ = writeln!(
                out,
                "  recovery {} rows, ready to serve in {:.0} ms",
                r.rows, r.ready_ms
            );
        }
        out
    }
}

fn latency_line(out: &mut String, name: &str, p: &Percentiles, interval_ms: u64) {
    let _ = writeln!(
        out,
        "  {name} p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} jobs, one every {interval_ms} ms)",
        p.p50_ms, p.p99_ms, p.max_ms, p.samples
    );
}

fn ms(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.0} ms"))
        .unwrap_or_else(|| "n/a".into())
}

fn mib(v: Option<u64>) -> String {
    v.map(|b| format!("{:.1} MiB", b as f64 / 1048576.0))
        .unwrap_or_else(|| "n/a".into())
}
