//! Process configuration: TOML files with kebab-case keys, every key also a
//! command-line flag of the same name, flags overriding the file. Loaded and
//! validated completely before anything is opened.

use serde::Deserialize;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use thiserror::Error;

use crate::security::Secret;

/// A configuration problem: which key, from which source, and why.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{source_name}: {}{reason}", key.as_ref().map(|k| format!("key `{k}`: ")).unwrap_or_default())]
pub struct ConfigError {
    /// The file path, or `command line`.
    pub source_name: String,
    pub key: Option<String>,
    pub reason: String,
}

/// Declares a resolved config struct with defaults and its all-optional twin
/// that is both the TOML schema and the clap flag set, so a key, its flag and
/// its default are written once.
macro_rules! config_struct {
    (
        $(#[$meta:meta])*
        $name:ident / $options:ident {
            $(
                $(#[doc = $doc:literal])*
                $(#[arg($($arg:tt)*)])?
                $field:ident : $ty:ty = $default:expr,
            )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name {
            $( $(#[doc = $doc])* pub $field: $ty, )*
        }

        impl Default for $name {
            fn default() -> Self {
                $name { $( $field: $default, )* }
            }
        }

        /// Every key optional: what one source (file or flags) set.
        #[derive(Debug, Clone, Default, clap::Args, Deserialize)]
        #[serde(deny_unknown_fields, rename_all = "kebab-case")]
        pub struct $options {
            $( $(#[doc = $doc])* #[arg(long $(, $($arg)*)?)] pub $field: Option<$ty>, )*
        }

        impl ConfigOptions for $options {
            type Resolved = $name;

            fn overlaid_with(self, over: $options) -> $options {
                $options { $( $field: over.$field.or(self.$field), )* }
            }

            fn resolve(self) -> $name {
                let defaults = $name::default();
                $name { $( $field: self.$field.unwrap_or(defaults.$field), )* }
            }

            fn keys_set(&self) -> Vec<String> {
                let mut keys = Vec::new();
                $( if self.$field.is_some() { keys.push(stringify!($field).replace('_', "-")); } )*
                keys
            }
        }
    };
}

config_struct! {
    /// Everything the coordinator reads at start-up.
    CoordinatorConfig / CoordinatorOptions {
        /// Address the client listener binds (CLI and client library).
        client_listen: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 7400)),
        /// Address the worker listener binds.
        worker_listen: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 7401)),
        /// SQLite database file; created if missing.
        db_path: PathBuf = PathBuf::from("taskyard-data/taskyard.db"),
        /// SQLite `synchronous` mode: full (every commit fsynced), normal or off.
        sqlite_synchronous: Synchronous = Synchronous::Full,
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
        max_frame_bytes: usize = crate::protocol::DEFAULT_MAX_FRAME_BYTES,
        /// Largest accepted job payload.
        max_payload_bytes: usize = 256 * 1024,
        /// Largest accepted task result; a bigger one fails its attempt.
        max_result_bytes: usize = 1024 * 1024,
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
        /// A connection without a valid Hello by then is closed.
        handshake_timeout_millis: u64 = 5000,
        /// error, warn, info, debug or trace.
        log_level: LogLevel = LogLevel::Info,
        /// text (human-readable) or json (one object per line).
        log_format: LogFormat = LogFormat::Text,
        /// Address of the HTTP API, metrics and dashboard; empty turns it off.
        http_listen: String = "127.0.0.1:7480".to_string(),
    }
}

config_struct! {
    /// Everything a worker reads at start-up.
    WorkerConfig / WorkerOptions {
        /// The coordinator's worker listener.
        coordinator: String = "127.0.0.1:7401".to_string(),
        /// Stable name; generated once per process when empty.
        worker_id: String = String::new(),
        /// Most tasks run at once (default: number of CPUs).
        capacity: u32 = default_capacity(),
        /// Heartbeat period; keep well under the coordinator's heartbeat-timeout-millis.
        heartbeat_interval_millis: u64 = 2000,
        /// Longest pause between reconnection attempts.
        reconnect_max_millis: u64 = 5000,
        /// Largest accepted frame, in either direction.
        max_frame_bytes: usize = crate::protocol::DEFAULT_MAX_FRAME_BYTES,
        /// Programs the `exec` task may run: names (looked up on PATH at
        /// start-up) or paths. Empty: `exec` is not offered. Repeat the flag
        /// or separate names with commas.
        #[arg(value_delimiter = ',', value_name = "PROGRAM")]
        exec_allow: Vec<String> = Vec::new(),
        /// Most bytes of an `exec` program's stdout kept as its result; the
        /// rest is counted and marked.
        max_output_bytes: usize = 1024 * 1024,
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

/// A token given inline or in a file (not both); `None` when neither is set.
/// Errors are (key, reason).
fn secret(
    inline: &str,
    inline_key: &str,
    file: &Path,
    file_key: &str,
) -> Result<Option<Secret>, Invalid> {
    match (inline.is_empty(), file.as_os_str().is_empty()) {
        (true, true) => Ok(None),
        (false, true) => Ok(Some(Secret::new(inline))),
        (true, false) => Secret::from_file(file)
            .map(Some)
            .map_err(|reason| (file_key.to_string(), reason)),
        (false, false) => Err((
            inline_key.to_string(),
            format!("set {inline_key} or {file_key}, not both"),
        )),
    }
}

impl CoordinatorConfig {
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

impl WorkerConfig {
    /// The worker token: `token`, else `token-file`, else `$TASKYARD_TOKEN`.
    pub fn secret(&self) -> Result<Option<Secret>, Invalid> {
        let configured = secret(&self.token, "token", &self.token_file, "token-file")?;
        Ok(configured.or_else(env_token))
    }
}

/// `$TASKYARD_TOKEN`, when set and not empty.
pub fn env_token() -> Option<Secret> {
    std::env::var("TASKYARD_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty())
        .map(|t| Secret::new(t.trim()))
}

fn default_capacity() -> u32 {
    std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1)
}

/// One source's view of a config: every key optional.
pub trait ConfigOptions: Default + for<'de> Deserialize<'de> {
    /// The complete config, every key filled.
    type Resolved: Validate;
    /// Values from `over` win; the rest come from `self`.
    fn overlaid_with(self, over: Self) -> Self;
    /// Fills every unset key with its default.
    fn resolve(self) -> Self::Resolved;
    /// The kebab-case names of the keys this source set.
    fn keys_set(&self) -> Vec<String>;
}

/// Range checks on a resolved config; the error is (key, reason).
pub trait Validate {
    fn validate(&self) -> Result<(), (String, String)>;
}

/// Reads `file` (if any), applies `flags` over it, fills defaults and
/// validates. Errors name the key and the source it came from.
pub fn load<O: ConfigOptions>(file: Option<&Path>, flags: O) -> Result<O::Resolved, ConfigError> {
    let flag_keys = flags.keys_set();
    let config = read_file::<O>(file)?.overlaid_with(flags).resolve();
    config.validate().map_err(|(key, reason)| ConfigError {
        source_name: match file {
            Some(path) if !flag_keys.contains(&key) => path.display().to_string(),
            _ => "command line".to_string(),
        },
        key: Some(key),
        reason,
    })?;
    Ok(config)
}

/// Parses a config file into the options struct. A missing file, a syntax
/// error, an unknown key or a value of the wrong type names the file and key.
fn read_file<T: for<'de> Deserialize<'de> + Default>(
    file: Option<&Path>,
) -> Result<T, ConfigError> {
    let Some(path) = file else {
        return Ok(T::default());
    };
    let source_name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        source_name: source_name.clone(),
        key: None,
        reason: format!("cannot read: {e}"),
    })?;
    toml::from_str(&text).map_err(|e| ConfigError {
        key: e.span().and_then(|span| key_at(&text, span.start)),
        source_name,
        reason: e.message().to_string(),
    })
}

/// The key on the line containing byte `offset` (`key = value`).
fn key_at(text: &str, offset: usize) -> Option<String> {
    let line_start = text[..offset.min(text.len())]
        .rfind('\n')
        .map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next()?;
    let key = line.split('=').next()?.trim().trim_matches('"');
    (!key.is_empty() && !key.starts_with('[')).then(|| key.to_string())
}

/// A validation failure: (key, reason).
pub type Invalid = (String, String);

fn at_least(key: &str, value: u64, min: u64) -> Result<(), Invalid> {
    if value < min {
        return Err((
            key.to_string(),
            format!("{value} is below the minimum of {min}"),
        ));
    }
    Ok(())
}

fn frame_size(value: usize) -> Result<(), Invalid> {
    if !(1024..=64 * 1024 * 1024).contains(&value) {
        return Err((
            "max-frame-bytes".to_string(),
            format!("{value} is outside 1024..=67108864"),
        ));
    }
    Ok(())
}

impl Validate for CoordinatorConfig {
    fn validate(&self) -> Result<(), Invalid> {
        at_least("sweep-interval-millis", self.sweep_interval_millis, 10)?;
        at_least(
            "heartbeat-timeout-millis",
            self.heartbeat_timeout_millis,
            10,
        )?;
        at_least("task-timeout-millis", self.task_timeout_millis, 1)?;
        at_least("aging-step-millis", self.aging_step_millis, 1)?;
        at_least("max-active-jobs", self.max_active_jobs, 1)?;
        at_least("retry-base-millis", self.retry_base_millis, 1)?;
        at_least(
            "retry-cap-millis",
            self.retry_cap_millis,
            self.retry_base_millis,
        )?;
        at_least("default-max-attempts", self.default_max_attempts.into(), 1)?;
        at_least("max-payload-bytes", self.max_payload_bytes as u64, 1)?;
        at_least("max-connections", self.max_connections as u64, 1)?;
        at_least(
            "max-in-flight-requests",
            self.max_in_flight_requests as u64,
            1,
        )?;
        at_least(
            "handshake-timeout-millis",
            self.handshake_timeout_millis,
            10,
        )?;
        if self.tls_cert.as_os_str().is_empty() != self.tls_key.as_os_str().is_empty() {
            return Err(("tls-key".into(), "tls-cert and tls-key go together".into()));
        }
        if self.tls_enabled() {
            crate::security::tls::acceptor(&self.tls_cert, &self.tls_key)
                .map_err(|reason| ("tls-cert".to_string(), reason))?;
        }
        self.check_exposure()?;
        at_least("max-result-bytes", self.max_result_bytes as u64, 1)?;
        self.http_addr()?;
        frame_size(self.max_frame_bytes)
    }
}

impl CoordinatorConfig {
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
}

impl Validate for WorkerConfig {
    fn validate(&self) -> Result<(), Invalid> {
        if self.coordinator.trim().is_empty() {
            return Err(("coordinator".into(), "must be host:port".into()));
        }
        if !(1..=10_000).contains(&self.capacity) {
            return Err((
                "capacity".into(),
                format!("{} is outside 1..=10000", self.capacity),
            ));
        }
        crate::protocol::payloads::validate_task_type(&self.worker_id)
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
        at_least("max-output-bytes", self.max_output_bytes as u64, 1)?;
        crate::worker::AllowList::resolve(&self.exec_allow)
            .map_err(|e| ("exec-allow".to_string(), e.to_string()))?;
        frame_size(self.max_frame_bytes)
    }
}

/// Declares a small enum used as a config value: parsed from TOML and flags
/// by its lowercase name.
macro_rules! config_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident => $text:literal),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
        #[serde(rename_all = "lowercase")]
        pub enum $name { $($variant),* }

        impl FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($text => Ok($name::$variant),)*
                    _ => Err(format!("{s:?} is not one of: {}", [$($text),*].join(", "))),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(match self { $($name::$variant => $text),* })
            }
        }
    };
}

config_enum!(
    /// How much of SQLite's durability to keep.
    Synchronous { Full => "full", Normal => "normal", Off => "off" }
);
config_enum!(
    /// Minimum level of log lines printed.
    LogLevel { Error => "error", Warn => "warn", Info => "info", Debug => "debug", Trace => "trace" }
);
config_enum!(
    /// Log line format.
    LogFormat { Text => "text", Json => "json" }
);

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_with(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().expect("temp file");
        f.write_all(text.as_bytes()).expect("write");
        f
    }

    #[test]
    fn example_files_load_with_every_key() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
        let c = load::<CoordinatorOptions>(Some(&dir.join("coordinator.toml")), Default::default())
            .expect("config/coordinator.toml loads");
        assert_eq!(c.client_listen.port(), 7400);
        let w = load::<WorkerOptions>(Some(&dir.join("worker.toml")), Default::default())
            .expect("config/worker.toml loads");
        assert_eq!(w.coordinator, "127.0.0.1:7401");
        let d = load::<CoordinatorOptions>(Some(&dir.join("dev.toml")), Default::default())
            .expect("config/dev.toml loads");
        assert_eq!(d.db_path, PathBuf::from("taskyard-data/taskyard.db"));
    }

    #[test]
    fn flags_override_the_file() {
        let f = file_with("heartbeat-timeout-millis = 9000\nretry-base-millis = 50\n");
        let flags = CoordinatorOptions {
            heartbeat_timeout_millis: Some(2000),
            ..Default::default()
        };
        let c = load::<CoordinatorOptions>(Some(f.path()), flags).expect("valid");
        assert_eq!(c.heartbeat_timeout_millis, 2000);
        assert_eq!(c.retry_base_millis, 50);
        assert_eq!(c.sweep_interval_millis, 500, "default kept");
    }

    #[test]
    fn unknown_key_names_the_key_and_file() {
        let f = file_with("sweep-interval-millis = 100\nheartbeat-timout-millis = 5\n");
        let err = load::<CoordinatorOptions>(Some(f.path()), Default::default())
            .expect_err("unknown key");
        assert_eq!(err.key.as_deref(), Some("heartbeat-timout-millis"));
        assert_eq!(err.source_name, f.path().display().to_string());
        assert!(err.reason.contains("unknown field"), "{err}");
    }

    #[test]
    fn wrong_type_names_the_key_and_file() {
        let f = file_with("capacity = \"lots\"\n");
        let err = load::<WorkerOptions>(Some(f.path()), Default::default()).expect_err("bad type");
        assert_eq!(err.key.as_deref(), Some("capacity"));
        assert!(err.to_string().contains(&f.path().display().to_string()));
    }

    #[test]
    fn out_of_range_value_names_the_key() {
        let f = file_with("capacity = 0\n");
        let err =
            load::<WorkerOptions>(Some(f.path()), Default::default()).expect_err("zero capacity");
        assert_eq!(err.key.as_deref(), Some("capacity"));
        assert_eq!(err.source_name, f.path().display().to_string());
        let flags = CoordinatorOptions {
            retry_cap_millis: Some(10),
            ..Default::default()
        };
        let err = load::<CoordinatorOptions>(None, flags).expect_err("cap below base");
        assert_eq!(err.key.as_deref(), Some("retry-cap-millis"));
        assert_eq!(err.source_name, "command line");
    }

    #[test]
    fn exec_allow_is_a_list_in_toml_and_a_repeatable_comma_separated_flag() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            options: WorkerOptions,
        }
        let f = file_with("exec-allow = [\"sh\", \"/bin/echo\"]\n");
        let w = load::<WorkerOptions>(Some(f.path()), Default::default()).expect("valid");
        assert_eq!(w.exec_allow, ["sh", "/bin/echo"]);
        let cli = Cli::try_parse_from(["w", "--exec-allow", "sh,echo", "--exec-allow", "true"])
            .expect("flags parse");
        assert_eq!(
            cli.options.exec_allow.as_deref(),
            Some(&["sh".to_string(), "echo".into(), "true".into()][..])
        );
    }

    #[test]
    fn an_exec_allow_name_not_on_path_is_a_config_error_naming_it() {
        let f = file_with("exec-allow = [\"sh\", \"no-such-program-xyz\"]\n");
        let err = load::<WorkerOptions>(Some(f.path()), Default::default()).expect_err("bad name");
        assert_eq!(err.key.as_deref(), Some("exec-allow"));
        assert_eq!(err.source_name, f.path().display().to_string());
        assert!(err.reason.contains("no-such-program-xyz"), "{err}");
    }

    #[test]
    fn missing_file_is_named() {
        let err = load::<WorkerOptions>(
            Some(Path::new("/nonexistent/worker.toml")),
            Default::default(),
        )
        .expect_err("missing");
        assert!(
            err.to_string()
                .starts_with("/nonexistent/worker.toml: cannot read"),
            "{err}"
        );
    }
}
