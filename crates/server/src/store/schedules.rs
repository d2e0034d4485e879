//! Schedules in SQLite: the `schedules` table (one row per schedule, its
//! definition as MessagePack), and the progress a batch of job rows
//! carries: a job whose idempotency key names a schedule's slot moves that
//! schedule's `last_slot` in the job's own transaction, so a slot fired
//! is recorded exactly when its job is durable.

use super::{JobStore, StoreError};
use crate::scheduler::schedule::keys::parse_slot_key;
use crate::scheduler::schedule::{ScheduleWrite, StoredSchedule};
use crate::scheduler::JobRow;
use rusqlite::params;
use taskyard_protocol::ScheduleSpec;

const UPSERT: &str = "INSERT INTO schedules (name, definition, last_slot, updated_at, fired)
    VALUES (?1, ?2, ?3, ?4, ?5)
    ON CONFLICT (name) DO UPDATE SET definition = excluded.definition,
        last_slot = max(coalesce(schedules.last_slot, excluded.last_slot), coalesce(excluded.last_slot, schedules.last_slot)),
        updated_at = excluded.updated_at";
const DELETE: &str = "DELETE FROM schedules WHERE name = ?1";
const PROGRESS: &str = "UPDATE schedules SET last_slot = max(coalesce(last_slot, ?2), ?2),
    fired = fired + ?3 WHERE name = ?1";
const SKIPPED: &str =
    "UPDATE schedules SET skipped_overlap = ?2, skipped_catchup = ?3 WHERE name = ?1";
const LOAD: &str = "SELECT name, definition, last_slot, updated_at, fired, skipped_overlap, \
    skipped_catchup FROM schedules ORDER BY name";

/// What the rows of one batch fired of one schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Progress<'a> {
    pub name: &'a str,
    /// The newest slot fired.
    pub newest: i64,
    /// Slots fired (jobs of this schedule's slots first stored).
    pub fired: i64,
}

/// The newest slot and the number fired per schedule among the
/// idempotency keys of `inserted`, the rows that give a job its first
/// stored row: a slot is fired when its job first becomes durable, and the
/// job's later rows (assigned, finished) have nothing to add.
pub(crate) fn schedule_progress<'a>(
    inserted: impl IntoIterator<Item = &'a JobRow>,
) -> Vec<Progress<'a>> {
    let mut progress: Vec<Progress<'a>> = Vec::new();
    for (name, slot) in inserted
        .into_iter()
        .filter_map(|r| parse_slot_key(r.idempotency_key.as_deref()?))
    {
        match progress.iter_mut().find(|p| p.name == name) {
            Some(entry) => {
                entry.newest = entry.newest.max(slot);
                entry.fired += 1;
            }
            None => progress.push(Progress {
                name,
                newest: slot,
                fired: 1,
            }),
        }
    }
    progress
}

/// A count as its column stores it (saturating: never negative).
pub(crate) fn count_column(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// A count read back from its column.
pub(crate) fn count_of(column: i64) -> u64 {
    column.max(0) as u64
}

/// A definition as stored.
pub(crate) fn encode_spec(spec: &ScheduleSpec) -> Result<Vec<u8>, String> {
    rmp_serde::to_vec_named(spec).map_err(|e| format!("encoding schedule {}: {e}", spec.name))
}

/// A stored definition read back; the error names the schedule.
pub(crate) fn decode_spec(name: &str, bytes: &[u8]) -> Result<ScheduleSpec, String> {
    rmp_serde::from_slice(bytes).map_err(|e| format!("schedule {name}: unreadable definition: {e}"))
}

impl JobStore {
    /// Records the slots fired by `inserted` (rows that gave their job its
    /// first stored row), in the open transaction.
    pub(super) fn write_schedule_progress(
        &mut self,
        inserted: &[&JobRow],
    ) -> Result<(), StoreError> {
        let progress = schedule_progress(inserted.iter().copied());
        if progress.is_empty() {
            return Ok(());
        }
        let mut update = self
            .conn
            .prepare_cached(PROGRESS)
            .map_err(|e| self.error(e))?;
        for p in progress {
            update
                .execute(params![p.name, p.newest, p.fired])
                .map_err(|e| {
                    StoreError::sqlite(&self.path, format!("recording schedule {}: {e}", p.name))
                })?;
        }
        Ok(())
    }

    /// Writes or deletes a schedule, durable when it returns. A
    /// transaction of staged job rows that is open is committed with it
    /// (rows are only ever made durable early). If the write fails, those
    /// staged rows are rolled back with it, and the next `commit` fails
    /// without writing (its batch is sent again), so no answer waiting for
    /// them is ever released.
    pub fn write_schedule(&mut self, write: &ScheduleWrite) -> Result<(), StoreError> {
        let staged = !self.conn.is_autocommit();
        let mut result = self.write_schedule_row(write);
        // Open: rows were staged, or the write took several statements.
        if result.is_ok() && !self.conn.is_autocommit() {
            result = self.conn.execute_batch("COMMIT").map_err(|e| self.error(e));
        }
        match &result {
            Ok(()) => self.committed(),
            Err(e) => {
                self.rollback();
                if staged {
                    self.staged_lost = Some(e.to_string());
                }
            }
        }
        result
    }

    fn write_schedule_row(&mut self, write: &ScheduleWrite) -> Result<(), StoreError> {
        match write {
            ScheduleWrite::Put(stored) => {
                let definition =
                    encode_spec(&stored.spec).map_err(|e| StoreError::sqlite(&self.path, e))?;
                self.conn
                    .execute(
                        UPSERT,
                        params![
                            stored.spec.name,
                            definition,
                            stored.last_slot,
                            stored.updated_at,
                            count_column(stored.fired)
                        ],
                    )
                    .map_err(|e| self.error(e))?;
            }
            ScheduleWrite::Delete(name) => {
                self.conn
                    .execute(DELETE, params![name])
                    .map_err(|e| self.error(e))?;
            }
            ScheduleWrite::Skipped(counts) => {
                if self.conn.is_autocommit() {
                    self.conn
                        .execute_batch("BEGIN")
                        .map_err(|e| self.error(e))?;
                }
                let mut update = self
                    .conn
                    .prepare_cached(SKIPPED)
                    .map_err(|e| self.error(e))?;
                for c in counts {
                    let [overlap, catchup] = c.skipped.map(count_column);
                    update
                        .execute(params![c.name, overlap, catchup])
                        .map_err(|e| StoreError::sqlite(&self.path, e.to_string()))?;
                }
            }
        }
        Ok(())
    }

    /// Every stored schedule, by name.
    pub fn load_schedules(&mut self) -> Result<Vec<StoredSchedule>, StoreError> {
        let mut select = self.conn.prepare(LOAD).map_err(|e| self.error(e))?;
        let rows = select
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, Vec<u8>>(1)?,
                    r.get::<_, Option<i64>>(2)?,
                    r.get::<_, i64>(3)?,
                    [
                        r.get::<_, i64>(4)?,
                        r.get::<_, i64>(5)?,
                        r.get::<_, i64>(6)?,
                    ],
                ))
            })
            .map_err(|e| self.error(e))?;
        let mut stored = Vec::new();
        for row in rows {
            let (name, definition, last_slot, updated_at, [fired, overlap, catchup]) =
                row.map_err(|e| self.error(e))?;
            let spec =
                decode_spec(&name, &definition).map_err(|e| StoreError::sqlite(&self.path, e))?;
            stored.push(StoredSchedule {
                spec,
                last_slot,
                updated_at,
                fired: count_of(fired),
                skipped: [count_of(overlap), count_of(catchup)],
            });
        }
        Ok(stored)
    }
}
