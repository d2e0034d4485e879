//! The last hour minute by minute, per task type: jobs that succeeded and
//! failed, how long jobs waited ready before their first attempt started,
//! and how long attempts ran. It feeds the dashboard's overview charts.
//!
//! Bounded: 60 minutes for at most `timeline-task-types` task types; a
//! type beyond that is counted under [`OTHER`] (a type silent for an hour
//! gives its place up to a new one). Recording is O(1) and allocates only
//! when a type is first seen; a read is O(types × 60).

use crate::scheduler::hash_map::HashMap;
use crate::scheduler::job::Job;
use serde::Serialize;
use taskyard_protocol::JobState;
use utoipa::ToSchema;

/// Minutes kept, the newest (current, still filling) last.
pub const MINUTES: usize = 60;
/// The name jobs of untracked task types are counted under.
pub const OTHER: &str = "other";
const MINUTE_MS: i64 = 60_000;
/// Upper bounds (ms) of the latency buckets; the last bucket is unbounded.
const BOUNDS_MS: [u64; 17] = [
    1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 30_000, 60_000, 300_000, 600_000,
];

/// Durations seen in one minute: exact count, mean and max; p95 from buckets.
#[derive(Debug, Clone, Default, PartialEq)]
struct Latency {
    count: u32,
    sum_ms: u64,
    max_ms: u64,
    buckets: [u32; BOUNDS_MS.len() + 1],
}

impl Latency {
    fn observe(&mut self, ms: u64) {
        self.count += 1;
        self.sum_ms = self.sum_ms.saturating_add(ms);
        self.max_ms = self.max_ms.max(ms);
        let i = BOUNDS_MS.partition_point(|b| *b < ms);
        self.buckets[i] += 1;
    }

    fn merge(&mut self, other: &Latency) {
        self.count += other.count;
        self.sum_ms = self.sum_ms.saturating_add(other.sum_ms);
        self.max_ms = self.max_ms.max(other.max_ms);
        for (a, b) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *a += b;
        }
    }

    fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_ms as f64 / f64::from(self.count))
    }

    /// The 95th percentile, interpolated inside its bucket and never above
    /// the largest value seen.
    fn p95(&self) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = 0.95 * f64::from(self.count);
        let mut below = 0.0;
        for (i, n) in self.buckets.iter().enumerate() {
            let n = f64::from(*n);
            if n > 0.0 && below + n >= rank {
                let low = if i == 0 { 0.0 } else { BOUNDS_MS[i - 1] as f64 };
                let high = BOUNDS_MS.get(i).map_or(self.max_ms as f64, |b| *b as f64);
                let estimate = low + (high - low) * ((rank - below) / n);
                return Some(estimate.min(self.max_ms as f64));
            }
            below += n;
        }
        Some(self.max_ms as f64)
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
struct Minute {
    succeeded: u32,
    failed: u32,
    wait: Latency,
    run: Latency,
}

/// One task type's minutes, a ring indexed by minute number.
#[derive(Debug, Clone, PartialEq)]
struct Series {
    minutes: Vec<Minute>,
    /// The minute number (unix ms / 60 000) of the newest slot written.
    newest: i64,
}

impl Series {
    fn new() -> Self {
        Series {
            minutes: vec![Minute::default(); MINUTES],
            newest: i64::MIN,
        }
    }

    /// The slot for minute `m`, clearing slots that fell out of the hour;
    /// `None` for a minute already out of it.
    fn slot(&mut self, m: i64) -> Option<&mut Minute> {
        if m > self.newest {
            let gap = m.saturating_sub(self.newest).min(MINUTES as i64);
            for back in 0..gap {
                self.minutes[ring(m - back)] = Minute::default();
            }
            self.newest = m;
        }
        (m > self.newest - MINUTES as i64).then(|| &mut self.minutes[ring(m)])
    }

    /// The stored minute `m`, if it is within the hour this series holds.
    fn get(&self, m: i64) -> Option<&Minute> {
        (m <= self.newest && m > self.newest - MINUTES as i64).then(|| &self.minutes[ring(m)])
    }

    fn quiet_since(&self, m: i64) -> bool {
        self.newest <= m - MINUTES as i64
    }
}

fn ring(minute: i64) -> usize {
    minute.rem_euclid(MINUTES as i64) as usize
}

/// What happened to a job, for [`Timeline::record`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Succeeded,
    Failed,
    /// The first attempt started after waiting ready for this long.
    Started {
        waited_ms: u64,
    },
    /// An attempt ended after running this long.
    Ran {
        ms: u64,
    },
}

/// Per task type and minute, the last hour (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    max_types: usize,
    types: HashMap<String, Series>,
    other: Series,
}

impl Timeline {
    /// Tracks up to `max_types` task types one by one.
    pub fn new(max_types: usize) -> Self {
        Timeline {
            max_types,
            types: HashMap::default(),
            other: Series::new(),
        }
    }

    /// Counts `event` for a job of `task_type` at `now` (unix ms).
    pub fn record(&mut self, task_type: &str, event: Event, now: i64) {
        let minute = now.div_euclid(MINUTE_MS);
        let Some(slot) = self.series_for(task_type, minute).slot(minute) else {
            return;
        };
        match event {
            Event::Succeeded => slot.succeeded += 1,
            Event::Failed => slot.failed += 1,
            Event::Started { waited_ms } => slot.wait.observe(waited_ms),
            Event::Ran { ms } => slot.run.observe(ms),
        }
    }

    /// Counts what a transition `CoordinatorState::transition` just
    /// applied to `job` (already in its new state) from `from` means here.
    pub fn record_transition(&mut self, job: &Job, from: JobState, now: i64) {
        let elapsed = |since: i64| now.saturating_sub(since).max(0) as u64;
        if from == JobState::Running {
            if let Some(at) = job.assigned_at {
                self.record(&job.task_type, Event::Ran { ms: elapsed(at) }, now);
            }
        }
        let event = match job.state {
            JobState::Succeeded => Event::Succeeded,
            JobState::Failed => Event::Failed,
            JobState::Running if job.attempts == 1 => Event::Started {
                waited_ms: elapsed(job.ready_at()),
            },
            _ => return,
        };
        self.record(&job.task_type, event, now);
    }

    fn series_for(&mut self, task_type: &str, minute: i64) -> &mut Series {
        if !self.types.contains_key(task_type) && !self.make_room(minute) {
            return &mut self.other;
        }
        self.types
            .entry(task_type.to_string())
            .or_insert_with(Series::new)
    }

    /// True when a new type may be tracked: below the bound, or after
    /// dropping a type that has been quiet for the whole hour.
    fn make_room(&mut self, minute: i64) -> bool {
        if self.types.len() < self.max_types {
            return true;
        }
        let quiet = self
            .types
            .iter()
            .find(|(_, s)| s.quiet_since(minute))
            .map(|(t, _)| t.clone());
        quiet.is_some_and(|t| self.types.remove(&t).is_some())
    }

    /// The hour ending with the minute of `now`, per tracked type (by
    /// name, `other` last when it saw anything) and all types together.
    pub fn snapshot(&self, now: i64) -> TimelineSnapshot {
        let last = now.div_euclid(MINUTE_MS);
        let minutes: Vec<i64> = (last - MINUTES as i64 + 1..=last).collect();
        let mut names: Vec<&String> = self.types.keys().collect();
        names.sort();
        let mut series: Vec<TypeTimeline> = names
            .into_iter()
            .filter_map(|name| {
                let s = &self.types[name];
                view(name, &minutes, &[s])
            })
            .collect();
        if let Some(other) = view(OTHER, &minutes, &[&self.other]) {
            series.push(other);
        }
        let all: Vec<&Series> = self.types.values().chain([&self.other]).collect();
        let total = view("", &minutes, &all).unwrap_or_else(|| empty(&minutes));
        TimelineSnapshot {
            at: now,
            minute_starts: minutes.iter().map(|m| m * MINUTE_MS).collect(),
            series,
            total,
        }
    }
}

/// The hour for `series` merged; `None` when nothing happened in it.
fn view(name: &str, minutes: &[i64], series: &[&Series]) -> Option<TypeTimeline> {
    let merged: Vec<Minute> = minutes
        .iter()
        .map(|m| {
            let mut sum = Minute::default();
            for minute in series.iter().filter_map(|s| s.get(*m)) {
                sum.succeeded += minute.succeeded;
                sum.failed += minute.failed;
                sum.wait.merge(&minute.wait);
                sum.run.merge(&minute.run);
            }
            sum
        })
        .collect();
    let active = merged.iter().any(|m| *m != Minute::default());
    active.then(|| TypeTimeline {
        task_type: name.to_string(),
        succeeded: merged.iter().map(|m| m.succeeded).collect(),
        failed: merged.iter().map(|m| m.failed).collect(),
        wait_mean_ms: merged.iter().map(|m| m.wait.mean()).collect(),
        wait_p95_ms: merged.iter().map(|m| m.wait.p95()).collect(),
        run_mean_ms: merged.iter().map(|m| m.run.mean()).collect(),
        run_p95_ms: merged.iter().map(|m| m.run.p95()).collect(),
    })
}

fn empty(minutes: &[i64]) -> TypeTimeline {
    TypeTimeline {
        task_type: String::new(),
        succeeded: vec![0; minutes.len()],
        failed: vec![0; minutes.len()],
        wait_mean_ms: vec![None; minutes.len()],
        wait_p95_ms: vec![None; minutes.len()],
        run_mean_ms: vec![None; minutes.len()],
        run_p95_ms: vec![None; minutes.len()],
    }
}

/// `GET /api/timeline`: 60 minutes, oldest first; each series has one
/// value per minute (`null` latency: nothing started or ran then).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct TimelineSnapshot {
    pub at: i64,
    /// Unix ms at which each minute starts.
    #[schema(min_items = 60, max_items = 60)]
    pub minute_starts: Vec<i64>,
    /// Task types that saw anything this hour, by name; `other` last.
    pub series: Vec<TypeTimeline>,
    /// All task types together (`task_type` is empty).
    pub total: TypeTimeline,
}

/// One task type's hour: each series holds a value for each of the 60
/// minutes.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct TypeTimeline {
    /// Empty in `total`; `other` for jobs of types beyond `timeline-task-types`.
    pub task_type: String,
    #[schema(min_items = 60, max_items = 60)]
    pub succeeded: Vec<u32>,
    #[schema(min_items = 60, max_items = 60)]
    pub failed: Vec<u32>,
    #[schema(schema_with = minutes_of_ms)]
    pub wait_mean_ms: Vec<Option<f64>>,
    #[schema(schema_with = minutes_of_ms)]
    pub wait_p95_ms: Vec<Option<f64>>,
    #[schema(schema_with = minutes_of_ms)]
    pub run_mean_ms: Vec<Option<f64>>,
    #[schema(schema_with = minutes_of_ms)]
    pub run_p95_ms: Vec<Option<f64>>,
}

/// A latency series: one number of milliseconds (`null`: none) a minute.
fn minutes_of_ms() -> utoipa::openapi::schema::Array {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, SchemaType, Type};
    let ms = ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Number, Type::Null]))
        .minimum(Some(0));
    ArrayBuilder::new()
        .items(ms)
        .min_items(Some(MINUTES))
        .max_items(Some(MINUTES))
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_000 * MINUTE_MS;

    #[test]
    fn counts_land_in_the_minute_they_happened_and_leave_after_an_hour() {
        let mut t = Timeline::new(4);
        t.record("echo", Event::Succeeded, T0);
        t.record("echo", Event::Failed, T0 + 59_999);
        t.record("echo", Event::Succeeded, T0 + MINUTE_MS);
        let s = t.snapshot(T0 + MINUTE_MS);
        assert_eq!(s.minute_starts.len(), MINUTES);
        assert_eq!(*s.minute_starts.last().unwrap(), T0 + MINUTE_MS);
        let echo = &s.series[0];
        assert_eq!(echo.task_type, "echo");
        assert_eq!(&echo.succeeded[58..], &[1, 1]);
        assert_eq!(&echo.failed[58..], &[1, 0]);
        assert_eq!(s.total.succeeded, echo.succeeded);

        let later = t.snapshot(T0 + 60 * MINUTE_MS);
        assert_eq!(
            later.series[0].succeeded[0], 1,
            "the minute after T0 is the oldest kept"
        );
        assert!(t.snapshot(T0 + 61 * MINUTE_MS).series.is_empty());
    }

    #[test]
    fn a_slot_is_cleared_before_it_is_reused_an_hour_later() {
        let mut t = Timeline::new(4);
        t.record("echo", Event::Succeeded, T0);
        t.record("echo", Event::Succeeded, T0 + 60 * MINUTE_MS);
        let s = t.snapshot(T0 + 60 * MINUTE_MS);
        assert_eq!(s.series[0].succeeded.iter().sum::<u32>(), 1);
    }

    #[test]
    fn types_beyond_the_bound_are_counted_as_other_until_one_goes_quiet() {
        let mut t = Timeline::new(2);
        for name in ["a", "b", "c", "d"] {
            t.record(name, Event::Succeeded, T0);
        }
        let s = t.snapshot(T0);
        let names: Vec<&str> = s.series.iter().map(|x| x.task_type.as_str()).collect();
        assert_eq!(names, ["a", "b", OTHER]);
        assert_eq!(s.series[2].succeeded[59], 2);
        assert_eq!(s.total.succeeded[59], 4);

        t.record("a", Event::Succeeded, T0 + 30 * MINUTE_MS);
        t.record("e", Event::Succeeded, T0 + 60 * MINUTE_MS);
        let names: Vec<String> = t
            .snapshot(T0 + 60 * MINUTE_MS)
            .series
            .into_iter()
            .map(|x| x.task_type)
            .collect();
        assert_eq!(
            names,
            ["a", "e"],
            "b was quiet for an hour and gave up its place"
        );
    }

    #[test]
    fn latency_mean_p95_and_nothing_when_nothing_ran() {
        let mut t = Timeline::new(4);
        for ms in 1..=100 {
            t.record("sleep", Event::Ran { ms: ms * 10 }, T0);
        }
        t.record("sleep", Event::Started { waited_ms: 3 }, T0);
        let s = t.snapshot(T0);
        let sleep = &s.series[0];
        assert_eq!(sleep.run_mean_ms[59], Some(505.0));
        let p95 = sleep.run_p95_ms[59].unwrap();
        assert!((500.0..=1000.0).contains(&p95), "p95 {p95}");
        assert_eq!(
            sleep.wait_p95_ms[59],
            Some(3.0),
            "capped by the largest value"
        );
        assert_eq!(sleep.run_mean_ms[58], None);
    }
}
