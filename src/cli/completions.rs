//! `taskyard completions SHELL`: a completion script for bash, zsh, fish,
//! elvish or PowerShell on stdout, generated from the same clap definitions
//! the binary parses with, so it always knows every subcommand and flag.

use crate::cli::{output, Cli, CliError, Exit};
use clap::{Args, CommandFactory};
use clap_complete::Shell;

#[derive(Debug, Args)]
#[command(after_help = "\
Install, for example:
  bash  taskyard completions bash > ~/.local/share/bash-completion/completions/taskyard
  zsh   taskyard completions zsh > ~/.zfunc/_taskyard   (with fpath+=(~/.zfunc) before compinit)
  fish  taskyard completions fish > ~/.config/fish/completions/taskyard.fish")]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_name = "SHELL", value_enum)]
    pub shell: Shell,
}

/// The completion script for `shell`. Built from `Cli::command()` itself
/// (the global flags visible in every subcommand), so `taskyard status
/// --js<TAB>` completes a global flag too.
pub fn script(shell: Shell) -> Vec<u8> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "taskyard", &mut script);
    script
}

/// Writes the script to stdout.
pub fn run(args: CompletionsArgs) -> Result<Exit, CliError> {
    output::emit_bytes(&script(args.shell))?;
    Ok(Exit::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every subcommand's name and every long flag, at every depth.
    fn names_and_flags(cmd: &clap::Command) -> Vec<String> {
        let mut words: Vec<String> = cmd
            .get_arguments()
            .filter(|a| !a.is_hide_set())
            .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
            .collect();
        for sub in cmd.get_subcommands() {
            words.push(sub.get_name().to_string());
            words.extend(names_and_flags(sub));
        }
        words
    }

    #[test]
    fn every_script_names_every_subcommand_and_flag() {
        let words = names_and_flags(&Cli::command());
        for expected in [
            "submit",
            "workers",
            "completions",
            "man",
            "recovery",
            "--json",
            "--all-failed",
        ] {
            assert!(
                words.iter().any(|w| w == expected),
                "{expected} not among {words:?}"
            );
        }
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let text = String::from_utf8(script(shell)).expect("UTF-8");
            for word in &words {
                let bare = word.trim_start_matches('-');
                assert!(text.contains(bare), "{shell}: {word} missing");
            }
        }
    }

    #[test]
    fn the_bash_script_registers_a_completion_for_taskyard() {
        let text = String::from_utf8(script(Shell::Bash)).expect("UTF-8");
        assert!(text.contains("complete -F _taskyard"), "{text}");
        let fish = String::from_utf8(script(Shell::Fish)).expect("UTF-8");
        assert!(fish.contains("complete -c taskyard"), "{fish}");
        let zsh = String::from_utf8(script(Shell::Zsh)).expect("UTF-8");
        assert!(zsh.starts_with("#compdef taskyard"), "{zsh}");
    }

    #[test]
    fn the_shell_is_one_clap_complete_knows() {
        let err = crate::cli::parse::try_parse_from(["taskyard", "completions", "tcsh"])
            .expect_err("no tcsh");
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("bash"), "{err}");
    }
}
