//! `taskyard man`: the manual page taskyard(1) in roff on stdout, or with
//! `--dir DIR` one page per command (taskyard.1, taskyard-submit.1, …)
//! written there. Generated from the clap definitions, like `--help`.

use crate::cli::{output, parse, CliError, Exit};
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Debug, Args)]
#[command(after_help = "\
Install, for example:
  taskyard man > ~/.local/share/man/man1/taskyard.1
  taskyard man --dir /usr/local/share/man/man1")]
pub struct ManArgs {
    /// Write taskyard.1 and a taskyard-COMMAND.1 for every command into
    /// this directory (which must exist) instead of printing taskyard.1.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// taskyard(1) as roff.
pub fn page() -> Vec<u8> {
    let mut page = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = clap_mangen::Man::new(parse::command()).render(&mut page);
    page
}

/// Writes every page into `dir`; returns their paths, sorted. An error
/// names the directory.
pub fn write_pages(dir: &Path) -> Result<Vec<PathBuf>, CliError> {
    let bad = |e: std::io::Error| CliError::BadArgument(format!("--dir {}: {e}", dir.display()));
    if !dir.is_dir() {
        return Err(bad(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "not a directory",
        )));
    }
    clap_mangen::generate_to(parse::command(), dir).map_err(bad)?;
    let mut pages: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(bad)?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|p| is_our_page(p))
        .collect();
    pages.sort();
    Ok(pages)
}

fn is_our_page(path: &Path) -> bool {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    name.starts_with("taskyard") && name.ends_with(".1")
}

/// Prints taskyard(1), or writes the pages and prints their paths.
pub fn run(args: ManArgs) -> Result<Exit, CliError> {
    match args.dir {
        None => output::emit_bytes(&page())?,
        Some(dir) => {
            let pages = write_pages(&dir)?;
            let names: Vec<String> = pages.iter().map(|p| p.display().to_string()).collect();
            output::emit(&names.join("\n"))?;
        }
    }
    Ok(Exit::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_has_the_sections_of_a_manual_and_the_exit_codes() {
        let page = String::from_utf8(page()).expect("UTF-8");
        assert!(page.starts_with(".ie \\n(.g .ds Aq"), "{page}");
        assert!(page.contains(".TH taskyard 1"), "{page}");
        for section in ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "SUBCOMMANDS"] {
            assert!(
                page.contains(&format!(".SH {section}")),
                "{section}: {page}"
            );
        }
        assert!(page.contains("no such job"), "exit codes: {page}");
        assert!(page.contains("taskyard\\-submit(1)"), "{page}");
    }

    #[test]
    fn dir_gets_one_page_per_command() {
        let dir = tempfile::tempdir().expect("dir");
        let pages = write_pages(dir.path()).expect("written");
        let names: Vec<String> = pages
            .iter()
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        for expected in [
            "taskyard.1",
            "taskyard-submit.1",
            "taskyard-workers.1",
            "taskyard-bench-recovery.1",
            "taskyard-man.1",
        ] {
            assert!(
                names.iter().any(|n| n == expected),
                "{expected} not in {names:?}"
            );
        }
        let submit = std::fs::read_to_string(dir.path().join("taskyard-submit.1")).expect("read");
        assert!(submit.contains("idempotency"), "{submit}");
    }

    #[test]
    fn a_missing_dir_is_an_error_naming_it() {
        let err = write_pages(Path::new("/nonexistent/man1")).expect_err("no such dir");
        assert_eq!(err.to_string(), "--dir /nonexistent/man1: not a directory");
    }
}
