//! What the configuration reference is generated from: each key's name,
//! its doc comment and its default, collected by `config_struct!`.

use crate::clock::text::format_duration;
use crate::config::durations::duration_key_of;
use std::net::SocketAddr;
use std::path::PathBuf;

/// One key of a config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyReference {
    /// As written in TOML and, with `--` before it, as a flag.
    pub key: String,
    /// The key's doc comment, one paragraph.
    pub doc: String,
    /// The default, as TOML would write it.
    pub default: String,
    /// For a duration key, the older spelling that takes integer
    /// milliseconds (`heartbeat-timeout-millis`), still accepted.
    pub millis_key: Option<String>,
}

impl KeyReference {
    /// The reference of field `field` (snake case, as declared): a
    /// `*_millis: u64` field under its duration spelling (`named`, if the
    /// declaration names it), its default a duration.
    pub fn of<T: DefaultText + 'static>(
        field: &str,
        named: Option<&str>,
        doc: String,
        default: &T,
    ) -> KeyReference {
        let key = field.replace('_', "-");
        let millis = (default as &dyn std::any::Any).downcast_ref::<u64>();
        match (duration_key_of::<T>(field, named), millis) {
            (Some(short), Some(&millis)) => KeyReference {
                key: short,
                doc,
                default: format!("\"{}\"", format_duration(millis)),
                millis_key: Some(key),
            },
            _ => KeyReference {
                key,
                doc,
                default: default.default_text(),
                millis_key: None,
            },
        }
    }
}

/// A doc comment's lines as one paragraph.
pub fn doc_text(lines: &[&str]) -> String {
    lines
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A default value as a person reads it in TOML.
pub trait DefaultText {
    fn default_text(&self) -> String;
}

macro_rules! displayed {
    ($($t:ty),*) => {
        $(impl DefaultText for $t {
            fn default_text(&self) -> String {
                self.to_string()
            }
        })*
    };
}
displayed!(u32, u64, usize, bool);

/// `DefaultText` for types shown quoted, as TOML writes strings.
#[macro_export]
macro_rules! quoted_default {
    ($($t:ty),*) => {
        $(impl $crate::config::reference::DefaultText for $t {
            fn default_text(&self) -> String {
                format!("\"{self}\"")
            }
        })*
    };
}
quoted_default!(
    String,
    SocketAddr,
    crate::config::LogLevel,
    crate::config::LogFormat
);

impl DefaultText for PathBuf {
    fn default_text(&self) -> String {
        format!("\"{}\"", self.display())
    }
}

/// An element of a list-valued key, as TOML writes it.
pub trait ListItemText {
    fn item_text(&self) -> String;
}

impl ListItemText for String {
    fn item_text(&self) -> String {
        format!("\"{self}\"")
    }
}

impl<T: ListItemText> DefaultText for Vec<T> {
    fn default_text(&self) -> String {
        let items: Vec<String> = self.iter().map(ListItemText::item_text).collect();
        format!("[{}]", items.join(", "))
    }
}
