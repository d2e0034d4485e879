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
use crate::config::defaults;
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
            time: Duration::from_millis(defaults::HISTORY_READ_BUDGET_MILLIS),
            rows: defaults::HISTORY_READ_ROWS,
        }
    }
}

pub use crate::scheduler::Walked;

/// The end of a bounded stretch: the order key of its last job, and
/// whether more jobs follow it in the page's order.
pub(crate) type StretchEnd = (OrderKey, bool);

/// The end of the next `n` jobs after `filter`'s cursor in its order,
/// whatever they match: the `n`th, or the last if fewer follow; none if no
/// job follows the cursor. `keys_after(filter, limit, offset)`: the order
/// keys of up to `limit` jobs after the filter's cursor (no other
/// condition), skipping `offset`, in the filter's order.
pub(crate) fn stretch_end<R: ?Sized>(
    reader: &mut R,
    filter: &PageFilter,
    n: u64,
    keys_after: impl Fn(&mut R, &PageFilter, usize, u64) -> Result<Vec<OrderKey>, StoreError>,
) -> Result<Option<StretchEnd>, StoreError> {
    match keys_after(reader, filter, 2, n.saturating_sub(1))?[..] {
        [nth, _] => Ok(Some((nth, true))),
        [nth] => Ok(Some((nth, false))),
        _ if keys_after(reader, filter, 1, 0)?.is_empty() => Ok(None),
        _ => {
            // Fewer than `n` follow: the last job in the page's order is
            // the first walking back from the end.
            let back = PageFilter {
                oldest_first: !filter.oldest_first,
                ..PageFilter::default()
            };
            let found = keys_after(reader, &back, 1, 0)?;
            Ok(found.first().map(|key| (*key, false)))
        }
    }
}

/// Reads `filter`'s page within `budget` (see the module's doc; none:
/// however long it takes) through a backend's two reads: `select`, the
/// page's rows, or `None` if the database stopped it at the deadline given
/// (none: no deadline; the filter's `until` bounds it instead); `stretch`,
/// the end of the next `n` jobs after the filter's cursor in its order,
/// whatever they match (none: no job follows the cursor).
pub(crate) fn walk_within<R: ?Sized, T>(
    reader: &mut R,
    filter: &PageFilter,
    budget: Option<&ReadBudget>,
    select: impl Fn(&mut R, &PageFilter, Option<Instant>) -> Result<Option<Vec<T>>, StoreError>,
    stretch: impl Fn(&mut R, &PageFilter, u64) -> Result<Option<StretchEnd>, StoreError>,
) -> Result<Walked<T>, StoreError> {
    let Some(budget) = budget else {
        return Ok(Walked::whole(
            select(reader, filter, None)?.unwrap_or_default(),
        ));
    };
    // No time at all: straight to the bounded walk.
    if !budget.time.is_zero() {
        let deadline = Instant::now() + budget.time;
        if let Some(rows) = select(reader, filter, Some(deadline))? {
            return Ok(Walked::whole(rows));
        }
    }
    let Some((last, more)) = stretch(reader, filter, budget.rows.max(1))? else {
        return Ok(Walked::whole(Vec::new()));
    };
    let bounded = PageFilter {
        until: Some(last),
        ..filter.clone()
    };
    let rows = select(reader, &bounded, None)?.unwrap_or_default();
    let stopped_at = (more && rows.len() < filter.limit).then_some(last);
    Ok(Walked { rows, stopped_at })
}
