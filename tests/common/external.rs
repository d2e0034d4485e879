//! The one policy for tests that need a program from outside the crate
//! (Chromium, chromedriver, PostgreSQL, Python, promtool, schemathesis):
//! find it; when it is missing, print one line naming the package that
//! provides it and skip, except under `TASKYARD_REQUIRE_EXTERNAL=1` (set
//! by `.ci/run`), where a missing program fails the test.
//!
//! ```ignore
//! let Some(chromium) = external::program(&["chromium", "chromium-browser"], Package::Debian("chromium")) else {
//!     return; // skipped, with a note on stderr
//! };
//! ```

use std::path::{Path, PathBuf};

/// The environment variable that turns a missing program into a failure.
pub const REQUIRE_EXTERNAL: &str = "TASKYARD_REQUIRE_EXTERNAL";

/// Where a missing program comes from, so the note can say how to install it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Package {
    /// A Debian package (`apt-get install -y NAME`).
    Debian(&'static str),
    /// A PyPI package (`pip install NAME`, in a venv: `.ci/run` makes one
    /// under `target/`).
    PyPi(&'static str),
}

impl Package {
    /// How to install it, as the note words it.
    pub fn install_hint(self) -> String {
        match self {
            Package::Debian(name) => {
                format!("the Debian package {name} provides it (apt-get install -y {name})")
            }
            Package::PyPi(name) => {
                format!("the PyPI package {name} provides it (pip install {name})")
            }
        }
    }
}

/// The first of `names` found in a directory of `PATH`, or `None` after
/// `missing` decided to skip. `names` are alternatives for one program
/// (`chromium`, `chromium-browser`); the first is the one the note names.
pub fn program(names: &[&str], package: Package) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    let found = find_in(&dirs, names);
    present(names.first().copied().unwrap_or("?"), found, package)
}

/// For a program found another way (PostgreSQL's server programs live in
/// `/usr/lib/postgresql/N/bin`, not on `PATH`): `found` itself, or `None`
/// after `missing` decided to skip.
pub fn present<T>(program: &str, found: Option<T>, package: Package) -> Option<T> {
    if found.is_none() {
        missing(program, package, required());
    }
    found
}

/// The first of `names` that is a file in one of `dirs`, in `dirs` order.
pub fn find_in(dirs: &[PathBuf], names: &[&str]) -> Option<PathBuf> {
    dirs.iter()
        .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
        .find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// True when `TASKYARD_REQUIRE_EXTERNAL=1`.
pub fn required() -> bool {
    std::env::var(REQUIRE_EXTERNAL).as_deref() == Ok("1")
}

/// The one line printed for a missing program.
pub fn note(program: &str, package: Package) -> String {
    format!(
        "{program} not found: {}; .ci/run installs it",
        package.install_hint()
    )
}

/// Reports a missing program: panics when `required`, else prints
/// `skipped: <note>` on stderr and returns so the caller can skip.
pub fn missing(program: &str, package: Package, required: bool) {
    let note = note(program, package);
    if required {
        panic!("{note}; {REQUIRE_EXTERNAL}=1 makes a missing program a failure");
    }
    eprintln!("skipped: {note}");
}
