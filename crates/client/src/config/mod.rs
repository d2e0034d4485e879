//! Process configuration: TOML files with kebab-case keys, every key also a
//! command-line flag of the same name, flags overriding the file. Loaded and
//! validated completely before anything is opened.

/// Declares a resolved config struct with defaults and its all-optional twin
/// that is both the TOML schema and the clap flag set, so a key, its flag and
/// its default are written once. A `*_millis: u64` key is also a key
/// without the suffix taking a duration (see `durations`);
/// `#[duration_key = "NAME"]` names that key instead when the stem is
/// already another key.
#[macro_export]
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
        #[derive(Debug, Clone, Default, ::clap::Args)]
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

        impl<'de> ::serde::Deserialize<'de> for $options {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $crate::config::durations::deserialize_options(d)
            }
        }

        impl $crate::config::ConfigOptions for $options {
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

            fn read_value<'de, A: ::serde::de::MapAccess<'de>>(
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

pub mod durations;
pub mod reference;
mod suggest;

pub use suggest::Position;

use crate::security::Secret;
use serde::Deserialize;
use std::fmt;
use std::path::Path;
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
    load_checked(file, flags, |_| Ok(()))
}

/// `load`, then `check` on the resolved config: checks that need more than
/// the config knows (a cron expression, a database URL), supplied by the
/// start-up code that owns them. Their errors name key and file like the
/// config's own.
pub fn load_checked<O: ConfigOptions>(
    file: Option<&Path>,
    flags: O,
    check: impl FnOnce(&O::Resolved) -> Result<(), Invalid>,
) -> Result<O::Resolved, ConfigError> {
    let flags =
        durations::fold(flags).map_err(|invalid| ConfigError::about_key(None, &[], invalid))?;
    let flag_keys = flags.keys_set();
    let options = read_file::<O>(file)?.overlaid_with(flags);
    let spelled = options.durations().clone();
    let config = options.resolve();
    config
        .validate()
        .and_then(|()| check(&config))
        .map_err(|(key, reason)| {
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
pub fn shown(key: &str, value: u64) -> String {
    if key.ends_with("-millis") {
        crate::clock::text::format_duration(value)
    } else {
        value.to_string()
    }
}

pub fn at_least(key: &str, value: u64, min: u64) -> Result<(), Invalid> {
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

pub fn at_most(key: &str, value: u64, max: u64) -> Result<(), Invalid> {
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
pub fn within(
    key: &str,
    value: u64,
    range: taskyard_protocol::limits::Range,
) -> Result<(), Invalid> {
    range
        .check(value)
        .map(|_| ())
        .map_err(|e| (key.to_string(), e.to_string()))
}

pub fn frame_size(value: usize) -> Result<(), Invalid> {
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
pub fn fits_frame(key: &str, value: usize, max_frame_bytes: usize) -> Result<(), Invalid> {
    let headroom = taskyard_protocol::fit::FRAME_HEADROOM_BYTES;
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
pub fn secret(
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

/// Declares a small enum used as a config value: parsed from TOML and flags
/// by its lowercase name.
#[macro_export]
macro_rules! config_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident => $text:literal),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, ::serde::Deserialize)]
        #[serde(rename_all = "lowercase")]
        pub enum $name { $($variant),* }

        impl ::std::str::FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($text => Ok($name::$variant),)*
                    _ => Err(format!("{s:?} is not one of: {}", [$($text),*].join(", "))),
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(match self { $($name::$variant => $text),* })
            }
        }
    };
}

config_enum!(
    /// Minimum level of log lines printed.
    LogLevel { Error => "error", Warn => "warn", Info => "info", Debug => "debug", Trace => "trace" }
);
config_enum!(
    /// Log line format.
    LogFormat { Text => "text", Json => "json" }
);
