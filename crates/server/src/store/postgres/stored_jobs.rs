//! Reading history from PostgreSQL: one connection per reader thread,
//! each read in its own snapshot of what is committed.

use super::connect::{error_text, PgTarget};
use super::read::{attempts_of, job_from, with_last_attempt, ATTEMPT_COLUMNS, COLUMNS};
use crate::scheduler::Job;
use crate::scheduler::OrderKey;
use crate::store::read_budget::{stretch_end, walk_within, ReadBudget, Walked};
use crate::store::stored_jobs::FilterArg;
use crate::store::stored_jobs::StoredJobReader;
use crate::store::{PageFilter, StoreError, StoredSummary};
use postgres::error::SqlState;
use postgres::types::ToSql;
use postgres::Client;
use std::time::Instant;
use taskyard_protocol::JobId;

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

    /// Rows of `filter`'s page, newest submission first, as `columns`;
    /// `None` if PostgreSQL cancelled the read at `deadline`.
    fn select(
        &mut self,
        filter: &PageFilter,
        columns: &str,
        deadline: Option<Instant>,
    ) -> Result<Option<Vec<postgres::Row>>, StoreError> {
        let mut conditions = Vec::new();
        let mut args: Vec<Box<dyn ToSql + Sync>> = Vec::new();
        for (sql, values) in filter.conditions().into_iter().chain(filter.range()) {
            let mut sql = sql;
            for value in values {
                args.push(match value {
                    FilterArg::Text(text) => Box::new(text),
                    FilterArg::Int(n) => Box::new(n),
                    FilterArg::Id(id) => Box::new(id.0),
                });
                sql = sql.replacen('?', &format!("${}", args.len()), 1);
            }
            conditions.push(sql);
        }
        let where_sql = match conditions.is_empty() {
            true => String::new(),
            false => format!("WHERE {}", conditions.join(" AND ")),
        };
        args.push(Box::new(filter.limit.min(i64::MAX as usize) as i64));
        let query = format!(
            "SELECT {columns} FROM taskyard.jobs {where_sql} ORDER BY {} LIMIT ${}",
            filter.order_sql(),
            args.len()
        );
        let params: Vec<&(dyn ToSql + Sync)> = args.iter().map(|a| a.as_ref()).collect();
        // 0: no limit; a deadline already past still gets a millisecond.
        let timeout = deadline.map_or(0, |d| {
            d.saturating_duration_since(Instant::now())
                .as_millis()
                .max(1)
        });
        let client = self.client()?;
        let read = (|| {
            let mut tx = client
                .transaction()
                .map_err(|e| Unread::Failed(error_text(&e)))?;
            tx.batch_execute(&format!("SET LOCAL statement_timeout = {timeout}"))
                .map_err(|e| Unread::Failed(error_text(&e)))?;
            let rows = tx.query(&query, &params).map_err(|e| match e.code() {
                Some(&SqlState::QUERY_CANCELED) => Unread::OutOfTime,
                _ => Unread::Failed(error_text(&e)),
            })?;
            tx.commit().map_err(|e| Unread::Failed(error_text(&e)))?;
            Ok(rows)
        })();
        match read {
            Ok(rows) => Ok(Some(rows)),
            Err(Unread::OutOfTime) => Ok(None),
            Err(Unread::Failed(reason)) => Err(self.fail(reason)),
        }
    }

    /// Order keys of up to `limit` jobs after `filter`'s cursor (and no
    /// other condition), skipping `offset`, in its order.
    fn keys_after(
        &mut self,
        filter: &PageFilter,
        limit: usize,
        offset: u64,
    ) -> Result<Vec<OrderKey>, StoreError> {
        let limit = limit.min(i64::MAX as usize) as i64;
        let compare = if filter.oldest_first { ">" } else { "<" };
        let order_by = filter.order_sql();
        let offset = offset.min(i64::MAX as u64) as i64;
        let found = match filter.before {
            Some((sequence, submitted_at, id)) => {
                let query = format!(
                    "SELECT sequence, submitted_at, id FROM taskyard.jobs \
                     WHERE (sequence, submitted_at, id) {compare} ($1, $2, $3) \
                     ORDER BY {order_by} LIMIT $4 OFFSET $5"
                );
                let sequence = sequence.min(i64::MAX as u64) as i64;
                self.client()?
                    .query(&query, &[&sequence, &submitted_at, &id.0, &limit, &offset])
            }
            None => {
                let query = format!(
                    "SELECT sequence, submitted_at, id FROM taskyard.jobs \
                     ORDER BY {order_by} LIMIT $1 OFFSET $2"
                );
                self.client()?.query(&query, &[&limit, &offset])
            }
        };
        let rows = found.map_err(|e| self.fail(error_text(&e)))?;
        rows.iter()
            .map(|row| {
                let sequence: i64 = row.try_get(0)?;
                let submitted_at: i64 = row.try_get(1)?;
                let id: uuid::Uuid = row.try_get(2)?;
                Ok((sequence.max(0) as u64, submitted_at, JobId(id)))
            })
            .collect::<Result<Vec<_>, postgres::Error>>()
            .map_err(|e| self.fail(e.to_string()))
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

impl StoredJobReader for PostgresReader {
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

    fn page(
        &mut self,
        filter: &PageFilter,
        budget: Option<&ReadBudget>,
    ) -> Result<Walked<Job>, StoreError> {
        let walked = walk_within(self, filter, budget, Self::job_rows, |r, f, n| {
            stretch_end(r, f, n, Self::keys_after)
        })?;
        let stopped_at = walked.stopped_at;
        let rows = self.with_histories(walked.rows)?;
        Ok(Walked { rows, stopped_at })
    }

    fn summaries(
        &mut self,
        filter: &PageFilter,
        budget: Option<&ReadBudget>,
    ) -> Result<Walked<StoredSummary>, StoreError> {
        walk_within(self, filter, budget, Self::summary_rows, |r, f, n| {
            stretch_end(r, f, n, Self::keys_after)
        })
    }
}

impl PostgresReader {
    /// The page's jobs (without their older attempts), or `None` if out
    /// of time.
    fn job_rows(
        &mut self,
        filter: &PageFilter,
        deadline: Option<Instant>,
    ) -> Result<Option<Vec<Job>>, StoreError> {
        let Some(rows) = self.select(filter, COLUMNS, deadline)? else {
            return Ok(None);
        };
        let jobs = rows.iter().map(job_from).collect::<Result<Vec<_>, _>>();
        jobs.map(Some).map_err(|e| self.fail(e))
    }

    /// The page's summaries, or `None` if out of time.
    fn summary_rows(
        &mut self,
        filter: &PageFilter,
        deadline: Option<Instant>,
    ) -> Result<Option<Vec<StoredSummary>>, StoreError> {
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
        let Some(rows) = self.select(filter, &columns, deadline)? else {
            return Ok(None);
        };
        rows.iter()
            .map(|row| {
                let payload: Option<i64> = row.try_get(27).map_err(|e| e.to_string())?;
                let result: Option<i64> = row.try_get(28).map_err(|e| e.to_string())?;
                Ok(StoredSummary {
                    job: job_from(row)?,
                    payload_bytes: payload.unwrap_or(0).max(0) as u64,
                    result_bytes: result.map(|n| n.max(0) as u64),
                })
            })
            .collect::<Result<Vec<_>, String>>()
            .map(Some)
            .map_err(|e| self.fail(e))
    }
}

/// Why a page's select returned no rows.
enum Unread {
    /// PostgreSQL cancelled it at its deadline (`statement_timeout`).
    OutOfTime,
    Failed(String),
}
