//! Where the guide's blocks run: a directory holding the files its
//! examples name, a `PATH` with the built binaries first, and the
//! addresses the guide writes replaced by the ones the test's processes
//! listen on:
//!
//! - the guide's default ports (7400 clients, 7401 workers, 7480 HTTP;
//!   7410, 7411, 7490 for a second coordinator) are free ports here, or
//!   `taskyard dev`'s. `TASKYARD_COORDINATOR` names the one standing for
//!   7400 (the CLI's default), and `taskyard-coordinator` on `PATH` is a
//!   script that gives the real binary a config file with the three
//!   standing for its default listen addresses (its own flags override
//!   the file, as they would the defaults);
//! - `coord.example`, the coordinator's host in the Security examples, is
//!   `localhost`, for which `cert.pem` is issued (by `ca.pem`);
//!   `client.token` and `worker.token` are there too, and
//!   `/etc/taskyard/` is this directory;
//! - a PostgreSQL URL's host and port (`127.0.0.1:5432`,
//!   `db.example:5432`) are a throwaway cluster's;
//! - the Prometheus example's copy of the alert rules is
//!   `docs/prometheus-alerts.yml` itself.
//!
//! `HOME` is a directory of its own (cargo and rustup keep theirs).

use super::common;
use super::common::dev::Dev;
use super::common::markdown::Block;
use super::common::processes::Killed;
use super::common::shell::{Ran, Shell};
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The ports the guide writes: the defaults, and a second coordinator's.
const GUIDE_PORTS: [u16; 6] = [7400, 7401, 7480, 7410, 7411, 7490];

pub struct Site {
    dir: tempfile::TempDir,
    /// (the guide's port, the one standing for it)
    ports: Vec<(u16, u16)>,
    postgres: Option<SocketAddr>,
}

impl Site {
    /// A site whose default ports are `dev`'s, or free ones without it.
    pub fn new(dev: Option<&Dev>, postgres: Option<SocketAddr>) -> Site {
        let dir = tempfile::tempdir().expect("temp dir");
        let ports = GUIDE_PORTS
            .iter()
            .map(|&port| {
                let dev_port = dev.and_then(|dev| match port {
                    7400 => Some(dev.client.port()),
                    7401 => Some(dev.worker.port()),
                    7480 => Some(dev.http.port()),
                    _ => None,
                });
                (port, dev_port.unwrap_or_else(|| common::free_port().port()))
            })
            .collect();
        let site = Site {
            dir,
            ports,
            postgres,
        };
        site.furnish();
        site
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The port standing for the guide's `port`.
    pub fn port(&self, port: u16) -> u16 {
        self.ports
            .iter()
            .find(|(guide, _)| *guide == port)
            .map_or(port, |(_, here)| *here)
    }

    /// The files the examples name, the binaries and `HOME`.
    fn furnish(&self) {
        let dir = self.dir();
        common::tls::certificates_for(dir, &["localhost"]);
        std::fs::write(dir.join("client.token"), "guide-client-token\n").expect("token");
        std::fs::write(dir.join("worker.token"), "guide-worker-token\n").expect("token");
        std::fs::create_dir_all(dir.join("home")).expect("home");
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).expect("bin");
        for (name, built) in [
            ("taskyard", env!("CARGO_BIN_EXE_taskyard")),
            ("taskyard-worker", env!("CARGO_BIN_EXE_taskyard-worker")),
        ] {
            std::os::unix::fs::symlink(built, bin.join(name)).expect("symlink");
        }
        let defaults = dir.join("default-addresses.toml");
        let listen = |port| format!("\"127.0.0.1:{}\"", self.port(port));
        std::fs::write(
            &defaults,
            format!(
                "client-listen = {}\nworker-listen = {}\nhttp-listen = {}\n",
                listen(7400),
                listen(7401),
                listen(7480)
            ),
        )
        .expect("default addresses");
        let coordinator = env!("CARGO_BIN_EXE_taskyard-coordinator");
        let script = format!(
            "#!/bin/sh\n\
             # The guide's default listen addresses, as this test's ports.\n\
             case \" $* \" in *\" --config \"*|*\" --config=\"*) exec '{coordinator}' \"$@\" ;; esac\n\
             exec '{coordinator}' --config '{}' \"$@\"\n",
            defaults.display()
        );
        let wrapper = bin.join("taskyard-coordinator");
        std::fs::write(&wrapper, script).expect("wrapper");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }

    /// `text` with the guide's addresses and paths replaced by the site's.
    pub fn substitute(&self, text: &str) -> String {
        let mut text = text.to_string();
        for (guide, here) in &self.ports {
            text = replace_port(&text, *guide, *here);
        }
        let dir = self.dir().display().to_string();
        let mut pairs = vec![
            ("coord.example".to_string(), "localhost".to_string()),
            ("/etc/taskyard/".to_string(), format!("{dir}/")),
            (
                "/etc/prometheus/taskyard-alerts.yml".to_string(),
                format!("{}/docs/prometheus-alerts.yml", super::ROOT),
            ),
        ];
        if let Some(postgres) = self.postgres {
            for host in ["127.0.0.1:5432", "db.example:5432"] {
                pairs.push((host.to_string(), postgres.to_string()));
            }
        }
        for (from, to) in pairs {
            text = text.replace(&from, &to);
        }
        text
    }

    /// A shell in the site's directory with its environment.
    pub fn shell(&self, timeout: Duration) -> Shell {
        let dir = self.dir();
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut paths = vec![dir.join("bin")];
        paths.extend(std::env::split_paths(&path));
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let kept = |name: &str, under_home: &str| {
            std::env::var_os(name)
                .or_else(|| home.as_ref().map(|h| h.join(under_home).into_os_string()))
                .unwrap_or_default()
        };
        let coordinator = format!("127.0.0.1:{}", self.port(7400));
        Shell {
            dir: dir.to_path_buf(),
            env: vec![
                ("PATH".into(), std::env::join_paths(paths).expect("PATH")),
                ("HOME".into(), dir.join("home").into_os_string()),
                ("CARGO_HOME".into(), kept("CARGO_HOME", ".cargo")),
                ("RUSTUP_HOME".into(), kept("RUSTUP_HOME", ".rustup")),
                ("TASKYARD_COORDINATOR".into(), OsString::from(coordinator)),
            ],
            env_remove: std::env::vars_os()
                .map(|(name, _)| name)
                .filter(|name| set_by_cargo_for_tests(&name.to_string_lossy()))
                .collect(),
            timeout,
        }
    }
}

/// What cargo sets for a test run (`CARGO_MANIFEST_DIR`, `CARGO_PKG_*`,
/// ...), which a block's `cargo` command must not see: build scripts
/// watch some, so it would find the build's fingerprints changed and
/// rebuild (and the next `cargo test` again). A user's own settings
/// (`CARGO_HOME`, `CARGO_TARGET_DIR`, ...) stay.
fn set_by_cargo_for_tests(name: &str) -> bool {
    const NAMES: &[&str] = &[
        "CARGO",
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_CRATE_NAME",
        "CARGO_BIN_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "CARGO_RUSTC_CURRENT_DIR",
    ];
    NAMES.contains(&name) || name.starts_with("CARGO_PKG_") || name.starts_with("CARGO_BIN_EXE_")
}

/// `text` with `:FROM` replaced by `:TO` where FROM is a whole port.
fn replace_port(text: &str, from: u16, to: u16) -> String {
    let needle = format!(":{from}");
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(&needle) {
        let after = &rest[at + needle.len()..];
        out.push_str(&rest[..at]);
        match after.starts_with(|c: char| c.is_ascii_digit()) {
            true => out.push_str(&needle),
            false => out.push_str(&format!(":{to}")),
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// What a page's commands need besides what they start themselves,
/// running while the page's blocks run: the Jobs page's `exec` progress
/// example runs `sh`, which only a worker with `exec-allow = ["sh"]`
/// does (the Workers page says how to start one).
pub fn page_helper(site: &Site, file: &str) -> Option<Killed> {
    if file != "docs/guide/jobs.md" {
        return None;
    }
    let worker = Command::new(env!("CARGO_BIN_EXE_taskyard-worker"))
        .args(["--coordinator", &format!("127.0.0.1:{}", site.port(7401))])
        .args(["--exec-allow", "sh", "--worker-id", "guide-sh-worker"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start a worker allowed to run sh");
    Some(Killed(vec![worker]))
}

/// What some blocks show, beyond their commands' exit status: `curl`
/// gets a JSON answer that is not an error (it exits 0 on a 4xx too);
/// the Jobs page's `exec` job reports the progress the guide says it
/// does; after the high-availability walkthrough's takeover its sleep job
/// is still RUNNING on its first attempt.
pub fn documented_effects(site: &Site, block: &Block, ran: &[Ran]) -> Result<(), String> {
    curl_is_answered(block, ran)?;
    reports_progress(site, block, ran)?;
    still_running_after_takeover(block, ran)
}

fn curl_is_answered(block: &Block, ran: &[Ran]) -> Result<(), String> {
    for curl in ran.iter().filter(|r| r.text.starts_with("curl ")) {
        let answer: serde_json::Value = serde_json::from_str(&curl.stdout).unwrap_or_default();
        if !answer.is_object() || answer.get("error").is_some() {
            return Err(format!(
                "{}: `{}` was answered {:?}",
                block.name(),
                curl.text,
                curl.stdout
            ));
        }
    }
    Ok(())
}

fn still_running_after_takeover(block: &Block, ran: &[Ran]) -> Result<(), String> {
    let Some(list) = ran
        .iter()
        .find(|r| r.text.contains("still RUNNING, not retried"))
    else {
        return Ok(());
    };
    let sleep = list.stdout.lines().find(|l| l.contains(" sleep "));
    match sleep {
        Some(line) if line.contains(" RUNNING ") && line.contains(" 1/3 ") => Ok(()),
        _ => Err(format!(
            "{}: after the takeover `taskyard list` shows the sleep job not RUNNING on its \
             first attempt:\n{}",
            block.name(),
            list.stdout
        )),
    }
}

fn reports_progress(site: &Site, block: &Block, ran: &[Ran]) -> Result<(), String> {
    let Some(submit) = ran.iter().find(|r| r.text.contains("TASKYARD_PROGRESS")) else {
        return Ok(());
    };
    let job = submit.stdout.trim();
    let coordinator = format!("127.0.0.1:{}", site.port(7400));
    let progress = |view: &serde_json::Value| {
        let p = &view["progress"];
        p["percent"] == 40 && p["message"] == "resizing 2/5"
    };
    let mut last = serde_json::Value::Null;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        let out = common::cli::taskyard(&coordinator, &["status", job, "--json"]);
        last = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if progress(&last) {
            common::cli::taskyard(&coordinator, &["cancel", job]);
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!(
        "{}: job {job} never showed progress 40% \"resizing 2/5\"; last seen: {last}",
        block.name()
    ))
}

/// A block's PostgreSQL URL (`postgres://USER:PASSWORD@HOST:PORT/DB`),
/// whose user and database a throwaway cluster is given.
pub struct PostgresUrl {
    user: String,
    password: String,
    database: String,
}

impl PostgresUrl {
    /// The first URL in `text`, if any.
    pub fn in_block(text: &str) -> Option<PostgresUrl> {
        let start = text.find("postgres://")? + "postgres://".len();
        let url: String = text[start..]
            .chars()
            .take_while(|c| !c.is_whitespace() && *c != '\'' && *c != '"')
            .collect();
        let (credentials, rest) = url.split_once('@')?;
        let (user, password) = credentials.split_once(':')?;
        let (_, database) = rest.split_once('/')?;
        Some(PostgresUrl {
            user: user.to_string(),
            password: password.to_string(),
            database: database.to_string(),
        })
    }

    /// Gives `cluster` the user (with its password) and the database
    /// (owned by it) that the URL names.
    pub fn provide(&self, cluster: &common::postgres::ThrowawayPostgres) {
        let mut client =
            postgres::Client::connect(&cluster.url(), postgres::NoTls).expect("connect");
        let (user, password) = (&self.user, &self.password);
        client
            .batch_execute(&format!(
                "DO $$ BEGIN \
                   IF EXISTS (SELECT FROM pg_roles WHERE rolname = '{user}') THEN \
                     ALTER ROLE \"{user}\" LOGIN PASSWORD '{password}'; \
                   ELSE CREATE ROLE \"{user}\" LOGIN PASSWORD '{password}'; END IF; \
                 END $$"
            ))
            .expect("the URL's user");
        client
            .batch_execute(&format!(
                "CREATE DATABASE \"{}\" OWNER \"{user}\"",
                self.database
            ))
            .expect("the URL's database");
    }
}
