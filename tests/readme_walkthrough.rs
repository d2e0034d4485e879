//! The README's five-minute walkthrough runs as written: `taskyard dev`
//! (the real binary, on ports of its own), then the "Terminal 2" block
//! through bash, with `taskyard` the built binary and the address given
//! by `TASKYARD_COORDINATOR`. Only `taskyard top`, which runs until
//! Ctrl-C, is left out.

mod common;

use common::dev::Dev;
use common::markdown::block_after;
use std::process::Command;

#[test]
fn the_walkthrough_runs_as_written_against_taskyard_dev() {
    let readme = include_str!("../README.md");
    let walkthrough = block_after("README.md", readme, "Terminal 2", "sh");
    let script: String = walkthrough
        .lines()
        .filter(|l| !l.starts_with("alias taskyard=") && !l.starts_with("taskyard top"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(script.contains("taskyard submit echo"), "{script}");

    let dir = tempfile::tempdir().expect("temp dir");
    let dev = Dev::start(dir.path());

    let bin = env!("CARGO_BIN_EXE_taskyard");
    let prelude = format!("taskyard() {{ \"{bin}\" \"$@\"; }}\n");
    let run = Command::new("bash")
        .arg("-c")
        .arg(prelude + &script)
        .env("TASKYARD_COORDINATOR", dev.client.to_string())
        .current_dir(dir.path())
        .output()
        .expect("run bash");
    drop(dev);

    let out = String::from_utf8_lossy(&run.stdout);
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        out.contains("hello"),
        "the echo job's result:\n{out}\n{err}"
    );
    assert!(
        out.contains("SUCCEEDED") || out.contains("succeeded"),
        "{out}\n{err}"
    );
    assert!(
        err.contains("payload.millis: expected a non-negative integer, got a string"),
        "the refusal the README quotes:\n{err}"
    );
    assert_eq!(
        run.status.code(),
        Some(3),
        "the last command's exit code, as the README says"
    );
}
