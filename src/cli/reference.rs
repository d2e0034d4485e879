//! The CLI reference, generated from the clap definitions (the same ones
//! `--help`, `taskyard man` and the completion scripts come from), so
//! `docs/reference/cli.md` cannot drift from the code (a test regenerates
//! it and compares).

use clap::{Arg, Command};

/// `docs/reference/cli.md`: every command of `taskyard`, its usage, and
/// its options and arguments with their help.
pub fn markdown() -> String {
    let mut cmd = crate::cli::parse::command();
    cmd.build();
    let mut out = String::from(
        "# CLI reference\n\n\
         Generated from the command-line definitions (`src/cli/`) by\n\
         `TASKYARD_BLESS=1 cargo test --test reference_docs`; `cargo test` fails\n\
         when this file is out of date. Do not edit it by hand. `taskyard help\n\
         COMMAND` and `taskyard man` say the same.\n",
    );
    command(&mut out, &cmd, "taskyard", 2);
    out
}

fn command(out: &mut String, cmd: &Command, path: &str, depth: usize) {
    if depth > 2 {
        out.push_str(&format!("\n{} `{path}`\n\n", "#".repeat(depth.min(4))));
        if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
            out.push_str(&format!("{about}\n\n"));
        }
        let mut usage = cmd.clone().bin_name(path.to_string());
        out.push_str(&format!("```text\n{}\n```\n", usage.render_usage()));
    } else {
        out.push_str("\n## Options of every command\n");
    }
    arguments(out, cmd);
    if depth <= 2 {
        out.push_str("\n## Commands\n");
    }
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        if sub.get_name() == "help" {
            continue;
        }
        command(out, sub, &format!("{path} {}", sub.get_name()), depth + 1);
    }
}

fn arguments(out: &mut String, cmd: &Command) {
    let shown: Vec<&Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && a.get_id() != "help" && a.get_id() != "version")
        .collect();
    if shown.is_empty() {
        return;
    }
    out.push_str("\n| argument | meaning |\n|---|---|\n");
    for arg in shown {
        out.push_str(&format!(
            "| {} | {} |\n",
            name(arg),
            help(arg).replace('|', "\\|")
        ));
    }
}

/// `--flag <VALUE>`, `-f, --flag`, or `<NAME>` for a positional argument.
fn name(arg: &Arg) -> String {
    let values: Vec<String> = arg
        .get_value_names()
        .map(|v| v.iter().map(|n| format!("<{n}>")).collect())
        .unwrap_or_default();
    let takes_value = arg.get_action().takes_values();
    let value = match (takes_value, values.is_empty()) {
        (true, true) => format!(" <{}>", arg.get_id().as_str().to_uppercase()),
        (true, false) => format!(" {}", values.join(" ")),
        (false, _) => String::new(),
    };
    match (arg.get_short(), arg.get_long()) {
        (Some(s), Some(l)) => format!("`-{s}, --{l}{value}`"),
        (None, Some(l)) => format!("`--{l}{value}`"),
        (Some(s), None) => format!("`-{s}{value}`"),
        (None, None) => format!("`{}`", value.trim()),
    }
}

/// The argument's help, its default and its choices, on one line.
fn help(arg: &Arg) -> String {
    let text = arg
        .get_long_help()
        .or(arg.get_help())
        .map(|h| h.to_string().replace('\n', " "))
        .unwrap_or_default();
    let text = text.trim();
    let mut text = match text.is_empty() || text.ends_with('.') {
        true => text.to_string(),
        false => format!("{text}."),
    };
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .filter(|v| !v.is_empty())
        .collect();
    if !defaults.is_empty() && arg.get_action().takes_values() {
        text.push_str(&format!(" Default: `{}`.", defaults.join(",")));
    }
    if let Some(env) = arg.get_env() {
        text.push_str(&format!(" Environment: `{}`.", env.to_string_lossy()));
    }
    text.trim().to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_command_and_its_options_are_listed() {
        let text = super::markdown();
        for expected in [
            "### `taskyard submit`",
            "### `taskyard dev`",
            "`--db-path <FILE>`",
        ] {
            assert!(text.contains(expected), "{expected} missing from:\n{text}");
        }
    }
}
