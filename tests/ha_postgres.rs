//! Coordinator nodes on one real (throwaway) PostgreSQL: one leads, the
//! other sends peers to it; a clean stop hands over at once; a leader
//! whose epoch is moved on behind its back steps down at its next commit
//! without sending the answers it held; `/api/cluster` shows both.

mod common;

use common::http::Http;
use std::time::{Duration, Instant};
use taskyard::client::Client;
use taskyard::config::{CoordinatorConfig, PostgresUrl, StoreKind};
use taskyard::process::node::NodeHandle;
use taskyard::protocol::{
    ClientRequest, CoordinatorToClient, CoordinatorToWorker, Hello, Role, SubmitAnswer,
    SubmitRequest, WorkerMessage,
};

/// Lease length in these tests: takeover after a crash within ~3 s, and
/// room on a loaded machine to tell a released lease (at once) from one
/// waited out.
const LEASE_MILLIS: u64 = 3000;

fn node_config(dir: &std::path::Path, name: &str, url: &str) -> CoordinatorConfig {
    CoordinatorConfig {
        node_name: name.to_string(),
        leader_lease_millis: LEASE_MILLIS,
        store: StoreKind::Postgres,
        postgres_url: PostgresUrl::new(url),
        history_readers: 1,
        ..common::coordinator_config(dir)
    }
}

fn start(dir: &std::path::Path, name: &str, url: &str) -> NodeHandle {
    NodeHandle::spawn_shared(node_config(dir, name, url), common::quiet_log()).expect("starts")
}

/// Waits until `node` serves (its client listener answers `Hello`).
fn wait_leading(node: &NodeHandle, within: Duration) -> Duration {
    common::raw_client::wait_serving(&node.client_addr.to_string(), within)
}

fn leader_named_by(node: &NodeHandle) -> Option<String> {
    common::raw_client::named_leader(&node.client_addr.to_string())
        .expect("expected NotLeader from a standby")
}

fn echo(message: &str) -> SubmitRequest {
    common::jobs::request("echo", serde_json::json!({ "message": message }))
}

fn eventually(within: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check() {
        assert!(Instant::now() < deadline, "not within {within:?}: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_standby_sends_peers_to_the_leader_and_takes_over_at_once_on_a_clean_stop() {
    let Some(pg) = common::postgres::start() else {
        return;
    };
    let url = pg.url();
    let dir = tempfile::tempdir().expect("temp dir");
    let a = start(dir.path(), "node-a", &url);
    wait_leading(&a, Duration::from_secs(10));
    let b = start(dir.path(), "node-b", &url);
    eventually(Duration::from_secs(3), "b names a", || {
        leader_named_by(&b).as_deref() == Some("node-a")
    });
    // A worker's Hello gets the worker-side NotLeader, naming the leader's
    // advertised worker address, and the connection is closed.
    let mut worker = std::net::TcpStream::connect(b.worker_addr).expect("worker port open");
    let hello = WorkerMessage::Hello(Hello::new(Role::Worker, None));
    std::io::Write::write_all(&mut worker, &common::raw_client::frame(&hello)).expect("hello");
    worker
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut header = [0u8; 4];
    std::io::Read::read_exact(&mut worker, &mut header).expect("an answer");
    let mut body = vec![0u8; u32::from_be_bytes(header) as usize];
    std::io::Read::read_exact(&mut worker, &mut body).expect("an answer");
    match rmp_serde::from_slice(&body).expect("a frame") {
        CoordinatorToWorker::NotLeader { leader: Some(l) } => {
            assert_eq!(l.node, "node-a");
            assert_eq!(l.worker, Some(a.worker_addr.to_string()));
        }
        other => panic!("expected NotLeader, got {other:?}"),
    }
    let mut rest = Vec::new();
    let closed = std::io::Read::read_to_end(&mut worker, &mut rest);
    assert!(closed.is_ok() && rest.is_empty(), "closed after NotLeader");

    let (http_a, http_b) = (
        Http::new(a.http_addr.expect("http")),
        Http::new(b.http_addr.expect("http")),
    );
    assert_eq!(http_b.get("/healthz").status, 200);
    let ready = http_b.get("/readyz");
    assert_eq!(ready.status, 503);
    assert!(
        ready.body.contains("standby: node-a leads"),
        "{}",
        ready.body
    );
    assert_eq!(http_b.get("/api/stats").json()["leader"]["node"], "node-a");
    assert_eq!(http_a.get("/readyz").status, 200);
    eventually(
        Duration::from_secs(3),
        "both members listed by both",
        || {
            [&http_a, &http_b].iter().all(|http| {
                let cluster = http.get("/api/cluster").json();
                cluster["members"].as_array().map_or(0, Vec::len) == 2
            })
        },
    );
    for http in [&http_a, &http_b] {
        let cluster = http.get("/api/cluster");
        assert_eq!(cluster.status, 200, "{}", cluster.body);
        let cluster = cluster.json();
        assert_eq!(cluster["leader"]["node"], "node-a", "{cluster}");
        assert_eq!(cluster["leader"]["epoch"], 1);
        assert_eq!(cluster["members"][0]["node"], "node-a", "leader first");
        assert_eq!(cluster["members"][0]["role"], "leader");
        assert_eq!(cluster["members"][1]["role"], "standby");
        assert!(cluster["leader"]["expires_in_ms"].as_i64().expect("ms") > 0);
    }
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_taskyard"))
            .args(args)
            .env_remove("TASKYARD_HTTP")
            .output()
            .expect("taskyard runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let b_http = b.http_addr.expect("http").to_string();
    let table = cli(&["cluster", "--http", &b_http]);
    println!("{table}");
    assert!(table.starts_with("leader: node-a (epoch 1)"), "{table}");
    assert!(table.contains("answered by: node-b (standby"), "{table}");
    assert!(table.contains("node-a  leader"), "{table}");
    assert!(table.contains("node-b  standby"), "{table}");
    let json: serde_json::Value =
        serde_json::from_str(&cli(&["cluster", "--json", "--http", &b_http])).expect("JSON");
    assert_eq!(json["leader"]["node"], "node-a");
    assert_eq!(json["members"].as_array().map(Vec::len), Some(2));
    let metrics = http_b.get("/metrics").body;
    assert!(metrics.contains("taskyard_leader 0"), "{metrics}");
    let metrics = http_a.get("/metrics").body;
    assert!(metrics.contains("taskyard_leader 1"), "{metrics}");
    assert!(metrics.contains("taskyard_leader_epoch 1"), "{metrics}");

    let stopping = Instant::now();
    a.stop();
    let stopped = stopping.elapsed();
    let took = stopped + wait_leading(&b, Duration::from_secs(5));
    println!("clean handover on PostgreSQL: stop took {stopped:?}, serving after {took:?} (lease {LEASE_MILLIS} ms)");
    assert!(
        took < Duration::from_millis(LEASE_MILLIS / 2),
        "a release wakes the standby at once: {took:?}"
    );
    let cluster = http_b.get("/api/cluster").json();
    assert_eq!(cluster["role"], "leader");
    assert_eq!(cluster["epoch"], 2);
    b.stop();
}

#[test]
fn a_leader_whose_epoch_moved_on_steps_down_at_its_next_commit_and_sends_nothing_it_held() {
    let Some(pg) = common::postgres::start() else {
        return;
    };
    let url = pg.url();
    let dir = tempfile::tempdir().expect("temp dir");
    let a = start(dir.path(), "node-a", &url);
    // A bound on start-up, not a measurement: generous for a loaded machine.
    wait_leading(&a, Duration::from_secs(30));
    let mut client = Client::connect(&a.client_addr.to_string()).expect("connects");
    let accepted = client
        .submit(echo("before"))
        .expect("submitted while leading");
    assert!(
        matches!(accepted, SubmitAnswer::Accepted { .. }),
        "{accepted:?}"
    );

    let mut sql = ::postgres::Client::connect(&url, ::postgres::NoTls).expect("connect");
    sql.execute(
        "UPDATE taskyard.leader SET epoch = epoch + 1 WHERE id = 1",
        &[],
    )
    .expect("bump");
    let mut request = echo("held");
    request.idempotency_key = Some("held".into());
    // Raw frames: the client library would send a keyed submission again
    // after the connection closed (and a later term would accept it).
    let mut raw = common::raw_client::connect(&a.client_addr.to_string());
    let hello = common::raw_client::read_frame(&mut raw, Duration::from_secs(5));
    assert!(
        matches!(hello, Some(CoordinatorToClient::Hello(_))),
        "{hello:?}"
    );
    std::io::Write::write_all(
        &mut raw,
        &common::raw_client::request_frame(1, ClientRequest::Submit(request)),
    )
    .expect("send the submission");
    let answer = common::raw_client::read_frame(&mut raw, Duration::from_secs(10));
    assert!(
        !matches!(answer, Some(CoordinatorToClient::Response { .. })),
        "the answer held behind the fenced commit is never sent: {answer:?}"
    );
    drop(client);
    let stored: i64 = sql
        .query_one(
            "SELECT count(*) FROM taskyard.jobs WHERE idempotency_key = 'held'",
            &[],
        )
        .expect("count")
        .get(0);
    assert_eq!(stored, 0, "nothing of the fenced batch was written");
    assert!(a.view.term().is_none(), "stepped down");
    let reason = a.view.read().last_step_down.clone().unwrap_or_default();
    println!("stepped down: {reason}");
    assert!(
        reason.contains("fenced") || reason.contains("refused"),
        "{reason}"
    );
    // Nobody else leads: once the lease row expires, a leads again at a
    // new epoch, and the job accepted before is still there.
    wait_leading(&a, Duration::from_secs(5));
    assert_eq!(a.view.term().expect("leads").epoch, 3);
    a.stop();
}

/// A real `taskyard-coordinator` process on PostgreSQL.
struct Process {
    child: std::process::Child,
    client: std::net::SocketAddr,
    http: std::net::SocketAddr,
    log: std::path::PathBuf,
}

impl Process {
    fn start(dir: &std::path::Path, name: &str, url: &str) -> Process {
        let (client, worker, http) = (
            common::free_port(),
            common::free_port(),
            common::free_port(),
        );
        let log = dir.join(format!("{name}.log"));
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_taskyard-coordinator"))
            .args(["--store", "postgres", "--node-name", name])
            .args(["--leader-lease-millis", &LEASE_MILLIS.to_string()])
            .args(["--client-listen", &client.to_string()])
            .args(["--worker-listen", &worker.to_string()])
            .args(["--http-listen", &http.to_string()])
            .args(["--history-readers", "1"])
            .env("TASKYARD_POSTGRES_URL", url)
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("taskyard-coordinator starts");
        Process {
            child,
            client,
            http,
            log,
        }
    }

    fn leads(&self) -> bool {
        common::raw_client::serves(&self.client.to_string())
    }

    fn wait_leading(&self, within: Duration) -> Duration {
        let started = Instant::now();
        while !self.leads() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            assert!(
                started.elapsed() < within,
                "did not lead within {within:?}:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        started.elapsed()
    }

    fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }

    /// Its exit code once it exits; fails (after SIGKILL) if it has not
    /// within 20 s, so a stop that hangs fails the test instead of CI.
    fn wait_exit(&mut self) -> Option<i32> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().expect("waits") {
                return status.code();
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("did not exit within 20 s of its signal");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn coordinator_processes_take_over_after_a_kill_and_hand_over_on_sigterm() {
    let Some(pg) = common::postgres::start() else {
        return;
    };
    let url = pg.url();
    let dir = tempfile::tempdir().expect("temp dir");
    let mut a = Process::start(dir.path(), "proc-a", &url);
    a.wait_leading(Duration::from_secs(15));
    let mut b = Process::start(dir.path(), "proc-b", &url);
    let http_b = Http::new(b.http);
    eventually(
        Duration::from_secs(10),
        "b serves HTTP as a standby",
        || std::net::TcpStream::connect(b.http).is_ok() && http_b.get("/readyz").status == 503,
    );
    assert!(!b.leads());

    // kill -9: nothing released; b takes over once the lease expires.
    a.signal(libc::SIGKILL);
    let killed = Instant::now();
    a.wait_exit();
    b.wait_leading(Duration::from_millis(LEASE_MILLIS + 2000));
    let takeover = killed.elapsed();
    println!("takeover after kill -9: {takeover:?} (lease {LEASE_MILLIS} ms)");
    assert_eq!(http_b.get("/readyz").status, 200);

    // A restarted process is a new node: a standby, never the old lease.
    let a2 = Process::start(dir.path(), "proc-a2", &url);
    eventually(Duration::from_secs(10), "a2 is a standby", || {
        std::net::TcpStream::connect(a2.http).is_ok()
            && Http::new(a2.http).get("/readyz").status == 503
    });
    // SIGTERM: b flushes, releases; a2 is woken by the notification.
    b.signal(libc::SIGTERM);
    let stopping = Instant::now();
    assert_eq!(b.wait_exit(), Some(0), "a clean stop exits 0");
    a2.wait_leading(Duration::from_millis(LEASE_MILLIS));
    let handover = stopping.elapsed();
    println!("handover after SIGTERM: {handover:?} (lease {LEASE_MILLIS} ms)");
    assert!(
        handover < Duration::from_millis(LEASE_MILLIS),
        "{handover:?}"
    );
    let cluster = Http::new(a2.http).get("/api/cluster").json();
    assert_eq!(cluster["leader"]["node"], "proc-a2");
    assert_eq!(cluster["leader"]["epoch"], 3);
}
