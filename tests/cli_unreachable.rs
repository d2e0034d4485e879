//! The real `taskyard` binary against an address nothing listens on.

use std::net::TcpListener;
use std::process::Command;

/// A local port that was free a moment ago: bound, then released.
fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local addr").port()
}

#[test]
fn unreachable_coordinator_exits_2_with_one_line_naming_the_address() {
    let port = closed_port();
    let addr = format!("127.0.0.1:{port}");
    let output = Command::new(env!("CARGO_BIN_EXE_taskyard"))
        .args(["--coordinator", &addr, "submit", "echo"])
        .args(["--payload", r#"{"message":"hi"}"#])
        .env_remove("TASKYARD_COORDINATOR")
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("run taskyard");

    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "stderr: {stderr}");
    assert!(output.stdout.is_empty(), "nothing on stdout");
    assert_eq!(stderr.lines().count(), 1, "exactly one line: {stderr:?}");
    let expected = format!("taskyard: cannot reach coordinator at {addr}:");
    assert!(stderr.starts_with(&expected), "{stderr:?}");
    assert!(!stderr.contains("panicked"), "{stderr:?}");
    assert!(!stderr.contains("backtrace"), "{stderr:?}");
}
