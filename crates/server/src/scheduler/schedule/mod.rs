//! Schedules: named cron or interval cadences that submit an ordinary job
//! per slot, with idempotency key `schedule:NAME:SLOT`. Pure policy; the
//! coordinator applies what it decides.

pub mod cadence;
mod cron_fields;

#[cfg(test)]
mod cadence_tests;
#[cfg(test)]
mod firing_tests;

pub use cadence::{slot_label, Cadence, CadenceError};
pub mod spec;
pub use spec::{validate, SpecError, SpecLimits};
pub mod book;
pub mod keys;
pub use book::{Entry, ScheduleBook, ScheduleRefused, SkipReason};
pub mod admin;
pub mod firing;
pub mod pass_memo;
pub mod passes;
pub mod requests;
pub use admin::{ScheduleWrite, SkippedCounts, StoredSchedule};
pub use requests::ScheduleStep;
