//! Who leads: what a standby coordinator tells a peer that reached it, so
//! the peer can go to the leader instead.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The leading coordinator's advertised addresses (`advertise-client`,
/// `advertise-worker`, `advertise-http`) and its epoch. An address the
/// leader does not advertise is null.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
pub struct LeaderAddresses {
    /// The leader's node name (`node-name`).
    #[serde(default)]
    pub node: String,
    /// The epoch of the leader's lease.
    #[serde(default)]
    pub epoch: u64,
    #[serde(default)]
    pub client: Option<String>,
    #[serde(default)]
    pub worker: Option<String>,
    #[serde(default)]
    pub http: Option<String>,
}
