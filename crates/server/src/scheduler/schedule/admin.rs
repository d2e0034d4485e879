//! What operators do to schedules, decided on the coordinator's state:
//! create, update, pause, resume, trigger, delete, read, and the schedules
//! restored at start-up. Each change returns the record to store; the
//! coordinator answers once it is durable.

use crate::scheduler::schedule::book::{runs_view, Entry, ScheduleRefused};
use crate::scheduler::schedule::keys::{parse_slot_key, schedule_of};
use crate::scheduler::schedule::spec::{validate, SpecLimits};
use crate::scheduler::state::CoordinatorState;
use slog::info;
use taskyard_client::clock::Now;
use taskyard_protocol::{ScheduleSpec, ScheduleView, SubmitAnswer};

/// How many upcoming slots a view lists.
pub const UPCOMING_SLOTS: usize = 5;

/// A schedule as stored: its definition, the newest slot fired, its
/// floor when last written (slots at or before it are never fired), and
/// how many slots it fired (moved with the jobs that fire them; a write
/// of the definition stores it only for a new schedule).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSchedule {
    pub spec: ScheduleSpec,
    pub last_slot: Option<i64>,
    pub updated_at: i64,
    pub fired: u64,
    /// Slots skipped, by reason (`SkipReason` as index).
    pub skipped: [u64; 2],
}

/// A change to store: a schedule written, or deleted, or the skipped
/// counts of some schedules (after a pass skipped slots).
#[derive(Debug, Clone, PartialEq)]
pub enum ScheduleWrite {
    Put(Box<StoredSchedule>),
    Delete(String),
    Skipped(Vec<SkippedCounts>),
}

/// A schedule's skipped counts to store. Only the counts: the schedule's
/// floor is not moved by them, because the pass that skipped may also
/// have fired slots whose jobs are not durable yet, and a floor stored
/// past those would lose them in a crash. So a restart may decide (and
/// count) a skipped slot again; it never loses a fired one.
#[derive(Debug, Clone, PartialEq)]
pub struct SkippedCounts {
    pub name: String,
    /// By reason (`SkipReason` as index).
    pub skipped: [u64; 2],
}

impl CoordinatorState {
    /// Sets `max-schedules` (start-up, before any schedule is added).
    pub fn set_max_schedules(&mut self, max: usize) {
        let old = std::mem::replace(
            &mut self.schedules,
            crate::scheduler::schedule::ScheduleBook::new(max),
        );
        for entry in old.all() {
            self.schedules.put(entry.clone());
        }
    }

    fn spec_limits(&self) -> SpecLimits {
        SpecLimits {
            max_payload_bytes: self.policy.max_payload_bytes,
        }
    }

    /// Adds a new schedule; its first slot is the first after `now`.
    pub fn create_schedule(
        &mut self,
        spec: ScheduleSpec,
        now: Now,
    ) -> Result<ScheduleWrite, ScheduleRefused> {
        let cadence = validate(&spec, self.spec_limits())?;
        self.schedules.check_new(&spec.name)?;
        info!(self.log, "schedule created"; "schedule" => &spec.name);
        self.schedules
            .put(Entry::new(spec.clone(), cadence, now.wall_ms));
        Ok(self.stored(&spec.name))
    }

    /// Replaces a schedule's definition, keeping its runs; slots before
    /// `now` are not fired for the new definition.
    pub fn update_schedule(
        &mut self,
        spec: ScheduleSpec,
        now: Now,
    ) -> Result<ScheduleWrite, ScheduleRefused> {
        let cadence = validate(&spec, self.spec_limits())?;
        let old = self
            .schedules
            .get(&spec.name)
            .ok_or_else(|| ScheduleRefused::Unknown(spec.name.clone()))?;
        let after = old.after.max(now.wall_ms);
        let mut entry = Entry::new(spec.clone(), cadence, after);
        entry.buffered = old.buffered;
        self.schedules.put(entry);
        info!(self.log, "schedule updated"; "schedule" => &spec.name);
        Ok(self.stored(&spec.name))
    }

    /// Creates the schedule, or updates it if it differs (the TOML's
    /// `[[schedule]]` at start-up); `None`: unchanged, nothing to store
    /// (so the slots missed while the coordinator was down still count).
    pub fn upsert_schedule(
        &mut self,
        spec: ScheduleSpec,
        now: Now,
    ) -> Result<Option<ScheduleWrite>, ScheduleRefused> {
        match self.schedules.get(&spec.name) {
            Some(old) if old.spec == spec => Ok(None),
            Some(_) => self.update_schedule(spec, now).map(Some),
            None => self.create_schedule(spec, now).map(Some),
        }
    }

    /// Pauses or resumes a schedule. Slots that came while it was paused
    /// are not fired on resume.
    pub fn set_schedule_paused(
        &mut self,
        name: &str,
        paused: bool,
        now: Now,
    ) -> Result<ScheduleWrite, ScheduleRefused> {
        self.schedules.change(name, |entry| {
            entry.spec.paused = paused;
            entry.after = entry.after.max(now.wall_ms);
            entry.plan();
        })?;
        info!(self.log, "schedule paused or resumed"; "schedule" => name, "paused" => paused);
        Ok(self.stored(name))
    }

    /// The skipped counts of the schedules whose counts moved since the
    /// last call, to store (at most one entry per schedule).
    pub fn take_skipped_counts(&mut self) -> Option<ScheduleWrite> {
        let names = self.schedules.take_skips_changed();
        let counts: Vec<SkippedCounts> = names
            .into_iter()
            .filter_map(|name| {
                let skipped = self.schedules.get(&name)?.skipped;
                Some(SkippedCounts { name, skipped })
            })
            .collect();
        (!counts.is_empty()).then_some(ScheduleWrite::Skipped(counts))
    }

    /// Removes a schedule; jobs it fired are left alone.
    pub fn delete_schedule(&mut self, name: &str) -> Result<ScheduleWrite, ScheduleRefused> {
        self.schedules
            .remove(name)
            .ok_or_else(|| ScheduleRefused::Unknown(name.to_string()))?;
        info!(self.log, "schedule deleted"; "schedule" => name);
        Ok(ScheduleWrite::Delete(name.to_string()))
    }

    /// Fires a job of the schedule now, outside its cadence.
    pub fn trigger_named_schedule(
        &mut self,
        name: &str,
        now: Now,
    ) -> Result<SubmitAnswer, ScheduleRefused> {
        let mut entry = self
            .schedules
            .remove(name)
            .ok_or_else(|| ScheduleRefused::Unknown(name.to_string()))?;
        let answer = self.trigger_schedule(&mut entry, now);
        self.schedules.put(entry);
        Ok(answer)
    }

    /// Every schedule, by name.
    pub fn schedule_views(&self) -> Vec<ScheduleView> {
        self.schedules
            .all()
            .into_iter()
            .map(|e| self.schedule_view(e))
            .collect()
    }

    /// One schedule, with its next slots and recent runs.
    pub fn schedule_named(&self, name: &str) -> Option<ScheduleView> {
        self.schedules.get(name).map(|e| self.schedule_view(e))
    }

    fn schedule_view(&self, entry: &Entry) -> ScheduleView {
        ScheduleView {
            spec: entry.spec.clone(),
            next_fires: entry.upcoming(UPCOMING_SLOTS),
            last_slot: entry
                .recent_runs()
                .find_map(|(slot, _)| slot)
                .or(Some(entry.after).filter(|_| entry.fired > 0)),
            recent_runs: runs_view(entry, |id| self.jobs.get(&id).map(|j| j.state)),
            fired: entry.fired,
            skipped: entry.skipped.iter().sum(),
        }
    }

    /// The record of `name` to store: `updated_at` is the entry's floor
    /// (`Entry::after`: its creation, last change or resume, or the slot
    /// last decided), so a restart considers exactly the slots after it.
    fn stored(&self, name: &str) -> ScheduleWrite {
        match self.schedules.get(name) {
            Some(entry) => ScheduleWrite::Put(Box::new(StoredSchedule {
                spec: entry.spec.clone(),
                last_slot: entry.recent_runs().find_map(|(slot, _)| slot),
                updated_at: entry.after,
                fired: entry.fired,
                skipped: entry.skipped,
            })),
            None => ScheduleWrite::Delete(name.to_string()),
        }
    }

    /// Loads the stored schedules after the jobs are recovered: each
    /// resumes after its newest decided slot (or its last change), its
    /// recent runs found from the recovered idempotency keys. A stored
    /// definition this binary refuses is skipped and named in the answer.
    pub fn restore_schedules(&mut self, stored: Vec<StoredSchedule>) -> Vec<String> {
        let mut refused = Vec::new();
        let mut runs = self.runs_by_schedule();
        for record in stored {
            let cadence = match validate(&record.spec, self.spec_limits()) {
                Ok(c) => c,
                Err(e) => {
                    refused.push(format!("{}: {e}", record.spec.name));
                    continue;
                }
            };
            let newest = runs
                .get(&record.spec.name)
                .and_then(|r| r.iter().filter_map(|(slot, _)| *slot).max());
            let after = record
                .updated_at
                .max(record.last_slot.unwrap_or(i64::MIN))
                .max(newest.unwrap_or(i64::MIN));
            let name = record.spec.name.clone();
            let mut entry = Entry::new(record.spec, cadence, after);
            entry.fired = record.fired;
            entry.skipped = record.skipped;
            for (slot, job) in runs.remove(&name).unwrap_or_default() {
                entry.record_run(slot, job);
            }
            self.schedules.put(entry);
        }
        refused
    }

    /// Each schedule's runs still in the database, oldest first, from the
    /// idempotency keys (manual triggers by submission order, after).
    fn runs_by_schedule(
        &self,
    ) -> std::collections::HashMap<String, Vec<(Option<i64>, taskyard_protocol::JobId)>> {
        let mut runs: std::collections::HashMap<String, Vec<_>> = Default::default();
        for (key, job) in self.idempotency.iter() {
            let Some(name) = schedule_of(key) else {
                continue;
            };
            let slot = parse_slot_key(key).map(|(_, s)| s);
            let submitted = self.jobs.get(job).map_or(i64::MIN, |j| j.submitted_at);
            runs.entry(name.to_string())
                .or_default()
                .push((slot, *job, submitted));
        }
        runs.into_iter()
            .map(|(name, mut list)| {
                list.sort_by_key(|(slot, _, submitted)| (slot.unwrap_or(*submitted), *submitted));
                let list = list.into_iter().map(|(s, j, _)| (s, j)).collect();
                (name, list)
            })
            .collect()
    }
}
