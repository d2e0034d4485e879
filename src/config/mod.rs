//! Process configuration: TOML files with kebab-case keys, every key also a
//! command-line flag of the same name, flags overriding the file. Loaded and
//! validated completely before anything is opened.

/// Declares a resolved config struct with defaults and its all-optional twin
/// that is both the TOML schema and the clap flag set, so a key, its flag and
/// its default are written once. A `*_millis: u64` key is also a key
/// without the suffix taking a duration (see `durations`);
/// `#[duration_key = "NAME"]` names that key instead when the stem is
/// already another key.
macro_rules! config_struct {
    (
        $(#[$meta:meta])*
        $name:ident / $options:ident {
            $(
                $(#[doc = $doc:literal])*
                $(#[duration_key = $short:literal])?
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

        /// Every key optional: what one source (file or flags) set. A
        /// `-millis` flag is hidden from `--help`, which shows its duration
        /// spelling instead.
        #[derive(Debug, Clone, Default, clap::Args)]
        pub struct $options {
            $(
                $(#[doc = $doc])*
                #[arg(
                    long,
                    hide = $crate::config::durations::is_millis_field::<$ty>(stringify!($field))
                    $(, $($arg)*)?
                )]
                pub $field: Option<$ty>,
            )*
            // The keys this source gave in the duration spelling.
            #[command(flatten)]
            pub durations: $crate::config::durations::Durations<$options>,
        }

        impl<'de> serde::Deserialize<'de> for $options {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $crate::config::durations::deserialize_options(d)
            }
        }

        impl ConfigOptions for $options {
            type Resolved = $name;

            fn overlaid_with(self, over: $options) -> $options {
                let over_keys = over.keys_set();
                let durations = self.durations.overlaid_with(over.durations, &over_keys);
                $options { $( $field: over.$field.or(self.$field), )* durations }
            }

            fn resolve(self) -> $name {
                let defaults = $name::default();
                $name { $( $field: self.$field.unwrap_or(defaults.$field), )* }
            }

            fn declared_keys() -> Vec<String> {
                vec![$( stringify!($field).replace('_', "-"), )*]
            }

            fn duration_keys() -> Vec<(String, String)> {
                let mut keys = Vec::new();
                $(
                    let named = None $(.or(Some($short)))?;
                    let key = $crate::config::durations::duration_key_of::<$ty>(stringify!($field), named);
                    if let Some(key) = key {
                        keys.push((key, stringify!($field).replace('_', "-")));
                    }
                )*
                keys
            }

            fn keys_set(&self) -> Vec<String> {
                let mut keys = Vec::new();
                $(
                    if self.$field.is_some() {
                        keys.push(self.durations.written(stringify!($field).replace('_', "-")));
                    }
                )*
                keys.extend(self.durations.flag_keys().map(str::to_string));
                keys
            }

            fn read_value<'de, A: serde::de::MapAccess<'de>>(
                &mut self,
                key: &str,
                map: &mut A,
            ) -> Result<bool, A::Error> {
                $(
                    if key == stringify!($field).replace('_', "-") {
                        self.$field = Some(map.next_value()?);
                        return Ok(true);
                    }
                )*
                Ok(false)
            }

            fn millis_mut(&mut self, key: &str) -> Option<&mut Option<u64>> {
                $(
                    if key == stringify!($field).replace('_', "-") {
                        return (&mut self.$field as &mut dyn std::any::Any).downcast_mut();
                    }
                )*
                None
            }

            fn durations(&self) -> &$crate::config::durations::Durations<$options> {
                &self.durations
            }

            fn durations_mut(&mut self) -> &mut $crate::config::durations::Durations<$options> {
                &mut self.durations
            }

            fn reference() -> Vec<$crate::config::reference::KeyReference> {
                let defaults = $name::default();
                vec![$( $crate::config::reference::KeyReference::of(
                    stringify!($field),
                    None $(.or(Some($short)))?,
                    $crate::config::reference::doc_text(&[$($doc),*]),
                    &defaults.$field,
                ), )*]
            }
        }
    };
}

mod coordinator;
pub mod durations;
pub mod reference;
pub mod schedule;
mod suggest;
mod worker;

pub use coordinator::CoordinatorConfig;
pub use coordinator::CoordinatorOptions;
pub use suggest::Position;
pub use worker::{WorkerConfig, WorkerOptions};

use crate::security::Secret;
use serde::Deserialize;
use std::fmt;
use std::path::Path;
use std::str::FromStr;
use thiserror::Error;

/// A configuration problem: which key, from which source (and where in
/// the file, for a syntax error or an unknown key), and why.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub struct ConfigError {
    /// The file path, or `command line`.
    pub source_name: String,
    /// Where in the file the problem is, when the parser could tell.
    pub position: Option<Position>,
    pub key: Option<String>,
    pub reason: String,
}

/// `FILE:LINE:COLUMN: key `KEY`: REASON`, the parts that are known: the
/// form editors and terminals turn into a link to the spot.
impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source_name)?;
        if let Some(p) = self.position {
            write!(f, ":{}:{}", p.line, p.column)?;
        }
        f.write_str(": ")?;
        if let Some(key) = &self.key {
            write!(f, "key `{key}`: ")?;
        }
        f.write_str(&self.reason)
    }
}

impl ConfigError {
    /// An error about `key` of a loaded config, blamed on the source that
    /// set it: the command line if a flag did (`flag_keys`), else `file`.
    pub fn about_key(file: Option<&Path>, flag_keys: &[String], invalid: Invalid) -> Self {
        let (key, reason) = invalid;
        ConfigError {
            source_name: match file {
                Some(path) if !flag_keys.contains(&key) => path.display().to_string(),
                _ => "command line".to_string(),
            },
            position: None,
            key: Some(key),
            reason,
        }
    }
}

/// One source's view of a config: every key optional.
pub trait ConfigOptions: Default + for<'de> Deserialize<'de> {
    /// The complete config, every key filled.
    type Resolved: Validate;
    /// Values from `over` win, in whichever spelling; the rest come from
    /// `self`. Both have their duration flags folded (`durations::fold`).
    fn overlaid_with(self, over: Self) -> Self;
    /// Fills every unset key with its default.
    fn resolve(self) -> Self::Resolved;
    /// The kebab-case names of the keys as declared.
    fn declared_keys() -> Vec<String>;
    /// Every `-millis` key's duration spelling: (`heartbeat-timeout`,
    /// `heartbeat-timeout-millis`).
    fn duration_keys() -> Vec<(String, String)>;
    /// The kebab-case names of the keys this source set, as it wrote them.
    fn keys_set(&self) -> Vec<String>;
    /// Reads the value of declared key `key` from `map` into its field;
    /// false when no key is named so.
    fn read_value<'de, A: serde::de::MapAccess<'de>>(
        &mut self,
        key: &str,
        map: &mut A,
    ) -> Result<bool, A::Error>;
    /// The value of `-millis` key `key`; `None` when `key` is no such key.
    fn millis_mut(&mut self, key: &str) -> Option<&mut Option<u64>>;
    /// What this source wrote in the duration spelling.
    fn durations(&self) -> &durations::Durations<Self>;
    fn durations_mut(&mut self) -> &mut durations::Durations<Self>;
    /// Every key with its documentation and default, in declaration
    /// order: what the configuration reference is generated from.
    fn reference() -> Vec<reference::KeyReference>;

    /// The kebab-case names of every key: those declared and the duration
    /// spellings.
    fn keys() -> Vec<String> {
        let mut keys = Self::declared_keys();
        keys.extend(Self::duration_keys().into_iter().map(|(key, _)| key));
        keys
    }
}

/// Range checks on a resolved config; the error is (key, reason).
pub trait Validate {
    fn validate(&self) -> Result<(), (String, String)>;
}

/// Reads `file` (if any), applies `flags` over it, fills defaults and
/// validates. Errors name the key as the user wrote it (in either
/// spelling of a duration) and the source it came from.
pub fn load<O: ConfigOptions>(file: Option<&Path>, flags: O) -> Result<O::Resolved, ConfigError> {
    let flags =
        durations::fold(flags).map_err(|invalid| ConfigError::about_key(None, &[], invalid))?;
    let flag_keys = flags.keys_set();
    let options = read_file::<O>(file)?.overlaid_with(flags);
    let spelled = options.durations().clone();
    let config = options.resolve();
    config.validate().map_err(|(key, reason)| {
        let invalid = (spelled.written(key), reason);
        let mut error = ConfigError::about_key(file, &flag_keys, invalid);
        if let (Some(path), Some(key)) = (file, &error.key) {
            if !flag_keys.contains(key) {
                let text = std::fs::read_to_string(path).unwrap_or_default();
                error.position = value_position(&text, key);
            }
        }
        error
    })?;
    Ok(config)
}

/// Parses a config file into the options struct. A missing file, a syntax
/// error, an unknown key or a value of the wrong type names the file, the
/// key and, where the parser says, the line and column; an unknown key
/// names the known key it most resembles.
fn read_file<O: ConfigOptions>(file: Option<&Path>) -> Result<O, ConfigError> {
    let Some(path) = file else {
        return Ok(O::default());
    };
    let source_name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        source_name: source_name.clone(),
        position: None,
        key: None,
        reason: format!("cannot read: {e}"),
    })?;
    toml::from_str(&text).map_err(|e| {
        let key = e.span().and_then(|span| key_at(&text, span.start));
        ConfigError {
            position: e.span().map(|span| Position::of(&text, span.start)),
            reason: explain::<O>(e.message(), key.as_deref()),
            key,
            source_name,
        }
    })
}

/// The parser's message, on one line; for an unknown key, the key it was
/// probably meant to be instead of the parser's list of every key.
fn explain<O: ConfigOptions>(message: &str, key: Option<&str>) -> String {
    match key.filter(|_| message.starts_with("unknown field")) {
        Some(unknown) => match suggest::closest(unknown, &O::keys()) {
            Some(meant) => format!("unknown key; did you mean `{meant}`?"),
            None => "unknown key (`--help` lists every key; a file's keys are the flags' \
                     names without the leading `--`)"
                .to_string(),
        },
        None => message.lines().collect::<Vec<_>>().join("; "),
    }
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

/// Where the value of top-level `key` starts (`key = value`), for an error
/// about that value; `None` when the file does not set it at the top.
fn value_position(text: &str, key: &str) -> Option<Position> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if trimmed.starts_with('[') {
            return None;
        }
        if let Some((name, value)) = trimmed.split_once('=') {
            if name.trim().trim_matches('"') == key {
                let value_at = line.len() - value.len() + (value.len() - value.trim_start().len());
                return Some(Position::of(text, offset + value_at));
            }
        }
        offset += line.len();
    }
    None
}

/// A validation failure: (key, reason).
pub type Invalid = (String, String);

/// `value` of `key` as a person reads it in an error: a `-millis` key's
/// as a duration (`5ms`, `2s`), whichever spelling set it.
pub(super) fn shown(key: &str, value: u64) -> String {
    if key.ends_with("-millis") {
        crate::clock::text::format_duration(value)
    } else {
        value.to_string()
    }
}

pub(super) fn at_least(key: &str, value: u64, min: u64) -> Result<(), Invalid> {
    if value < min {
        return Err((
            key.to_string(),
            format!(
                "{} is below the minimum of {}",
                shown(key, value),
                shown(key, min)
            ),
        ));
    }
    Ok(())
}

pub(super) fn at_most(key: &str, value: u64, max: u64) -> Result<(), Invalid> {
    if value > max {
        return Err((
            key.to_string(),
            format!(
                "{} is above the maximum of {}",
                shown(key, value),
                shown(key, max)
            ),
        ));
    }
    Ok(())
}

/// `value` must lie in the range a submission could ask for itself (a
/// default outside it would make every submission that relies on it fail).
pub(super) fn within(
    key: &str,
    value: u64,
    range: crate::protocol::limits::Range,
) -> Result<(), Invalid> {
    range
        .check(value)
        .map(|_| ())
        .map_err(|e| (key.to_string(), e.to_string()))
}

pub(super) fn frame_size(value: usize) -> Result<(), Invalid> {
    if !(1024..=64 * 1024 * 1024).contains(&value) {
        return Err((
            "max-frame-bytes".to_string(),
            format!("{value} is outside 1024..=67108864"),
        ));
    }
    Ok(())
}

/// `key` (a payload, result or output size) is at most what one frame of
/// `max_frame_bytes` carries beside its envelope
/// (`protocol::fit::FRAME_HEADROOM_BYTES`); the error names both keys.
pub(super) fn fits_frame(key: &str, value: usize, max_frame_bytes: usize) -> Result<(), Invalid> {
    let headroom = crate::protocol::fit::FRAME_HEADROOM_BYTES;
    let room = max_frame_bytes.saturating_sub(headroom);
    if value > room {
        return Err((
            key.to_string(),
            format!(
                "{value} does not fit one frame: max-frame-bytes ({max_frame_bytes}) less \
                 {headroom} bytes of envelope carries at most {room}; lower {key} or raise \
                 max-frame-bytes"
            ),
        ));
    }
    Ok(())
}

/// A token given inline or in a file (not both); `None` when neither is set.
/// Errors are (key, reason).
pub(super) fn secret(
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

/// `$TASKYARD_TOKEN`, when set and not empty.
pub fn env_token() -> Option<Secret> {
    std::env::var("TASKYARD_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty())
        .map(|t| Secret::new(t.trim()))
}

/// `postgres-url`: a PostgreSQL URL that may hold a password, so `Debug`
/// shows only where it points (see `PgTarget::describe`).
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct PostgresUrl(String);

impl PostgresUrl {
    pub fn new(url: impl Into<String>) -> PostgresUrl {
        PostgresUrl(url.into())
    }

    /// `$TASKYARD_POSTGRES_URL`, or empty: the value of `postgres-url`
    /// when neither the file nor a flag sets it (the variable keeps the
    /// password out of config files and the process list).
    pub fn from_env() -> PostgresUrl {
        PostgresUrl(std::env::var("TASKYARD_POSTGRES_URL").unwrap_or_default())
    }

    /// The URL itself, password included: only for connecting.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match crate::store::postgres::PgTarget::parse(&self.0) {
            Ok(target) => write!(f, "{:?}", target.describe()),
            Err(_) if self.0.is_empty() => f.write_str("\"\""),
            Err(_) => f.write_str("\"(unparsable URL, not shown)\""),
        }
    }
}

impl FromStr for PostgresUrl {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(PostgresUrl(s.to_string()))
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
    /// Which store the coordinator keeps its jobs in.
    StoreKind { Sqlite => "sqlite", Postgres => "postgres" }
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
    use std::path::PathBuf;

    fn file_with(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().expect("temp file");
        f.write_all(text.as_bytes()).expect("write");
        f
    }

    /// The retention keys `config/coordinator.toml` must list, as it
    /// spells them (durations without `-millis`).
    const RETENTION_KEYS: [&str; 8] = [
        "retain-finished-in-memory",
        "retain-finished-in-memory-for",
        "retain-finished-in-memory-bytes",
        "history-readers",
        "job-retention",
        "failed-job-retention",
        "expiry-interval",
        "expiry-batch-rows",
    ];

    #[test]
    fn example_files_load_with_every_key() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
        let c = load::<CoordinatorOptions>(Some(&dir.join("coordinator.toml")), Default::default())
            .expect("config/coordinator.toml loads");
        assert_eq!(c.client_listen.port(), 7400);
        let text = std::fs::read_to_string(dir.join("coordinator.toml")).expect("readable");
        let set = toml::from_str::<CoordinatorOptions>(&text)
            .expect("parses")
            .keys_set();
        for key in RETENTION_KEYS {
            assert!(set.iter().any(|k| k == key), "{key} is in coordinator.toml");
        }
        let defaults = CoordinatorConfig::default();
        let retention = |c: &CoordinatorConfig| {
            (
                (
                    c.retain_finished_in_memory,
                    c.retain_finished_in_memory_millis,
                    c.retain_finished_in_memory_bytes,
                ),
                (c.history_readers, c.expiry_batch_rows),
                (c.job_retention_millis, c.failed_job_retention_millis),
                c.expiry_interval_millis,
            )
        };
        assert_eq!(
            retention(&c),
            retention(&defaults),
            "the file states the defaults"
        );
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
        assert_eq!(err.position, Some(Position { line: 2, column: 1 }));
        assert_eq!(
            err.reason,
            "unknown key; did you mean `heartbeat-timeout-millis`?"
        );
        assert!(
            err.to_string().starts_with(&format!(
                "{}:2:1: key `heartbeat-timout-millis`",
                err.source_name
            )),
            "{err}"
        );
        let f = file_with("capacity = 2\nflavour = \"vanilla\"\n");
        let err = load::<WorkerOptions>(Some(f.path()), Default::default()).expect_err("unknown");
        assert!(err.reason.starts_with("unknown key (`--help`"), "{err}");
        assert!(
            !err.reason.contains("coordinator"),
            "no list of every key: {err}"
        );
    }

    #[test]
    fn a_bad_value_names_the_line_and_column_of_the_value() {
        let f = file_with("# worker\ncapacity = 2\n  prefetch =  20000\n");
        let err = load::<WorkerOptions>(Some(f.path()), Default::default()).expect_err("range");
        assert_eq!(err.key.as_deref(), Some("prefetch"));
        assert_eq!(
            err.position,
            Some(Position {
                line: 3,
                column: 15
            }),
            "{err}"
        );
        assert!(
            err.to_string()
                .starts_with(&format!("{}:3:15: key `prefetch`", err.source_name)),
            "{err}"
        );
        // Set by a flag: the command line is blamed, with no position.
        let flags = WorkerOptions {
            prefetch: Some(20_000),
            ..Default::default()
        };
        let f = file_with("capacity = 2\n");
        let err = load::<WorkerOptions>(Some(f.path()), flags).expect_err("range");
        assert_eq!(
            (err.source_name.as_str(), err.position),
            ("command line", None)
        );
    }

    #[test]
    fn metrics_max_task_types_is_bounded_and_the_example_states_its_default() {
        let f = file_with("metrics-max-task-types = 1001\n");
        let err = load::<CoordinatorOptions>(Some(f.path()), Default::default())
            .expect_err("above the maximum");
        assert_eq!(err.key.as_deref(), Some("metrics-max-task-types"));
        assert!(err.reason.contains("maximum of 1000"), "{err}");
        let f = file_with("metrics-max-task-types = 0\n");
        let c = load::<CoordinatorOptions>(Some(f.path()), Default::default()).expect("0 is valid");
        assert_eq!(c.metrics_max_task_types, 0);
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/coordinator.toml");
        let c = load::<CoordinatorOptions>(Some(&example), Default::default()).expect("loads");
        assert_eq!(
            c.metrics_max_task_types,
            CoordinatorConfig::default().metrics_max_task_types
        );
        assert!(std::fs::read_to_string(&example)
            .unwrap_or_default()
            .contains("\nmetrics-max-task-types = "));
    }

    #[test]
    fn a_syntax_error_names_the_file_line_and_column() {
        let f = file_with("capacity = 2\nheartbeat-interval-millis = = 3\n");
        let err = load::<WorkerOptions>(Some(f.path()), Default::default()).expect_err("syntax");
        assert_eq!(err.position.map(|p| p.line), Some(2));
        assert_eq!(err.key.as_deref(), Some("heartbeat-interval-millis"));
        assert!(!err.reason.contains('\n'), "one line: {err}");
        let shown = err.to_string();
        let at = format!("{}:2:", f.path().display());
        assert!(shown.starts_with(&at), "{shown}");
        let f = file_with("[unclosed\n");
        let err = load::<WorkerOptions>(Some(f.path()), Default::default()).expect_err("syntax");
        assert_eq!(err.position.map(|p| p.line), Some(1), "{err}");
    }

    #[test]
    fn wrong_type_names_the_key_and_file() {
        let f = file_with("capacity = \"lots\"\n");
        let err = load::<WorkerOptions>(Some(f.path()), Default::default()).expect_err("bad type");
        assert_eq!(err.key.as_deref(), Some("capacity"));
        assert!(err.to_string().contains(&f.path().display().to_string()));
    }

    #[test]
    fn a_coordinator_list_with_an_empty_element_or_a_bad_address_names_the_key_and_file() {
        for (text, reason) in [
            ("coordinator = \"a:7401,,b:7401\"\n", "element 2 is empty"),
            ("coordinator = \"a:7401,b\"\n", "\"b\" is not host:port"),
        ] {
            let f = file_with(text);
            let err = load::<WorkerOptions>(Some(f.path()), Default::default()).expect_err(text);
            assert_eq!(err.key.as_deref(), Some("coordinator"));
            assert_eq!(err.source_name, f.path().display().to_string());
            assert!(err.to_string().contains(reason), "{err}");
        }
        let f = file_with("coordinator = \"a:7401, b:7402\"\n");
        let w = load::<WorkerOptions>(Some(f.path()), Default::default()).expect("a list");
        assert_eq!(w.coordinator, "a:7401, b:7402");
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
    fn store_postgres_needs_a_url_that_parses_and_never_shows_its_password() {
        let f = file_with(
            "store = \"postgres\"\npostgres-url = \"postgres://u:pw-in-file@h:nan/db\"\n",
        );
        let err =
            load::<CoordinatorOptions>(Some(f.path()), Default::default()).expect_err("bad URL");
        assert_eq!(err.key.as_deref(), Some("postgres-url"));
        assert!(!err.to_string().contains("pw-in-file"), "{err}");
        let f = file_with(
            "store = \"postgres\"\npostgres-url = \"postgres://u:pw-in-file@h:5433/db\"\n",
        );
        let config = load::<CoordinatorOptions>(Some(f.path()), Default::default()).expect("loads");
        assert_eq!(config.store, StoreKind::Postgres);
        assert!(!format!("{config:?}").contains("pw-in-file"));
        assert!(format!("{config:?}").contains("PostgreSQL u@h:5433/db"));
        let f = file_with("store = \"sqlite\"\n");
        let config = load::<CoordinatorOptions>(Some(f.path()), Default::default()).expect("loads");
        assert_eq!(config.store, StoreKind::Sqlite);
    }

    #[test]
    fn submission_defaults_must_be_values_a_submission_could_ask_for() {
        use crate::protocol::limits::{MAX_ATTEMPTS, MAX_TIMEOUT_MS};
        let at_max = format!(
            "task-timeout-millis = {MAX_TIMEOUT_MS}\ndefault-max-attempts = {MAX_ATTEMPTS}\n"
        );
        let f = file_with(&at_max);
        load::<CoordinatorOptions>(Some(f.path()), Default::default()).expect("the maximum");
        for (key, text) in [
            (
                "task-timeout-millis",
                format!("task-timeout-millis = {}", MAX_TIMEOUT_MS + 1),
            ),
            (
                "default-max-attempts",
                format!("default-max-attempts = {}", MAX_ATTEMPTS + 1),
            ),
        ] {
            let f = file_with(&text);
            let err = load::<CoordinatorOptions>(Some(f.path()), Default::default())
                .expect_err("one beyond");
            assert_eq!(err.key.as_deref(), Some(key));
            assert!(err.reason.contains("is outside 1..="), "{err}");
        }
    }

    #[test]
    fn a_result_or_payload_bigger_than_a_frame_is_an_error_naming_both_keys() {
        let f = file_with("max-result-bytes = 2097152\nmax-frame-bytes = 1048576\n");
        let err = load::<CoordinatorOptions>(Some(f.path()), Default::default())
            .expect_err("a result that no frame carries");
        assert_eq!(err.key.as_deref(), Some("max-result-bytes"));
        assert_eq!(err.source_name, f.path().display().to_string());
        assert!(err.reason.contains("max-frame-bytes (1048576)"), "{err}");
        let flags = CoordinatorOptions {
            max_frame_bytes: Some(64 * 1024),
            max_result_bytes: Some(32 * 1024),
            ..Default::default()
        };
        let err = load::<CoordinatorOptions>(None, flags).expect_err("default payload too big");
        assert_eq!(err.key.as_deref(), Some("max-payload-bytes"));
        assert!(err.reason.contains("max-frame-bytes (65536)"), "{err}");
        let flags = WorkerOptions {
            max_frame_bytes: Some(64 * 1024),
            ..Default::default()
        };
        let err = load::<WorkerOptions>(None, flags).expect_err("default output too big");
        assert_eq!(err.key.as_deref(), Some("max-output-bytes"));
        assert!(err.reason.contains("max-frame-bytes"), "{err}");
        let defaults = CoordinatorConfig::default();
        assert!(defaults.validate().is_ok(), "the defaults fit");
        assert!(WorkerConfig::default().validate().is_ok());
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
    fn an_exec_supervisor_that_is_not_an_executable_file_is_a_config_error() {
        let f = file_with("exec-supervisor = \"/nonexistent/taskyard-worker\"\n");
        let err = load::<WorkerOptions>(Some(f.path()), Default::default()).expect_err("bad path");
        assert_eq!(err.key.as_deref(), Some("exec-supervisor"));
        assert!(err.reason.contains("/nonexistent/taskyard-worker"), "{err}");
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
