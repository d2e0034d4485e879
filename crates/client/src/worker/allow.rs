//! The `exec` allow-list. Names are resolved on the worker's PATH once, at
//! start-up, and canonicalized; a task's program is resolved the same way
//! when it arrives and runs only if it lands on one of those files. So
//! `python3` and `/usr/bin/python3` are the same entry, and a symlink or a
//! PATH entry added later cannot smuggle in another binary.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Why a name in `exec-allow` (or a task's `program`) does not resolve.
#[derive(Debug, Error)]
pub enum ResolveError {
    #[error("{name:?} is not found on PATH")]
    NotOnPath { name: String },
    #[error("{name:?} cannot be resolved: {source}")]
    Unresolvable {
        name: String,
        source: std::io::Error,
    },
    #[error("{name:?} is not an executable file")]
    NotExecutable { name: String },
}

/// A task's program is not one the worker allows (or does not resolve).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("program {program:?} is not allowed on this worker ({reason}); exec-allow is [{allowed}]")]
pub struct NotAllowed {
    pub program: String,
    pub reason: String,
    pub allowed: String,
}

/// Canonical paths of the programs `exec` may run. Empty: `exec` is off.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList {
    programs: BTreeSet<PathBuf>,
}

impl AllowList {
    /// Resolves every name; the first that does not resolve is the error.
    pub fn resolve(names: &[String]) -> Result<AllowList, ResolveError> {
        let programs = names
            .iter()
            .map(|name| resolve_program(name))
            .collect::<Result<_, _>>()?;
        Ok(AllowList { programs })
    }

    pub fn is_empty(&self) -> bool {
        self.programs.is_empty()
    }

    /// The canonical path `program` resolves to, if it is allowed.
    pub fn check(&self, program: &str) -> Result<PathBuf, NotAllowed> {
        let not_allowed = |reason: String| NotAllowed {
            program: program.to_string(),
            reason,
            allowed: self.to_string(),
        };
        let path = resolve_program(program).map_err(|e| not_allowed(e.to_string()))?;
        if self.programs.contains(&path) {
            Ok(path)
        } else {
            Err(not_allowed(format!("resolves to {}", path.display())))
        }
    }
}

impl std::fmt::Display for AllowList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let paths: Vec<String> = self
            .programs
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        f.write_str(&paths.join(", "))
    }
}

/// A name with a `/` is a path (relative to the worker's directory); any
/// other name is looked up on PATH like a shell would. The result is
/// canonical (symlinks resolved) and an executable regular file.
pub fn resolve_program(name: &str) -> Result<PathBuf, ResolveError> {
    let candidate = if name.contains('/') {
        PathBuf::from(name)
    } else {
        find_on_path(name)?
    };
    let canonical =
        std::fs::canonicalize(&candidate).map_err(|source| ResolveError::Unresolvable {
            name: name.to_string(),
            source,
        })?;
    if !is_executable(&canonical) {
        return Err(ResolveError::NotExecutable {
            name: name.to_string(),
        });
    }
    Ok(canonical)
}

fn find_on_path(name: &str) -> Result<PathBuf, ResolveError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| ResolveError::NotOnPath {
            name: name.to_string(),
        })
}

/// An existing regular file with an execute bit set.
pub(crate) fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_and_its_path_are_the_same_entry() {
        let allow = AllowList::resolve(&["sh".to_string()]).expect("sh is on PATH");
        let by_name = allow.check("sh").expect("allowed by name");
        let by_path = allow
            .check(&by_name.display().to_string())
            .expect("by path");
        assert_eq!(by_name, by_path);
        assert!(by_name.is_absolute());
    }

    #[test]
    fn other_programs_are_refused_naming_the_program_and_the_list() {
        let allow = AllowList::resolve(&["sh".to_string()]).expect("sh");
        let err = allow.check("echo").expect_err("not allowed");
        assert_eq!(err.program, "echo");
        assert!(err.to_string().contains(&allow.to_string()), "{err}");
        assert!(allow.check("no-such-program-xyz").is_err());
    }

    #[test]
    fn unresolvable_names_are_errors() {
        let plain_file = tempfile::NamedTempFile::new().expect("temp file");
        let plain_file = plain_file.path().display().to_string();
        for name in ["no-such-program-xyz", "/nonexistent/bin/x", &plain_file] {
            let err = AllowList::resolve(&[name.to_string()]).expect_err(name);
            assert!(err.to_string().contains(name), "{err}");
        }
    }
}
