//! `taskyard bench takeover`: two `taskyard-coordinator` processes on one
//! PostgreSQL, in-process workers given both worker addresses, and a
//! stream of keyed no-op jobs. The leader is killed with SIGKILL (nothing
//! flushed, nothing released) `runs` times; each takeover is timed from
//! the kill to the other process answering a client's `Hello` as leader,
//! and to the stream's first job accepted after the kill. The killed
//! process is started again (a new node name, the same ports) as the next
//! standby.

use crate::cluster::{registry, StartTimes, NOOP};
use crate::postgres::BenchPostgres;
use crate::startup::median;
use crate::BenchError;
use serde::Serialize;
use slog::Logger;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use taskyard_client::client::Client;
use taskyard_client::clock::{Clock, SystemClock};
use taskyard_client::worker::WorkerConfig;
use taskyard_client::worker::WorkerHandle;
use taskyard_protocol::{ClientMessage, CoordinatorToClient, Hello, Role, SubmitRequest};

/// What `bench takeover` is parameterised by.
#[derive(Debug, Clone)]
pub struct TakeoverOptions {
    /// Leader kills.
    pub runs: u32,
    /// `leader-lease-millis` of both processes.
    pub lease_millis: u64,
    pub workers: u32,
    pub capacity: u32,
    /// Pause between the stream's submissions.
    pub interval: Duration,
    /// See `BenchPostgres::prepare`.
    pub postgres_url: Option<String>,
    /// The `taskyard-coordinator` program to run.
    pub coordinator_program: PathBuf,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct TakeoverReport {
    pub store: String,
    pub postgres: String,
    pub lease_millis: u64,
    /// Each kill: SIGKILL to the standby answering `Hello` as leader.
    pub takeover_ms: Vec<f64>,
    pub takeover_median_ms: f64,
    /// Each kill: SIGKILL to the stream's first job accepted after it.
    pub first_accepted_ms: Vec<f64>,
    pub first_accepted_median_ms: f64,
    /// Jobs the stream had accepted, and seen succeed, by the end.
    pub accepted: u64,
    pub succeeded: u64,
}

/// How long the leader serves the stream before it is killed.
const SERVE_BEFORE_KILL: Duration = Duration::from_secs(2);

/// Runs the benchmark.
pub fn run(opts: &TakeoverOptions, log: Logger) -> Result<TakeoverReport, BenchError> {
    if !opts.coordinator_program.is_file() {
        return Err(BenchError::Start(format!(
            "{}: not found; build taskyard-coordinator beside taskyard",
            opts.coordinator_program.display()
        )));
    }
    let pg = BenchPostgres::prepare(opts.postgres_url.as_deref())?;
    let logs = super::cluster::TempDir::create()?;
    // One after the other, so that `bench-a` is the first leader.
    let a = Node::start_on_free_ports(opts, &pg, &logs.0, "bench-a", Answer::Serves)?;
    let b = Node::start_on_free_ports(opts, &pg, &logs.0, "bench-b", Answer::NotLeader)?;
    let ports = [a.ports, b.ports];
    let mut nodes = [a, b];
    let clients = format!("{},{}", ports[0].client, ports[1].client);
    let workers_at = format!("{},{}", ports[0].worker, ports[1].worker);
    let workers: Vec<WorkerHandle> = (1..=opts.workers)
        .map(|i| {
            let config = WorkerConfig {
                coordinator: workers_at.clone(),
                worker_id: format!("bench-takeover-{}-{i}", std::process::id()),
                capacity: opts.capacity,
                ..WorkerConfig::default()
            };
            WorkerHandle::spawn_with_registry(config, registry(&StartTimes::default()), log.clone())
        })
        .collect();
    let stream = Stream::start(&clients, opts.interval);
    let mut takeover_ms = Vec::new();
    let mut first_accepted_ms = Vec::new();
    let mut leader = 0;
    for run in 1..=opts.runs.max(1) {
        std::thread::sleep(SERVE_BEFORE_KILL);
        let standby = 1 - leader;
        let killed = nodes[leader].kill()?;
        nodes[standby].wait(Answer::Serves, takeover_limit(opts))?;
        takeover_ms.push(ms(killed.elapsed()));
        while stream.first_accepted_after(killed).is_none() {
            if killed.elapsed() > takeover_limit(opts) {
                return Err(BenchError::Failed(format!(
                    "run {run}: no job accepted within {:?} of the kill",
                    takeover_limit(opts)
                )));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let first = stream.first_accepted_after(killed).unwrap_or(killed);
        first_accepted_ms.push(ms(first.saturating_duration_since(killed)));
        let name = format!("bench-{}-{}", if leader == 0 { "a" } else { "b" }, run + 1);
        nodes[leader] = Node::start(opts, &pg, &logs.0, &name, ports[leader])?;
        nodes[leader].wait(Answer::NotLeader, super::cluster::LEAD_WITHIN)?;
        leader = standby;
    }
    let (accepted, succeeded) = stream.stop();
    for worker in workers {
        worker.stop();
    }
    drop(nodes);
    Ok(TakeoverReport {
        store: "postgres".into(),
        postgres: pg.describe(),
        lease_millis: opts.lease_millis,
        takeover_median_ms: median(&takeover_ms),
        takeover_ms,
        first_accepted_median_ms: median(&first_accepted_ms),
        first_accepted_ms,
        accepted,
        succeeded,
    })
}

/// A takeover slower than the lease plus this is a failure.
fn takeover_limit(opts: &TakeoverOptions) -> Duration {
    Duration::from_millis(opts.lease_millis) + Duration::from_secs(30)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A node's listening ports, chosen free before it starts (a restarted
/// node reuses them, so workers and clients keep their address lists).
#[derive(Clone, Copy)]
struct Ports {
    client: SocketAddr,
    worker: SocketAddr,
}

impl Ports {
    fn free() -> Result<Ports, BenchError> {
        let one = || -> Result<SocketAddr, BenchError> {
            let listener = TcpListener::bind("127.0.0.1:0")
                .map_err(|e| BenchError::Start(format!("no free port: {e}")))?;
            listener
                .local_addr()
                .map_err(|e| BenchError::Start(format!("no free port: {e}")))
        };
        Ok(Ports {
            client: one()?,
            worker: one()?,
        })
    }
}

/// What a node answers a client's `Hello` with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Serves,
    NotLeader,
}

/// A `taskyard-coordinator` process.
struct Node {
    child: Child,
    ports: Ports,
    log: PathBuf,
}

impl Node {
    fn start(
        opts: &TakeoverOptions,
        pg: &BenchPostgres,
        dir: &std::path::Path,
        name: &str,
        ports: Ports,
    ) -> Result<Node, BenchError> {
        let log = dir.join(format!("{name}.log"));
        let stderr = std::fs::File::create(&log)
            .map_err(|e| BenchError::Start(format!("{}: {e}", log.display())))?;
        let child = Command::new(&opts.coordinator_program)
            .args(["--store", "postgres", "--node-name", name])
            .args(["--leader-lease-millis", &opts.lease_millis.to_string()])
            .args(["--client-listen", &ports.client.to_string()])
            .args(["--worker-listen", &ports.worker.to_string()])
            .arg("--http-listen=")
            .args(["--log-level", "info"])
            .env("TASKYARD_POSTGRES_URL", pg.url())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(|e| {
                BenchError::Start(format!("{}: {e}", opts.coordinator_program.display()))
            })?;
        Ok(Node { child, ports, log })
    }

    /// Starts a node on ports free a moment ago and waits for it to answer
    /// `answer`. Another process may take such a port before the node
    /// binds it: a node that exits at once is started again on other
    /// ports, at most three times.
    fn start_on_free_ports(
        opts: &TakeoverOptions,
        pg: &BenchPostgres,
        dir: &std::path::Path,
        name: &str,
        answer: Answer,
    ) -> Result<Node, BenchError> {
        let mut tries = 0;
        loop {
            tries += 1;
            let mut node = Node::start(opts, pg, dir, name, Ports::free()?)?;
            match node.wait(answer, super::cluster::LEAD_WITHIN) {
                Ok(()) => return Ok(node),
                Err(_) if tries < 3 && node.child.try_wait().ok().flatten().is_some() => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// SIGKILL; returns once the process is gone, with the time of the
    /// signal.
    fn kill(&mut self) -> Result<Instant, BenchError> {
        let killed = Instant::now();
        self.child
            .kill()
            .map_err(|e| BenchError::Failed(format!("cannot kill the leader: {e}")))?;
        let _ = self.child.wait();
        Ok(killed)
    }

    fn wait(&mut self, answer: Answer, within: Duration) -> Result<(), BenchError> {
        let started = Instant::now();
        while hello_answer(self.ports.client) != Some(answer) {
            let exited = self.child.try_wait().ok().flatten();
            if exited.is_some() || started.elapsed() > within {
                let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                return Err(BenchError::Failed(format!(
                    "the coordinator at {} did not answer as {answer:?} within {within:?} ({}); its log:\n{log}",
                    self.ports.client,
                    exited.map_or("running".to_string(), |s| s.to_string()),
                )));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the coordinator at `addr` itself answers a `Hello` with (the
/// client library would follow a `NotLeader`); `None`: no answer.
fn hello_answer(addr: SocketAddr) -> Option<Answer> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    let body =
        rmp_serde::to_vec_named(&ClientMessage::Hello(Hello::new(Role::Client, None))).ok()?;
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    stream.write_all(&frame).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).ok()?;
    let len = u32::from_be_bytes(header) as usize;
    if len > 1 << 20 {
        return None;
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).ok()?;
    match rmp_serde::from_slice(&body).ok()? {
        CoordinatorToClient::Hello(_) => Some(Answer::Serves),
        CoordinatorToClient::NotLeader { .. } => Some(Answer::NotLeader),
        _ => None,
    }
}

/// One thread submitting keyed no-op jobs one at a time, following the
/// leader (the client library resends a keyed submission in flight when
/// the leader died).
struct Stream {
    /// When each job was accepted (in order).
    accepted_at: Arc<Mutex<Vec<Instant>>>,
    ids: Arc<Mutex<Vec<taskyard_protocol::JobId>>>,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
    clients: String,
}

impl Stream {
    fn start(clients: &str, interval: Duration) -> Stream {
        let accepted_at = Arc::new(Mutex::new(Vec::new()));
        let ids = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::spawn({
            let (accepted_at, ids, stop) = (accepted_at.clone(), ids.clone(), stop.clone());
            let clients = clients.to_string();
            let run = format!("{}-{}", std::process::id(), SystemClock.now_millis());
            move || {
                let mut client = None;
                let mut n = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    let c = match client.as_mut() {
                        Some(c) => c,
                        None => match Client::connect(&clients) {
                            Ok(c) => client.insert(c),
                            Err(_) => {
                                std::thread::sleep(Duration::from_millis(1));
                                continue;
                            }
                        },
                    };
                    let request = SubmitRequest {
                        idempotency_key: Some(format!("takeover-{run}-{n}")),
                        ..SubmitRequest::new(NOOP, vec![0xa0])
                    };
                    match c.submit(request) {
                        Ok(taskyard_protocol::SubmitAnswer::Accepted { job_id, .. }) => {
                            n += 1;
                            if let (Ok(mut at), Ok(mut ids)) = (accepted_at.lock(), ids.lock()) {
                                at.push(Instant::now());
                                ids.push(job_id);
                            }
                            std::thread::sleep(interval);
                        }
                        Ok(_) => std::thread::sleep(Duration::from_millis(1)),
                        Err(_) => client = None,
                    }
                }
            }
        });
        Stream {
            accepted_at,
            ids,
            stop,
            thread,
            clients: clients.to_string(),
        }
    }

    fn first_accepted_after(&self, at: Instant) -> Option<Instant> {
        let times = self.accepted_at.lock().ok()?;
        times.iter().copied().find(|t| *t > at)
    }

    /// Stops submitting; waits (up to 30 s) for every accepted job to
    /// succeed and returns (accepted, succeeded).
    fn stop(self) -> (u64, u64) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.thread.join();
        let ids = self.ids.lock().map(|ids| ids.clone()).unwrap_or_default();
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut succeeded = 0;
        let mut client = None;
        for id in &ids {
            while Instant::now() < deadline {
                if client.is_none() {
                    client = Client::connect(&self.clients).ok();
                }
                let Some(c) = client.as_mut() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                match c.status(*id) {
                    Ok(Some(view)) if view.state == taskyard_protocol::JobState::Succeeded => {
                        succeeded += 1;
                        break;
                    }
                    Ok(_) => std::thread::sleep(Duration::from_millis(5)),
                    Err(_) => client = None,
                }
            }
        }
        (ids.len() as u64, succeeded)
    }
}

impl TakeoverReport {
    /// The human-readable form.
    pub fn to_text(&self) -> String {
        let list = |v: &[f64]| {
            v.iter()
                .map(|ms| format!("{ms:.0}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut out = String::new();
        let _ = writeln!(
            out,
            "taskyard bench takeover: 2 coordinator processes on {}, leader-lease-millis {}, leader killed (SIGKILL) {} times",
            self.postgres,
            self.lease_millis,
            self.takeover_ms.len()
        );
        let _ = writeln!(
            out,
            "  takeover        median {:.0} ms (runs: {} ms): kill to the standby serving",
            self.takeover_median_ms,
            list(&self.takeover_ms)
        );
        let _ = writeln!(
            out,
            "  first accepted  median {:.0} ms (runs: {} ms): kill to the stream's next accepted job",
            self.first_accepted_median_ms,
            list(&self.first_accepted_ms)
        );
        let _ = writeln!(
            out,
            "  stream          {} jobs accepted, {} seen SUCCEEDED",
            self.accepted, self.succeeded
        );
        out
    }
}
