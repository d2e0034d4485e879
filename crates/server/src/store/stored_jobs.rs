//! Reading stored jobs back: jobs the coordinator no longer holds in
//! memory (finished and evicted ones, mostly), read on a connection of their own beside the writer's (WAL lets readers see
//! the last committed state while a write transaction is open).

use super::read::{read_row, with_stored_attempts, COLUMNS};
use super::read_budget::{stretch_end, walk_within, ReadBudget, Walked};
use super::StoreError;
use crate::scheduler::{Job, OrderKey};
use rusqlite::{params_from_iter, Connection, ErrorCode, OpenFlags, OptionalExtension};
use std::path::{Path, PathBuf};
use std::time::Instant;
use taskyard_protocol::JobId;

/// What a stored-reads thread reads through, whatever the backend
/// (SQLite's `JobReader`, PostgreSQL's `PostgresReader`): each read sees
/// what was committed when it began. One per thread, on a connection of
/// its own.
pub trait StoredJobReader: Send + 'static {
    /// The stored job with all its attempts, if the database has it.
    fn job(&mut self, id: JobId) -> Result<Option<Job>, StoreError>;
    /// Up to `filter.limit` stored jobs, newest submission first; each
    /// with all its attempts. Within `budget`: a page that would cost
    /// more comes back short, with where it stopped.
    fn page(
        &mut self,
        filter: &PageFilter,
        budget: Option<&ReadBudget>,
    ) -> Result<Walked<Job>, StoreError>;
    /// `page` without payloads, results and older attempts, with the
    /// stored lengths (see `JobReader::summaries_unbudgeted`).
    fn summaries(
        &mut self,
        filter: &PageFilter,
        budget: Option<&ReadBudget>,
    ) -> Result<Walked<StoredSummary>, StoreError>;
}

impl StoredJobReader for JobReader {
    fn job(&mut self, id: JobId) -> Result<Option<Job>, StoreError> {
        JobReader::job(self, id)
    }

    fn page(
        &mut self,
        filter: &PageFilter,
        budget: Option<&ReadBudget>,
    ) -> Result<Walked<Job>, StoreError> {
        let select = |r: &mut Self, f: &PageFilter, deadline| r.page_rows(f, deadline);
        walk_within(self, filter, budget, select, |r, f, n| {
            stretch_end(r, f, n, |r: &mut Self, f, l, o| r.keys_after(f, l, o))
        })
    }

    fn summaries(
        &mut self,
        filter: &PageFilter,
        budget: Option<&ReadBudget>,
    ) -> Result<Walked<StoredSummary>, StoreError> {
        let select = |r: &mut Self, f: &PageFilter, deadline| r.summary_rows(f, deadline);
        walk_within(self, filter, budget, select, |r, f, n| {
            stretch_end(r, f, n, |r: &mut Self, f, l, o| r.keys_after(f, l, o))
        })
    }
}

/// A read-only connection to the database. Each reader thread owns one.
pub struct JobReader {
    conn: Connection,
    path: PathBuf,
}

/// A stored job without its bytes (see [`JobReader::summaries_unbudgeted`]), and how
/// long its payload and result are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSummary {
    pub job: Job,
    pub payload_bytes: u64,
    pub result_bytes: Option<u64>,
}

/// Where the lengths follow `COLUMNS` in a summary row.
const SUMMARY_LENGTHS: usize = 27;

pub use crate::scheduler::stored_read::PageFilter;

/// The SQL of a page, the same for every backend.
impl PageFilter {
    /// The `WHERE` conditions (without the cursor) and their arguments,
    /// as `(sql with ? for each argument, argument)` pairs, the same for
    /// every backend; an id prefix becomes a range of the primary key.
    ///
    /// State and priority are written as literals (they come from enums,
    /// never from text a client sent): a database uses a partial index
    /// (`jobs_failed`, `jobs_low`, …) only when the query names its value.
    pub fn conditions(&self) -> Vec<(String, Vec<FilterArg>)> {
        let mut out = Vec::new();
        if let Some(state) = self.state {
            out.push((format!("state = '{}'", state.as_str()), Vec::new()));
        }
        if let Some(task_type) = &self.task_type {
            let sql = "task_type = ?".to_string();
            out.push((sql, vec![FilterArg::Text(task_type.clone())]));
        }
        if let Some(finished_by) = self.finished_by {
            let sql = "finished_at <= ?".to_string();
            out.push((sql, vec![FilterArg::Int(finished_by)]));
        }
        if let Some(priority) = self.priority {
            out.push((format!("priority = {}", priority.level()), Vec::new()));
        }
        if let Some(prefix) = &self.id_prefix {
            let (low, high) = prefix.bounds();
            let sql = "id BETWEEN ? AND ?".to_string();
            out.push((sql, vec![FilterArg::Id(low), FilterArg::Id(high)]));
        }
        out
    }

    /// The conditions of the page's stretch of the order, like
    /// `conditions`: after the cursor, and up to `until`.
    pub fn range(&self) -> Vec<(String, Vec<FilterArg>)> {
        let (after, up_to) = match self.oldest_first {
            false => ("<", ">="),
            true => (">", "<="),
        };
        [(after, self.before), (up_to, self.until)]
            .into_iter()
            .filter_map(|(compare, key)| {
                let (sequence, submitted_at, id) = key?;
                let sql = format!("(sequence, submitted_at, id) {compare} (?, ?, ?)");
                let sequence = sequence.min(i64::MAX as u64) as i64;
                let args = vec![
                    FilterArg::Int(sequence),
                    FilterArg::Int(submitted_at),
                    FilterArg::Id(id),
                ];
                Some((sql, args))
            })
            .collect()
    }

    /// The `ORDER BY` of this page's order.
    pub fn order_sql(&self) -> &'static str {
        match self.oldest_first {
            false => "sequence DESC, submitted_at DESC, id DESC",
            true => "sequence ASC, submitted_at ASC, id ASC",
        }
    }
}

/// One argument of a `PageFilter` condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterArg {
    Text(String),
    Int(i64),
    Id(JobId),
}

impl JobReader {
    /// Opens the database read-only. It must exist (the writer created and
    /// migrated it first); nothing this connection does can change it.
    pub fn open(path: &Path) -> Result<JobReader, StoreError> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags)
            .map_err(|e| StoreError::sqlite(path, e.to_string()))?;
        Ok(JobReader {
            conn,
            path: path.to_path_buf(),
        })
    }

    /// The stored job with its whole history, if the database has it.
    pub fn job(&self, id: JobId) -> Result<Option<Job>, StoreError> {
        let query = format!("SELECT {COLUMNS} FROM jobs WHERE id = ?1");
        let found = self
            .conn
            .query_row(&query, [id.to_string()], read_row)
            .optional()
            .map_err(|e| self.error(e))?;
        found.map(|job| self.with_history(job)).transpose()
    }

    /// Up to `filter.limit` stored jobs, newest submission first; each
    /// with its whole history. No budget: however long it takes.
    pub fn page_unbudgeted(&self, filter: &PageFilter) -> Result<Vec<Job>, StoreError> {
        Ok(self.page_rows(filter, None)?.unwrap_or_default())
    }

    /// `page` without the bytes: each job's payload and result are left
    /// empty (a result present stays `Some`), its history holds only the
    /// last attempt, and the stored lengths come beside it. What a list of
    /// summaries needs, without reading a payload or result from disk.
    pub fn summaries_unbudgeted(
        &self,
        filter: &PageFilter,
    ) -> Result<Vec<StoredSummary>, StoreError> {
        Ok(self.summary_rows(filter, None)?.unwrap_or_default())
    }

    /// `page`, or `None` if `deadline` passed first.
    fn page_rows(
        &self,
        filter: &PageFilter,
        deadline: Option<Instant>,
    ) -> Result<Option<Vec<Job>>, StoreError> {
        let Some(jobs) = self.select(filter, COLUMNS, read_row, deadline)? else {
            return Ok(None);
        };
        let jobs = jobs.into_iter().map(|job| self.with_history(job));
        Ok(Some(jobs.collect::<Result<_, _>>()?))
    }

    /// `summaries`, or `None` if `deadline` passed first.
    fn summary_rows(
        &self,
        filter: &PageFilter,
        deadline: Option<Instant>,
    ) -> Result<Option<Vec<StoredSummary>>, StoreError> {
        let columns = format!(
            "{}, length(payload), length(result)",
            COLUMNS.replacen("payload", "x'' AS payload", 1).replacen(
                "result",
                "CASE WHEN result IS NULL THEN NULL ELSE x'' END AS result",
                1
            )
        );
        let read = |row: &rusqlite::Row<'_>| {
            Ok(StoredSummary {
                job: read_row(row)?,
                payload_bytes: row
                    .get::<_, Option<i64>>(SUMMARY_LENGTHS)?
                    .unwrap_or(0)
                    .max(0) as u64,
                result_bytes: row
                    .get::<_, Option<i64>>(SUMMARY_LENGTHS + 1)?
                    .map(|n| n.max(0) as u64),
            })
        };
        self.select(filter, &columns, read, deadline)
    }

    /// The rows of `filter`'s page, newest submission first, as `columns`
    /// read by `read`; `None` if SQLite was stopped at `deadline`. A page
    /// bounded by `until` walks the listing order, whatever the filter.
    fn select<T>(
        &self,
        filter: &PageFilter,
        columns: &str,
        read: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
        deadline: Option<Instant>,
    ) -> Result<Option<Vec<T>>, StoreError> {
        let walk_order = filter.until.is_some() || self.prefix_is_dense(filter)?;
        let (query, args) = page_query(filter, columns, walk_order);
        let mut stmt = self.conn.prepare(&query).map_err(|e| self.error(e))?;
        if let Some(deadline) = deadline {
            let out_of_time = move || Instant::now() >= deadline;
            self.conn
                .progress_handler(PROGRESS_STEPS, Some(out_of_time));
        }
        let rows = stmt
            .query_map(params_from_iter(args), read)
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>());
        self.conn.progress_handler(0, None::<fn() -> bool>);
        match rows {
            Ok(rows) => Ok(Some(rows)),
            Err(e) if e.sqlite_error_code() == Some(ErrorCode::OperationInterrupted) => Ok(None),
            Err(e) => Err(self.error(e)),
        }
    }

    /// Order keys of up to `limit` jobs after `filter`'s cursor (and no
    /// other condition), skipping `offset`, in its order.
    fn keys_after(
        &self,
        filter: &PageFilter,
        limit: usize,
        offset: u64,
    ) -> Result<Vec<OrderKey>, StoreError> {
        let bare = PageFilter {
            before: filter.before,
            oldest_first: filter.oldest_first,
            limit,
            ..PageFilter::default()
        };
        let (query, mut args) = page_query(&bare, "sequence, submitted_at, id", true);
        let query = format!("{query} OFFSET ?");
        args.push((offset.min(i64::MAX as u64) as i64).into());
        let mut stmt = self.conn.prepare(&query).map_err(|e| self.error(e))?;
        let rows = stmt
            .query_map(params_from_iter(args), |row| {
                let sequence: i64 = row.get(0)?;
                let id: String = row.get(2)?;
                Ok((sequence, row.get::<_, i64>(1)?, id))
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(|e| self.error(e))?;
        rows.into_iter()
            .map(|(sequence, submitted_at, id)| {
                let id = id
                    .parse::<JobId>()
                    .map_err(|e| StoreError::sqlite(&self.path, format!("job id {id:?}: {e}")))?;
                Ok((sequence.max(0) as u64, submitted_at, id))
            })
            .collect()
    }

    /// Whether the page of an id prefix (and no other indexed filter)
    /// should walk the listing order instead of the prefix's range of the
    /// primary key. Ids are minted from the clock (UUID v7), so a short
    /// prefix names every job of a stretch of time, millions of them: the
    /// range would be read whole and sorted. Counting at most
    /// `DENSE_PREFIX_ROWS` of it tells: past that, matches are dense enough
    /// in the order for a page to come quickly; below it, the range is
    /// small enough to sort.
    pub fn prefix_is_dense(&self, filter: &PageFilter) -> Result<bool, StoreError> {
        let Some(prefix) = &filter.id_prefix else {
            return Ok(false);
        };
        if filter.state.is_some() || filter.task_type.is_some() || filter.priority.is_some() {
            return Ok(false);
        }
        let (low, high) = prefix.bounds();
        let counted: i64 = self
            .conn
            .prepare_cached(
                "SELECT count(*) FROM (SELECT 1 FROM jobs WHERE id BETWEEN ?1 AND ?2 LIMIT ?3)",
            )
            .and_then(|mut stmt| {
                stmt.query_row(
                    rusqlite::params![low.to_string(), high.to_string(), DENSE_PREFIX_ROWS],
                    |r| r.get(0),
                )
            })
            .map_err(|e| self.error(e))?;
        Ok(counted >= DENSE_PREFIX_ROWS)
    }

    /// Adds the attempts stored apart from the job row.
    fn with_history(&self, job: Job) -> Result<Job, StoreError> {
        with_stored_attempts(&self.conn, job).map_err(|e| self.error(e))
    }

    fn error(&self, e: rusqlite::Error) -> StoreError {
        StoreError::sqlite(&self.path, e.to_string())
    }
}

/// Matches of an id prefix past which its page walks the listing order
/// (see `JobReader::prefix_is_dense`).
const DENSE_PREFIX_ROWS: i64 = 5_000;

/// The `SELECT` of `filter`'s page of `columns`, newest submission first
/// (or oldest), and its arguments; `walk_order`: through `jobs_order`
/// whatever else the planner would choose.
pub(crate) fn page_query(
    filter: &PageFilter,
    columns: &str,
    walk_order: bool,
) -> (String, Vec<rusqlite::types::Value>) {
    let mut conditions = Vec::new();
    let mut args: Vec<rusqlite::types::Value> = Vec::new();
    for (sql, values) in filter.conditions() {
        conditions.push(sql);
        args.extend(values.into_iter().map(sql_value));
    }
    for (sql, values) in filter.range() {
        conditions.push(sql);
        args.extend(values.into_iter().map(sql_value));
    }
    let order_by = filter.order_sql();
    let filter_sql = match conditions.is_empty() {
        true => String::new(),
        false => format!("WHERE {}", conditions.join(" AND ")),
    };
    args.push((filter.limit.min(i64::MAX as usize) as i64).into());
    let table = match walk_order {
        true => "jobs INDEXED BY jobs_order",
        false => "jobs",
    };
    let query = format!("SELECT {columns} FROM {table} {filter_sql} ORDER BY {order_by} LIMIT ?");
    (query, args)
}

fn sql_value(value: FilterArg) -> rusqlite::types::Value {
    match value {
        FilterArg::Text(text) => text.into(),
        FilterArg::Int(n) => n.into(),
        FilterArg::Id(id) => id.to_string().into(),
    }
}

/// SQLite instructions between two looks at a read's deadline.
const PROGRESS_STEPS: i32 = 1_000;

#[cfg(test)]
#[path = "history_plan_tests.rs"]
mod history_plan_tests;
