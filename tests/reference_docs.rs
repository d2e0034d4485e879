//! The CLI and configuration references in `docs/reference/` are
//! generated from the code (clap and the config definitions); this test
//! regenerates them and fails when the checked-in files differ, naming
//! the command that rewrites them (`TASKYARD_BLESS=1`).

use std::path::Path;

fn check(file: &str, generated: String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    if std::env::var_os("TASKYARD_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("mkdir");
        std::fs::write(&path, &generated).expect("write");
        return;
    }
    let stored = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        stored == generated,
        "{file} is out of date: run `TASKYARD_BLESS=1 cargo test --test reference_docs` \
         and commit it"
    );
}

#[test]
fn the_cli_reference_is_current() {
    check(
        "docs/reference/cli.md",
        taskyard::cli::reference::markdown(),
    );
}

#[test]
fn the_configuration_reference_is_current() {
    check(
        "docs/reference/configuration.md",
        taskyard::cli::config_reference::markdown(),
    );
}
