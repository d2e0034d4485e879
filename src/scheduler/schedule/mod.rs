//! Schedules: named cron or interval cadences that submit an ordinary job
//! per slot, with idempotency key `schedule:NAME:SLOT`. Pure policy; the
//! coordinator applies what it decides.

pub mod cadence;

#[cfg(test)]
mod cadence_tests;

pub use cadence::{slot_label, Cadence, CadenceError};
