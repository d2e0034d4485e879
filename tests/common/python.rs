//! The Python that has the project's package (`clients/python`):
//! `$TASKYARD_PYTHON`, else `pyenv/bin/python` in cargo's target directory
//! (which `.ci/run` makes). Without one a test names the package and
//! skips (fails under `TASKYARD_REQUIRE_EXTERNAL=1`).

use super::external::{self, Package};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A Python that can `import taskyard`, or `None` after the note.
pub fn python() -> Option<PathBuf> {
    let candidate = std::env::var_os("TASKYARD_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("pyenv/bin/python"));
    let works = Command::new(&candidate)
        .args(["-c", "import taskyard"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    external::present(
        "python with the taskyard package",
        works.then_some(candidate),
        Package::PyPi("./clients/python"),
    )
}

/// Where cargo builds (`target/` or `$CARGO_TARGET_DIR`), as `.ci/target-dir`
/// prints it: the parent of the directory cargo gives tests for scratch files.
pub fn target_dir() -> PathBuf {
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR"));
    scratch.parent().unwrap_or(scratch).to_path_buf()
}
