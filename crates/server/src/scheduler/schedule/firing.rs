//! How the sweep fires schedules: each due slot is decided once, oldest
//! first: skipped (outside the catch-up window, or by the overlap policy)
//! or submitted as an ordinary job with idempotency key
//! `schedule:NAME:SLOT`. A slot's job and the schedule's progress are
//! committed in one transaction (the store records the slot from the
//! job's key), so after a crash a slot is decided again only if its job
//! never became durable, and then its key makes a second submission
//! return the first job.
//!
//! Slots are wall-clock times (cron is about the wall clock): a wall
//! clock set ahead brings slots due, within the catch-up window.

use crate::scheduler::schedule::book::{Entry, SkipReason};
use crate::scheduler::schedule::cadence::SHORTEST_SLOT_MS;
use crate::scheduler::schedule::keys::{labelled_slot_key, trigger_key};
use crate::scheduler::schedule::pass_memo::PassMemo;
use crate::scheduler::state::CoordinatorState;
use slog::{info, warn};
use taskyard_client::clock::Now;
use taskyard_protocol::{JobId, Overlap, SubmitAnswer, SubmitRequest};

/// The most schedules decided in one pass. More due at once (10,000
/// schedules on one cron slot) are decided over several passes, one per
/// commit (see the coordinator's `schedule_passes`), so a commit carries
/// about this many fired jobs and ordinary requests are handled between
/// the passes instead of waiting behind one huge batch. 32 keeps the
/// inserts each commit carries for schedules few (an ordinary job that
/// arrives meanwhile waits behind them), and still fires 10,000 schedules
/// in about half a second on SQLite; firing faster only queues jobs that
/// the workers' slots take at their own pace.
pub const SCHEDULES_PER_PASS: usize = 32;
/// The most slots one schedule fires in one sweep; the rest wait for the
/// next sweep (a catch-up window of many slots fires over a few sweeps).
pub const MAX_FIRES_PER_SWEEP: usize = 100;
/// The most skipped slots counted one by one in a catch-up; past that the
/// count stops (the skip itself is one jump, whatever its length).
pub const MAX_SKIPS_COUNTED: u64 = 10_000;

impl CoordinatorState {
    /// Fires the `buffer-one` slots whose previous run has ended (once a
    /// sweep: every held slot is looked at, so not on every pass).
    pub fn release_buffered_schedules(&mut self, now: Now) {
        let mut memo = PassMemo::default();
        for mut entry in self.schedules.take_buffered() {
            self.release_buffered(&mut entry, now, &mut memo);
            self.schedules.put(entry);
        }
    }

    /// Decides the slots that have come of at most `SCHEDULES_PER_PASS`
    /// schedules, earliest first. True when another pass is worth running
    /// at once: the pass was full and no submission was refused (a refusal
    /// means admission is full; the next sweep tries again).
    pub fn fire_due_schedules(&mut self, now: Now) -> bool {
        let due = self.schedules.take_due(now.wall_ms, SCHEDULES_PER_PASS);
        let full = due.len() == SCHEDULES_PER_PASS;
        let mut refused = false;
        let mut memo = PassMemo::default();
        for mut entry in due {
            refused |= !self.decide_due_slots(&mut entry, now, &mut memo);
            self.schedules.put(entry);
        }
        full && !refused
    }

    /// When the earliest schedule is next due (wall ms), if any: at or
    /// before `now` means a pass has slots to decide.
    pub fn next_schedule_due(&self) -> Option<i64> {
        self.schedules.next_due()
    }

    /// Submits a job for `entry` now, outside its cadence (`trigger`):
    /// no slot is used up and the overlap policy does not apply.
    pub fn trigger_schedule(&mut self, entry: &mut Entry, now: Now) -> SubmitAnswer {
        let key = trigger_key(&entry.spec.name, now.wall_ms);
        let answer = self.submit(template(entry, key, 0), now);
        if let SubmitAnswer::Accepted { job_id, .. } = answer {
            entry.record_run(None, job_id);
        }
        answer
    }

    /// Decides `entry`'s slots that have come, oldest first, at most
    /// `MAX_FIRES_PER_SWEEP`. False if a submission was refused.
    fn decide_due_slots(&mut self, entry: &mut Entry, now: Now, memo: &mut PassMemo) -> bool {
        let mut window = None;
        for _ in 0..MAX_FIRES_PER_SWEEP {
            let Some(slot) = entry.next_slot.filter(|s| *s <= now.wall_ms) else {
                return true;
            };
            let late = now.wall_ms - slot;
            // The default window is one slot, never under a second (cron
            // slots are whole seconds, intervals at least one): a slot less
            // late than that needs no search for its slot's length. (A
            // cron's last slot, with none after it, also counts as in the
            // window when under a second late.)
            if late >= SHORTEST_SLOT_MS || entry.spec.catchup_window_ms.is_some() {
                let window = *window.get_or_insert_with(|| entry.catchup_window_ms(now.wall_ms));
                if late >= window {
                    self.skip_missed(entry, now.wall_ms - window);
                    continue;
                }
            }
            if !self.decide_slot(entry, slot, now, memo) {
                return false; // refused (admission): tried again next sweep
            }
            entry.after = slot;
            entry.plan_with(memo);
        }
        true
    }

    /// Skips every slot up to `floor` (outside the catch-up window),
    /// counting them, and plans the first slot after it.
    fn skip_missed(&mut self, entry: &mut Entry, floor: i64) {
        let mut skipped = 0u64;
        let mut cursor = entry.next_slot;
        while let Some(slot) = cursor.filter(|s| *s <= floor) {
            skipped += 1;
            if skipped >= MAX_SKIPS_COUNTED {
                break;
            }
            cursor = entry.cadence.next_after(slot);
        }
        warn!(self.log, "schedule slots missed outside the catch-up window skipped";
              "schedule" => &entry.spec.name, "slots" => skipped);
        entry.skipped[SkipReason::CatchupWindow as usize] += skipped;
        self.schedules.note_skipped(&entry.spec.name);
        entry.after = entry.after.max(floor);
        entry.plan();
    }

    /// Applies the overlap policy to `slot` and fires it, holds it
    /// (`buffer-one`) or skips it. False: the submission was refused and
    /// the slot stays undecided.
    fn decide_slot(&mut self, entry: &mut Entry, slot: i64, now: Now, memo: &mut PassMemo) -> bool {
        let active = entry.last_job().filter(|job| self.is_active(*job));
        match (entry.spec.overlap, active) {
            (_, None) | (Overlap::Allow, _) => self.fire_slot(entry, slot, now, memo),
            (Overlap::Skip, Some(_)) => {
                entry.skipped[SkipReason::Overlap as usize] += 1;
                self.schedules.note_skipped(&entry.spec.name);
                true
            }
            (Overlap::BufferOne, Some(_)) => {
                if entry.buffered.replace(slot).is_some() {
                    entry.skipped[SkipReason::Overlap as usize] += 1;
                    self.schedules.note_skipped(&entry.spec.name);
                }
                true
            }
            (Overlap::CancelPrevious, Some(job)) => {
                // Cancelling a non-terminal job cannot be refused.
                let _ = self.cancel(job, now);
                self.fire_slot(entry, slot, now, memo)
            }
        }
    }

    fn release_buffered(&mut self, entry: &mut Entry, now: Now, memo: &mut PassMemo) {
        let Some(slot) = entry.buffered else {
            return;
        };
        if entry.last_job().is_some_and(|job| self.is_active(job)) {
            return; // still running: stays buffered
        }
        if self.fire_slot(entry, slot, now, memo) {
            entry.buffered = None;
        }
    }

    /// Submits `slot`'s job. False if the submission was refused.
    fn fire_slot(&mut self, entry: &mut Entry, slot: i64, now: Now, memo: &mut PassMemo) -> bool {
        let name = &entry.spec.name;
        let delay = jitter_ms(name, slot, entry.spec.jitter_ms);
        let key = labelled_slot_key(name, memo.label(slot));
        match self.submit(template(entry, key, delay), now) {
            SubmitAnswer::Accepted { job_id, .. } => {
                self.fired(entry, slot, job_id, now);
                true
            }
            SubmitAnswer::Rejected(refused) => {
                warn!(self.log, "schedule slot refused, tried again next sweep";
                      "schedule" => name, "reason" => &refused.reason);
                false
            }
        }
    }

    fn fired(&mut self, entry: &mut Entry, slot: i64, job_id: JobId, now: Now) {
        entry.record_run(Some(slot), job_id);
        entry.fired += 1;
        let lag_ms = now.wall_ms.saturating_sub(slot).max(0);
        self.schedules.lag.observe(lag_ms as f64 / 1000.0);
        // The slot is formatted only if the line is logged (10,000
        // schedules on one slot would format 10,000 discarded labels).
        let label = slog::FnValue(move |_| crate::scheduler::schedule::slot_label(slot));
        info!(self.log, "schedule fired"; "schedule" => &entry.spec.name,
              "slot" => label, "job" => %job_id);
    }

    fn is_active(&self, job: JobId) -> bool {
        self.jobs.get(&job).is_some_and(|j| !j.state.is_terminal())
    }
}

/// The job a schedule submits, with `key` and `delay_ms`.
fn template(entry: &Entry, key: String, delay_ms: u64) -> SubmitRequest {
    let spec = &entry.spec;
    SubmitRequest {
        task_type: spec.task_type.clone(),
        payload: spec.payload.clone(),
        priority: spec.priority,
        max_attempts: spec.max_attempts,
        timeout_ms: spec.timeout_ms,
        idempotency_key: Some(key),
        delay_ms: (delay_ms > 0).then_some(delay_ms),
        concurrency_key: None,
    }
}

/// A delay of 0 to `jitter` ms, the same for a slot every time it is
/// decided (FNV-1a of name and slot), so a re-decided slot waits alike.
pub fn jitter_ms(name: &str, slot: i64, jitter: u64) -> u64 {
    if jitter == 0 {
        return 0;
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in name.bytes().chain(slot.to_le_bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash % (jitter + 1)
}
