//! Real coordinator and worker processes on one PostgreSQL, for the
//! high-availability tests: start, find the leader, kill -9, SIGSTOP and
//! SIGCONT, each process on fixed loopback ports it keeps across restarts.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One `taskyard-coordinator` process and the addresses it listens on.
pub struct CoordinatorProcess {
    pub name: String,
    pub client: SocketAddr,
    pub worker: SocketAddr,
    pub http: SocketAddr,
    pub log: PathBuf,
    url: String,
    extra: Vec<String>,
    child: Option<Child>,
}

impl CoordinatorProcess {
    /// Starts coordinator `name` on `url` with lease `lease_millis`,
    /// logging to `dir/NAME.log`; `extra` flags are added as given.
    pub fn start(name: &str, url: &str, dir: &Path, extra: &[&str]) -> CoordinatorProcess {
        let mut process = CoordinatorProcess {
            name: name.to_string(),
            client: super::free_port(),
            worker: super::free_port(),
            http: super::free_port(),
            log: dir.join(format!("{name}.log")),
            url: url.to_string(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            child: None,
        };
        process.spawn();
        process
    }

    /// Starts the process again (after a kill) on the same ports.
    pub fn spawn(&mut self) {
        let log = super::processes::append_log(&self.log);
        let child = Command::new(env!("CARGO_BIN_EXE_taskyard-coordinator"))
            .args(["--store", "postgres"])
            .env("TASKYARD_POSTGRES_URL", &self.url)
            .args(["--client-listen", &self.client.to_string()])
            .args(["--worker-listen", &self.worker.to_string()])
            .args(["--http-listen", &self.http.to_string()])
            .args(["--node-name", &self.name])
            .args(["--log-format", "json", "--log-level", "info"])
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start taskyard-coordinator");
        self.child = Some(child);
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().map(|c| c.id() as i32).expect("running")
    }

    /// `/readyz` answered 200: this process leads and serves.
    pub fn is_ready(&self) -> bool {
        http_status(self.http, "/readyz") == Some(200)
    }

    /// `/healthz` answered 200 (leader or standby).
    pub fn is_alive(&self) -> bool {
        http_status(self.http, "/healthz") == Some(200)
    }

    pub fn kill_9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.pid().to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill -{signal} {}", self.pid());
    }

    /// SIGTERM, then waits for the exit (SIGKILL and a failure after
    /// 20 s: a stop that hangs fails the test, not CI); returns its code.
    pub fn stop(&mut self) -> Option<i32> {
        let mut child = self.child.take()?;
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return status.code();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{} did not stop within 20 s of SIGTERM", self.name);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for CoordinatorProcess {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            // A stopped process would never see SIGKILL's reaping otherwise.
            let _ = Command::new("kill")
                .args(["-CONT", &child.id().to_string()])
                .status();
        }
        self.kill_9();
    }
}

/// Which of `coordinators` serves as leader, once one does within `within`.
pub fn wait_for_leader(coordinators: &[&CoordinatorProcess], within: Duration) -> usize {
    let deadline = Instant::now() + within;
    loop {
        if let Some(i) = coordinators.iter().position(|c| c.is_ready()) {
            return i;
        }
        assert!(
            Instant::now() < deadline,
            "no coordinator became leader within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The status of `GET path`, or `None` when nothing answered within 1 s.
pub fn http_status(addr: SocketAddr, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// The status and body of `GET path`, or `None` when nothing answered.
pub fn http_body(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    let status = text.get(9..12)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string())?;
    Some((status, body))
}

impl CoordinatorProcess {
    /// Sends SIGSTOP and returns once every thread of the process is
    /// stopped (`T` in /proc), so nothing it does afterwards can predate
    /// the freeze.
    pub fn freeze(&self) {
        self.signal("STOP");
        let tasks = format!("/proc/{}/task", self.pid());
        super::wait_until("every thread to stop", Duration::from_secs(5), || {
            std::fs::read_dir(&tasks).is_ok_and(|dir| {
                dir.flatten().all(|task| {
                    std::fs::read_to_string(task.path().join("stat")).is_ok_and(|stat| {
                        // The state follows the parenthesised command name.
                        stat.rsplit_once(") ")
                            .is_some_and(|(_, rest)| rest.starts_with('T') || rest.starts_with('t'))
                    })
                })
            })
        });
    }
}
