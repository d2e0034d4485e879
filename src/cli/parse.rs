//! The command line as `taskyard` parses it and shows it in `--help`.
//!
//! The global flags (`--coordinator`, `--json`, `--token-file`, `--tls-ca`,
//! `--tls-server-name`) are accepted before or after any subcommand, but
//! described once: in `taskyard --help` (and taskyard(1)). A subcommand's
//! help ends with one line naming them instead of repeating each.

use crate::cli::Cli;
use clap::{Arg, CommandFactory, FromArgMatches};
use std::ffi::OsString;

/// The clap command `taskyard` parses with: `Cli`'s, with the global flags
/// hidden from every subcommand's help (still accepted there).
pub fn command() -> clap::Command {
    let cmd = Cli::command();
    let globals: Vec<Arg> = cmd
        .get_arguments()
        .filter(|a| a.is_global_set())
        .cloned()
        .collect();
    let note = global_flags_note(&globals);
    cmd.mut_subcommands(|sub| globals_hidden(sub, &globals, &note))
}

/// The line a subcommand's help ends with, naming the global flags.
pub fn global_flags_note(globals: &[Arg]) -> String {
    let names: Vec<String> = globals
        .iter()
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .collect();
    format!(
        "Global options {} are described in `taskyard --help`.",
        names.join(", ")
    )
}

/// `sub` (and its own subcommands) with a hidden copy of each global flag,
/// so clap does not propagate a visible one, and `note` after its help.
/// A copy is the same argument (same id, still global), so it parses as the
/// propagated one would.
fn globals_hidden(sub: clap::Command, globals: &[Arg], note: &str) -> clap::Command {
    let after = match sub.get_after_help() {
        Some(text) => format!("{text}\n\n{note}"),
        None => note.to_string(),
    };
    let sub = globals
        .iter()
        .fold(sub, |sub, arg| sub.arg(arg.clone().hide(true)));
    sub.after_help(after)
        .mut_subcommands(|nested| globals_hidden(nested, globals, note))
}

/// Parses the process's arguments; on an error (or `--help`, `--version`)
/// prints clap's message and exits (2 for a usage error, 0 otherwise).
pub fn parse() -> Cli {
    try_parse_from(std::env::args_os()).unwrap_or_else(|e| e.exit())
}

/// Parses `args` (the first is the program name) like `parse`, returning
/// clap's error instead of exiting.
pub fn try_parse_from<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let mut cmd = command();
    let matches = cmd.try_get_matches_from_mut(args)?;
    Cli::from_arg_matches(&matches).map_err(|e| e.format(&mut cmd))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GLOBAL_HELP: [&str; 5] = [
        "--coordinator <ADDR>",
        "--json",
        "--token-file <FILE>",
        "--tls-ca <FILE>",
        "--tls-server-name <NAME>",
    ];

    fn help_of(path: &[&str]) -> String {
        let mut cmd = command();
        cmd.build();
        let mut sub = &mut cmd;
        for name in path {
            sub = sub.find_subcommand_mut(name).expect("subcommand");
        }
        sub.render_long_help().to_string()
    }

    #[test]
    fn the_command_is_consistent() {
        command().debug_assert();
    }

    #[test]
    fn top_level_help_describes_each_global_flag_once() {
        let help = help_of(&[]);
        for flag in GLOBAL_HELP {
            let listed = format!("  {flag}");
            assert_eq!(help.matches(&listed).count(), 1, "{flag} in {help}");
        }
    }

    #[test]
    fn subcommand_help_names_the_global_flags_without_repeating_them() {
        for path in [
            &["status"][..],
            &["submit"],
            &["workers"],
            &["bench", "recovery"],
        ] {
            let help = help_of(path);
            for flag in GLOBAL_HELP {
                let listed = format!("  {flag}");
                assert!(!help.contains(&listed), "{path:?} repeats {flag}: {help}");
            }
            assert!(
                help.contains("Global options --coordinator, --json, --token-file, --tls-ca, --tls-server-name are described in `taskyard --help`."),
                "{path:?}: {help}"
            );
        }
    }

    #[test]
    fn global_flags_still_parse_before_and_after_a_subcommand() {
        let id = crate::protocol::JobId::mint().to_string();
        let parse = |args: &[&str]| {
            try_parse_from(std::iter::once("taskyard").chain(args.iter().copied())).expect("valid")
        };
        for cli in [
            parse(&["--json", "--coordinator", "10.0.0.1:1", "status", &id]),
            parse(&["status", &id, "--json", "--coordinator", "10.0.0.1:1"]),
        ] {
            assert!(cli.json);
            assert_eq!(cli.coordinator.as_deref(), Some("10.0.0.1:1"));
        }
        let cli = parse(&["bench", "recovery", "--json"]);
        assert!(cli.json, "a nested subcommand takes them too");
    }

    #[test]
    fn a_usage_error_is_clap_s_exit_2() {
        let err = try_parse_from(["taskyard", "status", "--nope"]).expect_err("unknown flag");
        assert_eq!(err.exit_code(), 2);
    }
}
