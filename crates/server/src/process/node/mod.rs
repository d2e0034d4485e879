//! The coordinator process as a node of a cluster: its role (standby or
//! leader), the terms it leads, and what it knows about the others.

pub mod runtime;
pub mod standby;
pub mod term_io;

pub use crate::actors::node_view::{
    ClusterInfo, ClusterLeader, ClusterMember, NodeRole, NodeView, Term, ViewState,
};
pub use crate::store::{OpenedStore, StoreOpener};
pub use runtime::{NodeHandle, NodeServer};
