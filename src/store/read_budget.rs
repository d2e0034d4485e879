//! How long one history read may run, and what it returns when that runs
//! out: never an error, but the matches found so far and where to go on.
//!
//! A read first runs as asked, stopped by the database once `time` has
//! passed (SQLite's progress handler, PostgreSQL's `statement_timeout`).
//! Every filter is served by an index, so this is rare: a combination the
//! indexes serve poorly (an old id prefix, a rare state of one task type).
//! Then the read walks a bounded stretch instead: the next `rows` jobs in
//! the page's order, whatever they match, through the listing index; the
//! page holds the matches among them, and its cursor resumes after the
//! last of them. A slow filter therefore pages through history in steps
//! of bounded cost instead of failing.

use super::{PageFilter, StoreError};
use crate::scheduler::OrderKey;
use std::time::{Duration, Instant};

/// The most one history page may cost: `time` for the read as asked,
/// then a walk of at most `rows` jobs in the page's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadBudget {
    pub time: Duration,
    pub rows: u64,
}

impl Default for ReadBudget {
    fn default() -> Self {
        ReadBudget {
            time: Duration::from_millis(DEFAULT_BUDGET_MILLIS),
            rows: DEFAULT_BUDGET_ROWS,
        }
    }
}

/// `history-read-budget-millis` unless configured otherwise.
pub const DEFAULT_BUDGET_MILLIS: u64 = 100;
/// `history-read-rows` unless configured otherwise.
pub const DEFAULT_BUDGET_ROWS: u64 = 20_000;

/// A page as read. `rows`: the matches in the page's order, at most the
/// filter's limit. `stopped_at`: set when the budget ran out before the
/// page was full; `rows` then holds every match up to and including this
/// order key, none after it, and the next page resumes after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Walked<T> {
    pub rows: Vec<T>,
    pub stopped_at: Option<OrderKey>,
}

impl<T> Walked<T> {
    /// Every match up to the limit: the read was not stopped.
    pub fn whole(rows: Vec<T>) -> Walked<T> {
        Walked {
            rows,
            stopped_at: None,
        }
    }

    /// The same page with each row turned into another.
    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Walked<U> {
        Walked {
            rows: self.rows.into_iter().map(f).collect(),
            stopped_at: self.stopped_at,
        }
    }
}

/// Reads `filter`'s page within `budget` (see the module's doc) through a
/// backend's two reads: `select`, the page's rows, or `None` if the
/// database stopped it at the deadline given (none: no deadline; the
/// filter's `until` bounds it instead); `frontier`, the order key of the
/// `n`th job after the filter's cursor in its order, whatever it matches,
/// if more jobs follow it (else the stretch reaches the end: no bound).
pub(crate) fn walk_within<R: ?Sized, T>(
    reader: &mut R,
    filter: &PageFilter,
    budget: &ReadBudget,
    select: impl Fn(&mut R, &PageFilter, Option<Instant>) -> Result<Option<Vec<T>>, StoreError>,
    frontier: impl Fn(&mut R, &PageFilter, u64) -> Result<Option<OrderKey>, StoreError>,
) -> Result<Walked<T>, StoreError> {
    // No time at all: straight to the bounded walk.
    if !budget.time.is_zero() {
        let deadline = Instant::now() + budget.time;
        if let Some(rows) = select(reader, filter, Some(deadline))? {
            return Ok(Walked::whole(rows));
        }
    }
    let until = frontier(reader, filter, budget.rows.max(1))?;
    let bounded = PageFilter {
        until,
        ..filter.clone()
    };
    let rows = select(reader, &bounded, None)?.unwrap_or_default();
    let stopped_at = until.filter(|_| rows.len() < filter.limit);
    Ok(Walked { rows, stopped_at })
}
