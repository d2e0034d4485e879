//! The configuration reference, generated from the config definitions
//! (`config_struct!`): each key's name, its doc comment and its default,
//! so the reference in `docs/reference/configuration.md` cannot drift from
//! the code (a test regenerates it and compares).

use crate::clock::text::format_duration;
use crate::config::durations::duration_key_of;
use crate::config::schedule::DeclaredSchedule;
use crate::config::{ConfigOptions, CoordinatorOptions, PostgresUrl, WorkerOptions};
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

macro_rules! quoted {
    ($($t:ty),*) => {
        $(impl DefaultText for $t {
            fn default_text(&self) -> String {
                format!("\"{self}\"")
            }
        })*
    };
}
quoted!(
    String,
    SocketAddr,
    crate::config::StoreKind,
    crate::config::Synchronous,
    crate::config::LogLevel,
    crate::config::LogFormat
);

impl DefaultText for PathBuf {
    fn default_text(&self) -> String {
        format!("\"{}\"", self.display())
    }
}

impl DefaultText for Vec<String> {
    fn default_text(&self) -> String {
        let items: Vec<String> = self.iter().map(|s| format!("\"{s}\"")).collect();
        format!("[{}]", items.join(", "))
    }
}

impl DefaultText for Vec<DeclaredSchedule> {
    fn default_text(&self) -> String {
        "[]".into()
    }
}

/// Read from the environment when unset: the reference says so rather
/// than printing this machine's value.
impl DefaultText for PostgresUrl {
    fn default_text(&self) -> String {
        "$TASKYARD_POSTGRES_URL".into()
    }
}

/// `docs/reference/configuration.md`: every key of the coordinator and
/// the worker, with its default and meaning.
pub fn markdown() -> String {
    let mut out = String::from(
        "# Configuration reference\n\n\
         Generated from the config definitions (`src/config/`) by\n\
         `TASKYARD_BLESS=1 cargo test --test reference_docs`; `cargo test` fails\n\
         when this file is out of date. Do not edit it by hand.\n\n\
         Every key can be set in the TOML file given with `--config FILE` or as\n\
         the flag `--KEY VALUE`; a flag wins over the file.\n\n\
         A duration is a whole number and a unit, `ms`, `s`, `m`, `h` or `d`\n\
         (`250ms`, `30s`, `5m`, `1h`, `7d`), in quotes in TOML:\n\
         `heartbeat-timeout = \"6s\"`, `--heartbeat-timeout 6s`. A bare number is\n\
         refused, since it could mean any unit. Each duration key is also\n\
         accepted under its older name ending in `-millis`, with integer\n\
         milliseconds (`heartbeat-timeout-millis = 6000`,\n\
         `--heartbeat-timeout-millis 6000`). A file, or a command line, sets a\n\
         key in one spelling or the other, not both; a flag in either spelling\n\
         wins over the file's.\n",
    );
    section(
        &mut out,
        "Coordinator (`taskyard-coordinator`, `taskyard dev`)",
        "config/coordinator.toml",
        &CoordinatorOptions::reference(),
    );
    section(
        &mut out,
        "Worker (`taskyard-worker`)",
        "config/worker.toml",
        &WorkerOptions::reference(),
    );
    out
}

fn section(out: &mut String, title: &str, example: &str, keys: &[KeyReference]) {
    out.push_str(&format!(
        "\n## {title}\n\nAn example file with the defaults: `{example}`.\n\n\
         | key | default | meaning |\n|---|---|---|\n"
    ));
    for k in keys {
        let also = match &k.millis_key {
            Some(millis_key) => format!(" Also `{millis_key}`, in milliseconds."),
            None => String::new(),
        };
        out.push_str(&format!(
            "| `{}` | `{}` | {}{also} |\n",
            k.key,
            k.default.replace('|', "\\|"),
            k.doc.replace('|', "\\|")
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_has_a_doc_and_a_default() {
        for keys in [CoordinatorOptions::reference(), WorkerOptions::reference()] {
            assert!(!keys.is_empty());
            for k in keys {
                assert!(!k.doc.is_empty(), "{} has no doc comment", k.key);
                assert!(!k.default.is_empty(), "{} has no default text", k.key);
            }
        }
    }

    #[test]
    fn the_reference_names_keys_as_toml_writes_them() {
        let text = markdown();
        assert!(
            text.contains("| `client-listen` | `\"127.0.0.1:7400\"` |"),
            "{text}"
        );
        assert!(text.contains("| `retain-finished-in-memory-bytes` | `16777216` |"));
    }
}
