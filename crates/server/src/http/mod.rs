//! The coordinator's HTTP listener (`http-listen`): a JSON API, Prometheus
//! metrics, health probes and a live dashboard. Handlers hold no state:
//! every read and write is a message to the `Coordinator`, answered through
//! its outbox, so HTTP never shows anything that is not yet durable (see
//! `bridge`).

pub mod api;
pub mod auth;
pub mod body;
pub mod bridge;
pub mod browser_rules;
pub mod const_metrics;
pub mod dashboard;
pub mod dto;
pub mod error;
pub mod health;
pub mod job_actions;
pub mod link;
pub mod metrics;
pub mod metrics_by_task_type;
pub mod openapi;
pub mod process_metrics;
pub mod schedules;
pub mod server;

pub use bridge::CoordinatorLink;
pub use browser_rules::ListenerHosts;
pub use server::{app, serve};
