//! The folders of `src/` depend downward only (ARCHITECTURE.md, "Code
//! map"): a `crate::X` path in a folder may name only folders below it in
//! `LAYERS`. Since the layers are a line, this also rules out cycles
//! between folders. `KNOWN_EXCEPTIONS` lists the upward imports that are
//! still there, to be removed one by one: the test fails both on a new
//! upward import and on an exception that no longer occurs (so the list
//! only shrinks). Unit-test files (`tests.rs`, `*_tests.rs`) may use
//! fixtures from anywhere and are not checked.

use std::collections::BTreeSet;
use std::path::Path;

/// Lowest first; folders on one line are peers and may not use each other.
const LAYERS: &[&[&str]] = &[
    &["protocol"],
    &["clock", "security", "memory", "signals"],
    &["config"],
    &["logging"],
    &["scheduler"],
    &["store"],
    &["ha"],
    &["client", "worker"],
    &["actors"],
    &["net"],
    &["http"],
    &["process"],
    &["bench"],
    &["cli"],
];

/// (from, to): upward imports still to be removed.
const KNOWN_EXCEPTIONS: &[(&str, &str)] = &[
    // Defaults and checks the config borrows from the parts it configures.
    ("config", "scheduler"),
    ("config", "store"),
    ("config", "worker"),
];

fn layer_of(folder: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&folder))
}

/// Every `(from, to)` folder pair where a file of `from` names `crate::to`.
fn imports(src: &Path) -> BTreeSet<(String, String)> {
    let mut found = BTreeSet::new();
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
            let relative = path.strip_prefix(src).expect("under src");
            let from = relative
                .components()
                .next()
                .and_then(|c| c.as_os_str().to_str())
                .map(|c| c.trim_end_matches(".rs").to_string())
                .expect("a first component");
            let text = std::fs::read_to_string(&path).expect("read file");
            for (at, _) in text.match_indices("crate::") {
                let rest = &text[at + "crate::".len()..];
                let to: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !to.is_empty() && to != from {
                    found.insert((from.clone(), to));
                }
            }
        }
    }
    found
}

#[test]
fn folders_import_downward_only() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut upward = BTreeSet::new();
    for (from, to) in imports(&src) {
        let (Some(a), Some(b)) = (layer_of(&from), layer_of(&to)) else {
            // lib.rs, bin/ and names that are not folders of src/.
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
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for entry in std::fs::read_dir(&src).expect("read src") {
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
            "src/{name} has no place in LAYERS (tests/layering.rs)"
        );
    }
}
