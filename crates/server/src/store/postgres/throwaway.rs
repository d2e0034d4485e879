//! A throwaway PostgreSQL cluster for tests and benchmarks: `initdb` in a
//! temporary directory, one server on a free loopback port, password
//! (SCRAM) authentication for user `taskyard`, everything removed on
//! drop. Nothing system-wide is started or changed.
//!
//! PostgreSQL refuses to run as root; when we are root the server binaries
//! run as `nobody` (through `setpriv`), in a directory chowned to it.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The user the cluster's superuser is called, and the database name.
pub const USER: &str = "taskyard";
/// The database tests connect to (created by `initdb`).
pub const DATABASE: &str = "postgres";

/// uid and gid of `nobody` on Debian, which the server runs as when we are
/// root.
const NOBODY: u32 = 65534;

/// How long a start waits for the server to accept connections.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a throwaway cluster could not be started or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ThrowawayError {
    #[error("no PostgreSQL server binaries found (looked in /usr/lib/postgresql/*/bin and `pg_config --bindir`); install postgresql")]
    NotInstalled,
    #[error("throwaway PostgreSQL: {0}")]
    Io(#[from] std::io::Error),
    #[error("throwaway PostgreSQL: {what} failed: {output}")]
    Command { what: String, output: String },
    #[error(
        "throwaway PostgreSQL on {addr} did not accept connections within {secs} s; its log: {log}"
    )]
    NotReady {
        addr: SocketAddr,
        secs: u64,
        log: String,
    },
}

/// A running (or stopped, for an outage test) throwaway cluster. Dropping
/// it stops the server and removes its directory.
pub struct ThrowawayPostgres {
    bin: PathBuf,
    /// The temporary directory: `data/`, `socket/`, `server.log`.
    dir: PathBuf,
    port: u16,
    password: String,
    server: Option<Child>,
}

/// Extra `postgresql.conf` settings (name, value) for `start_with`.
pub type Settings<'a> = &'a [(&'a str, &'a str)];

impl ThrowawayPostgres {
    /// Whether PostgreSQL's server binaries are installed here.
    pub fn available() -> bool {
        find_bindir().is_some()
    }

    /// Starts a fresh cluster with PostgreSQL's default settings
    /// (`fsync` and `synchronous_commit` on).
    pub fn start() -> Result<ThrowawayPostgres, ThrowawayError> {
        ThrowawayPostgres::start_with(&[])
    }

    /// Starts a fresh cluster with `settings` added to its
    /// `postgresql.conf` (e.g. `("max_connections", "200")`).
    pub fn start_with(settings: Settings<'_>) -> Result<ThrowawayPostgres, ThrowawayError> {
        let bin = find_bindir().ok_or(ThrowawayError::NotInstalled)?;
        let dir = make_temp_dir()?;
        let mut cluster = ThrowawayPostgres {
            bin,
            dir,
            port: 0,
            password: random_password(),
            server: None,
        };
        cluster.init(settings)?;
        // A free port can be taken by someone else before the server binds
        // it: try a few.
        let mut last = None;
        for _ in 0..3 {
            cluster.port = free_port()?;
            match cluster.start_again() {
                Ok(()) => return Ok(cluster),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(ThrowawayError::NotInstalled))
    }

    /// `postgres://taskyard:PASSWORD@127.0.0.1:PORT/postgres`.
    pub fn url(&self) -> String {
        self.url_for(DATABASE)
    }

    /// The URL of another database on this cluster.
    pub fn url_for(&self, database: &str) -> String {
        format!(
            "postgres://{USER}:{}@127.0.0.1:{}/{database}",
            self.password, self.port
        )
    }

    /// The password of user `taskyard` (tests check it never leaks).
    pub fn password(&self) -> &str {
        &self.password
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Creates database `name` on this cluster and returns its URL: a
    /// fresh database per test is much cheaper than a cluster per test.
    pub fn create_database(&self, name: &str) -> Result<String, ThrowawayError> {
        let out = self
            .command("psql")
            .args(["-X", "-q", "-h"])
            .arg(self.socket_dir())
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                USER,
                "-d",
                DATABASE,
                "-c",
            ])
            .arg(format!("CREATE DATABASE \"{name}\""))
            .output()?;
        check("psql CREATE DATABASE", &out)?;
        Ok(self.url_for(name))
    }

    /// Whether the server process is running (not stopped or killed).
    pub fn is_running(&mut self) -> bool {
        matches!(self.server.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// Stops the server with a fast shutdown (SIGINT: open transactions are
    /// rolled back, connections closed) and waits for it to exit. The data
    /// stays; `start_again` brings it back on the same port.
    pub fn stop(&mut self) -> Result<(), ThrowawayError> {
        self.signal_and_wait(libc::SIGINT)
    }

    /// Kills the server with SIGKILL, as a crash would: the next start
    /// runs crash recovery.
    pub fn kill(&mut self) -> Result<(), ThrowawayError> {
        self.signal_and_wait(libc::SIGKILL)
    }

    /// Starts the server again (after `stop` or `kill`) on the same port
    /// and data, and waits until it accepts connections. A no-op while it
    /// runs.
    pub fn start_again(&mut self) -> Result<(), ThrowawayError> {
        if self.is_running() {
            return Ok(());
        }
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.dir.join("server.log"))?;
            let child = self
                .command("postgres")
                .arg("-D")
                .arg(self.dir.join("data"))
                .args(["-p", &self.port.to_string()])
                .stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log)
                .spawn()?;
            self.server = Some(child);
            match self.wait_ready(deadline) {
                Ok(()) => return Ok(()),
                // After a kill, the old server's children can hold its
                // shared memory for a moment: the new one exits; retry.
                Err(_) if !self.is_running() && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The server's log so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    fn init(&self, settings: Settings<'_>) -> Result<(), ThrowawayError> {
        let pwfile = self.dir.join("password");
        std::fs::write(&pwfile, &self.password)?;
        std::fs::create_dir(self.socket_dir())?;
        chown_to_server_user(&self.dir)?;
        chown_to_server_user(&pwfile)?;
        chown_to_server_user(&self.socket_dir())?;
        let out = self
            .command("initdb")
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-U", USER, "--auth=scram-sha-256", "--no-sync"])
            .args(["--no-instructions", "-E", "UTF8", "--locale=C"])
            .arg(format!("--pwfile={}", pwfile.display()))
            .output()?;
        check("initdb", &out)?;
        let mut conf = format!(
            "\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n\
             logging_collector = off\nmax_connections = 100\n",
            self.socket_dir().display()
        );
        for (name, value) in settings {
            conf.push_str(&format!("{name} = '{}'\n", value.replace('\'', "''")));
        }
        use std::io::Write;
        std::fs::OpenOptions::new()
            .append(true)
            .open(self.dir.join("data/postgresql.conf"))?
            .write_all(conf.as_bytes())?;
        Ok(())
    }

    fn socket_dir(&self) -> PathBuf {
        self.dir.join("socket")
    }

    /// `program` from the server's bin directory, as the server user.
    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        let mut command = match running_as_root() {
            true => {
                let mut c = Command::new("setpriv");
                c.args([
                    format!("--reuid={NOBODY}"),
                    format!("--regid={NOBODY}"),
                    "--clear-groups".to_string(),
                ])
                .arg(path);
                c
            }
            false => Command::new(path),
        };
        command
            .current_dir(&self.dir)
            .env("PGPASSWORD", &self.password);
        command
    }

    fn wait_ready(&mut self, deadline: Instant) -> Result<(), ThrowawayError> {
        let not_ready = |me: &ThrowawayPostgres| ThrowawayError::NotReady {
            addr: me.addr(),
            secs: READY_TIMEOUT.as_secs(),
            log: me.log(),
        };
        loop {
            if !self.is_running() {
                return Err(not_ready(self));
            }
            if TcpStream::connect_timeout(&self.addr(), Duration::from_millis(200)).is_ok() {
                // Listening is not accepting: ask the server itself.
                let ready = self
                    .command("pg_isready")
                    .args(["-q", "-h", "127.0.0.1", "-p", &self.port.to_string()])
                    .status()?;
                if ready.success() {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                return Err(not_ready(self));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn signal_and_wait(&mut self, signal: libc::c_int) -> Result<(), ThrowawayError> {
        let Some(mut child) = self.server.take() else {
            return Ok(());
        };
        if child.try_wait()?.is_none() {
            // The child is the postmaster itself (setpriv execs it).
            // SAFETY: kill(2) on our own child's pid has no memory effects.
            unsafe { libc::kill(child.id() as libc::pid_t, signal) };
        }
        child.wait()?;
        Ok(())
    }
}

impl Drop for ThrowawayPostgres {
    fn drop(&mut self) {
        // Immediate shutdown: nothing here is kept, so nothing to flush.
        let _ = self.signal_and_wait(libc::SIGQUIT);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The newest `/usr/lib/postgresql/N/bin` with `initdb`, or
/// `pg_config --bindir`.
fn find_bindir() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    if let Some((_, bin)) = found.pop() {
        return Some(bin);
    }
    let out = Command::new("pg_config").arg("--bindir").output().ok()?;
    let bin = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    bin.join("initdb").exists().then_some(bin)
}

fn running_as_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn chown_to_server_user(path: &Path) -> std::io::Result<()> {
    if running_as_root() {
        std::os::unix::fs::chown(path, Some(NOBODY), Some(NOBODY))?;
    }
    Ok(())
}

/// A new private directory under the system's temp dir.
fn make_temp_dir() -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = std::env::temp_dir().join(format!("taskyard-pg-{}", uuid::Uuid::new_v4().simple()));
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    Ok(dir)
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// 32 hex digits: nothing a URL would need to escape.
fn random_password() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

fn check(what: &str, out: &std::process::Output) -> Result<(), ThrowawayError> {
    if out.status.success() {
        return Ok(());
    }
    Err(ThrowawayError::Command {
        what: what.to_string(),
        output: format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    })
}
