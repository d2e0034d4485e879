//! `taskyard bench recovery`: how long a coordinator takes to start on a
//! database that has run for months (many finished rows, a few active
//! ones). Seeds the database, then starts a coordinator on it `runs`
//! times, each timed from the call to ready-to-serve (database opened,
//! state recovered, listeners open), and once more step by step.

use crate::actors::CoordinatorHandle;
use crate::bench::cluster::TempDir;
use crate::bench::seed::{self, SeedPlan};
use crate::bench::BenchError;
use crate::clock::Clock;
use crate::config::{CoordinatorConfig, Synchronous};
use crate::scheduler::{CoordinatorState, Policy};
use crate::store::JobStore;
use serde::Serialize;
use slog::Logger;
use std::fmt::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Instant;

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
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct StartupReport {
    pub finished: u64,
    pub active: u64,
    pub keyed: bool,
    pub seed_secs: f64,
    /// Each run: call to ready to serve, in milliseconds.
    pub ready_ms: Vec<f64>,
    pub ready_median_ms: f64,
    /// Jobs loaded into memory (active set and finished window).
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
    let now = crate::clock::SystemClock.now_millis();
    let plan = SeedPlan {
        finished: opts.finished,
        active: opts.active,
        keyed: opts.keyed,
        // Finished during the last hour or so: none has expired.
        finished_from: now - 3_600_000 - opts.finished as i64,
        task_type: super::cluster::NOOP.into(),
    };
    let seeded = seed::seed(&path, &plan)?;
    let config = CoordinatorConfig {
        client_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        worker_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        db_path: path.clone(),
        http_listen: String::new(),
        max_active_jobs: (opts.active + 1000).max(CoordinatorConfig::default().max_active_jobs),
        ..CoordinatorConfig::default()
    };
    let steps = steps(&config)?;
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

/// One start-up's store steps timed apart, without listeners.
fn steps(config: &CoordinatorConfig) -> Result<Steps, BenchError> {
    let fail = |e: crate::store::StoreError| BenchError::Failed(e.to_string());
    let started = Instant::now();
    let store = JobStore::open(&config.db_path, Synchronous::Full).map_err(fail)?;
    let opened = Instant::now();
    let stored = store
        .load_for_recovery(config.retain_finished_in_memory)
        .map_err(fail)?;
    let loaded = Instant::now();
    let log = Logger::root(slog::Discard, slog::o!());
    let mut state = CoordinatorState::new(Policy::from_config(config), log);
    state.recover_stored(stored, crate::clock::SystemClock.now());
    let recovered = Instant::now();
    let ms = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1000.0;
    Ok(Steps {
        open_ms: ms(started, opened),
        load_ms: ms(opened, loaded),
        recover_ms: ms(loaded, recovered),
    })
}

fn median(values: &[f64]) -> f64 {
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
            "taskyard bench recovery: {} finished and {} active jobs{}, seeded in {:.1} s",
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
