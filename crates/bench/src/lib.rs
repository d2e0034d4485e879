//! `taskyard bench`: a load generator and its measurements. By default it
//! starts a coordinator (temporary database) and workers in this process;
//! with `coordinator` set it targets a running coordinator instead and
//! connects its workers to that coordinator's worker listener.
//!
//! Phases, in order: optional preload (jobs no worker runs, queued behind
//! everything), throughput (submit and drain `jobs` no-op jobs), a paced
//! latency phase, optional idle workers, optional restart (recovery).

mod cluster;
mod cpu;
pub mod history;
mod idle;
mod latency;
mod load;
mod pipeline;
pub mod postgres;
pub mod report;
pub mod schedules;
pub mod seed;
pub mod startup;
pub mod takeover;

pub use cluster::TempDir;
pub use report::BenchReport;

use cluster::{Cluster, NOOP, TIMED, UNRUN};
use cpu::{CpuSnapshot, CpuUsed};
use load::SubmitPlan;
use report::{rate, Persistence, Preload, Recovery, Settled, Setup, Throughput};
use slog::Logger;
use std::time::{Duration, Instant};
use taskyard_client::client::ClientError;
use taskyard_client::client::ClientOptions;
use taskyard_protocol::{Priority, SubmitRequest};
use taskyard_server::config::{StoreKind, Synchronous};
use taskyard_server::process::server::{COORDINATOR_THREAD, PERSISTENCE_THREAD};

/// Everything a run is parameterised by (the CLI flags).
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// `None`: start a coordinator in this process.
    pub coordinator: Option<String>,
    /// Token and TLS for reaching a running coordinator.
    pub client: ClientOptions,
    /// Where in-process workers connect when `coordinator` is set.
    pub worker_addr: Option<String>,
    pub jobs: u64,
    pub workers: u32,
    pub capacity: u32,
    /// Jobs each worker takes beyond `capacity` (its `prefetch`).
    pub prefetch: u32,
    /// The own coordinator's `postgres-write-connections`.
    pub write_connections: usize,
    /// Submit every job before any worker starts, and time the drain from
    /// the workers' start.
    pub backlog: bool,
    pub clients: u32,
    pub batch: u32,
    /// Jobs each client keeps in flight.
    pub window: u32,
    pub payload_bytes: usize,
    pub synchronous: Synchronous,
    /// The own coordinator's store.
    pub store: StoreKind,
    /// With `store` PostgreSQL: the database (its `taskyard` schema is
    /// dropped first); `None` and no `$TASKYARD_POSTGRES_URL`: a throwaway
    /// cluster started for the run.
    pub postgres_url: Option<String>,
    pub preload: u64,
    pub idle_workers: u32,
    pub idle_window: Duration,
    pub latency_jobs: u32,
    pub latency_interval: Duration,
    pub recovery: bool,
    /// Finished jobs stored in the own coordinator's database before it
    /// starts (see `seed`).
    pub seed_finished: u64,
    /// Those jobs finished 8 days ago: past the default retention, so
    /// expiry deletes them while the run goes on.
    pub seed_expired: bool,
    /// Schedules the run creates (`bench schedules`): the own
    /// coordinator's `max-schedules` is at least this.
    pub schedules: u32,
    /// Submitted jobs carry concurrency keys `bench:0` .. `bench:N-1` in
    /// turn; 0: no key.
    pub concurrency_keys: u32,
    /// The own coordinator limits each `bench:` key to this many running
    /// jobs; 0: no limit.
    pub limit: u32,
}

/// Why a run could not complete.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("cannot start the coordinator: {0}")]
    Start(String),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("{0}")]
    Failed(String),
}

/// Reports a phase's progress: (phase, done, total).
pub type ProgressFn<'a> = &'a dyn Fn(&str, u64, u64);

/// Runs every phase `opts` asks for and reports.
pub fn run(
    opts: &BenchOptions,
    log: Logger,
    progress: ProgressFn,
) -> Result<BenchReport, BenchError> {
    let mut cluster = Cluster::start(opts, log)?;
    let preload = preload(opts, &cluster)?;
    let before = (cpu_snapshot(), cluster.inspect()?);
    let plan = plan(opts, &cluster, NOOP, opts.jobs);
    let drained = match opts.backlog {
        false => load::submit_and_drain(&plan, progress)?,
        true => load::backlog_then_drain(&plan, || cluster.start_workers(opts), progress)?,
    };
    let after = (cpu_snapshot(), cluster.inspect()?);
    let settled = settled(opts, &cluster)?;
    let latency = (opts.latency_jobs > 0)
        .then(|| {
            latency::paced(
                &cluster.client_addr,
                &cluster.client_options,
                opts.latency_jobs,
                opts.latency_interval,
                &template(opts, TIMED, Priority::Normal),
                &cluster.start_times,
            )
        })
        .transpose()?;
    let idle = (opts.idle_workers > 0)
        .then(|| {
            idle::measure(
                &cluster.worker_addr,
                opts.idle_workers,
                opts.idle_window,
                cpu_snapshot,
            )
        })
        .transpose()?;
    let recovery = if opts.recovery {
        cluster.restart_timed()?
    } else {
        None
    };
    let own = cluster.is_own();
    cluster.stop();
    let cpu = CpuUsed::between(&before.0, &after.0);
    let cpu = if own {
        cpu
    } else {
        CpuUsed {
            coordinator_thread_ms: None,
            persistence_thread_ms: None,
            ..cpu
        }
    };
    Ok(BenchReport {
        setup: setup(opts),
        throughput: throughput(&drained),
        persistence: persistence(before.1, after.1),
        coordinator_cpu_us_per_job: cpu
            .coordinator_thread_ms
            .map(|ms| 1000.0 * ms / drained.terminal.max(1) as f64),
        cpu,
        latency,
        preload,
        idle,
        settled,
        recovery: recovery.map(|(ready, rows)| Recovery {
            rows,
            ready_ms: ready.as_secs_f64() * 1000.0,
        }),
    })
}

/// How long the coordinator is left idle after the drain before its memory
/// is read: a few sweeps (`sweep-interval-millis`, 500 by default), so the
/// retention window has evicted what its bounds say.
const SETTLE: Duration = Duration::from_millis(1_500);

/// The coordinator's memory once the drain has settled; own coordinator
/// only (its RSS is this process's, workers and load generator included).
fn settled(opts: &BenchOptions, cluster: &Cluster) -> Result<Option<Settled>, BenchError> {
    if !cluster.is_own() {
        return Ok(None);
    }
    std::thread::sleep(SETTLE);
    let inspected = cluster.inspect()?;
    Ok(Some(Settled {
        idle_ms: SETTLE.as_millis() as u64,
        rss_bytes: cpu::rss_bytes(),
        jobs_in_memory: inspected.as_ref().map(|i| i.jobs_in_memory),
        finished_in_memory: inspected.as_ref().map(|i| i.finished_in_memory),
        seeded_left: match opts.seed_finished {
            0 => None,
            _ => cluster.seeded_left()?,
        },
    }))
}

fn cpu_snapshot() -> CpuSnapshot {
    CpuSnapshot::take(COORDINATOR_THREAD, PERSISTENCE_THREAD)
}

/// Queues `opts.preload` LOW jobs of a type no worker runs, in big batches.
fn preload(opts: &BenchOptions, cluster: &Cluster) -> Result<Option<Preload>, BenchError> {
    if opts.preload == 0 {
        return Ok(None);
    }
    let rss_before = cpu::rss_bytes();
    let started = Instant::now();
    let mut plan = plan(opts, cluster, UNRUN, opts.preload);
    plan.template.priority = Priority::Low;
    plan.batch = plan.batch.max(1000);
    plan.window = plan.window.max(4 * plan.batch);
    let submitted = load::submit_only(&plan)?;
    if submitted.rejected > 0 {
        return Err(BenchError::Failed(format!(
            "preload: {} jobs rejected: {}",
            submitted.rejected,
            submitted.first_rejection.unwrap_or_default()
        )));
    }
    let secs = started.elapsed().as_secs_f64();
    let rss_after = cpu::rss_bytes();
    let per_job = rss_before
        .zip(rss_after)
        .map(|(b, a)| a.saturating_sub(b) as f64 / opts.preload as f64);
    Ok(Some(Preload {
        jobs: opts.preload,
        secs,
        rss_before_bytes: rss_before,
        rss_after_bytes: rss_after,
        rss_bytes_per_job: per_job,
    }))
}

fn plan(opts: &BenchOptions, cluster: &Cluster, task_type: &str, jobs: u64) -> SubmitPlan {
    SubmitPlan {
        addr: cluster.client_addr.clone(),
        options: cluster.client_options.clone(),
        jobs,
        clients: opts.clients,
        batch: opts.batch,
        window: opts.window,
        template: template(opts, task_type, Priority::Normal),
        concurrency_keys: opts.concurrency_keys,
    }
}

fn template(opts: &BenchOptions, task_type: &str, priority: Priority) -> SubmitRequest {
    SubmitRequest {
        priority,
        ..SubmitRequest::new(task_type, payload(opts.payload_bytes))
    }
}

/// A MessagePack string (custom payloads must decode as a JSON-like value)
/// whose encoding is `bytes` long, at least 1.
fn payload(bytes: usize) -> Vec<u8> {
    let bytes = bytes.max(1);
    let mut out = match bytes {
        1..=32 => vec![0xa0 | (bytes - 1) as u8],
        33..=257 => vec![0xd9, (bytes - 2) as u8],
        258..=65_538 => [&[0xda][..], &((bytes - 3) as u16).to_be_bytes()].concat(),
        _ => [&[0xdb][..], &((bytes - 5) as u32).to_be_bytes()].concat(),
    };
    out.resize(bytes, b'x');
    out
}

fn setup(opts: &BenchOptions) -> Setup {
    Setup {
        coordinator: opts
            .coordinator
            .clone()
            .unwrap_or_else(|| "in-process".into()),
        store: opts.coordinator.is_none().then(|| opts.store.to_string()),
        synchronous: (opts.coordinator.is_none() && opts.store == StoreKind::Sqlite)
            .then(|| opts.synchronous.to_string()),
        jobs: opts.jobs,
        workers: opts.workers,
        capacity: opts.capacity,
        prefetch: opts.prefetch,
        write_connections: (opts.coordinator.is_none() && opts.store == StoreKind::Postgres)
            .then_some(opts.write_connections),
        backlog: opts.backlog,
        clients: opts.clients,
        batch: opts.batch,
        window: opts.window,
        payload_bytes: payload(opts.payload_bytes).len(),
        concurrency_keys: opts.concurrency_keys,
        limit: opts.limit,
    }
}

fn throughput(d: &load::Drained) -> Throughput {
    let (submit_secs, drain_secs) = (d.submitted.elapsed.as_secs_f64(), d.elapsed.as_secs_f64());
    Throughput {
        accepted: d.submitted.accepted,
        rejected: d.submitted.rejected,
        first_rejection: d.submitted.first_rejection.clone(),
        terminal: d.terminal,
        succeeded: d.succeeded,
        submit_secs,
        submit_jobs_per_sec: rate(d.submitted.accepted, submit_secs),
        drain_secs,
        drain_jobs_per_sec: rate(d.terminal, drain_secs),
    }
}

fn persistence(
    before: Option<taskyard_server::actors::coordinator::Inspection>,
    after: Option<taskyard_server::actors::coordinator::Inspection>,
) -> Option<Persistence> {
    let (b, a) = (before?, after?);
    let batches = a.batches_committed - b.batches_committed;
    let rows = a.rows_committed - b.rows_committed;
    Some(Persistence {
        batches,
        rows,
        mean_rows_per_batch: rate(rows, batches as f64),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_have_the_asked_size_and_are_messagepack() {
        for bytes in [0, 1, 2, 32, 33, 257, 258, 1000, 70_000] {
            let p = payload(bytes);
            assert_eq!(p.len(), bytes.max(1), "{bytes}");
            assert!(
                taskyard_protocol::payloads::validate("bench.noop", &p).is_ok(),
                "{bytes}"
            );
        }
    }
}
