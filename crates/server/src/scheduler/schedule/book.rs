//! `ScheduleBook`: every schedule the coordinator holds, at most
//! `max-schedules`, with a time-ordered index of when each is next due, so
//! a sweep looks only at the schedules whose slot has come (never at every
//! schedule, never minute by minute).

use crate::scheduler::hash_map::HashMap;
use crate::scheduler::metrics::Histogram;
use crate::scheduler::schedule::cadence::Cadence;
use crate::scheduler::schedule::pass_memo::PassMemo;
use crate::scheduler::schedule::spec::SpecError;
use std::collections::{BTreeSet, VecDeque};
use taskyard_protocol::{JobId, ScheduleRun, ScheduleSpec, MAX_RECENT_RUNS_LIMIT};

/// Why a schedule change was refused; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleRefused {
    #[error("{0}")]
    Invalid(#[from] SpecError),
    #[error("schedule {0:?} already exists")]
    Exists(String),
    #[error("schedule {0:?} does not exist")]
    Unknown(String),
    #[error("max-schedules ({max}) reached")]
    TooMany { max: usize },
}

/// One schedule and where its firing stands.
#[derive(Debug, Clone)]
pub struct Entry {
    pub spec: ScheduleSpec,
    pub cadence: Cadence,
    /// Slots at or before this wall time are never considered: the
    /// creation, last update or resume time, or the last slot decided.
    pub after: i64,
    /// The next slot to decide, if any (paused or past `end_at`: none).
    pub next_slot: Option<i64>,
    /// The slot held back by `buffer-one` until the current run ends.
    pub buffered: Option<i64>,
    /// The newest runs first, at most `MAX_RECENT_RUNS_LIMIT`.
    pub recent: VecDeque<(Option<i64>, JobId)>,
    pub fired: u64,
    /// Slots skipped, by reason (`SkipReason` as index).
    pub skipped: [u64; 2],
}

/// Why a slot did not fire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// The previous run was still active (`skip`, or a `buffer-one` slot
    /// replaced by a later one).
    Overlap = 0,
    /// Missed while the coordinator was down, older than the catch-up window.
    CatchupWindow = 1,
}

impl SkipReason {
    pub const ALL: [SkipReason; 2] = [SkipReason::Overlap, SkipReason::CatchupWindow];

    /// The `reason` label of `taskyard_schedule_skipped_total`.
    pub fn label(self) -> &'static str {
        match self {
            SkipReason::Overlap => "overlap",
            SkipReason::CatchupWindow => "catchup-window",
        }
    }
}

impl Entry {
    pub fn new(spec: ScheduleSpec, cadence: Cadence, after: i64) -> Entry {
        let mut entry = Entry {
            spec,
            cadence,
            after,
            next_slot: None,
            buffered: None,
            recent: VecDeque::new(),
            fired: 0,
            skipped: [0; 2],
        };
        entry.plan();
        entry
    }

    /// Sets `next_slot`: the first slot after `after`, within the
    /// schedule's start and end, unless paused.
    pub fn plan(&mut self) {
        self.plan_with(&mut PassMemo::default());
    }

    /// `plan`, with what the pass has worked out already.
    pub fn plan_with(&mut self, memo: &mut PassMemo) {
        self.next_slot = if self.spec.paused {
            None
        } else {
            self.first_slot_after(self.after, memo)
        };
    }

    fn first_slot_after(&self, after: i64, memo: &mut PassMemo) -> Option<i64> {
        let floor = match self.spec.start_at {
            Some(start) => after.max(start.saturating_sub(1)),
            None => after,
        };
        let slot = memo.next_after(&self.spec, &self.cadence, floor)?;
        match self.spec.end_at {
            Some(end) if slot > end => None,
            _ => Some(slot),
        }
    }

    /// The catch-up window: the definition's, else one slot.
    pub fn catchup_window_ms(&self, now_ms: i64) -> i64 {
        match self.spec.catchup_window_ms {
            Some(w) => i64::try_from(w).unwrap_or(i64::MAX),
            None => self.cadence.slot_length_ms(now_ms.saturating_sub(1)).max(1),
        }
    }

    /// Records a job this schedule submitted.
    pub fn record_run(&mut self, slot: Option<i64>, job: JobId) {
        self.recent.push_front((slot, job));
        self.recent.truncate(MAX_RECENT_RUNS_LIMIT);
    }

    /// The job of the newest run, whose state decides overlap.
    pub fn last_job(&self) -> Option<JobId> {
        self.recent.front().map(|(_, job)| *job)
    }

    /// The next `count` slots, from the one due next.
    pub fn upcoming(&self, count: usize) -> Vec<i64> {
        let Some(first) = self.next_slot else {
            return Vec::new();
        };
        let mut slots = vec![first];
        let mut memo = PassMemo::default();
        while slots.len() < count {
            match self.first_slot_after(slots[slots.len() - 1], &mut memo) {
                Some(s) => slots.push(s),
                None => break,
            }
        }
        slots
    }

    pub fn recent_runs(&self) -> impl Iterator<Item = (Option<i64>, JobId)> + '_ {
        self.recent.iter().copied()
    }
}

/// See the module documentation.
#[derive(Debug)]
pub struct ScheduleBook {
    entries: HashMap<String, Entry>,
    /// (next slot, name) of every schedule that has one.
    due: BTreeSet<(i64, String)>,
    /// Schedules holding a `buffer-one` slot.
    buffered: BTreeSet<String>,
    /// Schedules whose skipped counts moved since they were last stored
    /// (bounded by the schedules there are).
    skips_changed: BTreeSet<String>,
    max: usize,
    /// Fire time minus nominal slot, for `taskyard_schedule_lag_seconds`.
    pub lag: Histogram,
}

/// Buckets of the lag histogram (seconds): 10 ms to 1 h.
pub const LAG_BUCKETS: [f64; 10] = [0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 60.0, 600.0, 3600.0];

impl Default for ScheduleBook {
    fn default() -> Self {
        ScheduleBook::new(0)
    }
}

impl ScheduleBook {
    pub fn new(max: usize) -> ScheduleBook {
        ScheduleBook {
            entries: HashMap::default(),
            due: BTreeSet::new(),
            buffered: BTreeSet::new(),
            skips_changed: BTreeSet::new(),
            max,
            lag: Histogram::new(&LAG_BUCKETS),
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.entries.get(name)
    }

    /// Every schedule, by name.
    pub fn all(&self) -> Vec<&Entry> {
        let mut all: Vec<&Entry> = self.entries.values().collect();
        all.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
        all
    }

    /// Whether a new schedule may be added: not a name held, and below
    /// `max-schedules`.
    pub fn check_new(&self, name: &str) -> Result<(), ScheduleRefused> {
        if self.entries.contains_key(name) {
            return Err(ScheduleRefused::Exists(name.to_string()));
        }
        if self.entries.len() >= self.max {
            return Err(ScheduleRefused::TooMany { max: self.max });
        }
        Ok(())
    }

    /// Adds or replaces a schedule (replacing keeps its runs and counts).
    pub fn put(&mut self, mut entry: Entry) {
        let name = entry.spec.name.clone();
        if let Some(old) = self.remove(&name) {
            entry.recent = old.recent;
            entry.fired = old.fired;
            entry.skipped = old.skipped;
        }
        self.insert(entry);
    }

    /// `name` skipped a slot: its counts are to be stored.
    pub fn note_skipped(&mut self, name: &str) {
        if !self.skips_changed.contains(name) {
            self.skips_changed.insert(name.to_string());
        }
    }

    /// The schedules whose skipped counts moved since the last call.
    pub fn take_skips_changed(&mut self) -> BTreeSet<String> {
        std::mem::take(&mut self.skips_changed)
    }

    pub fn remove(&mut self, name: &str) -> Option<Entry> {
        let entry = self.entries.remove(name)?;
        if let Some(slot) = entry.next_slot {
            self.due.remove(&(slot, name.to_string()));
        }
        self.buffered.remove(name);
        Some(entry)
    }

    /// Takes out at most `max` schedules whose next slot is at or before
    /// `now_ms`, earliest slot first; the caller decides them and puts each
    /// back with `put`.
    pub fn take_due(&mut self, now_ms: i64, max: usize) -> Vec<Entry> {
        let mut taken = Vec::new();
        while let Some((slot, _)) = self.due.first() {
            if *slot > now_ms || taken.len() >= max {
                break;
            }
            let Some((_, name)) = self.due.pop_first() else {
                break;
            };
            if let Some(entry) = self.entries.remove(&name) {
                self.buffered.remove(&name);
                taken.push(entry);
            }
        }
        taken
    }

    /// Takes out every schedule holding a `buffer-one` slot.
    pub fn take_buffered(&mut self) -> Vec<Entry> {
        let names = std::mem::take(&mut self.buffered);
        names.iter().filter_map(|n| self.remove(n)).collect()
    }

    /// Applies `change` to the named schedule and re-indexes it.
    pub fn change(
        &mut self,
        name: &str,
        change: impl FnOnce(&mut Entry),
    ) -> Result<&Entry, ScheduleRefused> {
        let mut entry = self
            .remove(name)
            .ok_or_else(|| ScheduleRefused::Unknown(name.to_string()))?;
        change(&mut entry);
        self.insert(entry);
        self.entries
            .get(name)
            .ok_or_else(|| ScheduleRefused::Unknown(name.to_string()))
    }

    fn insert(&mut self, entry: Entry) {
        let name = entry.spec.name.clone();
        if let Some(slot) = entry.next_slot {
            self.due.insert((slot, name.clone()));
        }
        if entry.buffered.is_some() {
            self.buffered.insert(name.clone());
        }
        self.entries.insert(name, entry);
    }

    /// When the earliest schedule is next due, if any.
    pub fn next_due(&self) -> Option<i64> {
        self.due.first().map(|(slot, _)| *slot)
    }
}

/// The runs of an entry as the wire shows them, given each job's state.
pub fn runs_view(
    entry: &Entry,
    state_of: impl Fn(JobId) -> Option<taskyard_protocol::JobState>,
) -> Vec<ScheduleRun> {
    entry
        .recent_runs()
        .map(|(slot, job_id)| ScheduleRun {
            slot,
            job_id,
            state: state_of(job_id),
        })
        .collect()
}
