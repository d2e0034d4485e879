//! The folders of every crate of the workspace depend downward only
//! (ARCHITECTURE.md, "Code map"): a file in a folder may name only folders
//! below it in `LAYERS`, whether through `crate::X` inside its crate or
//! through another crate's path (`taskyard_client::X`, `taskyard_protocol`).
//! Cargo already forbids cycles between crates; since the layers are a
//! line, this also rules out cycles between folders inside one crate.
//! `KNOWN_EXCEPTIONS` lists the upward imports that are still there, to be
//! removed one by one: the test fails both on a new upward import and on
//! an exception that no longer occurs (so the list only shrinks).
//! Unit-test files (`tests.rs`, `*_tests.rs`) may use fixtures from
//! anywhere and are not checked.

use std::collections::BTreeSet;
use std::path::Path;

/// Lowest first; folders on one line are peers and may not use each other.
const LAYERS: &[&[&str]] = &[
    // crates/protocol
    &["protocol"],
    // crates/client (also used by the server: security, clock, config, logging)
    &["clock", "security", "memory"],
    &["config"],
    &["logging"],
    &["client", "worker"],
    // crates/server
    &["scheduler"],
    &["store"],
    &["ha"],
    &["actors"],
    &["net"],
    &["http"],
    &["process"],
    // crates/bench
    &["bench"],
    // the root package: the CLI and the binaries
    &["signals"],
    &["cli"],
];

/// The workspace's crates: where their sources are, the name other crates
/// use for them, and the folder a crate is as a whole (`None` when its
/// sources are folders of their own).
const CRATES: &[(&str, &str, Option<&str>)] = &[
    ("crates/protocol/src", "taskyard_protocol", Some("protocol")),
    ("crates/client/src", "taskyard_client", None),
    ("crates/server/src", "taskyard_server", None),
    ("crates/bench/src", "taskyard_bench", Some("bench")),
    ("src", "taskyard", None),
];

/// (from, to): upward imports still to be removed.
const KNOWN_EXCEPTIONS: &[(&str, &str)] = &[];

fn layer_of(folder: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&folder))
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The folder a path names after `prefix` (`crate::`, `taskyard_client::`),
/// or the whole crate's folder for a crate that is one.
fn named_after(rest: &str, whole: Option<&str>) -> Option<String> {
    if let Some(folder) = whole {
        return Some(folder.to_string());
    }
    let name: String = rest
        .strip_prefix("::")?
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// The folders a file's text names, inside its crate (`crate::X`, unless the
/// crate is one folder) and in the other crates.
fn named_folders(text: &str, own_whole: Option<&str>) -> BTreeSet<String> {
    let mut named = BTreeSet::new();
    let mut prefixes: Vec<(&str, Option<&str>)> = CRATES
        .iter()
        .map(|(_, name, whole)| (*name, *whole))
        .collect();
    if own_whole.is_none() {
        prefixes.push(("crate", None));
    }
    for (prefix, whole) in prefixes {
        for (at, _) in text.match_indices(prefix) {
            let before = text[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let rest = &text[at + prefix.len()..];
            // `taskyard_client` must not match inside `taskyard_clientx`,
            // nor `taskyard` inside `taskyard_server`.
            if rest.starts_with(|c: char| c.is_alphanumeric() || c == '_') {
                continue;
            }
            if let Some(folder) = named_after(rest, whole) {
                named.insert(folder);
            }
        }
    }
    named
}

/// Every `(from, to)` folder pair where a file of `from` names `to`.
fn imports() -> BTreeSet<(String, String)> {
    let mut found = BTreeSet::new();
    for (dir, _, whole) in CRATES {
        let src = root().join(dir);
        for (path, text) in sources(&src) {
            let from = match whole {
                Some(folder) => folder.to_string(),
                None => path
                    .strip_prefix(&src)
                    .expect("under src")
                    .components()
                    .next()
                    .and_then(|c| c.as_os_str().to_str())
                    .map(|c| c.trim_end_matches(".rs").to_string())
                    .expect("a first component"),
            };
            for to in named_folders(&text, *whole) {
                if to != from {
                    found.insert((from.clone(), to));
                }
            }
        }
    }
    found
}

/// The non-test Rust files under `src`, with their text.
fn sources(src: &Path) -> Vec<(std::path::PathBuf, String)> {
    let mut files = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if !name.ends_with(".rs") || name == "tests.rs" || name.ends_with("_tests.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read file");
            files.push((path, text));
        }
    }
    files
}

#[test]
fn folders_import_downward_only() {
    let mut upward = BTreeSet::new();
    for (from, to) in imports() {
        let (Some(a), Some(b)) = (layer_of(&from), layer_of(&to)) else {
            // lib.rs, bin/ and names that are not folders.
            continue;
        };
        if b >= a {
            upward.insert((from, to));
        }
    }
    let known: BTreeSet<(String, String)> = KNOWN_EXCEPTIONS
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    let new: Vec<_> = upward.difference(&known).collect();
    assert!(
        new.is_empty(),
        "folders importing upward or sideways (see ARCHITECTURE.md): {new:?}"
    );
    let gone: Vec<_> = known.difference(&upward).collect();
    assert!(
        gone.is_empty(),
        "no longer imported: remove from KNOWN_EXCEPTIONS: {gone:?}"
    );
}

#[test]
fn every_folder_has_a_layer() {
    for (dir, _, whole) in CRATES {
        if let Some(folder) = whole {
            assert!(
                layer_of(folder).is_some(),
                "{folder} has no place in LAYERS"
            );
            continue;
        }
        for entry in std::fs::read_dir(root().join(dir)).expect("read src") {
            let path = entry.expect("entry").path();
            let name = path
                .file_stem()
                .and_then(|n| n.to_str())
                .expect("a name")
                .to_string();
            if ["lib", "bin", "main"].contains(&name.as_str()) {
                continue;
            }
            assert!(
                layer_of(&name).is_some(),
                "{dir}/{name} has no place in LAYERS (tests/layering.rs)"
            );
        }
    }
}

/// The check itself sees an upward import through another crate's path,
/// inside a crate, and not a longer name that merely starts like a crate's.
#[test]
fn the_check_reads_paths_across_crates() {
    let text = "use taskyard_client::worker::Worker;\nuse crate::store::JobStore;\n\
                use taskyard_protocol::JobId;\nlet x = taskyard_serverless::y;";
    let named = named_folders(text, None);
    let expected: BTreeSet<String> = ["worker", "store", "protocol"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(named, expected);
    assert_eq!(
        named_folders("use crate::frame::FrameCodec;", Some("protocol")),
        BTreeSet::new()
    );
}
