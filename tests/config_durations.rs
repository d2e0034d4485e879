//! Processes started from config files written in the one duration syntax
//! (`heartbeat-timeout = "6s"`, `--heartbeat-timeout 6s`) apply it: a real
//! coordinator and a real worker, each from its TOML file, run a job, and
//! the coordinator closes a silent connection after the handshake timeout
//! its file set.

mod common;

use common::processes::Killed;

use common::jobs::*;
use common::*;
use serde_json::json;
use std::io::Read;
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use taskyard::protocol::JobState;

/// Starts `binary --config FILE` for a file in `dir` holding `text`, and
/// any further `flags`.
fn start(binary: &str, dir: &Path, text: &str, flags: &[&str]) -> Child {
    let path = dir.join(format!(
        "{}.toml",
        binary.rsplit('/').next().unwrap_or("config")
    ));
    std::fs::write(&path, text).expect("write config");
    Command::new(binary)
        .arg("--config")
        .arg(&path)
        .args(flags)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("binary starts")
}

/// Everything a connection that never says Hello receives before it is closed.
fn read_until_closed(addr: &str) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut received = Vec::new();
    let _ = stream.read_to_end(&mut received);
    String::from_utf8_lossy(&received).to_string()
}

#[test]
fn a_coordinator_and_a_worker_configured_with_durations_run_a_job() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (client_addr, worker_addr) = (free_port(), free_port());
    let coordinator = format!(
        "client-listen = \"{client_addr}\"\n\
         worker-listen = \"{worker_addr}\"\n\
         http-listen = \"\"\n\
         db-path = \"{}\"\n\
         sqlite-preallocate-wal = false\n\
         handshake-timeout = \"300ms\"\n\
         sweep-interval = \"50ms\"\n\
         heartbeat-timeout = \"2s\"\n\
         retry-base = \"20ms\"\n\
         job-retention = \"7d\"\n\
         retain-finished-in-memory-for = \"1m\"\n\
         # the older spelling, still accepted beside the new one\n\
         retry-cap-millis = 200\n",
        dir.path().join("durations.db").display()
    );
    let worker = format!(
        "coordinator = \"{worker_addr}\"\n\
         worker-id = \"durations\"\n\
         heartbeat-interval = \"200ms\"\n\
         reconnect-max = \"200ms\"\n\
         coordinator-timeout = \"2s\"\n\
         drain-timeout = \"1s\"\n"
    );
    let flags = ["--client-idle-timeout", "1m"];
    let coordinator = start(
        env!("CARGO_BIN_EXE_taskyard-coordinator"),
        dir.path(),
        &coordinator,
        &flags,
    );
    let mut processes = Killed(vec![coordinator]);
    let addr = client_addr.to_string();
    let mut client = connect_within(&addr, Duration::from_secs(20));

    let closed = read_until_closed(&addr);
    assert!(
        closed.contains("handshake-timeout-millis (300)"),
        "closed after the file's handshake-timeout: {closed:?}"
    );

    let worker = start(
        env!("CARGO_BIN_EXE_taskyard-worker"),
        dir.path(),
        &worker,
        &[],
    );
    processes.0.push(worker);
    wait_until("the worker registers", Duration::from_secs(20), || {
        is_listed(&mut client, "durations")
    });
    let job = submit(
        &mut client,
        request("echo", json!({ "message": "six seconds" })),
    );
    let view = wait_for_job(&mut client, job, "succeeds", Duration::from_secs(20), |v| {
        v.state.is_terminal()
    });
    assert_eq!(view.state, JobState::Succeeded, "{view:?}");
}
