//! `NodeView`: what this coordinator process knows about the cluster,
//! shared (behind a lock) by the listeners, the HTTP handlers and the node
//! runtime that keeps it current. On SQLite it is fixed: always the leader
//! at epoch 0, alone.

use crate::actors::coordinator::Coordinator;
use crate::ha::{LeaderRecord, Member, MemberRole};
use actix::Addr;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Instant;
use taskyard_protocol::LeaderAddresses;
use tokio_util::sync::CancellationToken;
use utoipa::openapi::schema::{Object, ObjectBuilder, Type};
use utoipa::ToSchema;

/// This process's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeRole {
    /// Answers peers with `NotLeader` and polls the lease.
    Standby,
    /// Holds the lease at this epoch and recovers from the database;
    /// peers are still told `NotLeader` until it serves.
    Recovering { epoch: u64 },
    /// Serves at this epoch.
    Leading { epoch: u64 },
}

impl NodeRole {
    pub fn name(self) -> &'static str {
        match self {
            NodeRole::Standby => "standby",
            NodeRole::Recovering { .. } => "recovering",
            NodeRole::Leading { .. } => "leader",
        }
    }
}

/// A term of leadership: the coordinator serving it and the token every
/// session of the term watches (cancelled on step-down: all close).
#[derive(Clone)]
pub struct Term {
    pub epoch: u64,
    pub coordinator: Addr<Coordinator>,
    /// `None`: a term that never ends before the process (SQLite), whose
    /// sessions need no watching.
    pub sessions: Option<CancellationToken>,
}

/// See the module documentation.
pub struct ViewState {
    /// This node's name and advertised addresses (`epoch` unused).
    pub me: LeaderAddresses,
    /// `postgres` or `sqlite`.
    pub store: &'static str,
    pub role: NodeRole,
    /// Set exactly while `role` is `Leading`.
    pub term: Option<Term>,
    /// The leader row as last read, and when.
    pub leader: Option<(LeaderRecord, Instant)>,
    /// The members that checked in, as last read, and when.
    pub members: Option<(Vec<Member>, Instant)>,
    /// Times this process became leader or stopped leading.
    pub leader_changes: u64,
    /// Why it last stopped leading, if it ever did.
    pub last_step_down: Option<String>,
    /// Why the lease could not be read, if the last try failed.
    pub lease_error: Option<String>,
}

/// See the module documentation.
#[derive(Clone)]
pub struct NodeView(Arc<RwLock<ViewState>>);

impl NodeView {
    /// A standby on PostgreSQL that has not read the lease yet.
    pub fn standby(me: LeaderAddresses) -> NodeView {
        NodeView::with(ViewState {
            me,
            store: "postgres",
            role: NodeRole::Standby,
            term: None,
            leader: None,
            members: None,
            leader_changes: 0,
            last_step_down: None,
            lease_error: None,
        })
    }

    /// The single SQLite coordinator: the leader at epoch 0, for good.
    pub fn single(me: LeaderAddresses, coordinator: Addr<Coordinator>) -> NodeView {
        NodeView::with(ViewState {
            me,
            store: "sqlite",
            role: NodeRole::Leading { epoch: 0 },
            term: Some(Term {
                epoch: 0,
                coordinator,
                sessions: None,
            }),
            leader: None,
            members: None,
            leader_changes: 0,
            last_step_down: None,
            lease_error: None,
        })
    }

    fn with(state: ViewState) -> NodeView {
        NodeView(Arc::new(RwLock::new(state)))
    }

    /// A poisoned lock only means a panic elsewhere mid-update; the view
    /// is plain data and still usable.
    pub fn read(&self) -> RwLockReadGuard<'_, ViewState> {
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn write(&self) -> RwLockWriteGuard<'_, ViewState> {
        self.0.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The term being served, if this process leads.
    pub fn term(&self) -> Option<Term> {
        self.read().term.clone()
    }

    /// Whom to send peers to: the leader as last read (`None`: unknown,
    /// or the lease is free).
    pub fn leader_addresses(&self) -> Option<LeaderAddresses> {
        let view = self.read();
        let (record, _) = view.leader.as_ref()?;
        let known = !record.leader.node.is_empty() && record.leader.node != view.me.node;
        known.then(|| record.leader.clone())
    }

    /// What `/api/cluster` and `taskyard cluster` show.
    pub fn cluster(&self) -> ClusterInfo {
        let view = self.read();
        let leading_epoch = match view.role {
            NodeRole::Leading { epoch } => Some(epoch),
            _ => None,
        };
        let leader = match (&view.leader, leading_epoch) {
            (Some((record, read_at)), _) => {
                let aged = read_at.elapsed().as_millis() as i64;
                Some(ClusterLeader {
                    leader: record.leader.clone(),
                    expires_in_ms: Some(record.expires_in_ms - aged),
                    renewed_ms_ago: Some(record.renewed_ms_ago + aged),
                })
            }
            (None, Some(epoch)) => Some(ClusterLeader {
                leader: LeaderAddresses {
                    epoch,
                    ..view.me.clone()
                },
                expires_in_ms: None,
                renewed_ms_ago: None,
            }),
            (None, None) => None,
        };
        let members = match &view.members {
            Some((members, read_at)) => {
                let aged = read_at.elapsed().as_millis() as i64;
                members
                    .iter()
                    .map(|m| ClusterMember {
                        node: m.node.clone(),
                        role: member_role(m.role).to_string(),
                        client: m.addresses.client.clone(),
                        worker: m.addresses.worker.clone(),
                        http: m.addresses.http.clone(),
                        seen_ms_ago: Some(m.seen_ms_ago + aged),
                    })
                    .collect()
            }
            None => vec![ClusterMember {
                node: view.me.node.clone(),
                role: if leading_epoch.is_some() {
                    "leader"
                } else {
                    "standby"
                }
                .to_string(),
                client: view.me.client.clone(),
                worker: view.me.worker.clone(),
                http: view.me.http.clone(),
                seen_ms_ago: None,
            }],
        };
        ClusterInfo {
            node: view.me.node.clone(),
            role: view.role.name().to_string(),
            epoch: match view.role {
                NodeRole::Standby => None,
                NodeRole::Recovering { epoch } | NodeRole::Leading { epoch } => Some(epoch),
            },
            store: view.store.to_string(),
            leader,
            members,
            leader_changes: view.leader_changes,
            last_step_down: view.last_step_down.clone(),
            lease_error: view.lease_error.clone(),
        }
    }
}

/// A string that is one of `words`.
fn one_of(words: impl IntoIterator<Item = &'static str>) -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(words))
        .build()
}

fn role_schema() -> Object {
    let roles = [
        NodeRole::Leading { epoch: 0 },
        NodeRole::Recovering { epoch: 0 },
        NodeRole::Standby,
    ];
    one_of(roles.map(NodeRole::name))
}

fn member_role_schema() -> Object {
    one_of([MemberRole::Leader, MemberRole::Standby].map(member_role))
}

/// The stores a coordinator runs on (`ViewState::store`).
fn store_schema() -> Object {
    one_of(["sqlite", "postgres"])
}

/// How `/api/cluster` names a member's role.
fn member_role(role: MemberRole) -> &'static str {
    match role {
        MemberRole::Leader => "leader",
        MemberRole::Standby => "standby",
    }
}

/// The leader as `GET /api/cluster` shows it. The ages are on the
/// database's clock as last read, moved on by the time since.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ClusterLeader {
    #[serde(flatten)]
    pub leader: LeaderAddresses,
    /// Until the lease expires, on the database's clock (negative:
    /// expired); null on SQLite.
    pub expires_in_ms: Option<i64>,
    /// Since the holder acquired or renewed it; null on SQLite.
    pub renewed_ms_ago: Option<i64>,
}

/// A coordinator that checked in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ClusterMember {
    pub node: String,
    /// `leader` or `standby`.
    #[schema(schema_with = member_role_schema)]
    pub role: String,
    pub client: Option<String>,
    pub worker: Option<String>,
    pub http: Option<String>,
    /// Since its last check-in; null on SQLite (no check-ins).
    pub seen_ms_ago: Option<i64>,
}

/// The body of `GET /api/cluster`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = Cluster)]
pub struct ClusterInfo {
    /// The node that answered (`node-name`).
    pub node: String,
    /// Its role: `leader`, `recovering` (won the lease, loading) or `standby`.
    #[schema(schema_with = role_schema)]
    pub role: String,
    /// Its epoch while it leads or recovers.
    pub epoch: Option<u64>,
    /// `postgres` or `sqlite`.
    #[schema(schema_with = store_schema)]
    pub store: String,
    /// The leader as the answering process last read the lease (SQLite:
    /// itself, epoch 0, no lease times).
    #[schema(inline)]
    pub leader: Option<ClusterLeader>,
    /// Coordinators that checked in within three polls, leader first.
    #[schema(inline)]
    pub members: Vec<ClusterMember>,
    /// Times the answering node became leader or stopped leading.
    pub leader_changes: u64,
    pub last_step_down: Option<String>,
    /// Why the answering node could not read the lease, if it could not.
    pub lease_error: Option<String>,
}
