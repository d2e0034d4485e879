//! The worker's keys, their defaults and checks.

use crate::clock::text::format_duration;
use crate::config::{
    at_least, env_token, fits_frame, frame_size, secret, Invalid, LogFormat, LogLevel, Validate,
};
use crate::security::Secret;
use std::path::PathBuf;

crate::config_struct! {
    /// Everything a worker reads at start-up.
    WorkerConfig / WorkerOptions {
        /// The coordinator's worker listener, host:port; several separated
        /// by commas (every coordinator of a group: the worker finds the
        /// leader among them and follows it).
        coordinator: String = "127.0.0.1:7401".to_string(),
        /// Stable name; generated once per process when empty.
        worker_id: String = String::new(),
        /// Most tasks run at once (default: number of CPUs).
        capacity: u32 = default_capacity(),
        /// Jobs the worker takes beyond `capacity`, each waiting in the
        /// worker for a slot: the coordinator counts capacity + prefetch
        /// as the worker's slots. A slot that frees then starts its next
        /// job at once instead of waiting for the coordinator to commit a
        /// new assignment (which on PostgreSQL is a transaction's round
        /// trip). A waiting job's timeout runs while it waits, and a
        /// worker lost takes its waiting jobs with it (they are retried
        /// like its running ones). 0: none.
        prefetch: u32 = 0,
        /// Heartbeat period; keep well under the coordinator's heartbeat-timeout.
        heartbeat_interval_millis: u64 = 2000,
        /// Longest pause between reconnection attempts.
        reconnect_max_millis: u64 = 5000,
        /// Silence after which the coordinator counts as gone: nothing heard
        /// from it for this long (it answers every heartbeat; a paused or
        /// partitioned coordinator does not) makes the worker leave it for
        /// the next address. Running tasks go on. Must exceed
        /// heartbeat-interval.
        coordinator_timeout_millis: u64 = 6_000,
        /// Largest accepted frame, in either direction.
        max_frame_bytes: usize = taskyard_protocol::DEFAULT_MAX_FRAME_BYTES,
        /// Programs the `exec` task may run: names (looked up on PATH at
        /// start-up) or paths. Empty: `exec` is not offered. Repeat the flag
        /// or separate names with commas.
        #[arg(value_delimiter = ',', value_name = "PROGRAM")]
        exec_allow: Vec<String> = Vec::new(),
        /// The binary that starts each `exec` program and kills its process
        /// group if the worker dies: a taskyard-worker binary. Empty: this
        /// program, if it can be its own (taskyard-worker can).
        #[arg(value_name = "PATH")]
        exec_supervisor: PathBuf = PathBuf::new(),
        /// Most bytes of an `exec` program's stdout kept as its result; the
        /// rest is counted and marked. With the envelope it must fit
        /// max-frame-bytes: the default is 1 MiB less 1 KiB.
        max_output_bytes: usize =
            taskyard_protocol::DEFAULT_MAX_FRAME_BYTES - taskyard_protocol::fit::FRAME_HEADROOM_BYTES,
        /// Pause between SIGTERM and SIGKILL when an `exec` program is stopped.
        exec_kill_grace_millis: u64 = 2000,
        /// After SIGINT/SIGTERM, how long running tasks may take to finish
        /// before they are cancelled and the worker exits.
        drain_timeout_millis: u64 = 30_000,
        /// The coordinator's worker token (else token-file, else $TASKYARD_TOKEN).
        token: String = String::new(),
        /// File holding the worker token (first line).
        token_file: PathBuf = PathBuf::new(),
        /// PEM CA certificate to verify the coordinator with; set for TLS.
        tls_ca: PathBuf = PathBuf::new(),
        /// Name in the coordinator's certificate (default: the host of coordinator).
        tls_server_name: String = String::new(),
        /// error, warn, info, debug or trace.
        log_level: LogLevel = LogLevel::Info,
        /// text (human-readable) or json (one object per line).
        log_format: LogFormat = LogFormat::Text,
    }
}

impl WorkerConfig {
    /// The worker token: `token`, else `token-file`, else `$TASKYARD_TOKEN`.
    pub fn secret(&self) -> Result<Option<Secret>, Invalid> {
        let configured = secret(&self.token, "token", &self.token_file, "token-file")?;
        Ok(configured.or_else(env_token))
    }
}

impl WorkerConfig {
    /// The start-up check of `coordinator` beyond its syntax (which
    /// `validate` checks): at least one of its addresses resolves, so a
    /// name that does not exist stops the worker at once instead of being
    /// retried for ever. Addresses that do not resolve while another does
    /// are left to the reconnect loop (a standby that is not up yet).
    pub fn resolve_coordinators(&self) -> Result<(), Invalid> {
        let addrs = taskyard_protocol::parse_address_list(&self.coordinator)
            .map_err(|e| ("coordinator".to_string(), e.to_string()))?;
        let mut failures = Vec::new();
        for addr in &addrs {
            match std::net::ToSocketAddrs::to_socket_addrs(addr.as_str()) {
                Ok(resolved) if resolved.len() > 0 => return Ok(()),
                Ok(_) => failures.push(format!("{addr:?} resolves to no address")),
                Err(e) => failures.push(format!("{addr:?} does not resolve ({e})")),
            }
        }
        Err(("coordinator".to_string(), failures.join("; ")))
    }
}

fn default_capacity() -> u32 {
    std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1)
}

impl Validate for WorkerConfig {
    fn validate(&self) -> Result<(), Invalid> {
        taskyard_protocol::parse_address_list(&self.coordinator)
            .map_err(|e| ("coordinator".to_string(), e.to_string()))?;
        if self.prefetch > 10_000 {
            return Err((
                "prefetch".into(),
                format!("{} is outside 0..=10000", self.prefetch),
            ));
        }
        if !(1..=10_000).contains(&self.capacity) {
            return Err((
                "capacity".into(),
                format!("{} is outside 1..=10000", self.capacity),
            ));
        }
        taskyard_protocol::payloads::validate_task_type(&self.worker_id)
            .or_else(|e| {
                if self.worker_id.is_empty() {
                    Ok(())
                } else {
                    Err(e)
                }
            })
            .map_err(|e| ("worker-id".to_string(), e.reason))?;
        at_least(
            "heartbeat-interval-millis",
            self.heartbeat_interval_millis,
            10,
        )?;
        at_least("reconnect-max-millis", self.reconnect_max_millis, 10)?;
        if self.coordinator_timeout_millis <= self.heartbeat_interval_millis {
            return Err((
                "coordinator-timeout-millis".into(),
                format!(
                    "{} must exceed heartbeat-interval ({}): every heartbeat is answered",
                    format_duration(self.coordinator_timeout_millis),
                    format_duration(self.heartbeat_interval_millis)
                ),
            ));
        }
        at_least("max-output-bytes", self.max_output_bytes as u64, 1)?;
        crate::worker::AllowList::resolve(&self.exec_allow)
            .map_err(|e| ("exec-allow".to_string(), e.to_string()))?;
        if !self.exec_supervisor.as_os_str().is_empty() {
            crate::worker::Supervisor::resolve(&self.exec_supervisor)
                .map_err(|e| ("exec-supervisor".to_string(), e.to_string()))?;
        }
        frame_size(self.max_frame_bytes)?;
        fits_frame(
            "max-output-bytes",
            self.max_output_bytes,
            self.max_frame_bytes,
        )
    }
}
