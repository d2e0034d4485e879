//! The external-program policy itself (`tests/common/external.rs`): how a
//! program is found, what the note says, and that a missing program skips
//! unless `TASKYARD_REQUIRE_EXTERNAL=1`.

#[path = "common/external.rs"]
#[allow(dead_code)]
mod external;

use external::*;
use std::path::{Path, PathBuf};

fn script(dir: &Path, name: &str, mode: u32) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, "#!/bin/sh\n").expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    path
}

#[test]
fn the_first_executable_alternative_in_path_order_is_found() {
    let (a, b) = (
        tempfile::tempdir().expect("a"),
        tempfile::tempdir().expect("b"),
    );
    script(a.path(), "chromium", 0o644);
    let wanted = script(b.path(), "chromium", 0o755);
    script(b.path(), "chromium-browser", 0o755);
    let dirs = [a.path().to_path_buf(), b.path().to_path_buf()];
    assert_eq!(
        find_in(&dirs, &["chromium", "chromium-browser"]),
        Some(wanted)
    );
    assert_eq!(find_in(&dirs, &["promtool"]), None);
}

#[test]
fn the_note_names_the_program_and_how_to_install_its_package() {
    assert_eq!(
        note("promtool", Package::Debian("prometheus")),
        "promtool not found: the Debian package prometheus provides it \
         (apt-get install -y prometheus); .ci/run installs it"
    );
    assert!(note("st", Package::PyPi("schemathesis")).contains("pip install schemathesis"));
}

#[test]
fn a_missing_program_skips_unless_required() {
    missing("nothing-here", Package::Debian("nothing"), false);
    let failed =
        std::panic::catch_unwind(|| missing("nothing-here", Package::Debian("nothing"), true));
    let message = failed.expect_err("required: a failure");
    let text = message
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(
        text.contains("nothing-here not found") && text.contains(REQUIRE_EXTERNAL),
        "{text}"
    );
}
