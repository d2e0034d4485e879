//! Where the coordinator reads time: once per handler, as a `Now` holding
//! both clocks, then passed down. Tests inject `ManualClock`.
//!
//! Two clocks, two jobs. The wall clock (unix milliseconds) is for times
//! that are shown or stored: `submitted_at`, `updated_at`, attempt start
//! and end, `next_retry_at` and `not_before` in views and the database.
//! The monotonic clock (milliseconds from an arbitrary start, never going
//! back, unmoved by a wall-clock step) is for durations the coordinator
//! measures itself: heartbeat age, attempt deadlines, retry backoff, the
//! release of delayed jobs, expiry's pauses. A monotonic reading means
//! nothing outside the process that took it, so it is never stored.

pub mod text;

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// One reading of both clocks, taken together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    /// Unix milliseconds: what is shown and stored.
    pub wall_ms: i64,
    /// Monotonic milliseconds: what durations are measured on.
    pub mono_ms: i64,
    /// The same monotonic reading in microseconds (`mono_ms` is it
    /// rounded down): for the latency histograms, which need more than
    /// whole milliseconds.
    pub mono_us: i64,
}

impl Now {
    /// Both clocks reading `ms`: a start for tests, where the two agree
    /// until the wall clock is stepped.
    pub const fn both(ms: i64) -> Now {
        Now {
            wall_ms: ms,
            mono_ms: ms,
            mono_us: ms.saturating_mul(1000),
        }
    }

    /// The monotonic instant at which the wall clock will read `wall`, if
    /// it is not stepped meanwhile: `wall` as a deadline to measure on the
    /// monotonic clock. How stored wall times become timers at recovery.
    pub fn mono_at(&self, wall: i64) -> i64 {
        self.mono_ms
            .saturating_add(wall.saturating_sub(self.wall_ms))
    }

    /// The wall time the monotonic instant `mono` falls at, seen from this
    /// reading: a timer as a wall time to show (wall now + what remains).
    pub fn wall_at(&self, mono: i64) -> i64 {
        self.wall_ms
            .saturating_add(mono.saturating_sub(self.mono_ms))
    }

    /// `mono_at` in monotonic microseconds: the instant the wall clock
    /// reads (or read) `wall`, for durations measured against this reading.
    pub fn mono_us_at(&self, wall: i64) -> i64 {
        self.mono_us
            .saturating_add(wall.saturating_sub(self.wall_ms).saturating_mul(1000))
    }

    /// This reading moved on by `ms` on both clocks.
    pub fn plus(&self, ms: i64) -> Now {
        self.plus_micros(ms.saturating_mul(1000))
    }

    /// This reading moved on by `us` microseconds: the monotonic clock by
    /// exactly that, the millisecond readings by the whole milliseconds the
    /// monotonic one crossed.
    pub fn plus_micros(&self, us: i64) -> Now {
        let mono_us = self.mono_us.saturating_add(us);
        let crossed = mono_us.div_euclid(1000) - self.mono_us.div_euclid(1000);
        Now {
            wall_ms: self.wall_ms.saturating_add(crossed),
            mono_ms: self.mono_ms.saturating_add(crossed),
            mono_us,
        }
    }
}

/// A source of wall-clock and monotonic time.
pub trait Clock: Send + Sync + 'static {
    /// Wall-clock time in unix milliseconds; may step either way.
    fn now_millis(&self) -> i64;

    /// Monotonic milliseconds from an arbitrary start; never decreases.
    fn monotonic_millis(&self) -> i64;

    /// Both clocks at once.
    fn now(&self) -> Now {
        let mono_ms = self.monotonic_millis();
        Now {
            wall_ms: self.now_millis(),
            mono_ms,
            mono_us: mono_ms.saturating_mul(1000),
        }
    }
}

/// The system's clocks: `SystemTime` for the wall, `Instant` (the OS's
/// monotonic clock) for durations.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_millis(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    }

    fn monotonic_millis(&self) -> i64 {
        i64::try_from(monotonic_elapsed().as_millis()).unwrap_or(i64::MAX)
    }

    /// One monotonic reading, in both units.
    fn now(&self) -> Now {
        let elapsed = monotonic_elapsed();
        Now {
            wall_ms: self.now_millis(),
            mono_ms: i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX),
            mono_us: i64::try_from(elapsed.as_micros()).unwrap_or(i64::MAX),
        }
    }
}

/// Time since the first reading of this process's monotonic clock.
fn monotonic_elapsed() -> std::time::Duration {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed()
}

/// Clocks that move only when told to; clones share the same time. Both
/// start at the same reading; `advance` moves both (time passing),
/// `step_wall` moves the wall clock alone, either way (someone set it).
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<Mutex<Now>>);

impl ManualClock {
    pub fn starting_at(millis: i64) -> Self {
        ManualClock(Arc::new(Mutex::new(Now::both(millis))))
    }

    /// Time passes: both clocks move on by `millis`.
    pub fn advance(&self, millis: i64) {
        self.update(|now| *now = now.plus(millis));
    }

    /// Time passes by `micros` microseconds: the monotonic clock moves by
    /// exactly that, the millisecond readings by each millisecond crossed.
    pub fn advance_micros(&self, micros: i64) {
        self.update(|now| *now = now.plus_micros(micros));
    }

    /// The wall clock is set `millis` ahead (negative: back); the
    /// monotonic clock does not move.
    pub fn step_wall(&self, millis: i64) {
        self.update(|now| now.wall_ms = now.wall_ms.saturating_add(millis));
    }

    fn update(&self, change: impl FnOnce(&mut Now)) {
        let mut now = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        change(&mut now);
    }

    fn read(&self) -> Now {
        *self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Clock for ManualClock {
    fn now_millis(&self) -> i64 {
        self.read().wall_ms
    }

    fn monotonic_millis(&self) -> i64 {
        self.read().mono_ms
    }

    fn now(&self) -> Now {
        self.read()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advance_moves_both_clocks_and_a_wall_step_moves_the_wall_alone() {
        let clock = ManualClock::starting_at(1000);
        clock.advance(500);
        assert_eq!(clock.now(), Now::both(1500));
        clock.step_wall(3_600_000);
        assert_eq!(clock.now().wall_ms, 3_601_500);
        assert_eq!(clock.now().mono_ms, 1500);
        clock.step_wall(-7_200_000);
        assert_eq!(clock.now().wall_ms, -3_598_500);
        assert_eq!(clock.now().mono_ms, 1500, "a step back leaves it alone too");
        clock.clone().advance(1);
        assert_eq!(clock.monotonic_millis(), 1501, "clones share the time");
    }

    #[test]
    fn wall_and_monotonic_times_convert_through_one_reading() {
        let now = Now {
            wall_ms: 10_000,
            mono_ms: 200,
            mono_us: 200_000,
        };
        assert_eq!(now.mono_at(13_000), 3200, "3 s ahead on the wall");
        assert_eq!(now.wall_at(3200), 13_000);
        assert_eq!(now.mono_at(9000), -800, "a wall time passed is in the past");
        assert!(now.mono_at(i64::MAX) > now.mono_ms, "no overflow");
        assert!(now.wall_at(i64::MIN) < now.wall_ms, "no overflow");
        assert_eq!(now.mono_us_at(9000), -800_000);
        assert!(now.mono_us_at(i64::MAX) > now.mono_us, "no overflow");
    }

    #[test]
    fn microseconds_advance_the_millisecond_readings_only_as_they_add_up() {
        let clock = ManualClock::starting_at(1000);
        clock.advance_micros(400);
        assert_eq!(clock.now().mono_us, 1_000_400);
        assert_eq!(clock.now().mono_ms, 1000, "not a whole millisecond yet");
        clock.advance_micros(700);
        assert_eq!(clock.now().mono_us, 1_001_100);
        assert_eq!((clock.now().mono_ms, clock.now().wall_ms), (1001, 1001));
        clock.advance(2);
        assert_eq!(clock.now().mono_us, 1_003_100);
    }

    #[test]
    fn the_system_clock_reads_microseconds_that_agree_with_its_milliseconds() {
        let now = SystemClock.now();
        assert_eq!(now.mono_us.div_euclid(1000), now.mono_ms);
    }

    #[test]
    fn the_system_monotonic_clock_never_goes_back() {
        let clock = SystemClock;
        let first = clock.monotonic_millis();
        assert!(first >= 0);
        assert!(clock.monotonic_millis() >= first);
    }
}
