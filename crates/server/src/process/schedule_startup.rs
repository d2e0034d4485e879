//! Schedules at start-up, after the jobs are recovered and before anything
//! listens: the stored schedules are loaded into the state, then the
//! config's `[[schedule]]` entries are reconciled with them: each is
//! created or updated; one declared by an earlier start that the file no
//! longer has is paused (not deleted), and the log says so. Runs on the
//! thread that opened the store, which may block.

use crate::scheduler::schedule::ScheduleWrite;
use crate::scheduler::CoordinatorState;
use crate::store::{Store, StoreError};
use slog::{error, info, warn, Logger};
use taskyard_client::clock::Now;
use taskyard_protocol::ScheduleSpec;

/// See the module documentation. A declared schedule the state refuses
/// (`max-schedules` reached) is logged and skipped; a store failure ends
/// the start-up.
pub fn restore_schedules(
    store: &mut dyn Store,
    state: &mut CoordinatorState,
    declared: &[ScheduleSpec],
    now: Now,
    log: &Logger,
) -> Result<(), StoreError> {
    let stored = store.load_schedules()?;
    let loaded = stored.len();
    for refused in state.restore_schedules(stored) {
        error!(log, "stored schedule not loaded"; "reason" => refused);
    }
    let mut writes = Vec::new();
    for spec in declared {
        let mut spec = spec.clone();
        spec.from_config = true;
        match state.upsert_schedule(spec, now) {
            Ok(write) => writes.extend(write),
            Err(e) => error!(log, "schedule from the config not loaded"; "reason" => %e),
        }
    }
    for name in dropped_from_config(state, declared) {
        warn!(log, "schedule no longer in the config file: paused, not deleted";
              "schedule" => &name);
        if let Ok(write) = state.set_schedule_paused(&name, true, now) {
            writes.push(write);
        }
    }
    for write in &writes {
        store.write_schedule(write)?;
    }
    info!(log, "schedules loaded"; "stored" => loaded, "declared" => declared.len(),
          "written" => writes.iter().filter(|w| matches!(w, ScheduleWrite::Put(_))).count());
    Ok(())
}

/// Active schedules a former config declared that `declared` lacks.
fn dropped_from_config(state: &CoordinatorState, declared: &[ScheduleSpec]) -> Vec<String> {
    state
        .schedule_views()
        .into_iter()
        .filter(|v| v.spec.from_config && !v.spec.paused)
        .filter(|v| declared.iter().all(|d| d.name != v.spec.name))
        .map(|v| v.spec.name)
        .collect()
}
