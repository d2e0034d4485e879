//! Reading history from PostgreSQL: one connection per reader thread,
//! each read in its own snapshot of what is committed.

use super::connect::{error_text, PgTarget};
use super::read::{attempts_of, job_from, with_last_attempt, ATTEMPT_COLUMNS, COLUMNS};
use crate::protocol::JobId;
use crate::scheduler::Job;
use crate::store::history::FilterArg;
use crate::store::history::HistoryReader;
use crate::store::{PageFilter, StoreError, StoredSummary};
use postgres::types::ToSql;
use postgres::Client;

/// A history reader on a connection of its own (opened again after a
/// loss, at the next read).
pub struct PostgresReader {
    target: PgTarget,
    client: Option<Client>,
}

impl PostgresReader {
    /// Connects now, so a bad URL or an unreachable database fails at
    /// start-up.
    pub fn open(target: PgTarget) -> Result<PostgresReader, StoreError> {
        let mut reader = PostgresReader {
            target,
            client: None,
        };
        reader.client()?;
        Ok(reader)
    }

    fn client(&mut self) -> Result<&mut Client, StoreError> {
        if self.client.as_ref().is_none_or(|c| c.is_closed()) {
            self.client = None;
            let client = self
                .target
                .connect()
                .map_err(|e| StoreError::new(self.target.describe(), e))?;
            self.client = Some(client);
        }
        self.client
            .as_mut()
            .ok_or_else(|| StoreError::new(self.target.describe(), "not connected"))
    }

    fn fail(&self, reason: String) -> StoreError {
        StoreError::new(self.target.describe(), self.target.redact(&reason))
    }

    /// Rows of `filter`'s page, newest submission first, as `columns`.
    fn select(
        &mut self,
        filter: &PageFilter,
        columns: &str,
    ) -> Result<Vec<postgres::Row>, StoreError> {
        let mut conditions = Vec::new();
        let mut args: Vec<Box<dyn ToSql + Sync>> = Vec::new();
        let arg = |sql: &str, value: Box<dyn ToSql + Sync>, args: &mut Vec<_>| {
            args.push(value);
            sql.replacen('?', &format!("${}", args.len()), 1)
        };
        for (sql, values) in filter.conditions() {
            let mut sql = sql;
            for value in values {
                let boxed: Box<dyn ToSql + Sync> = match value {
                    FilterArg::Text(text) => Box::new(text),
                    FilterArg::Int(n) => Box::new(n),
                    FilterArg::Id(id) => Box::new(id.0),
                };
                sql = arg(&sql, boxed, &mut args);
            }
            conditions.push(sql);
        }
        let (compare, order_by) = filter.order_sql();
        if let Some((sequence, submitted_at, id)) = filter.before {
            let n = args.len();
            args.push(Box::new(sequence.min(i64::MAX as u64) as i64));
            args.push(Box::new(submitted_at));
            args.push(Box::new(id.0));
            conditions.push(format!(
                "(sequence, submitted_at, id) {compare} (${}, ${}, ${})",
                n + 1,
                n + 2,
                n + 3
            ));
        }
        let where_sql = match conditions.is_empty() {
            true => String::new(),
            false => format!("WHERE {}", conditions.join(" AND ")),
        };
        args.push(Box::new(filter.limit.min(i64::MAX as usize) as i64));
        let query = format!(
            "SELECT {columns} FROM taskyard.jobs {where_sql} ORDER BY {order_by} LIMIT ${}",
            args.len()
        );
        let params: Vec<&(dyn ToSql + Sync)> = args.iter().map(|a| a.as_ref()).collect();
        let rows = self.client()?.query(&query, &params);
        rows.map_err(|e| self.fail(error_text(&e)))
    }

    /// `jobs` with the attempts stored apart from their rows.
    fn with_histories(&mut self, mut jobs: Vec<Job>) -> Result<Vec<Job>, StoreError> {
        let ids: Vec<uuid::Uuid> = jobs.iter().map(|j| j.id.0).collect();
        let sql = format!(
            "SELECT {ATTEMPT_COLUMNS} FROM taskyard.attempts WHERE job_id = ANY($1) \
             ORDER BY job_id, number"
        );
        let client = self.client()?;
        let mut histories = attempts_of(client, &sql, &[&ids]).map_err(|e| self.fail(e))?;
        for job in &mut jobs {
            let stored = histories.remove(&job.id).unwrap_or_default();
            job.history = with_last_attempt(stored, job.history.pop());
        }
        Ok(jobs)
    }
}

impl HistoryReader for PostgresReader {
    fn job(&mut self, id: JobId) -> Result<Option<Job>, StoreError> {
        let query = format!("SELECT {COLUMNS} FROM taskyard.jobs WHERE id = $1");
        let found = self.client()?.query_opt(&query, &[&id.0]);
        let found = found.map_err(|e| self.fail(error_text(&e)))?;
        let Some(row) = found else {
            return Ok(None);
        };
        let job = job_from(&row).map_err(|e| self.fail(e))?;
        Ok(self.with_histories(vec![job])?.pop())
    }

    fn page(&mut self, filter: &PageFilter) -> Result<Vec<Job>, StoreError> {
        let rows = self.select(filter, COLUMNS)?;
        let jobs = rows
            .iter()
            .map(job_from)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.fail(e))?;
        self.with_histories(jobs)
    }

    fn summaries(&mut self, filter: &PageFilter) -> Result<Vec<StoredSummary>, StoreError> {
        let columns = format!(
            "{}, octet_length(payload)::bigint, octet_length(result)::bigint",
            COLUMNS
                .replacen("payload", "''::bytea AS payload", 1)
                .replacen(
                    "result",
                    "CASE WHEN result IS NULL THEN NULL ELSE ''::bytea END AS result",
                    1
                )
        );
        let rows = self.select(filter, &columns)?;
        rows.iter()
            .map(|row| {
                let payload: Option<i64> = row.try_get(26).map_err(|e| e.to_string())?;
                let result: Option<i64> = row.try_get(27).map_err(|e| e.to_string())?;
                Ok(StoredSummary {
                    job: job_from(row)?,
                    payload_bytes: payload.unwrap_or(0).max(0) as u64,
                    result_bytes: result.map(|n| n.max(0) as u64),
                })
            })
            .collect::<Result<Vec<_>, String>>()
            .map_err(|e| self.fail(e))
    }
}
