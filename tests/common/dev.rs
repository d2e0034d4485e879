//! `taskyard dev`, the real binary, on free ports of its own with its
//! database in a given directory: what the README and the guide tell a
//! reader to start. Stopped with SIGTERM (Ctrl-C's path) on drop.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Dev {
    child: Child,
    pub client: SocketAddr,
    pub worker: SocketAddr,
    pub http: SocketAddr,
}

impl Dev {
    /// Starts `taskyard dev` in `dir` and waits for its banner.
    pub fn start(dir: &Path) -> Dev {
        let (client, worker, http) = (super::free_port(), super::free_port(), super::free_port());
        let mut child = Command::new(env!("CARGO_BIN_EXE_taskyard"))
            .args(["dev", "--db-path"])
            .arg(dir.join("dev.db"))
            .args(["--client-port", &client.port().to_string()])
            .args(["--worker-port", &worker.port().to_string()])
            .args(["--http-port", &http.port().to_string()])
            .current_dir(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start taskyard dev");
        let stdout = child.stdout.take().expect("stdout");
        let mut banner = String::new();
        let mut lines = BufReader::new(stdout).lines();
        let started = Instant::now();
        while !banner.contains("cluster ready") && started.elapsed() < Duration::from_secs(30) {
            match lines.next() {
                Some(Ok(line)) => banner.push_str(&line),
                _ => break,
            }
        }
        let dev = Dev {
            child,
            client,
            worker,
            http,
        };
        assert!(
            banner.contains("cluster ready"),
            "taskyard dev said: {banner}"
        );
        dev
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        // SAFETY: a plain kill(2) of our own child process.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}
