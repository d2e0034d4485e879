//! `taskyard bench recovery`: how long a coordinator takes to start on a
//! database that has run for months (many finished rows, a few active
//! ones). Seeds the database, then starts a coordinator on it `runs`
//! times, each timed from the call to ready-to-serve (database opened,
//! state recovered, listeners open), and once more step by step.

use crate::cluster::{wait_leading, TempDir, LEAD_WITHIN};
use crate::postgres::BenchPostgres;
use crate::seed::{self, SeedPlan};
use crate::BenchError;
use serde::Serialize;
use slog::Logger;
use std::fmt::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Instant;
use taskyard_client::clock::Clock;
use taskyard_server::config::{CoordinatorConfig, PostgresUrl, StoreKind, Synchronous};
use taskyard_server::process::node::NodeHandle;
use taskyard_server::process::CoordinatorHandle;
use taskyard_server::scheduler::CoordinatorState;
use taskyard_server::scheduler::Stored;
use taskyard_server::store::postgres::PostgresStore;
use taskyard_server::store::{JobStore, Store, StoreError};

/// What `bench recovery` is parameterised by.
#[derive(Debug, Clone)]
pub struct StartupOptions {
    pub finished: u64,
    pub active: u64,
    pub keyed: bool,
    /// Timed start-ups.
    pub runs: u32,
    /// Keep the seeded database here instead of a removed temporary one.
    pub db: Option<PathBuf>,
    pub store: StoreKind,
    /// With `store` PostgreSQL: see `BenchPostgres::prepare`.
    pub postgres_url: Option<String>,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct StartupReport {
    /// `sqlite`, or `postgres` and where (no password).
    pub store: String,
    pub finished: u64,
    pub active: u64,
    pub keyed: bool,
    pub seed_secs: f64,
    /// Each run: call to ready to serve, in milliseconds.
    pub ready_ms: Vec<f64>,
    pub ready_median_ms: f64,
    /// Jobs loaded into memory (active set and finished window); on
    /// PostgreSQL from the timed step-by-step start-up.
    pub loaded: usize,
    /// Jobs counted as stored.
    pub stored: u64,
    /// One more start-up, step by step.
    pub steps: Steps,
    /// Where the database was kept, if asked.
    pub db: Option<String>,
}

/// Milliseconds spent in each step of one start-up.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Steps {
    pub open_ms: f64,
    pub load_ms: f64,
    pub recover_ms: f64,
}

/// Seeds, then times the start-ups.
pub fn run(opts: &StartupOptions, log: Logger) -> Result<StartupReport, BenchError> {
    if opts.store == StoreKind::Postgres {
        return run_postgres(opts, log);
    }
    // The temporary directory, if any, lives until the report is made.
    let (_temp, path) = match &opts.db {
        Some(db) => (None, db.clone()),
        None => {
            let dir = TempDir::create()?;
            let path = dir.0.join("recovery.db");
            (Some(dir), path)
        }
    };
    if path.exists() {
        return Err(BenchError::Failed(format!(
            "--db {}: already exists; give a new file",
            path.display()
        )));
    }
    let seeded = seed::seed(&path, &seed_plan(opts))?;
    let config = CoordinatorConfig {
        db_path: path.clone(),
        ..config(opts)
    };
    let fail = |e: StoreError| BenchError::Failed(e.to_string());
    let (steps, _) = steps(&config, || {
        JobStore::open(&config.db_path, Synchronous::Full).map_err(fail)
    })?;
    let mut ready_ms = Vec::new();
    let mut summary = None;
    for _ in 0..opts.runs.max(1) {
        let started = Instant::now();
        let handle = CoordinatorHandle::spawn(config.clone(), log.clone())
            .map_err(|e| BenchError::Start(e.to_string()))?;
        ready_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        summary = Some(handle.recovery);
        handle.stop();
    }
    let summary = summary.unwrap_or_default();
    Ok(StartupReport {
        store: "sqlite".into(),
        finished: opts.finished,
        active: opts.active,
        keyed: opts.keyed,
        seed_secs: seeded.secs,
        ready_median_ms: median(&ready_ms),
        ready_ms,
        loaded: summary.loaded,
        stored: summary.stored,
        steps,
        db: opts.db.as_ref().map(|p| p.display().to_string()),
    })
}

/// `bench recovery --store postgres`: seeds an empty `taskyard` schema,
/// then times nodes started as `taskyard-coordinator` starts them (lease
/// won, fence set, recovery run) until each serves; each stops cleanly,
/// releasing the lease for the next.
fn run_postgres(opts: &StartupOptions, log: Logger) -> Result<StartupReport, BenchError> {
    if opts.db.is_some() {
        return Err(BenchError::Failed(
            "--db names an SQLite file; it cannot be used with --store postgres".into(),
        ));
    }
    let pg = BenchPostgres::prepare(opts.postgres_url.as_deref())?;
    let seeded = seed::seed_postgres(pg.url(), &seed_plan(opts))?;
    let config = CoordinatorConfig {
        store: StoreKind::Postgres,
        postgres_url: PostgresUrl::new(pg.url()),
        node_name: "bench-recovery".into(),
        ..config(opts)
    };
    let fail = |e: StoreError| BenchError::Failed(e.to_string());
    let (steps, loaded) = steps(&config, || PostgresStore::open(pg.url()).map_err(fail))?;
    let mut ready_ms = Vec::new();
    for _ in 0..opts.runs.max(1) {
        let started = Instant::now();
        let node = NodeHandle::spawn_shared(config.clone(), log.clone())
            .map_err(|e| BenchError::Start(e.to_string()))?;
        wait_leading(&node, LEAD_WITHIN)?;
        ready_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        node.stop();
    }
    Ok(StartupReport {
        store: pg.describe(),
        finished: opts.finished,
        active: opts.active,
        keyed: opts.keyed,
        seed_secs: seeded.secs,
        ready_median_ms: median(&ready_ms),
        ready_ms,
        loaded: loaded.0,
        stored: loaded.1,
        steps,
        db: None,
    })
}

/// What `opts` seeds: finished during the last hour or so (none has
/// expired), then the active jobs.
fn seed_plan(opts: &StartupOptions) -> SeedPlan {
    let now = taskyard_client::clock::SystemClock.now_millis();
    SeedPlan {
        finished: opts.finished,
        active: opts.active,
        keyed: opts.keyed,
        finished_from: now - 3_600_000 - opts.finished as i64,
        task_type: super::cluster::NOOP.into(),
    }
}

/// The coordinator started on the seeded database: ephemeral ports, no
/// HTTP, room for every active job.
fn config(opts: &StartupOptions) -> CoordinatorConfig {
    CoordinatorConfig {
        client_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        worker_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        http_listen: String::new(),
        max_active_jobs: (opts.active + 1000).max(CoordinatorConfig::default().max_active_jobs),
        ..CoordinatorConfig::default()
    }
}

/// One start-up's store steps timed apart, without listeners or lease:
/// open the store `open` opens, load, recover; with (loaded, stored).
fn steps<S: Store>(
    config: &CoordinatorConfig,
    open: impl FnOnce() -> Result<S, BenchError>,
) -> Result<(Steps, (usize, u64)), BenchError> {
    let fail = |e: StoreError| BenchError::Failed(e.to_string());
    let started = Instant::now();
    let mut store = open()?;
    let opened = Instant::now();
    let stored: Stored = store
        .load_for_recovery(config.retain_finished_in_memory)
        .map_err(fail)?;
    let loaded = Instant::now();
    let log = Logger::root(slog::Discard, slog::o!());
    let mut state = CoordinatorState::for_config(config, log);
    let summary = state.recover_stored(stored, taskyard_client::clock::SystemClock.now());
    let recovered = Instant::now();
    let ms = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1000.0;
    let steps = Steps {
        open_ms: ms(started, opened),
        load_ms: ms(opened, loaded),
        recover_ms: ms(loaded, recovered),
    };
    Ok((steps, (summary.loaded, summary.stored)))
}

/// The middle value, or the mean of the middle two; 0 for none.
pub(super) fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

impl StartupReport {
    /// The human-readable form.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "taskyard bench recovery ({}): {} finished and {} active jobs{}, seeded in {:.1} s",
            self.store,
            self.finished,
            self.active,
            if self.keyed {
                ", every one with an idempotency key"
            } else {
                ""
            },
            self.seed_secs
        );
        let runs: Vec<String> = self.ready_ms.iter().map(|ms| format!("{ms:.0}")).collect();
        let _ = writeln!(
            out,
            "  ready    median {:.0} ms (runs: {} ms); {} jobs loaded, {} stored",
            self.ready_median_ms,
            runs.join(", "),
            self.loaded,
            self.stored
        );
        let s = &self.steps;
        let _ = writeln!(
            out,
            "  steps    open {:.0} ms, load {:.0} ms, recover {:.0} ms",
            s.open_ms, s.load_ms, s.recover_ms
        );
        if let Some(db) = &self.db {
            let _ = writeln!(out, "  database kept at {db}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn the_median_is_the_middle_value_or_the_mean_of_the_middle_two() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }
}
