//! The README's five-minute walkthrough runs as written: `taskyard dev`
//! (the real binary, on ports of its own), then the "Terminal 2" block
//! through bash, with `taskyard` the built binary and the address given
//! by `TASKYARD_COORDINATOR`. Only `taskyard top`, which runs until
//! Ctrl-C, is left out.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// The first ```sh block after `marker` in the README.
fn block_after(readme: &str, marker: &str) -> String {
    let from = readme.find(marker).expect("the marker is in the README");
    let start = readme[from..].find("```sh\n").expect("a sh block follows") + from + 6;
    let end = readme[start..].find("```").expect("the block ends") + start;
    readme[start..end].to_string()
}

#[test]
fn the_walkthrough_runs_as_written_against_taskyard_dev() {
    let readme = include_str!("../README.md");
    let walkthrough = block_after(readme, "Terminal 2");
    let script: String = walkthrough
        .lines()
        .filter(|l| !l.starts_with("alias taskyard=") && !l.starts_with("taskyard top"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(script.contains("taskyard submit echo"), "{script}");

    let dir = tempfile::tempdir().expect("temp dir");
    let client_port = free_port();
    let mut dev = Command::new(env!("CARGO_BIN_EXE_taskyard"))
        .args(["dev", "--db-path"])
        .arg(dir.path().join("dev.db"))
        .args(["--client-port", &client_port.to_string()])
        .args(["--worker-port", "0", "--http-port", "0"])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start taskyard dev");
    let stdout = dev.stdout.take().expect("stdout");
    let mut banner = String::new();
    let mut lines = BufReader::new(stdout).lines();
    let started = Instant::now();
    while !banner.contains("cluster ready") && started.elapsed() < Duration::from_secs(30) {
        match lines.next() {
            Some(Ok(line)) => banner.push_str(&line),
            _ => break,
        }
    }
    assert!(
        banner.contains("cluster ready"),
        "taskyard dev said: {banner}"
    );

    let bin = env!("CARGO_BIN_EXE_taskyard");
    let prelude = format!("taskyard() {{ \"{bin}\" \"$@\"; }}\n");
    let run = Command::new("bash")
        .arg("-c")
        .arg(prelude + &script)
        .env("TASKYARD_COORDINATOR", format!("127.0.0.1:{client_port}"))
        .current_dir(dir.path())
        .output()
        .expect("run bash");
    // SAFETY: a plain kill(2) of our own child process.
    unsafe { libc::kill(dev.id() as i32, libc::SIGTERM) };
    let _ = dev.wait();

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
