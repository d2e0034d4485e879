//! A `taskyard-worker` process that a coordinator refuses for good (wrong
//! token, TLS or registration mismatch) exits non-zero with one line naming
//! the cause and the address; one that cannot reach a leader keeps trying,
//! one line per attempt.

mod common;

use common::processes::append_log;
use common::standby::{leader_at, FakeStandby};
use common::tls::{certificates, certificates_for};
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::Duration;
use taskyard::config::CoordinatorConfig;

const WORKER_TOKEN: &str = "worker-s3cret";
/// How long a refused worker may take to exit.
const EXIT_WITHIN: Duration = Duration::from_secs(10);

/// A `taskyard-worker` process whose stdout and stderr go to one file;
/// killed on drop if still running.
struct WorkerProcess {
    child: Child,
    log: PathBuf,
}

impl WorkerProcess {
    /// Starts `taskyard-worker` for `coordinator` (a list) with `args`, in
    /// the default text log format a user sees, and no token from the
    /// environment.
    fn start(dir: &Path, coordinator: &str, args: &[&str]) -> WorkerProcess {
        let log = dir.join(format!("worker-{}.log", uuid::Uuid::new_v4().simple()));
        let out = append_log(&log);
        let err = out.try_clone().expect("clone log");
        let child = Command::new(env!("CARGO_BIN_EXE_taskyard-worker"))
            .args([
                "--coordinator",
                coordinator,
                "--reconnect-max-millis",
                "100",
            ])
            .args(args)
            .env_remove("TASKYARD_TOKEN")
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("start taskyard-worker");
        WorkerProcess { child, log }
    }

    fn wait_for_exit(&mut self) -> ExitStatus {
        let mut status = None;
        wait_until("the refused worker to exit", EXIT_WITHIN, || {
            status = self.child.try_wait().expect("try_wait");
            status.is_some()
        });
        status.expect("exited")
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.log).expect("read worker output")
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs a worker that must be refused: asserts it exits non-zero within
/// `EXIT_WITHIN` and that exactly one line of its output mentions `cause`,
/// naming `addr`; returns that line.
fn expect_refused(dir: &Path, coordinator: &str, args: &[&str], addr: &str, cause: &str) -> String {
    let mut worker = WorkerProcess::start(dir, coordinator, args);
    let status = worker.wait_for_exit();
    let output = worker.output();
    assert!(!status.success(), "exited {status}: {output}");
    let lines: Vec<&str> = output.lines().filter(|l| l.contains(cause)).collect();
    assert_eq!(lines.len(), 1, "one line naming {cause:?}:\n{output}");
    assert!(lines[0].contains(addr), "the line names {addr}:\n{output}");
    assert_no_empty_fields(&output);
    lines[0].to_string()
}

/// The old loop logged every failure a second time with `coordinator: ,`.
fn assert_no_empty_fields(output: &str) {
    for line in output.lines() {
        assert!(
            !line.contains(": ,") && !line.trim_end().ends_with(':'),
            "empty field in {line:?}"
        );
    }
}

fn with_worker_token(c: &mut CoordinatorConfig) {
    c.worker_token = WORKER_TOKEN.into();
}

#[test]
fn a_worker_with_a_wrong_or_missing_token_exits_with_one_line_naming_the_cause() {
    let cluster = Cluster::start_configured(with_worker_token);
    let dir = tempfile::tempdir().expect("dir");
    let addr = cluster.coordinator().worker_addr.to_string();
    for args in [&["--token", "guess"][..], &[]] {
        let line = expect_refused(dir.path(), &addr, args, &addr, "unauthorized");
        assert!(
            line.starts_with("taskyard-worker: ") && line.contains("token"),
            "{line}"
        );
    }
    assert!(
        cluster.client().workers().expect("workers").is_empty(),
        "no worker registered"
    );
}

#[test]
fn an_unauthorized_answer_from_a_live_coordinator_ends_the_worker_despite_other_addresses() {
    let cluster = Cluster::start_configured(with_worker_token);
    let dir = tempfile::tempdir().expect("dir");
    let leader = cluster.coordinator().worker_addr;
    let standby = FakeStandby::for_workers(Some(leader_at(None, Some(leader))));
    let down = free_port();
    let addrs = format!("{down},{},{leader}", standby.addr);
    let leader = leader.to_string();
    expect_refused(
        dir.path(),
        &addrs,
        &["--token", "guess"],
        &leader,
        "unauthorized",
    );
}

#[test]
fn tls_mismatches_end_the_worker_naming_tls() {
    let certs = tempfile::tempdir().expect("dir");
    let other = tempfile::tempdir().expect("dir");
    let (ca, cert, key) = certificates(certs.path());
    let (other_ca, _, _) = certificates_for(other.path(), &["localhost"]);
    let tls = Cluster::start_configured(|c| {
        c.tls_cert = cert.clone();
        c.tls_key = key.clone();
    });
    let plain = Cluster::start_configured(|_| {});
    let dir = tempfile::tempdir().expect("dir");
    let tls_addr = tls.coordinator().worker_addr.to_string();
    let plain_addr = plain.coordinator().worker_addr.to_string();
    let (ca, other_ca) = (path_text(&ca), path_text(&other_ca));
    let name = ["--tls-server-name", "localhost"];
    let plain_worker: &[&str] = &[];
    let untrusted = [&["--tls-ca", other_ca.as_str()][..], &name].concat();
    let tls_worker = [&["--tls-ca", ca.as_str()][..], &name].concat();
    expect_refused(dir.path(), &tls_addr, plain_worker, &tls_addr, "TLS");
    expect_refused(dir.path(), &tls_addr, &untrusted, &tls_addr, "TLS");
    expect_refused(dir.path(), &plain_addr, &tls_worker, &plain_addr, "TLS");
}

#[test]
fn a_refused_registration_ends_the_worker() {
    let cluster = Cluster::start_configured(|c| c.max_worker_capacity = 2);
    let dir = tempfile::tempdir().expect("dir");
    let addr = cluster.coordinator().worker_addr.to_string();
    let line = expect_refused(
        dir.path(),
        &addr,
        &["--capacity", "4"],
        &addr,
        "registration refused",
    );
    assert!(line.contains("max-worker-capacity"), "{line}");
}

#[test]
fn a_worker_on_the_client_port_exits_naming_the_listener() {
    let cluster = Cluster::start_configured(|_| {});
    let dir = tempfile::tempdir().expect("dir");
    let addr = cluster.client_addr();
    expect_refused(dir.path(), &addr, &[], &addr, "wrong listener");
}

#[test]
fn a_standby_and_a_dead_address_are_retried_one_line_per_attempt() {
    let standby = FakeStandby::for_workers(None);
    let down = free_port();
    let dir = tempfile::tempdir().expect("dir");
    let addrs = format!("{},{down}", standby.addr);
    let worker = WorkerProcess::start(dir.path(), &addrs, &["--log-level", "info"]);
    let (standby_addr, down_addr) = (standby.addr.to_string(), down.to_string());
    wait_until("three rounds of attempts", EXIT_WITHIN, || {
        let output = worker.output();
        let lines = |text: &str, addr: &str| {
            output
                .lines()
                .filter(|l| l.contains(text) && l.contains(addr))
                .count()
        };
        lines("coordinator is a standby", &standby_addr) >= 3
            && lines("connection to coordinator failed", &down_addr) >= 3
    });
    let mut worker = worker;
    assert!(
        worker.child.try_wait().expect("try_wait").is_none(),
        "still trying:\n{}",
        worker.output()
    );
    let output = worker.output();
    assert_no_empty_fields(&output);
    let attempts = output
        .lines()
        .filter(|l| l.contains("standby") || l.contains("failed"));
    for line in attempts {
        assert!(
            line.contains(&standby_addr) || line.contains(&down_addr),
            "an attempt's line names its address: {line}"
        );
    }
}

fn path_text(path: &Path) -> String {
    path.to_str()
        .expect("temporary paths are UTF-8")
        .to_string()
}

/// One misconfigured coordinator (here: it wants a token this worker does
/// not have) does not stop a worker that another address accepts: the
/// worker registers there and says once, as a warning, who refused it.
#[test]
fn a_refusal_from_one_address_does_not_stop_a_worker_another_accepts() {
    let strict = Cluster::start_configured(with_worker_token);
    let open = Cluster::start(0, 1);
    let dir = tempfile::tempdir().expect("dir");
    let refusing = strict.coordinator().worker_addr.to_string();
    let accepting = open.coordinator().worker_addr.to_string();
    let addrs = format!("{refusing},{accepting}");
    let mut worker = WorkerProcess::start(
        dir.path(),
        &addrs,
        &["--worker-id", "tolerant", "--capacity", "1"],
    );
    let mut client = open.client();
    wait_until(
        "the worker to register with the accepting coordinator",
        EXIT_WITHIN,
        || common::jobs::is_listed(&mut client, "tolerant"),
    );
    assert!(
        worker.child.try_wait().expect("try_wait").is_none(),
        "still running: {}",
        worker.output()
    );
    wait_until("the warning naming who refused", EXIT_WITHIN, || {
        let output = worker.output();
        output.contains("another accepted it") && output.contains(&refusing)
    });
}
