//! A real coordinator on a real (throwaway) PostgreSQL: jobs run and are
//! stored there, a restarted coordinator recovers them and reads history
//! back, a lost connection is opened again, and a bad or unreachable
//! database refuses to start naming the key and address, never the
//! password.

mod common;

use common::*;
use serde_json::json;
use std::process::Command;
use std::time::Duration;
use taskyard::client::WaitOutcome;
use taskyard::config::{PostgresUrl, StoreKind};
use taskyard::protocol::payloads::encode_json;
use taskyard::protocol::{JobId, JobState, SubmitAnswer, SubmitRequest};
use taskyard::scheduler::JobRow;
use taskyard::store::postgres::PostgresStore;
use taskyard::store::Store;

fn echo(message: &str) -> SubmitRequest {
    SubmitRequest::new("echo", encode_json(&json!({ "message": message })))
}

fn on_postgres(url: &str) -> impl FnOnce(&mut taskyard::config::CoordinatorConfig) + '_ {
    move |config| {
        config.store = StoreKind::Postgres;
        config.postgres_url = PostgresUrl::new(url);
        // Only the newest finished job stays in memory: older ones are
        // read back from PostgreSQL through the history readers.
        config.retain_finished_in_memory = 1;
    }
}

fn count(url: &str, sql: &str) -> i64 {
    let mut client = ::postgres::Client::connect(url, ::postgres::NoTls).expect("connect");
    client.query_one(sql, &[]).expect(sql).get(0)
}

#[test]
fn jobs_run_on_postgres_and_a_restarted_coordinator_recovers_them() {
    let Some(pg) = postgres::start() else {
        return;
    };
    let url = pg.url();
    let mut cluster = Cluster::start_configured(on_postgres(&url));
    cluster.add_worker("w1", 4);
    cluster.wait_for_workers(1);
    let mut client = cluster.client();
    let ids: Vec<JobId> = (0..20)
        .map(|i| {
            let mut request = echo(&format!("job {i}"));
            request.idempotency_key = Some(format!("k{i}"));
            match client.submit(request).expect("submit") {
                SubmitAnswer::Accepted { job_id, .. } => job_id,
                SubmitAnswer::Rejected(r) => panic!("rejected: {r}"),
            }
        })
        .collect();
    for id in &ids {
        let outcome = client
            .wait(*id, Duration::from_secs(30), Duration::from_millis(5))
            .expect("wait");
        let WaitOutcome::Finished(view) = outcome else {
            panic!("job {id} did not finish");
        };
        assert_eq!(view.state, JobState::Succeeded);
    }
    drop(client);
    cluster.stop();
    assert_eq!(
        count(
            &url,
            "SELECT count(*) FROM taskyard.jobs WHERE state = 'SUCCEEDED'"
        ),
        20,
        "every job stored as SUCCEEDED in PostgreSQL"
    );
    assert_eq!(
        count(
            &url,
            "SELECT sum(jobs)::bigint FROM taskyard.terminal_counts WHERE task_type = 'echo' AND state = 'SUCCEEDED'"
        ),
        20
    );

    let cluster = Cluster::start_configured(on_postgres(&url));
    assert_eq!(
        cluster.coordinator().recovery.stored,
        20,
        "{:?}",
        cluster.coordinator().recovery
    );
    let mut client = cluster.client();
    let first = client
        .status(ids[0])
        .expect("status")
        .expect("read from history");
    assert_eq!(first.state, JobState::Succeeded);
    assert_eq!(first.result.as_deref(), Some(&b"job 0"[..]));
    // The idempotency key came back with recovery.
    let mut again = echo("job 3 again");
    again.idempotency_key = Some("k3".into());
    match client.submit(again).expect("submit") {
        SubmitAnswer::Accepted { job_id, .. } => assert_eq!(job_id, ids[3]),
        SubmitAnswer::Rejected(r) => panic!("rejected: {r}"),
    }
}

/// PostgreSQL stopped and started again: the commit during the outage
/// fails (nothing of it is stored), the next one reconnects and succeeds.
/// One write connection, so that every batch meets the lost connection
/// (with several, a batch's rows use only some of them; a batch split
/// between writers is `store_conformance`'s subject, and the outage test of
/// `ha_postgres` runs the default two).
#[test]
fn a_lost_connection_is_opened_again_by_the_next_write() {
    let Some(mut pg) = postgres::start() else {
        return;
    };
    let mut store = PostgresStore::open_writers(&pg.url(), 1).expect("open");
    let row = |seq: u64| {
        let mut job = taskyard::scheduler::Job {
            id: JobId::mint(),
            task_type: "echo".into(),
            payload: vec![1].into(),
            priority: taskyard::protocol::Priority::Normal,
            sequence: seq,
            submitted_at: 1,
            state: JobState::Queued,
            attempts: 0,
            max_attempts: 3,
            timeout_ms: 100,
            lease: None,
            worker_id: None,
            assigned_at: None,
            next_retry_at: None,
            result: None,
            error: None,
            idempotency_key: None,
            not_before: None,
            updated_at: 1,
            finished_at: None,
            history: Vec::new(),
            progress: None,
            concurrency_key: None,
        };
        job.updated_at = 2;
        JobRow::whole(&job)
    };
    store.commit(&[row(1)]).expect("commit");
    pg.stop().expect("stop");
    let err = store.commit(&[row(2)]).expect_err("PostgreSQL is down");
    assert!(!err.is_fenced(), "{err}");
    assert!(
        err.to_string()
            .starts_with("PostgreSQL taskyard@127.0.0.1:"),
        "{err}"
    );
    assert!(!err.to_string().contains(pg.password()), "{err}");
    pg.start_again().expect("start again");
    store.commit(&[row(3)]).expect("reconnected");
    let sequences = count(&pg.url(), "SELECT sum(sequence)::bigint FROM taskyard.jobs");
    assert_eq!(sequences, 4, "jobs 1 and 3; nothing of the failed batch");

    // Rows staged when the connection is lost are lost with it: the commit
    // fails, and writes nothing of the rest of the batch on the new one.
    store.stage(&[row(10)]).expect("stage");
    pg.stop().expect("stop");
    pg.start_again().expect("start again");
    let err = store
        .commit(&[row(20)])
        .expect_err("the staged rows are gone");
    assert!(!err.is_fenced(), "{err}");
    store.commit(&[row(40)]).expect("the next batch is fresh");
    let sequences = count(&pg.url(), "SELECT sum(sequence)::bigint FROM taskyard.jobs");
    assert_eq!(
        sequences, 44,
        "jobs 1, 3 and 40; nothing of the batch that lost its connection"
    );
}

#[test]
fn an_unreachable_or_bad_database_refuses_to_start_without_the_password() {
    let dir = tempfile::tempdir().expect("dir");
    let port = free_port().port();
    let cases = [
        (
            format!("postgres://taskyard:hunter2secret@127.0.0.1:{port}/jobs"),
            format!("127.0.0.1:{port}"),
        ),
        (
            "postgres://taskyard:hunter2secret@127.0.0.1:99999999/jobs".to_string(),
            "not a PostgreSQL URL".to_string(),
        ),
    ];
    for (url, named) in cases {
        let mut command = Command::new(env!("CARGO_BIN_EXE_taskyard-coordinator"));
        command
            .args(["--store", "postgres", "--http-listen", ""])
            .args([
                "--client-listen",
                "127.0.0.1:0",
                "--worker-listen",
                "127.0.0.1:0",
            ])
            .arg("--db-path")
            .arg(dir.path().join("unused.db"))
            .env("TASKYARD_POSTGRES_URL", &url);
        let output = exits_within(command, Duration::from_secs(20));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("postgres-url"), "{stderr}");
        assert!(stderr.contains(&named), "{stderr}");
        assert!(!stderr.contains("hunter2secret"), "{stderr}");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(!stdout.contains("hunter2secret"), "{stdout}");
    }
    let mut command = Command::new(env!("CARGO_BIN_EXE_taskyard-coordinator"));
    command
        .args(["--store", "postgres"])
        .env_remove("TASKYARD_POSTGRES_URL");
    let output = exits_within(command, Duration::from_secs(20));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("postgres-url"), "{stderr}");
    assert!(
        !dir.path().join("unused.db").exists(),
        "no SQLite file opened"
    );
}

/// Runs `command` to its end, or kills it after `limit` and fails naming
/// what it printed: a start-up that should fail must not hang the suite.
fn exits_within(mut command: Command, limit: Duration) -> std::process::Output {
    use std::process::Stdio;
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run coordinator");
    let deadline = std::time::Instant::now() + limit;
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let output = child.wait_with_output().expect("output");
            panic!(
                "the coordinator did not exit within {limit:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

/// What the coordinator logs about its store names the database without
/// the password.
#[test]
fn the_log_names_the_database_without_the_password() {
    let Some(pg) = postgres::start() else {
        return;
    };
    let dir = tempfile::tempdir().expect("dir");
    let mut config = coordinator_config(dir.path());
    on_postgres(&pg.url())(&mut config);
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let json = slog_json::Json::default(SharedWriter(lines.clone()));
    let log = slog::Logger::root(slog::Drain::fuse(std::sync::Mutex::new(json)), slog::o!());
    let coordinator =
        taskyard::process::CoordinatorHandle::spawn(config, log).expect("coordinator starts");
    coordinator.stop();
    let text = String::from_utf8_lossy(&lines.lock().expect("lines")).into_owned();
    assert!(text.contains("PostgreSQL taskyard@127.0.0.1:"), "{text}");
    assert!(!text.contains(pg.password()), "{text}");
}

struct SharedWriter(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for SharedWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `sslmode=require` speaks TLS through rustls, verifying the server
/// against `sslrootcert`; without a CA that signed it (the system's roots
/// do not), the connection is refused.
#[test]
fn sslmode_require_connects_over_verified_tls() {
    let dir = tempfile::tempdir().expect("dir");
    let (ca, cert, key) = tls::certificates_for(dir.path(), &["localhost", "127.0.0.1"]);
    // The server runs as nobody when we are root: it must read its key,
    // which PostgreSQL wants owned by it and private.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        for file in [&cert, &key] {
            std::os::unix::fs::chown(file, Some(65534), Some(65534)).expect("chown");
        }
    }
    let (cert_path, key_path) = (cert.display().to_string(), key.display().to_string());
    let Some(pg) = postgres::start_with(&[
        ("ssl", "on"),
        ("ssl_cert_file", &cert_path),
        ("ssl_key_file", &key_path),
    ]) else {
        return;
    };
    let verified = format!("{}?sslmode=require&sslrootcert={}", pg.url(), ca.display());
    let target = taskyard::store::postgres::PgTarget::parse(&verified).expect("url");
    let mut client = target.connect().expect("TLS connection");
    let ssl: bool = client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .expect("pg_stat_ssl")
        .get(0);
    assert!(ssl, "the connection is encrypted");
    let mut store = PostgresStore::open(&verified).expect("the store opens over TLS");
    store.load_for_recovery(10).expect("and reads");

    let unverified = format!("{}?sslmode=require", pg.url());
    let err = PostgresStore::open(&unverified)
        .err()
        .expect("a server no trusted CA signed is refused");
    assert!(!err.to_string().contains(pg.password()), "{err}");
    assert!(
        err.to_string().to_lowercase().contains("certificate"),
        "{err}"
    );
}

/// The benchmarks' seeding writes PostgreSQL through the store's own write
/// path: recovery reads back the active set, the counts and the keys.
#[test]
fn the_bench_seeds_postgres_through_the_store() {
    let Some(pg) = postgres::start() else {
        return;
    };
    let plan = taskyard::bench::seed::SeedPlan {
        finished: 20_000,
        active: 7,
        keyed: true,
        finished_from: 1_000,
        task_type: "bench.noop".into(),
    };
    let seeded = taskyard::bench::seed::seed_postgres(&pg.url(), &plan).expect("seed");
    assert_eq!(seeded.rows, 20_007);
    let stored = PostgresStore::open(&pg.url())
        .expect("open")
        .load_for_recovery(10)
        .expect("load");
    assert_eq!(stored.jobs.len(), 17, "7 active and a window of 10");
    let count = |state| -> u64 {
        let counts = stored.counts.iter().filter(|(_, s, _)| *s == state);
        counts.map(|(_, _, n)| n).sum()
    };
    assert_eq!(count(JobState::Succeeded), 20_000);
    assert_eq!(count(JobState::Queued), 7);
    assert_eq!(stored.idempotency.len(), 20_007);
    assert_eq!(stored.newest.map(|(s, _)| s), Some(20_007));
    eprintln!(
        "seeded {} rows into PostgreSQL in {:.2} s",
        seeded.rows, seeded.secs
    );
}
