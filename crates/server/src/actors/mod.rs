//! The coordinator process's actors: the single-writer `Coordinator`, the
//! `Sweeper`, `Persistence` and the `StoredReads` reader pool, and the view of
//! who leads that they and the HTTP side share. Sessions (one per
//! connection) are in `net/`, process start-up in `process/`.

pub mod coordinator;
pub mod node_view;
pub mod outbox;
pub mod persistence;
pub mod stored_reads;
pub mod sweeper;

pub use coordinator::Coordinator;
