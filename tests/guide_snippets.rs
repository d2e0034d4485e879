//! Every block of the guide (docs/guide/*.md) that a reader would paste
//! is executed here, as written:
//!
//! - `sh` blocks run through bash (`common::shell`), one command after
//!   another, against a live `taskyard dev` (the real binary), with
//!   `taskyard`, `taskyard-worker` and `taskyard-coordinator` the built
//!   binaries first on `PATH`; a block that starts coordinators of its own
//!   gets ports of its own instead (and a throwaway PostgreSQL when it
//!   names one). Every command must exit 0 unless `EXPECTED_EXIT` says
//!   otherwise, and print the `# taskyard: ...` line shown under it.
//! - `toml` blocks load with the real config loader of the file their
//!   first line names (`# coordinator.toml`, `# worker.toml`), and are
//!   saved under that name for the commands of the page that use them.
//! - `yaml` (the Prometheus scrape config) passes `promtool check config`.
//! - `rust` blocks are compiled by `cargo test --doc` (`GuideDoctests` in
//!   src/lib.rs); `python` blocks run with the project's Python.
//! - `text` and `console` blocks are output, synopses and sessions shown
//!   with their output: not run.
//!
//! The guide's addresses are its defaults (7400, 7401, 7480, ...); here
//! free ports stand for them (see `site`). What is not run is listed in
//! `SKIPPED` with the reason, and what serves until stopped in
//! `SERVES_UNTIL_STOPPED`; a `cargo` command runs in the repository.
//! Beyond exit statuses, `site::documented_effects` checks what some
//! blocks say they do (curl's answers, an `exec` job's progress, a job
//! surviving a takeover).

mod common;
#[path = "guide_snippets/site.rs"]
mod site;

use common::dev::Dev;
use common::external::{self, Package};
use common::markdown::{blocks, Block};
use common::shell::{commands, Ran, Ready, ShellCommand, Step};
use site::Site;
use std::path::Path;
use std::time::Duration;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A page of the guide: its path and its text.
macro_rules! page {
    ($name:literal) => {
        (
            concat!("docs/guide/", $name),
            include_str!(concat!("../docs/guide/", $name)),
        )
    };
}

/// Every page of the guide.
const PAGES: &[(&str, &str)] = &[
    page!("README.md"),
    page!("cli.md"),
    page!("configuration.md"),
    page!("flow-control.md"),
    page!("high-availability.md"),
    page!("http-and-metrics.md"),
    page!("jobs.md"),
    page!("operations.md"),
    page!("protocol.md"),
    page!("schedules.md"),
    page!("security.md"),
    page!("workers.md"),
];

/// The info strings a guide block may have. Any other (or none) fails
/// `every_block_says_what_it_is`, so a new block is run or marked as
/// output on purpose.
const KINDS: &[&str] = &[
    "sh", "bash", "toml", "yaml", "rust", "python", "text", "console",
];

/// Commands that are not run (matched by how they start), and why.
const SKIPPED: &[(&str, &str)] = &[
    (
        "sudo apt-get install -y postgresql",
        "installs and starts the system's PostgreSQL as root; the block gets a throwaway \
         cluster that has the user and database its URL names",
    ),
    (
        "sudo -u postgres psql",
        "creates that user and database, which the throwaway cluster has already",
    ),
    (
        "cargo build --release",
        "cargo test has built the binaries, and they are first on PATH",
    ),
    (
        "cargo install cargo-fuzz",
        "downloads and builds cargo-fuzz: `the_fuzzing_commands_name_a_real_target` checks \
         what the block names instead",
    ),
    (
        "cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run",
        "a sanitizer build and a minute of fuzzing, for a person to run, not every cargo test",
    ),
];

/// Programs that serve until stopped. A reader starts them in a terminal
/// of their own and goes on once they are up; the test starts them in the
/// background (as the guide's own `&` lines do), waits until they are up
/// (a coordinator listens on its client port, a worker logs
/// `registered`) and kills them when the block ends.
const SERVES_UNTIL_STOPPED: &[&str] = &[
    "taskyard-coordinator",
    "taskyard-worker",
    "cargo run --example",
];

/// Commands the guide shows failing (matched by how they start), with
/// the exit status it gives.
const EXPECTED_EXIT: &[(&str, i32)] = &[("taskyard schedule create bad ", 3)];

/// Programs from outside the project that blocks run, with the package
/// that provides each: a block naming one that is missing is skipped with
/// a note saying so (a failure under `TASKYARD_REQUIRE_EXTERNAL=1`).
const OUTSIDE_PROGRAMS: &[(&str, Package)] = &[
    ("curl", Package::Debian("curl")),
    ("python3", Package::Debian("python3")),
];

/// Longest one block may take (the high-availability walkthrough waits
/// out a 10 s leader lease; `cargo run --example` may have to build).
const BLOCK_TIMEOUT: Duration = Duration::from_secs(120);

fn all_blocks() -> Vec<Block> {
    PAGES
        .iter()
        .flat_map(|(file, text)| blocks(file, text))
        .collect()
}

/// True (after the note) when `block` names an outside program that is
/// not installed.
fn lacks_a_program(block: &Block) -> bool {
    OUTSIDE_PROGRAMS.iter().any(|(program, package)| {
        block.text.contains(program) && external::program(&[program], *package).is_none()
    })
}

fn is_shell(block: &Block) -> bool {
    block.info == "sh" || block.info == "bash"
}

/// `text` padded with spaces, so that `" PROGRAM "` finds whole words.
fn words(text: &str) -> String {
    format!(
        " {} ",
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    )
}

fn starts_coordinators(block: &Block) -> bool {
    words(&block.text).contains(" taskyard-coordinator ")
}

fn skipped(command: &ShellCommand) -> Option<&'static str> {
    SKIPPED
        .iter()
        .find(|(start, _)| command.text.trim_start().starts_with(start))
        .map(|(_, why)| *why)
}

/// `command` as the test runs it: its addresses the site's, in the
/// background if it serves until stopped, and waited for until it is up;
/// a `cargo` command in the repository's directory, where a reader runs
/// cargo.
fn step(site: &Site, command: &ShellCommand) -> Step {
    let text = site.substitute(&command.text);
    let (code, comment) = split_comment(&text);
    let serves = SERVES_UNTIL_STOPPED
        .iter()
        .any(|program| words(code).contains(&format!(" {program} ")));
    let (code, background) = match code.trim_end().strip_suffix('&') {
        Some(code) if !code.ends_with('&') => (code.trim_end(), true),
        _ => (code.trim_end(), false),
    };
    let code = match code.starts_with("cargo ") {
        true => format!("(cd '{ROOT}' && {code})"),
        false => code.to_string(),
    };
    let expect = EXPECTED_EXIT
        .iter()
        .find(|(start, _)| command.text.starts_with(start))
        .map_or(0, |(_, status)| *status);
    Step {
        ready: serves.then(|| readiness(site, &code)),
        text: match serves || background {
            true => format!("{code} & {comment}"),
            false => format!("{code} {comment}"),
        },
        expect,
    }
}

/// When a server a command starts is up: a coordinator listens on its
/// client port, a worker has logged `registered`.
fn readiness(site: &Site, code: &str) -> Ready {
    match words(code).contains(" taskyard-coordinator ") {
        true => Ready::Listening(client_port(site, code)),
        false => Ready::Logged("registered"),
    }
}

/// The port of `--client-listen` in a coordinator's command line, else
/// the one standing for the default, 7400.
fn client_port(site: &Site, code: &str) -> u16 {
    let mut args = code.split_whitespace();
    args.find(|a| *a == "--client-listen");
    args.next()
        .and_then(|addr| addr.rsplit_once(':'))
        .and_then(|(_, port)| port.parse().ok())
        .unwrap_or_else(|| site.port(7400))
}

/// A command line split before its trailing `# comment` (a `#` outside
/// quotes that starts a word).
fn split_comment(line: &str) -> (&str, &str) {
    let mut quote = None;
    let mut previous = ' ';
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '#') if previous.is_whitespace() => return line.split_at(i),
            _ => {}
        }
        previous = c;
    }
    (line, "")
}

/// Runs the shell block at `site`: Ok, or what failed, naming the block.
fn run_shell(site: &Site, block: &Block) -> Result<Vec<Ran>, String> {
    let all = commands(&block.text);
    let runnable: Vec<&ShellCommand> = all.iter().filter(|c| skipped(c).is_none()).collect();
    let steps: Vec<Step> = runnable.iter().map(|c| step(site, c)).collect();
    let started = std::time::Instant::now();
    let ran = site
        .shell(BLOCK_TIMEOUT)
        .run(&steps)
        .map_err(|e| format!("{}: {e}", block.name()))?;
    eprintln!(
        "ran {}: {} commands in {:.1?}",
        block.name(),
        ran.len(),
        started.elapsed()
    );
    for command in &all {
        if let Some(why) = skipped(command) {
            eprintln!("  not run: `{}`: {why}", command.text);
        }
    }
    for (command, ran) in runnable.iter().zip(&ran) {
        for shown in command
            .comments
            .iter()
            .filter(|c| c.starts_with("taskyard:"))
        {
            if !ran.stderr.contains(shown.as_str()) {
                return Err(format!(
                    "{}: `{}` did not print what the guide shows under it, {shown:?}; \
                     it printed:\n{}",
                    block.name(),
                    command.text,
                    ran.stderr
                ));
            }
        }
    }
    Ok(ran)
}

/// Saves a TOML block that names its file (`# worker.toml`) under that
/// name in the site's directory, as a reader would; the name.
fn save_toml(site: &Site, block: &Block) -> Option<String> {
    let name = block.first_line().strip_prefix("# ")?.trim().to_string();
    let path = site.dir().join(&name);
    std::fs::write(&path, site.substitute(&block.text)).expect("write the TOML block");
    Some(name)
}

#[test]
fn every_block_says_what_it_is() {
    for block in all_blocks() {
        assert!(
            KINDS.contains(&block.info.as_str()),
            "{}: info string {:?} is none of {KINDS:?}: `text` for output or a synopsis, \
             `console` for a session with its output, or the language it is in",
            block.name(),
            block.info
        );
    }
}

#[test]
fn every_page_is_listed_here_and_compiled_as_doctests() {
    let dir = Path::new(ROOT).join("docs/guide");
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .expect("docs/guide")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/guide/{name}"))
        .collect();
    on_disk.sort();
    let listed: Vec<String> = PAGES.iter().map(|(file, _)| file.to_string()).collect();
    assert_eq!(listed, on_disk, "PAGES lists every page of the guide");
    let lib = include_str!("../src/lib.rs");
    for (file, _) in PAGES {
        assert!(
            lib.contains(&format!("include_str!(\"../{file}\")")),
            "src/lib.rs compiles {file}'s Rust blocks (GuideDoctests)"
        );
    }
}

#[test]
fn every_rule_here_matches_a_command_of_the_guide() {
    let all: Vec<ShellCommand> = all_blocks()
        .iter()
        .filter(|b| is_shell(b))
        .flat_map(|b| commands(&b.text))
        .collect();
    let starts = |start: &str| all.iter().any(|c| c.text.trim_start().starts_with(start));
    for (start, _) in SKIPPED {
        assert!(starts(start), "SKIPPED: no command starts {start:?}");
    }
    for (start, _) in EXPECTED_EXIT {
        assert!(starts(start), "EXPECTED_EXIT: no command starts {start:?}");
    }
    for program in SERVES_UNTIL_STOPPED {
        assert!(
            all.iter()
                .any(|c| words(&c.text).contains(&format!(" {program} "))),
            "SERVES_UNTIL_STOPPED: no command runs {program:?}"
        );
    }
}

#[test]
fn the_fuzzing_commands_name_a_real_target() {
    let fuzz = include_str!("../fuzz/Cargo.toml");
    assert!(fuzz.contains("name = \"frame_decoder\""), "{fuzz}");
    assert!(Path::new(ROOT)
        .join("fuzz/fuzz_targets/frame_decoder.rs")
        .is_file());
}

#[test]
fn toml_blocks_load_with_the_real_config_loaders() {
    let site = Site::new(None, None);
    for block in all_blocks().iter().filter(|b| b.info == "toml") {
        if lacks_a_program(block) {
            continue;
        }
        let name = save_toml(&site, block);
        let path = site.dir().join(name.as_deref().unwrap_or("?"));
        let loaded = match name.as_deref() {
            Some("coordinator.toml") => {
                taskyard::process::load_config(Some(&path), Default::default()).map(|_| ())
            }
            Some("worker.toml") => {
                taskyard::config::load(Some(&path), taskyard::worker::WorkerOptions::default())
                    .map(|_| ())
            }
            _ => panic!(
                "{}: start a TOML block with `# coordinator.toml` or `# worker.toml`, \
                 so readers and this test know which file it is",
                block.name()
            ),
        };
        if let Err(e) = loaded {
            panic!("{}: does not load: {e}", block.name());
        }
    }
}

#[test]
fn the_prometheus_config_passes_promtool() {
    let Some(promtool) = external::program(&["promtool"], Package::Debian("prometheus")) else {
        return;
    };
    let site = Site::new(None, None);
    for block in all_blocks().iter().filter(|b| b.info == "yaml") {
        let path = site.dir().join("prometheus.yml");
        std::fs::write(&path, site.substitute(&block.text)).expect("write");
        let out = std::process::Command::new(&promtool)
            .args(["check", "config"])
            .arg(&path)
            .output()
            .expect("run promtool");
        assert!(
            out.status.success(),
            "{}: promtool check config: {}{}",
            block.name(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn blocks_run_against_taskyard_dev() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dev = Dev::start(dir.path());
    let site = Site::new(Some(&dev), None);
    let mut failures = Vec::new();
    for (file, text) in PAGES {
        let _helper = site::page_helper(&site, file);
        for block in blocks(file, text) {
            let outcome = match block.info.as_str() {
                "toml" => {
                    save_toml(&site, &block);
                    continue;
                }
                _ if lacks_a_program(&block) => continue,
                "sh" | "bash" if !starts_coordinators(&block) => run_shell(&site, &block)
                    .and_then(|ran| site::documented_effects(&site, &block, &ran)),
                "python" => run_python(&site, &block),
                _ => continue,
            };
            failures.extend(outcome.err());
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A Python block, run as one file with the project's Python.
fn run_python(site: &Site, block: &Block) -> Result<(), String> {
    let Some(python) = common::python::python() else {
        return Ok(());
    };
    let file = site.dir().join(format!("block-{}.py", block.line));
    std::fs::write(&file, site.substitute(&block.text)).expect("write");
    let step = Step {
        text: format!("'{}' '{}'", python.display(), file.display()),
        expect: 0,
        ready: None,
    };
    site.shell(BLOCK_TIMEOUT)
        .run(&[step])
        .map_err(|e| format!("{}: {e}", block.name()))?;
    eprintln!("ran {} with {}", block.name(), python.display());
    Ok(())
}

#[test]
fn blocks_that_start_coordinators_run_on_ports_of_their_own() {
    let own: Vec<Block> = all_blocks()
        .into_iter()
        .filter(|b| is_shell(b) && starts_coordinators(b))
        .collect();
    let runs: Vec<_> = own
        .into_iter()
        .map(|block| std::thread::spawn(move || run_own(&block)))
        .collect();
    let failures: Vec<String> = runs
        .into_iter()
        .filter_map(|run| run.join().expect("the block's thread").err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A block that starts coordinators: a site of its own, with the
/// PostgreSQL its URL names when it names one.
fn run_own(block: &Block) -> Result<(), String> {
    if lacks_a_program(block) {
        return Ok(());
    }
    let postgres = match site::PostgresUrl::in_block(&block.text) {
        Some(url) => match common::postgres::start() {
            Some(cluster) => Some((url, cluster)),
            None => return Ok(()),
        },
        None => None,
    };
    if let Some((url, cluster)) = &postgres {
        url.provide(cluster);
    }
    let site = Site::new(None, postgres.as_ref().map(|(_, c)| c.addr()));
    let ran = run_shell(&site, block)?;
    site::documented_effects(&site, block, &ran)
}
