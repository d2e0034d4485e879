//! taskyard: a distributed job scheduler with one durable coordinator.

pub mod cli;
pub mod client;
pub mod config;
pub mod protocol;
