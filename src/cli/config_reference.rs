//! The configuration reference page, `docs/reference/configuration.md`,
//! generated from the config definitions (`config_struct!`) so it cannot
//! drift from the code (a test regenerates it and compares).

use crate::config::reference::KeyReference;
use crate::config::{ConfigOptions, CoordinatorOptions};
use crate::worker::WorkerOptions;

/// `docs/reference/configuration.md`: every key of the coordinator and
/// the worker, with its default and meaning.
pub fn markdown() -> String {
    let mut out = String::from(
        "# Configuration reference\n\n\
         Generated from the config definitions (`crates/server/src/config/`,\n\
         `crates/client/src/worker/config.rs`) by\n\
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
