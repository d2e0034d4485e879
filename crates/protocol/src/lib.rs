//! Everything both ends of a connection agree on: identifiers, wire messages,
//! framing, the job state machine and payload validation.

pub mod addresses;
pub mod byte_fields;
pub mod cursor;
pub mod fit;
pub mod flow;
pub mod frame;
pub mod hello;
pub mod id_prefix;
pub mod ids;
pub mod job_json;
pub mod job_state;
pub mod leader;
pub mod limits;
pub mod messages;
pub mod payloads;
pub mod priority;
pub mod queue_stats;
pub mod register;
pub mod schedule;
pub mod views;

pub use addresses::{parse_address_list, AddressError, LeaderSearch, MAX_REDIRECTS};
pub use cursor::PageCursor;
pub use frame::{
    FrameCodec, ProtocolError, DEFAULT_MAX_FRAME_BYTES, HTTP_CLIENT_PORT_HINT,
    HTTP_WORKER_PORT_HINT, TLS_PORT_HINT,
};
pub use hello::{
    Hello, Role, IDLE_CLOSED, MIN_CLIENT_IDLE_TIMEOUT_MILLIS, PROTOCOL_VERSION, UNAUTHORIZED,
    VERSION_MISMATCH, WRONG_LISTENER,
};
pub use id_prefix::{IdPrefix, IdPrefixError};
pub use ids::{JobId, LeaseId, WorkerId};
pub use job_state::{IllegalTransition, JobState};
pub use leader::LeaderAddresses;
pub use messages::*;
pub use priority::Priority;
pub use queue_stats::{QueueRow, QueueStats, TaskTypeRow};
pub use schedule::{Overlap, ScheduleRun, ScheduleSpec, ScheduleView, MAX_RECENT_RUNS_LIMIT};
pub use views::*;
