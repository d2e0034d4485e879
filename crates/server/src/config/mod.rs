//! The coordinator's configuration: its keys (`CoordinatorConfig`), the
//! `[[schedule]]` tables, the HTTP listener's host names and the generated
//! reference page, on the client crate's config core (files, flags,
//! durations and errors), which it re-exports so start-up code reads one
//! `config` module.

pub mod authority;
mod coordinator;
pub mod defaults;
#[cfg(test)]
mod durations_tests;
pub mod limit;
pub mod schedule;
#[cfg(test)]
mod tests;

pub use coordinator::{CoordinatorConfig, CoordinatorOptions};
pub use taskyard_client::config::*;

use limit::DeclaredLimit;
use reference::{DefaultText, ListItemText};
use schedule::DeclaredSchedule;
use serde::Deserialize;
use std::fmt;
use std::str::FromStr;

/// `postgres-url`: a PostgreSQL URL that may hold a password, so `Debug`
/// never shows it (the store's `PgTarget::describe` says where it points).
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
        if self.0.is_empty() {
            f.write_str("\"\"")
        } else {
            f.write_str("\"(set, not shown)\"")
        }
    }
}

impl FromStr for PostgresUrl {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(PostgresUrl(s.to_string()))
    }
}

taskyard_client::config_enum!(
    /// How much of SQLite's durability to keep.
    Synchronous { Full => "full", Normal => "normal", Off => "off" }
);
taskyard_client::config_enum!(
    /// Which store the coordinator keeps its jobs in.
    StoreKind { Sqlite => "sqlite", Postgres => "postgres" }
);

taskyard_client::quoted_default!(StoreKind, Synchronous);

/// A declared schedule is a TOML table; the default list is empty.
impl ListItemText for DeclaredSchedule {
    fn item_text(&self) -> String {
        "{…}".into()
    }
}

/// Read from the environment when unset: the reference says so rather
/// than printing this machine's value.
impl DefaultText for PostgresUrl {
    fn default_text(&self) -> String {
        "$TASKYARD_POSTGRES_URL".into()
    }
}

/// A declared limit is a TOML table; the default list is empty.
impl ListItemText for DeclaredLimit {
    fn item_text(&self) -> String {
        "{…}".into()
    }
}

/// One inline TOML table given as a flag (`--schedule`, `--limit`): `text`
/// read as the value of `name`.
pub(crate) fn inline_table<T: serde::de::DeserializeOwned>(
    name: &str,
    text: &str,
) -> Result<T, String> {
    let not_one = |message: &str| format!("not a {name} table: {message}");
    let mut table: toml::Table =
        toml::from_str(&format!("{name} = {text}")).map_err(|e| not_one(e.message()))?;
    let value = table.remove(name).ok_or_else(|| not_one("empty"))?;
    value
        .try_into()
        .map_err(|e: toml::de::Error| not_one(e.message()))
}
