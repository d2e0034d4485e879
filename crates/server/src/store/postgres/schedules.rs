//! Schedules in PostgreSQL: the same table and semantics as SQLite's
//! (`store::schedules`): a job whose idempotency key names a slot moves
//! its schedule's `last_slot` in the job's own transaction.

use super::PostgresStore;
use crate::scheduler::schedule::{ScheduleWrite, StoredSchedule};
use crate::scheduler::JobRow;
use crate::store::schedules::{
    count_column, count_of, decode_spec, encode_spec, schedule_progress,
};
use crate::store::StoreError;
use postgres::Client;

const UPSERT: &str =
    "INSERT INTO taskyard.schedules (name, definition, last_slot, updated_at, fired)
    VALUES ($1, $2, $3, $4, $5)
    ON CONFLICT (name) DO UPDATE SET definition = excluded.definition,
        last_slot = GREATEST(taskyard.schedules.last_slot, excluded.last_slot),
        updated_at = excluded.updated_at";
const DELETE: &str = "DELETE FROM taskyard.schedules WHERE name = $1";
const PROGRESS: &str = "UPDATE taskyard.schedules SET last_slot = GREATEST(last_slot, $2),
    fired = fired + $3 WHERE name = $1";
const SKIPPED: &str =
    "UPDATE taskyard.schedules SET skipped_overlap = $2, skipped_catchup = $3 WHERE name = $1";
const LOAD: &str = "SELECT name, definition, last_slot, updated_at, fired, skipped_overlap, \
    skipped_catchup FROM taskyard.schedules ORDER BY name";

/// Records the slots fired by `inserted` (rows that give their job its
/// first stored row), in the open transaction.
pub(super) fn write_progress<'a>(
    client: &mut Client,
    inserted: impl IntoIterator<Item = &'a JobRow>,
) -> Result<(), postgres::Error> {
    for p in schedule_progress(inserted) {
        client.execute(PROGRESS, &[&p.name, &p.newest, &p.fired])?;
    }
    Ok(())
}

impl PostgresStore {
    /// Writes or deletes a schedule in a fenced transaction of its own,
    /// durable when it returns. Staged job rows are not touched (they are
    /// written by the next commit).
    pub(super) fn write_schedule_row(&mut self, write: &ScheduleWrite) -> Result<(), StoreError> {
        let result = self.write_schedule_fenced(write);
        if result.is_err() {
            let staged = std::mem::take(&mut self.staged);
            self.rollback();
            self.staged = staged;
        }
        result
    }

    fn write_schedule_fenced(&mut self, write: &ScheduleWrite) -> Result<(), StoreError> {
        self.begin_write()?;
        let client = &mut self.conn()?.client;
        let written = match write {
            ScheduleWrite::Put(stored) => {
                let definition = encode_spec(&stored.spec).map_err(|e| self.fail(e))?;
                let client = &mut self.conn()?.client;
                client.execute(
                    UPSERT,
                    &[
                        &stored.spec.name,
                        &definition,
                        &stored.last_slot,
                        &stored.updated_at,
                        &count_column(stored.fired),
                    ],
                )
            }
            ScheduleWrite::Delete(name) => client.execute(DELETE, &[name]),
            ScheduleWrite::Skipped(counts) => counts.iter().try_fold(0, |n, c| {
                let [overlap, catchup] = c.skipped.map(count_column);
                let row: [&(dyn postgres::types::ToSql + Sync); 3] = [&c.name, &overlap, &catchup];
                client.execute(SKIPPED, &row).map(|m| n + m)
            }),
        };
        written.map_err(|e| self.driver(&e))?;
        let committed = self.conn()?.client.batch_execute("COMMIT");
        self.in_transaction = false;
        committed.map_err(|e| self.driver(&e))
    }

    /// Every stored schedule, by name.
    pub(super) fn load_schedule_rows(&mut self) -> Result<Vec<StoredSchedule>, StoreError> {
        let rows = {
            let client = &mut self.conn()?.client;
            client.query(LOAD, &[])
        };
        let rows = rows.map_err(|e| self.driver(&e))?;
        let mut stored = Vec::with_capacity(rows.len());
        for row in rows {
            let name: String = row.get(0);
            let definition: Vec<u8> = row.get(1);
            let spec = decode_spec(&name, &definition).map_err(|e| self.fail(e))?;
            stored.push(StoredSchedule {
                spec,
                last_slot: row.get(2),
                updated_at: row.get(3),
                fired: count_of(row.get(4)),
                skipped: [count_of(row.get(5)), count_of(row.get(6))],
            });
        }
        Ok(stored)
    }
}
