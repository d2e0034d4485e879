//! taskyard: a distributed job scheduler with one durable coordinator.

pub mod config;
pub mod logging;
pub mod protocol;
pub mod worker;
