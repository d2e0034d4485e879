//! `taskyard bench history`: what a page of history costs on a large
//! database (SQLite, or PostgreSQL with `--store postgres`). Seeds `finished` jobs (1% FAILED, four task types,
//! three priorities), then times each filter's first and tenth page in
//! both orders through the reader the coordinator uses, and a plain page
//! while 8 other readers run the slowest filter without pause.

use crate::seed::{seed, SeedPlan};
use crate::BenchError;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;
use taskyard_protocol::{IdPrefix, JobState, Priority};
use taskyard_server::store::postgres::{PgTarget, PostgresReader};
use taskyard_server::store::{JobReader, PageFilter, ReadBudget, StoredJobReader};

/// Rows on one page (the dashboard's and `list`'s default is 50).
const PAGE: usize = 50;
/// Timed repetitions of each measurement.
const RUNS: usize = 5;
/// Readers busy with the slowest filter during the contention phase.
const BUSY_READERS: usize = 8;

/// One filter's timings, milliseconds (medians of `RUNS`).
#[derive(Debug, Clone, Serialize)]
pub struct FilterTiming {
    pub filter: String,
    pub oldest_first: bool,
    pub first_page_ms: f64,
    pub tenth_page_ms: f64,
}

/// What `bench history` measured.
#[derive(Debug, Clone, Serialize)]
pub struct HistoryReport {
    pub store: String,
    pub finished_jobs: u64,
    pub seed_secs: f64,
    pub filters: Vec<FilterTiming>,
    /// The slowest filter of `filters` (by tenth page), run by the busy readers.
    pub busy_filter: String,
    /// A plain first page while `BUSY_READERS` readers run `busy_filter`.
    pub plain_page_busy_median_ms: f64,
    pub plain_page_busy_max_ms: f64,
}

impl HistoryReport {
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "history of {} finished jobs ({}, seeded in {:.1} s), pages of {PAGE}, medians of {RUNS}:\n",
            self.finished_jobs, self.store, self.seed_secs
        );
        out += "FILTER                ORDER    FIRST PAGE  TENTH PAGE\n";
        for f in &self.filters {
            out += &format!(
                "{:<21} {:<8} {:>8.2} ms {:>8.2} ms\n",
                f.filter,
                if f.oldest_first { "oldest" } else { "newest" },
                f.first_page_ms,
                f.tenth_page_ms
            );
        }
        out += &format!(
            "plain page while {BUSY_READERS} readers run {}: median {:.2} ms, max {:.2} ms\n",
            self.busy_filter, self.plain_page_busy_median_ms, self.plain_page_busy_max_ms
        );
        out
    }
}

/// Where the history lives: a new SQLite file, or a PostgreSQL database
/// whose `taskyard` schema is empty.
pub enum HistoryStore {
    Sqlite(std::path::PathBuf),
    Postgres(crate::postgres::BenchPostgres),
}

impl HistoryStore {
    fn name(&self) -> String {
        match self {
            HistoryStore::Sqlite(_) => "SQLite".into(),
            HistoryStore::Postgres(pg) => format!("PostgreSQL, {}", pg.describe()),
        }
    }

    fn seed(&self, plan: &SeedPlan) -> Result<f64, BenchError> {
        let seeded = match self {
            HistoryStore::Sqlite(path) => seed(path, plan)?,
            HistoryStore::Postgres(pg) => crate::seed::seed_postgres(pg.url(), plan)?,
        };
        Ok(seeded.secs)
    }

    /// Makes the seeded jobs varied: every 100th FAILED, task types
    /// `type-0`..`type-3`, base priorities LOW, NORMAL, HIGH in turn.
    fn vary(&self) -> Result<(), BenchError> {
        let fail = |e: String| BenchError::Failed(format!("varying the seeded jobs: {e}"));
        match self {
            HistoryStore::Sqlite(path) => rusqlite::Connection::open(path)
                .and_then(|conn| {
                    conn.execute_batch(
                        "UPDATE jobs SET state = CASE WHEN sequence % 100 = 0 THEN 'FAILED' \
                         ELSE state END, task_type = 'type-' || (sequence % 4), \
                         priority = sequence % 3;",
                    )
                })
                .map_err(|e| fail(e.to_string())),
            HistoryStore::Postgres(pg) => {
                let target = PgTarget::parse(pg.url()).map_err(|e| fail(e.to_string()))?;
                let mut client = target.connect().map_err(fail)?;
                client
                    .batch_execute(
                        "UPDATE taskyard.jobs SET state = CASE WHEN sequence % 100 = 0 \
                         THEN 'FAILED' ELSE state END, task_type = 'type-' || (sequence % 4), \
                         priority = (sequence % 3)::smallint; ANALYZE taskyard.jobs;",
                    )
                    .map_err(|e| fail(target.redact(&e.to_string())))
            }
        }
    }

    /// A reader on a connection of its own, as the coordinator's pool has.
    fn reader(&self) -> Result<Box<dyn StoredJobReader>, BenchError> {
        Ok(match self {
            HistoryStore::Sqlite(path) => Box::new(JobReader::open(path).map_err(failed)?),
            HistoryStore::Postgres(pg) => {
                let target =
                    PgTarget::parse(pg.url()).map_err(|e| BenchError::Failed(e.to_string()))?;
                Box::new(PostgresReader::open(target).map_err(failed)?)
            }
        })
    }
}

/// Seeds `store` with `finished` jobs and measures its pages.
pub fn run(store: &HistoryStore, finished: u64) -> Result<HistoryReport, BenchError> {
    let plan = SeedPlan {
        finished,
        active: 0,
        keyed: false,
        finished_from: 1_700_000_000_000,
        task_type: "type-0".into(),
    };
    let seed_secs = store.seed(&plan)?;
    store.vary()?;
    let mut reader = store.reader()?;
    let mut filters = Vec::new();
    for (name, filter) in filters_of(reader.as_mut())? {
        for oldest_first in [false, true] {
            let filter = PageFilter {
                oldest_first,
                ..filter.clone()
            };
            let (first, tenth) = time_pages(reader.as_mut(), &filter)?;
            filters.push(FilterTiming {
                filter: name.clone(),
                oldest_first,
                first_page_ms: first,
                tenth_page_ms: tenth,
            });
        }
    }
    let slowest = filters
        .iter()
        .max_by(|a, b| a.tenth_page_ms.total_cmp(&b.tenth_page_ms))
        .map(|f| f.filter.clone())
        .unwrap_or_default();
    let busy = filters_of(reader.as_mut())?
        .into_iter()
        .find(|(name, _)| *name == slowest)
        .map(|(_, f)| f)
        .unwrap_or_else(plain);
    let (median, max) = plain_page_while_busy(store, reader.as_mut(), &busy)?;
    Ok(HistoryReport {
        store: store.name(),
        finished_jobs: finished,
        seed_secs,
        filters,
        busy_filter: slowest,
        plain_page_busy_median_ms: median,
        plain_page_busy_max_ms: max,
    })
}

/// The coordinator's default budget per page.
const BUDGET: ReadBudget = ReadBudget {
    time: std::time::Duration::from_millis(
        taskyard_server::config::defaults::HISTORY_READ_BUDGET_MILLIS,
    ),
    rows: taskyard_server::config::defaults::HISTORY_READ_ROWS,
};

fn plain() -> PageFilter {
    PageFilter {
        limit: PAGE,
        ..PageFilter::default()
    }
}

/// The filters the CLI, API and dashboard offer, by name.
fn filters_of(reader: &mut dyn StoredJobReader) -> Result<Vec<(String, PageFilter)>, BenchError> {
    let newest = reader.summaries(&plain(), Some(&BUDGET)).map_err(failed)?;
    let prefix = newest
        .rows
        .first()
        .map(|s| s.job.id.to_string()[..8].to_string())
        .unwrap_or_else(|| "0".into());
    Ok(vec![
        ("none".into(), plain()),
        (
            "state=FAILED".into(),
            PageFilter {
                state: Some(JobState::Failed),
                ..plain()
            },
        ),
        (
            "type=type-1".into(),
            PageFilter {
                task_type: Some("type-1".into()),
                ..plain()
            },
        ),
        (
            "priority=low".into(),
            PageFilter {
                priority: Some(Priority::Low),
                ..plain()
            },
        ),
        (
            format!("prefix={prefix}"),
            PageFilter {
                id_prefix: IdPrefix::parse(&prefix).ok(),
                ..plain()
            },
        ),
    ])
}

/// Medians of the first page and of the tenth (reached through the
/// cursor of each page before it), milliseconds.
fn time_pages(
    reader: &mut dyn StoredJobReader,
    filter: &PageFilter,
) -> Result<(f64, f64), BenchError> {
    let mut first = Vec::new();
    let mut tenth = Vec::new();
    for _ in 0..RUNS {
        let mut cursor = None;
        for page in 1..=10 {
            let started = Instant::now();
            let resumed = PageFilter {
                before: cursor,
                ..filter.clone()
            };
            let walked = reader.summaries(&resumed, Some(&BUDGET)).map_err(failed)?;
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            match page {
                1 => first.push(ms),
                10 => tenth.push(ms),
                _ => {}
            }
            let last = walked.rows.last().map(|s| s.job.order_key());
            cursor = walked.stopped_at.or(last);
        }
    }
    Ok((median(&mut first), median(&mut tenth)))
}

/// A plain page's median and max while `BUSY_READERS` threads, each on a
/// connection of its own, read `busy` pages without pause.
fn plain_page_while_busy(
    store: &HistoryStore,
    reader: &mut dyn StoredJobReader,
    busy: &PageFilter,
) -> Result<(f64, f64), BenchError> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for _ in 0..BUSY_READERS {
        let mut own = store.reader()?;
        let (stop, busy) = (Arc::clone(&stop), busy.clone());
        threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = own.summaries(&busy, Some(&BUDGET));
            }
        }));
    }
    let mut times = Vec::new();
    for _ in 0..(RUNS * 10) {
        let started = Instant::now();
        reader.summaries(&plain(), Some(&BUDGET)).map_err(failed)?;
        times.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        let _ = thread.join();
    }
    let max = times.iter().copied().fold(0.0, f64::max);
    Ok((median(&mut times), max))
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

fn failed(e: taskyard_server::store::StoreError) -> BenchError {
    BenchError::Failed(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_history_is_measured_for_every_filter_in_both_orders() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = HistoryStore::Sqlite(dir.path().join("h.db"));
        let report = run(&store, 2_000).expect("bench");
        assert_eq!(report.filters.len(), 10);
        assert!(report.to_text().contains("state=FAILED"));
        let reader = JobReader::open(&dir.path().join("h.db")).expect("reader");
        let failed = reader
            .summaries_unbudgeted(&PageFilter {
                state: Some(JobState::Failed),
                limit: 100,
                ..PageFilter::default()
            })
            .expect("failed page");
        assert_eq!(failed.len(), 20, "every 100th of 2,000 failed");
    }
}
