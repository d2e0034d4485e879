//! The coordinator's keys, their defaults, and the checks that refuse an
//! unusable or insecure configuration before anything is opened.

use crate::config::authority::Authority;
use crate::config::{
    at_least, at_most, fits_frame, frame_size, secret, shown, within, Invalid, LogFormat, LogLevel,
    PostgresUrl, StoreKind, Synchronous, Validate,
};
use std::net::SocketAddr;
use std::path::PathBuf;
use taskyard_client::security::Secret;
use taskyard_protocol::limits::{MAX_ATTEMPTS_RANGE, TIMEOUT_MS};

taskyard_client::config_struct! {
    /// Everything the coordinator reads at start-up.
    CoordinatorConfig / CoordinatorOptions {
        /// Address the client listener binds (CLI and client library).
        client_listen: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 7400)),
        /// Address the worker listener binds.
        worker_listen: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 7401)),
        /// Where jobs are stored: `sqlite` (the file at db-path) or
        /// `postgres` (the database at postgres-url).
        store: StoreKind = StoreKind::Sqlite,
        /// PostgreSQL URL for store = "postgres", `postgres://USER:PASSWORD@HOST:PORT/DB`
        /// (`?sslmode=require` for TLS, `&sslrootcert=FILE` for a private CA);
        /// when not set, $TASKYARD_POSTGRES_URL. Never logged with its password.
        postgres_url: PostgresUrl = PostgresUrl::from_env(),
        /// store = "postgres": connections a batch's writes are split
        /// between, written in parallel and committed together (1..=16).
        postgres_write_connections: usize = crate::config::defaults::POSTGRES_WRITE_CONNECTIONS,
        /// SQLite database file; created if missing.
        db_path: PathBuf = PathBuf::from("taskyard-data/taskyard.db"),
        /// SQLite `synchronous` mode: full (every commit fsynced), normal or off.
        sqlite_synchronous: Synchronous = Synchronous::Full,
        /// Fill the WAL with zeros at start-up (~37 MB), so commits
        /// overwrite it in place instead of growing it: cheaper fsyncs.
        sqlite_preallocate_wal: bool = true,
        /// Longest a graceful stop (SIGTERM, SIGINT) waits for pending
        /// changes to become durable; then it stops anyway, logs how many
        /// were not, and exits 1.
        shutdown_timeout_millis: u64 = 10_000,
        /// How often the coordinator checks heartbeats, deadlines and retries.
        sweep_interval_millis: u64 = 500,
        /// A worker silent for longer than this is declared dead.
        heartbeat_timeout_millis: u64 = 6000,
        /// Per-attempt deadline for jobs submitted without their own timeout.
        task_timeout_millis: u64 = 300_000,
        /// Age after which a queued job's effective priority rises one level.
        aging_step_millis: u64 = 30_000,
        /// Submissions are rejected while this many jobs are not terminal.
        max_active_jobs: u64 = 100_000,
        /// First retry delay; doubles per attempt.
        retry_base_millis: u64 = 1000,
        /// Longest retry delay.
        retry_cap_millis: u64 = 30_000,
        /// Attempt budget for jobs submitted without their own.
        default_max_attempts: u32 = 3,
        /// Largest accepted frame, in either direction.
        max_frame_bytes: usize = taskyard_protocol::DEFAULT_MAX_FRAME_BYTES,
        /// Largest accepted job payload; with the envelope it must fit
        /// max-frame-bytes (a submission carries it in one frame).
        max_payload_bytes: usize = 256 * 1024,
        /// Largest accepted task result; a bigger one fails its attempt.
        /// With the envelope it must fit max-frame-bytes (a worker sends it
        /// in one frame): the default is 1 MiB less 1 KiB.
        max_result_bytes: usize =
            taskyard_protocol::DEFAULT_MAX_FRAME_BYTES - taskyard_protocol::fit::FRAME_HEADROOM_BYTES,
        /// Most task types one worker may advertise; a longer Register is
        /// refused and the connection closed.
        max_task_types_per_worker: usize =
            taskyard_protocol::register::DEFAULT_MAX_TASK_TYPES_PER_WORKER,
        /// Largest capacity a worker may register with.
        max_worker_capacity: u32 = taskyard_protocol::register::DEFAULT_MAX_WORKER_CAPACITY,
        /// Longest failure text kept from a worker; the rest is cut and
        /// the cut marked.
        max_error_bytes: usize = taskyard_protocol::register::DEFAULT_MAX_ERROR_BYTES,
        /// Shared secret workers must present (empty: none required).
        worker_token: String = String::new(),
        /// File holding the worker token (first line), instead of worker-token.
        worker_token_file: PathBuf = PathBuf::new(),
        /// Shared secret clients must present (empty: none required).
        client_token: String = String::new(),
        /// File holding the client token (first line), instead of client-token.
        client_token_file: PathBuf = PathBuf::new(),
        /// PEM certificate chain; with tls-key, both listeners speak TLS.
        tls_cert: PathBuf = PathBuf::new(),
        /// PEM private key for tls-cert.
        tls_key: PathBuf = PathBuf::new(),
        /// Allow a non-loopback listener without TLS (tokens still required).
        allow_plaintext: bool = false,
        /// Open connections per listener; more are refused with an error frame.
        max_connections: usize = 1024,
        /// Requests one client connection may have waiting for answers.
        max_in_flight_requests: usize = 64,
        /// A client connection stops having its requests read while more
        /// than this many bytes of answers wait to be taken by its socket.
        max_unwritten_answer_bytes: usize = 4 * 1024 * 1024,
        /// A worker owed more than this many bytes of assignments whose
        /// socket then takes less than 64 KiB within the heartbeat timeout
        /// is not reading, and is dropped (its attempts retried elsewhere).
        max_unwritten_worker_bytes: usize = 64 * 1024 * 1024,
        /// A connection without a valid Hello (a worker: and Register) by
        /// then is closed.
        handshake_timeout_millis: u64 = 5000,
        /// A client connection with no request for this long is closed
        /// with an error frame (clients keep idle connections open by Ping).
        client_idle_timeout_millis: u64 = 300_000,
        /// error, warn, info, debug or trace.
        log_level: LogLevel = LogLevel::Info,
        /// text (human-readable) or json (one object per line).
        log_format: LogFormat = LogFormat::Text,
        /// Address of the HTTP API, metrics and dashboard; empty turns it off.
        http_listen: String = "127.0.0.1:7480".to_string(),
        /// Extra names (`host` or `host:port`) the HTTP listener may be
        /// addressed by in the `Host` header, besides its own addresses;
        /// any other Host is refused (421) against DNS rebinding. Repeat
        /// the flag or separate entries with commas.
        #[arg(value_delimiter = ',', value_name = "HOST[:PORT]")]
        http_allowed_hosts: Vec<String> = Vec::new(),
        /// Most task types `/metrics` labels by name (`task_type` on the job
        /// counters and histograms, queue gauges); task types met after
        /// these are counted under `task_type="other"`. 0: all are `other`.
        metrics_max_task_types: usize = crate::config::defaults::METRICS_MAX_TASK_TYPES,
        /// Task types the dashboard's hour of charts (`/api/timeline`)
        /// tracks one by one; jobs of further types count as `other`.
        timeline_task_types: usize = crate::config::defaults::TIMELINE_TASK_TYPES,
        /// Most finished jobs kept in memory; older ones are read from the database.
        retain_finished_in_memory: usize = 10_000,
        /// Longest a finished job stays in memory.
        #[duration_key = "retain-finished-in-memory-for"]
        retain_finished_in_memory_millis: u64 = 60_000,
        /// Most payload and result bytes of finished jobs kept in memory
        /// (default 16 MiB); past it the oldest are read from the database.
        retain_finished_in_memory_bytes: u64 = 16 * 1024 * 1024,
        /// Threads (each with a read-only connection) answering reads of
        /// jobs no longer in memory.
        history_readers: usize = 2,
        /// Longest a page of history is read as asked before it walks a
        /// bounded stretch instead (history-read-rows jobs in its order)
        /// and comes back short, with a cursor to go on: never an error.
        /// 0ms: every page walks a bounded stretch.
        history_read_budget_millis: u64 = crate::config::defaults::HISTORY_READ_BUDGET_MILLIS,
        /// Jobs a page of history walks, whatever they match, once its
        /// time budget has run out.
        history_read_rows: u64 = crate::config::defaults::HISTORY_READ_ROWS,
        /// Most history reads one client connection (or one HTTP peer
        /// address) may have waiting or running; another is refused
        /// ("overloaded"). Readers take the waiting reads of all
        /// connections in turn, so one busy connection cannot starve
        /// the others.
        history_reads_per_connection: usize = 8,
        /// Most history reads waiting for a reader, of all connections
        /// together; another is refused ("overloaded").
        history_reads_waiting: usize = 1024,
        /// SUCCEEDED and CANCELLED jobs are deleted this long after they
        /// finish (default 7 days), with their attempts and idempotency key.
        job_retention_millis: u64 = 7 * 24 * 60 * 60 * 1000,
        /// FAILED jobs are deleted this long after they finish (default 30 days).
        failed_job_retention_millis: u64 = 30 * 24 * 60 * 60 * 1000,
        /// How often expired jobs are looked for; a backlog is deleted
        /// batch after batch without waiting.
        expiry_interval_millis: u64 = 60_000,
        /// Most jobs deleted in one transaction.
        expiry_batch_rows: usize = 500,
        /// Most schedules the coordinator holds; another create is refused
        /// ("max-schedules reached").
        max_schedules: usize = crate::config::defaults::MAX_SCHEDULES,
        /// Schedules declared in the file (`[[schedule]]` tables, see
        /// docs/guide/schedules.md), reconciled at start-up. As a flag, one
        /// inline table per use: `--schedule '{name = "tick", every = "1s",
        /// task-type = "echo", payload = {message = "hi"}}'`; flags replace
        /// the file's list.
        #[arg(value_name = "TOML-TABLE")]
        schedule: Vec<crate::config::schedule::DeclaredSchedule> = Vec::new(),
        /// Concurrency limits (`[[limit]]` tables: `pattern`, an exact
        /// concurrency key or a `prefix*`, and `max-running`): at most that
        /// many jobs of each matching key run at once; the exact pattern,
        /// else the longest prefix, applies. As a flag, one inline table per
        /// use: `--limit '{pattern = "stripe:*", max-running = 5}'`; flags
        /// replace the file's list.
        #[arg(value_name = "TOML-TABLE")]
        limit: Vec<crate::config::limit::DeclaredLimit> = Vec::new(),
        /// High availability (`store = "postgres"`): how long an acquired
        /// or renewed leader lease lasts on the database's clock. The
        /// leader renews every third of it and trusts it for four fifths;
        /// a standby takes over within about this long after a crash.
        leader_lease_millis: u64 = 10_000,
        /// This process's name in the lease and in `taskyard cluster`;
        /// empty: the host name plus a random suffix (unique per process).
        node_name: String = String::new(),
        /// The client address a standby tells peers to use while this
        /// process leads; empty: client-listen as bound.
        advertise_client: String = String::new(),
        /// The worker address advertised while this process leads; empty:
        /// worker-listen as bound.
        advertise_worker: String = String::new(),
        /// The HTTP address advertised while this process leads; empty:
        /// http-listen as bound.
        advertise_http: String = String::new(),
    }
}

impl CoordinatorConfig {
    /// The `[[schedule]]` definitions that convert to a `ScheduleSpec` (all
    /// of them once `check_schedules` passed; the scheduler's own checks
    /// run at start-up, `process::config_checks`).
    pub fn declared_schedules(&self) -> Vec<taskyard_protocol::ScheduleSpec> {
        self.schedule
            .iter()
            .filter_map(|s| s.to_spec().ok())
            .collect()
    }

    /// The concurrency limits declared, each checked; the error's key is
    /// `limit.PATTERN.FIELD`.
    pub fn concurrency_limits(
        &self,
    ) -> Result<Vec<(taskyard_protocol::flow::LimitPattern, u32)>, Invalid> {
        let mut limits = Vec::with_capacity(self.limit.len());
        for (i, declared) in self.limit.iter().enumerate() {
            let key = |field: &str| format!("limit.{}.{field}", declared.pattern);
            let limit = declared
                .to_limit()
                .map_err(|(field, reason)| (key(field), reason))?;
            if self.limit[..i]
                .iter()
                .any(|d| d.pattern == declared.pattern)
            {
                return Err((key("pattern"), "declared twice".into()));
            }
            limits.push(limit);
        }
        Ok(limits)
    }

    fn check_limits(&self) -> Result<(), Invalid> {
        let most = crate::config::limit::MAX_DECLARED_LIMITS;
        if self.limit.len() > most {
            return Err((
                "limit".into(),
                format!("{} limits declared, more than {most}", self.limit.len()),
            ));
        }
        self.concurrency_limits().map(|_| ())
    }

    /// Every `[[schedule]]` converts to a definition and names are unique;
    /// the error's key is `schedule.NAME.FIELD`.
    fn check_schedules(&self) -> Result<(), Invalid> {
        for (i, declared) in self.schedule.iter().enumerate() {
            let key = |field: &str| format!("schedule.{}.{field}", declared.name);
            declared
                .to_spec()
                .map_err(|(field, reason)| (key(field), reason))?;
            if self.schedule[..i].iter().any(|d| d.name == declared.name) {
                return Err((key("name"), "declared twice".into()));
            }
        }
        if self.schedule.len() > self.max_schedules {
            return Err((
                "max-schedules".into(),
                format!(
                    "{} schedules declared, more than max-schedules",
                    self.schedule.len()
                ),
            ));
        }
        Ok(())
    }

    /// The token workers must present, read from its file if configured.
    pub fn worker_secret(&self) -> Result<Option<Secret>, Invalid> {
        secret(
            &self.worker_token,
            "worker-token",
            &self.worker_token_file,
            "worker-token-file",
        )
    }

    /// The token clients must present, read from its file if configured.
    pub fn client_secret(&self) -> Result<Option<Secret>, Invalid> {
        secret(
            &self.client_token,
            "client-token",
            &self.client_token_file,
            "client-token-file",
        )
    }

    /// True when both listeners speak TLS.
    pub fn tls_enabled(&self) -> bool {
        !self.tls_cert.as_os_str().is_empty()
    }

    fn require_token(
        &self,
        key: &str,
        addr: SocketAddr,
        token_key: &str,
        set: bool,
    ) -> Result<(), Invalid> {
        if set {
            return Ok(());
        }
        Err((
            token_key.into(),
            format!("{key} {addr} is not a loopback address: set {token_key} or {token_key}-file"),
        ))
    }

    /// The HTTP listener has no TLS: off loopback it needs the client
    /// token and `allow-plaintext`.
    fn check_http_exposure(&self) -> Result<(), Invalid> {
        let Some(addr) = self.http_addr()?.filter(|a| !a.ip().is_loopback()) else {
            return Ok(());
        };
        self.require_token(
            "http-listen",
            addr,
            "client-token",
            self.client_secret()?.is_some(),
        )?;
        if !self.allow_plaintext {
            return Err(("allow-plaintext".into(), format!(
                "http-listen {addr} is not a loopback address and serves plain HTTP: put it behind a TLS proxy and set allow-plaintext = true"
            )));
        }
        Ok(())
    }

    /// Secure by default: a listener reachable from other machines needs a
    /// token, and TLS unless `allow-plaintext` is set.
    fn check_exposure(&self) -> Result<(), Invalid> {
        self.check_http_exposure()?;
        let listeners = [
            (
                "client-listen",
                self.client_listen,
                "client-token",
                self.client_secret()?,
            ),
            (
                "worker-listen",
                self.worker_listen,
                "worker-token",
                self.worker_secret()?,
            ),
        ];
        for (key, addr, token_key, token) in listeners {
            if addr.ip().is_loopback() {
                continue;
            }
            self.require_token(key, addr, token_key, token.is_some())?;
            if token.is_none() {
                return Err((
                    token_key.into(),
                    format!(
                    "{key} {addr} is not a loopback address: set {token_key} or {token_key}-file"
                ),
                ));
            }
            if !self.tls_enabled() && !self.allow_plaintext {
                return Err(("tls-cert".into(), format!(
                    "{key} {addr} is not a loopback address: set tls-cert and tls-key, or allow-plaintext = true"
                )));
            }
        }
        Ok(())
    }
}

impl Validate for CoordinatorConfig {
    fn validate(&self) -> Result<(), Invalid> {
        at_least("sweep-interval-millis", self.sweep_interval_millis, 10)?;
        at_least(
            "heartbeat-timeout-millis",
            self.heartbeat_timeout_millis,
            10,
        )?;
        within("task-timeout-millis", self.task_timeout_millis, TIMEOUT_MS)?;
        at_least("shutdown-timeout-millis", self.shutdown_timeout_millis, 1)?;
        at_least("aging-step-millis", self.aging_step_millis, 1)?;
        at_least("max-active-jobs", self.max_active_jobs, 1)?;
        at_least("retry-base-millis", self.retry_base_millis, 1)?;
        at_least(
            "retry-cap-millis",
            self.retry_cap_millis,
            self.retry_base_millis,
        )?;
        within(
            "default-max-attempts",
            self.default_max_attempts.into(),
            MAX_ATTEMPTS_RANGE,
        )?;
        at_least("max-payload-bytes", self.max_payload_bytes as u64, 1)?;
        at_least("max-connections", self.max_connections as u64, 1)?;
        at_least("history-readers", self.history_readers as u64, 1)?;
        at_least("history-read-rows", self.history_read_rows, 100)?;
        // PostgreSQL's statement_timeout holds at most this many ms.
        at_most(
            "history-read-budget-millis",
            self.history_read_budget_millis,
            i32::MAX as u64,
        )?;
        at_least(
            "history-reads-per-connection",
            self.history_reads_per_connection as u64,
            1,
        )?;
        at_least(
            "history-reads-waiting",
            self.history_reads_waiting as u64,
            1,
        )?;
        if !(1..=16).contains(&self.postgres_write_connections) {
            return Err((
                "postgres-write-connections".into(),
                format!("{} is outside 1..=16", self.postgres_write_connections),
            ));
        }
        at_least("job-retention-millis", self.job_retention_millis, 1)?;
        at_least(
            "failed-job-retention-millis",
            self.failed_job_retention_millis,
            1,
        )?;
        at_least("expiry-interval-millis", self.expiry_interval_millis, 10)?;
        at_least("expiry-batch-rows", self.expiry_batch_rows as u64, 1)?;
        self.check_schedules()?;
        self.check_limits()?;
        at_most(
            "metrics-max-task-types",
            self.metrics_max_task_types as u64,
            MAX_TASK_TYPE_LABELS,
        )?;
        within_u64(
            "timeline-task-types",
            self.timeline_task_types as u64,
            0,
            MAX_TIMELINE_TASK_TYPES as u64,
        )?;
        within_u64(
            "leader-lease-millis",
            self.leader_lease_millis,
            MIN_LEADER_LEASE_MILLIS,
            MAX_LEADER_LEASE_MILLIS,
        )?;
        check_node_name(&self.node_name)?;
        for (key, value) in [
            ("advertise-client", &self.advertise_client),
            ("advertise-worker", &self.advertise_worker),
            ("advertise-http", &self.advertise_http),
        ] {
            check_advertised(key, value)?;
        }
        at_least(
            "max-in-flight-requests",
            self.max_in_flight_requests as u64,
            1,
        )?;
        at_least(
            "max-unwritten-answer-bytes",
            self.max_unwritten_answer_bytes as u64,
            1,
        )?;
        at_least(
            "max-unwritten-worker-bytes",
            self.max_unwritten_worker_bytes as u64,
            1,
        )?;
        at_least(
            "handshake-timeout-millis",
            self.handshake_timeout_millis,
            10,
        )?;
        at_least(
            "client-idle-timeout-millis",
            self.client_idle_timeout_millis,
            taskyard_protocol::MIN_CLIENT_IDLE_TIMEOUT_MILLIS,
        )?;
        if self.tls_cert.as_os_str().is_empty() != self.tls_key.as_os_str().is_empty() {
            return Err(("tls-key".into(), "tls-cert and tls-key go together".into()));
        }
        if self.tls_enabled() {
            taskyard_client::security::tls::acceptor(&self.tls_cert, &self.tls_key)
                .map_err(|reason| ("tls-cert".to_string(), reason))?;
        }
        self.check_exposure()?;
        at_least("max-result-bytes", self.max_result_bytes as u64, 1)?;
        at_least(
            "max-task-types-per-worker",
            self.max_task_types_per_worker as u64,
            1,
        )?;
        at_least("max-worker-capacity", self.max_worker_capacity.into(), 1)?;
        at_least("max-error-bytes", self.max_error_bytes as u64, 1)?;
        self.http_addr()?;
        self.http_allowed_hosts()?;
        self.check_store()?;
        frame_size(self.max_frame_bytes)?;
        fits_frame(
            "max-payload-bytes",
            self.max_payload_bytes,
            self.max_frame_bytes,
        )?;
        fits_frame(
            "max-result-bytes",
            self.max_result_bytes,
            self.max_frame_bytes,
        )
    }
}

impl CoordinatorConfig {
    /// `store = "postgres"` needs a `postgres-url` (that it parses is
    /// checked at start-up, `process::config_checks`).
    fn check_store(&self) -> Result<(), Invalid> {
        if self.store != StoreKind::Postgres {
            return Ok(());
        }
        let url = &self.postgres_url;
        if url.expose().trim().is_empty() {
            return Err((
                "postgres-url".into(),
                "store = \"postgres\" needs postgres-url (or $TASKYARD_POSTGRES_URL)".into(),
            ));
        }
        Ok(())
    }

    /// The HTTP listener's address, `None` when `http-listen` is empty.
    pub fn http_addr(&self) -> Result<Option<SocketAddr>, Invalid> {
        let text = self.http_listen.trim();
        if text.is_empty() {
            return Ok(None);
        }
        text.parse().map(Some).map_err(|_| {
            (
                "http-listen".to_string(),
                format!("{text:?} is not host:port (or empty to disable)"),
            )
        })
    }

    /// The `http-allowed-hosts` entries, each `host` or `host:port`.
    pub fn http_allowed_hosts(&self) -> Result<Vec<Authority>, Invalid> {
        self.http_allowed_hosts
            .iter()
            .map(|entry| {
                entry.parse().map_err(|reason| {
                    (
                        "http-allowed-hosts".to_string(),
                        format!("entry {entry:?} is not host or host:port: {reason}"),
                    )
                })
            })
            .collect()
    }
}

/// Shortest `leader-lease-millis`: renewals every 100 ms at the fastest.
/// The most task types `timeline-task-types` may track (each holds about
/// 12 KiB: an hour of minutes).
pub const MAX_TIMELINE_TASK_TYPES: usize = 1000;
pub const MIN_LEADER_LEASE_MILLIS: u64 = 300;
/// Largest `metrics-max-task-types`: each label is some 50 series.
pub const MAX_TASK_TYPE_LABELS: u64 = 1000;
/// Longest `leader-lease-millis` (one hour): a longer lease only delays
/// takeover after a crash.
pub const MAX_LEADER_LEASE_MILLIS: u64 = 3_600_000;
/// Longest `node-name`.
pub const MAX_NODE_NAME_BYTES: usize = 128;

fn within_u64(key: &str, value: u64, min: u64, max: u64) -> Result<(), Invalid> {
    if !(min..=max).contains(&value) {
        let [value, min, max] = [value, min, max].map(|n| shown(key, n));
        return Err((key.to_string(), format!("{value} is outside {min}..={max}")));
    }
    Ok(())
}

/// A node name is shown and stored: printable, no spaces, bounded.
fn check_node_name(name: &str) -> Result<(), Invalid> {
    let bad = name.len() > MAX_NODE_NAME_BYTES
        || name.chars().any(|c| c.is_whitespace() || c.is_control());
    if bad {
        return Err((
            "node-name".into(),
            format!("{name:?} must be at most {MAX_NODE_NAME_BYTES} bytes without spaces or control characters (empty: host name plus a random suffix)"),
        ));
    }
    Ok(())
}

/// An advertised address is what peers dial: `host:port` (a name or an
/// IP), or empty for the bound address.
fn check_advertised(key: &str, value: &str) -> Result<(), Invalid> {
    if value.is_empty() {
        return Ok(());
    }
    match value.parse::<Authority>() {
        Ok(Authority { port: Some(_), .. }) => Ok(()),
        _ => Err((
            key.to_string(),
            format!("{value:?} is not host:port (or empty for the bound address)"),
        )),
    }
}

impl CoordinatorConfig {
    /// The lease's length (`leader-lease-millis`).
    pub fn leader_lease(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.leader_lease_millis)
    }

    /// This process's node name: `node-name`, or the host name plus a
    /// random suffix, so that two processes (or one restarted) never share
    /// a name by default.
    pub fn resolved_node_name(&self) -> String {
        if !self.node_name.is_empty() {
            return self.node_name.clone();
        }
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        format!("{}-{}", host_name(), &suffix[..8])
    }
}

/// The machine's host name (`localhost` if it cannot be read).
fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at
    // most that many bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    match std::str::from_utf8(&buf[..end]) {
        Ok(name) if rc == 0 && !name.is_empty() => name.replace(char::is_whitespace, "-"),
        _ => "localhost".to_string(),
    }
}

#[cfg(test)]
mod ha_key_tests {
    use super::*;

    fn with(edit: impl FnOnce(&mut CoordinatorConfig)) -> Result<(), Invalid> {
        let mut c = CoordinatorConfig::default();
        edit(&mut c);
        c.validate()
    }

    #[test]
    fn ha_keys_out_of_range_name_the_key() {
        assert_eq!(with(|_| {}), Ok(()));
        let key = |r: Result<(), Invalid>| r.expect_err("refused").0;
        assert_eq!(
            key(with(|c| c.leader_lease_millis = 299)),
            "leader-lease-millis"
        );
        assert_eq!(
            key(with(|c| c.leader_lease_millis = 3_600_001)),
            "leader-lease-millis"
        );
        assert_eq!(key(with(|c| c.node_name = "a b".into())), "node-name");
        assert_eq!(key(with(|c| c.node_name = "x".repeat(129))), "node-name");
        assert_eq!(
            key(with(|c| c.advertise_client = "host".into())),
            "advertise-client"
        );
        assert_eq!(
            key(with(|c| c.advertise_worker = "http://h:1".into())),
            "advertise-worker"
        );
        assert_eq!(
            key(with(|c| c.advertise_http = "h:99999".into())),
            "advertise-http"
        );
        assert_eq!(
            with(|c| {
                c.advertise_client = "coord-a.example:7400".into();
                c.advertise_worker = "10.0.0.5:7401".into();
                c.advertise_http = "[::1]:7480".into();
                c.node_name = "coord-a".into();
            }),
            Ok(())
        );
    }

    #[test]
    fn default_node_names_differ_per_call_and_start_with_the_host() {
        let c = CoordinatorConfig::default();
        let (a, b) = (c.resolved_node_name(), c.resolved_node_name());
        assert_ne!(a, b);
        assert_eq!(
            a.rsplit_once('-').map(|(h, _)| h),
            b.rsplit_once('-').map(|(h, _)| h)
        );
        let named = CoordinatorConfig {
            node_name: "coord-a".into(),
            ..CoordinatorConfig::default()
        };
        assert_eq!(named.resolved_node_name(), "coord-a");
    }
}
