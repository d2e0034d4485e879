//! The `more:` line `list` ends a page with: the command that lists the
//! next page. It repeats every filter and option the listing was made with
//! (a cursor only says where to continue, not what was asked), so pasting it
//! continues the same listing.

use crate::cli::ListArgs;
use crate::protocol::PageCursor;

/// `--limit`'s default; a hint names the limit only when it differs.
pub const DEFAULT_LIST_LIMIT: u32 = 50;

/// What, besides `list`'s own flags, the next page must be asked with.
#[derive(Debug, Clone, Default)]
pub struct HintGlobals<'a> {
    /// `--coordinator`, when it was given (not defaulted).
    pub coordinator: Option<&'a str>,
    pub json: bool,
}

/// `taskyard [--coordinator A] list [filters…] --cursor NEXT [--json]`,
/// each value quoted for a POSIX shell where it needs it.
pub fn next_page_command(args: &ListArgs, globals: &HintGlobals, next: &PageCursor) -> String {
    let mut words: Vec<String> = vec!["taskyard".into()];
    if let Some(coordinator) = globals.coordinator {
        words.extend(["--coordinator".into(), shell_quote(coordinator)]);
    }
    words.push("list".into());
    words.extend(filter_words(args));
    words.extend(["--cursor".into(), next.to_string()]);
    if globals.json {
        words.push("--json".into());
    }
    words.join(" ")
}

/// The filter and order flags of `args`, in `--help` order (no cursor).
fn filter_words(args: &ListArgs) -> Vec<String> {
    let mut words = Vec::new();
    let mut flag = |name: &str, value: String| words.extend([name.to_string(), value]);
    if let Some(state) = args.state {
        flag("--state", state.as_str().to_ascii_lowercase());
    }
    if let Some(task_type) = &args.task_type {
        flag("--type", shell_quote(task_type));
    }
    if args.limit != DEFAULT_LIST_LIMIT {
        flag("--limit", args.limit.to_string());
    }
    if let Some(priority) = args.priority {
        flag("--priority", priority.to_string());
    }
    if let Some(prefix) = &args.search {
        flag("--search", prefix.to_string());
    }
    if args.oldest_first {
        words.push("--oldest-first".into());
    }
    words
}

/// `text` as one POSIX shell word: unchanged when it holds only characters
/// no shell treats specially, else in single quotes (a `'` inside written
/// `'\''`).
pub fn shell_quote(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_.,:/@%+=".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        return text.to_string();
    }
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{parse, Command};
    use crate::protocol::JobId;

    fn list_args(args: &[&str]) -> ListArgs {
        let words = ["taskyard", "list"].into_iter().chain(args.iter().copied());
        match parse::try_parse_from(words).expect("valid").command {
            Command::List(list) => list,
            other => panic!("parsed as {other:?}"),
        }
    }

    fn cursor() -> PageCursor {
        format!("3.4.{}", JobId::mint()).parse().expect("a cursor")
    }

    #[test]
    fn the_hint_repeats_every_filter_and_option() {
        let args = list_args(&[
            "--state",
            "retry-wait",
            "--type",
            "resize image",
            "--limit",
            "2",
            "--priority",
            "HIGH",
            "--search",
            "0193AB",
            "--oldest-first",
        ]);
        let next = cursor();
        let globals = HintGlobals {
            coordinator: Some("10.0.0.1:7400,10.0.0.2:7400"),
            json: true,
        };
        assert_eq!(
            next_page_command(&args, &globals, &next),
            format!(
                "taskyard --coordinator 10.0.0.1:7400,10.0.0.2:7400 list --state retry_wait \
                 --type 'resize image' --limit 2 --priority high --search 0193ab \
                 --oldest-first --cursor {next} --json"
            )
        );
    }

    #[test]
    fn the_hint_parses_back_to_the_same_listing() {
        let args = list_args(&["--state", "failed", "--type", "echo", "--limit", "7"]);
        let next = cursor();
        let hint = next_page_command(&args, &HintGlobals::default(), &next);
        let again = list_args(&hint.split(' ').skip(2).collect::<Vec<_>>());
        assert_eq!(again.state, args.state);
        assert_eq!(again.task_type, args.task_type);
        assert_eq!(again.limit, 7);
        assert_eq!(again.cursor.map(|c| c.to_string()), Some(next.to_string()));
    }

    #[test]
    fn a_plain_listing_hint_names_only_the_cursor() {
        let next = cursor();
        let hint = next_page_command(&list_args(&[]), &HintGlobals::default(), &next);
        assert_eq!(hint, format!("taskyard list --cursor {next}"));
    }

    #[test]
    fn shell_quote_leaves_plain_words_and_quotes_the_rest() {
        assert_eq!(shell_quote("echo"), "echo");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote("$HOME"), "'$HOME'");
        assert_eq!(shell_quote(""), "''");
    }
}
