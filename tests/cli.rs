//! The real `taskyard` binary: against a running coordinator, against an
//! address nothing listens on, and `taskyard dev` as a whole.

mod common;

use common::cli::taskyard;
use common::*;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::Duration;

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

fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn submit_wait_prints_the_result_and_exits_0() {
    let cluster = Cluster::start(1, 2);
    let output = taskyard(
        &cluster.client_addr(),
        &[
            "submit",
            "echo",
            "--payload",
            r#"{"message":"from the cli"}"#,
            "--wait",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(stdout(&output).contains("from the cli"), "{output:?}");
}

#[test]
fn failed_job_exits_1_and_rejected_submission_exits_3() {
    let cluster = Cluster::start(1, 2);
    let addr = cluster.client_addr();
    let failed = taskyard(
        &addr,
        &[
            "submit",
            "fail",
            "--payload",
            r#"{"message":"boom"}"#,
            "--max-attempts",
            "1",
            "--wait",
        ],
    );
    assert_eq!(failed.status.code(), Some(1), "{failed:?}");
    assert!(
        String::from_utf8_lossy(&failed.stdout).contains("boom"),
        "{failed:?}"
    );

    let rejected = taskyard(
        &addr,
        &["submit", "sleep", "--payload", r#"{"millis":"soon"}"#],
    );
    assert_eq!(rejected.status.code(), Some(3), "{rejected:?}");
    let stderr = String::from_utf8_lossy(&rejected.stderr);
    assert!(stderr.contains("payload.millis"), "{stderr}");
}

#[test]
fn list_and_status_show_submitted_jobs_as_json() {
    let cluster = Cluster::start(0, 1);
    let addr = cluster.client_addr();
    let submitted = taskyard(
        &addr,
        &["submit", "thumbnail", "--payload", r#"{"w":3}"#, "--json"],
    );
    assert_eq!(submitted.status.code(), Some(0), "{submitted:?}");
    let answer: serde_json::Value = serde_json::from_slice(&submitted.stdout).expect("json");
    assert_eq!(answer["no_worker"], true, "{answer}");
    let note = String::from_utf8_lossy(&submitted.stderr);
    assert!(
        note.contains("no connected worker runs task type"),
        "{note}"
    );
    let id = answer["job_id"].as_str().expect("job id").to_string();

    let status = taskyard(&addr, &["status", &id, "--json"]);
    let view: serde_json::Value = serde_json::from_slice(&status.stdout).expect("json");
    assert_eq!(view["state"], "QUEUED", "{view}");
    assert_eq!(view["payload"]["w"], 3, "{view}");

    let list = taskyard(&addr, &["list", "--state", "queued"]);
    assert!(stdout(&list).contains(&id), "{list:?}");
}

/// The README's first command: `taskyard dev` starts a working cluster,
/// prints where it listens, runs jobs, and stops cleanly on Ctrl-C.
#[test]
fn dev_runs_a_working_cluster_and_stops_on_ctrl_c() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("dev.toml"),
        "client-listen = \"127.0.0.1:0\"\nworker-listen = \"127.0.0.1:0\"\nhttp-listen = \"127.0.0.1:0\"\n",
    )
    .expect("write config");
    let mut dev = Command::new(env!("CARGO_BIN_EXE_taskyard"))
        .args(["dev", "--config", "dev.toml", "--workers", "2"])
        .current_dir(dir.path())
        .env("RUST_LOG", "error")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start taskyard dev");
    let mut lines = BufReader::new(dev.stdout.take().expect("stdout")).lines();
    let addr = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            l.trim()
                .strip_prefix("clients connect to")
                .map(|a| a.trim().to_string())
        })
        .expect("banner names the client address");
    let dashboard = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            l.trim()
                .strip_prefix("dashboard")
                .map(|a| a.trim().to_string())
        })
        .expect("banner names the dashboard");
    let http: std::net::SocketAddr = dashboard
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix('/'))
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("dashboard URL {dashboard:?}"));
    let page = common::http::Http::new(http).get("/");
    assert_eq!(page.status, 200, "the dashboard is served at {dashboard}");

    let output = taskyard(
        &addr,
        &[
            "submit",
            "echo",
            "--payload",
            r#"{"message":"dev works"}"#,
            "--wait",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(stdout(&output).contains("dev works"));

    let pid = dev.id().to_string();
    let killed = Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let mut status = None;
    wait_until("taskyard dev to exit", Duration::from_secs(10), || {
        status = dev.try_wait().expect("try_wait");
        status.is_some()
    });
    assert_eq!(status.and_then(|s| s.code()), Some(0));
    assert!(dir.path().join("taskyard-data/taskyard.db").exists());
}

#[test]
fn list_shows_the_base_priority_and_the_aged_effective_level() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = taskyard::config::CoordinatorConfig {
        aging_step_millis: 200,
        ..coordinator_config(dir.path())
    };
    let cluster = Cluster {
        coordinator: Some(start_coordinator(config)),
        dir,
        workers: Vec::new(),
    };
    let addr = cluster.client_addr();
    let low = [
        "submit",
        "thumbnail",
        "--payload",
        "{}",
        "--priority",
        "low",
    ];
    assert_eq!(taskyard(&addr, &low).status.code(), Some(0));

    let mut listed = serde_json::Value::Null;
    wait_until(
        "the LOW job aged two steps",
        Duration::from_secs(10),
        || {
            let output = taskyard(&addr, &["list", "--json"]);
            listed = serde_json::from_slice(&output.stdout).unwrap_or_default();
            listed["jobs"][0]["effective_level"] == 2
        },
    );
    assert_eq!(listed["jobs"][0]["priority"], "low", "{listed}");
    assert_eq!(listed["counts"]["QUEUED"], 1, "{listed}");

    let table = stdout(&taskyard(&addr, &["list"]));
    let mut lines = table.lines();
    let header = lines.next().unwrap_or_default();
    assert!(header.contains("PRIORITY  EFFECTIVE"), "{table}");
    let row: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(row[3..5], ["low", "high"], "{table}");
}

/// Aging raises a job's level while it waits in its queue only: once it
/// has run, `status`, `list` and the HTTP API show its base priority.
#[test]
fn a_job_that_aged_while_queued_shows_its_base_priority_once_finished() {
    let mut cluster = Cluster::start_configured(|c| c.aging_step_millis = 200);
    let addr = cluster.client_addr();
    let low = [
        "submit",
        "echo",
        "--payload",
        r#"{"message":"hi"}"#,
        "--priority",
        "low",
    ];
    let id = stdout(&taskyard(&addr, &low)).trim().to_string();
    let mut text = String::new();
    wait_until(
        "the LOW job, queued with no worker, aged two steps",
        Duration::from_secs(10),
        || {
            text = stdout(&taskyard(&addr, &["status", &id]));
            text.contains("priority   low (aged to high while queued)\n")
        },
    );

    cluster.add_worker("worker-0", 1);
    let waited = taskyard(&addr, &["wait", &id]);
    assert_eq!(waited.status.code(), Some(0), "{waited:?}");
    let text = stdout(&taskyard(&addr, &["status", &id]));
    assert!(text.contains("state      SUCCEEDED\n"), "{text}");
    assert!(text.contains("priority   low\n"), "{text}");
    assert!(!text.contains("aged") && !text.contains("high"), "{text}");
    let json: serde_json::Value =
        serde_json::from_slice(&taskyard(&addr, &["status", &id, "--json"]).stdout).expect("json");
    assert_eq!(
        (&json["priority"], &json["effective_level"]),
        (&serde_json::json!("low"), &serde_json::json!(0)),
        "{json}"
    );
    let http = cluster.http().get(&format!("/api/jobs/{id}")).json();
    assert_eq!(http["effective_level"], 0, "{http}");
    let table = stdout(&taskyard(&addr, &["list"]));
    let row: Vec<&str> = table
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(row[3..5], ["low", "low"], "{table}");
}

#[test]
fn the_cli_pointed_at_the_http_port_says_so_and_exits_2() {
    let cluster = Cluster::start(0, 1);
    let http = cluster
        .coordinator()
        .http_addr
        .expect("http on")
        .to_string();
    let output = taskyard(&http, &["list"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "stderr: {stderr}");
    assert!(
        stderr.contains(
            "this is an HTTP port; the client port is the one in client-listen (default 7400)"
        ),
        "{stderr:?}"
    );
}

/// The library says the same as the CLI: a typed `WrongPort`, not a frame size.
#[test]
fn the_client_library_pointed_at_the_http_port_gets_wrong_port() {
    use taskyard::protocol::{ProtocolError, HTTP_CLIENT_PORT_HINT};
    let cluster = Cluster::start(0, 1);
    let http = cluster.coordinator().http_addr.expect("http on");
    match taskyard::client::Client::connect(&http.to_string()) {
        Err(taskyard::client::ClientError::Protocol(ProtocolError::WrongPort { hint })) => {
            assert_eq!(hint, HTTP_CLIENT_PORT_HINT)
        }
        Err(other) => panic!("not WrongPort: {other}"),
        Ok(_) => panic!("an HTTP port accepted a taskyard Hello"),
    }
}

#[test]
fn the_plain_cli_pointed_at_a_tls_port_says_pass_tls_ca_and_exits_2() {
    let certs = tempfile::tempdir().expect("dir");
    let (_ca, cert, key) = tls::certificates(certs.path());
    let cluster = Cluster::start_configured(|c| {
        c.tls_cert = cert;
        c.tls_key = key;
    });
    let output = taskyard(&cluster.client_addr(), &["list"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "stderr: {stderr}");
    assert!(
        stderr.contains("this port speaks TLS: pass --tls-ca"),
        "{stderr:?}"
    );
}

/// The same job in `status --json` and `GET /api/jobs/{id}`: one shape.
#[test]
fn cli_and_http_show_a_job_under_the_same_field_names() {
    let cluster = Cluster::start(1, 1);
    let addr = cluster.client_addr();
    let submitted = taskyard(
        &addr,
        &[
            "submit",
            "echo",
            "--payload",
            r#"{"message":"hi"}"#,
            "--wait",
        ],
    );
    assert_eq!(submitted.status.code(), Some(0), "{submitted:?}");
    let id = stdout(&submitted).lines().next().expect("id").to_string();
    let cli: serde_json::Value =
        serde_json::from_slice(&taskyard(&addr, &["status", &id, "--json"]).stdout).expect("json");
    let http = cluster.http().get(&format!("/api/jobs/{id}")).json();
    assert_eq!(
        cli, http,
        "status --json and the HTTP API agree field for field"
    );
    let listed: serde_json::Value =
        serde_json::from_slice(&taskyard(&addr, &["list", "--json"]).stdout).expect("json");
    let page = cluster.http().get("/api/jobs").json();
    assert_eq!(
        listed["jobs"], page["jobs"],
        "list --json and GET /api/jobs agree"
    );
    assert_eq!(listed["counts"], page["counts"]);
}

/// Id prefixes wherever a job id goes; retry and delete, one and in bulk.
#[test]
fn failed_jobs_are_named_by_prefix_retried_and_deleted_from_the_cli() {
    let cluster = Cluster::start(1, 2);
    let addr = cluster.client_addr();
    let fail = [
        "submit",
        "fail",
        "--payload",
        r#"{"message":"boom"}"#,
        "--max-attempts",
        "1",
    ];
    let ids: Vec<String> = (0..2)
        .map(|_| stdout(&taskyard(&addr, &fail)).trim().to_string())
        .collect();
    for id in &ids {
        let waited = taskyard(&addr, &["wait", &id[..30]]);
        assert_eq!(waited.status.code(), Some(1), "{waited:?}");
    }
    let status = taskyard(&addr, &["status", &ids[0][..30], "--json"]);
    let view: serde_json::Value = serde_json::from_slice(&status.stdout).expect("json");
    assert_eq!(view["job_id"], ids[0].as_str());

    let ambiguous = taskyard(&addr, &["status", &ids[0][..4]]);
    assert_eq!(ambiguous.status.code(), Some(2), "{ambiguous:?}");
    let said = String::from_utf8_lossy(&ambiguous.stderr);
    assert!(
        said.contains("ambiguous") && said.contains(&ids[1]),
        "{said}"
    );

    let retried = taskyard(&addr, &["retry", &ids[0][..30], &ids[1][..30], "--json"]);
    assert_eq!(retried.status.code(), Some(0), "{retried:?}");
    let answer: serde_json::Value = serde_json::from_slice(&retried.stdout).expect("json");
    assert_eq!(answer["done"].as_array().map(Vec::len), Some(2), "{answer}");
    for id in &ids {
        assert_eq!(taskyard(&addr, &["wait", id]).status.code(), Some(1));
    }

    let unconfirmed = taskyard(&addr, &["delete", "--all-failed"]);
    assert_eq!(unconfirmed.status.code(), Some(2), "{unconfirmed:?}");
    assert!(String::from_utf8_lossy(&unconfirmed.stderr).contains("--yes"));
    let one = taskyard(&addr, &["delete", &ids[0][..30]]);
    assert_eq!(one.status.code(), Some(0), "{one:?}");
    let gone = taskyard(&addr, &["status", &ids[0]]);
    assert_eq!(gone.status.code(), Some(5), "not found: {gone:?}");
    let rest = taskyard(&addr, &["delete", "--all-failed", "--yes", "--json"]);
    let answer: serde_json::Value = serde_json::from_slice(&rest.stdout).expect("json");
    assert_eq!(answer["done"], serde_json::json!([ids[1]]), "{answer}");
    let running = stdout(&taskyard(
        &addr,
        &["submit", "sleep", "--payload", r#"{"millis":5000}"#],
    ));
    let refused = taskyard(&addr, &["delete", running.trim()]);
    assert_eq!(refused.status.code(), Some(3), "{refused:?}");
    assert!(
        stdout(&refused).contains("only SUCCEEDED, FAILED or CANCELLED"),
        "{refused:?}"
    );
    let queues = taskyard(&addr, &["queues"]);
    assert_eq!(queues.status.code(), Some(0), "{queues:?}");
    assert!(stdout(&queues).contains("TYPE"), "{queues:?}");
}

#[test]
fn an_unknown_job_exits_5_and_an_unreachable_coordinator_2() {
    let cluster = Cluster::start(0, 1);
    let id = taskyard::protocol::JobId::mint().to_string();
    for command in [
        &["status", &id][..],
        &["wait", &id],
        &["cancel", &id],
        &["result", &id],
    ] {
        let output = taskyard(&cluster.client_addr(), command);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(5), "{command:?}: {stderr}");
        assert_eq!(
            stderr.trim(),
            format!("taskyard: job {id} not found (expired or never existed)")
        );
    }
    let closed = format!("127.0.0.1:{}", closed_port());
    assert_eq!(taskyard(&closed, &["status", &id]).status.code(), Some(2));
}

#[test]
fn result_and_payload_honour_json_and_completions_refuse_it() {
    let cluster = Cluster::start(1, 1);
    let addr = cluster.client_addr();
    let submitted = taskyard(
        &addr,
        &[
            "submit",
            "echo",
            "--payload",
            r#"{"message":"as json"}"#,
            "--wait",
            "--json",
        ],
    );
    assert_eq!(submitted.status.code(), Some(0), "{submitted:?}");
    let job: serde_json::Value = serde_json::from_slice(&submitted.stdout).expect("json");
    let id = job["job_id"].as_str().expect("id").to_string();

    let result = taskyard(&addr, &["result", &id, "--json"]);
    let value: serde_json::Value = serde_json::from_slice(&result.stdout).expect("result json");
    assert_eq!(value["job_id"], id.as_str());
    assert_eq!(value["result"], job["result"], "{value}");
    assert_eq!(value["result_bytes"], job["result_bytes"], "{value}");
    let raw = taskyard(&addr, &["result", &id]);
    assert_eq!(
        Some(String::from_utf8_lossy(&raw.stdout).as_ref()),
        value["result"].as_str()
    );

    let payload = taskyard(&addr, &["payload", &id, "--json"]);
    let value: serde_json::Value = serde_json::from_slice(&payload.stdout).expect("payload json");
    assert_eq!(value["payload"]["message"], "as json", "{value}");

    for refused in [
        &["completions", "bash", "--json"][..],
        &["man", "--json"],
        &["top", "--once", "--json"],
    ] {
        let output = taskyard(&addr, refused);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{refused:?}");
        assert!(output.stdout.is_empty(), "{refused:?}");
        assert!(
            stderr.starts_with("taskyard: --json does not apply here: "),
            "{stderr}"
        );
    }
}

#[test]
fn workers_show_free_slots_and_draining() {
    let cluster = Cluster::start(2, 3);
    let addr = cluster.client_addr();
    let table = stdout(&taskyard(&addr, &["workers"]));
    let header = table.lines().next().unwrap_or_default();
    assert!(
        header.contains("CAPACITY  ACTIVE  FREE  DRAINING  HEARTBEAT"),
        "{table}"
    );
    assert!(
        table.contains("2 worker(s), 6 of 6 slot(s) free"),
        "{table}"
    );
    let json = taskyard(&addr, &["workers", "--json"]);
    let workers: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    let http = cluster.http().get("/api/workers").json();
    let keys = |v: &serde_json::Value| -> Vec<String> {
        let mut keys: Vec<String> = v[0]
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        keys.sort();
        keys
    };
    assert_eq!(keys(&workers), keys(&http), "the HTTP API's names");
    assert_eq!(workers[0]["free"], 3, "{workers}");
    assert_eq!(workers[0]["draining"], false, "{workers}");
}

/// Runs `taskyard ARGS` with no coordinator involved; asserts exit 0.
fn generated(args: &[&str]) -> Vec<u8> {
    let output = taskyard("127.0.0.1:1", args);
    assert_eq!(output.status.code(), Some(0), "{args:?}: {output:?}");
    output.stdout
}

/// Feeds `script` to `shell CHECK_FLAG -` style syntax checkers: every
/// completion script is valid code for its shell.
fn assert_parses(shell: &std::path::Path, flag: &str, script: &[u8]) {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("taskyard-completion");
    std::fs::write(&file, script).expect("write script");
    let output = Command::new(shell)
        .arg(flag)
        .arg(&file)
        .output()
        .expect("run the shell");
    assert!(
        output.status.success(),
        "{} {flag}: {}",
        shell.display(),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn completion_scripts_are_valid_for_their_shells() {
    use common::external::{self, Package::Debian};
    for (shell, flag, package) in [
        ("bash", "-n", "bash"),
        ("zsh", "-n", "zsh"),
        ("fish", "--no-execute", "fish"),
    ] {
        let script = generated(&["completions", shell]);
        let text = String::from_utf8_lossy(&script);
        for sub in [
            "submit",
            "status",
            "workers",
            "completions",
            "man",
            "cluster",
        ] {
            assert!(text.contains(sub), "{shell} script lacks {sub}");
        }
        if let Some(program) = external::program(&[shell], Debian(package)) {
            assert_parses(&program, flag, &script);
        }
    }
}

/// The checked-in manual page; `TASKYARD_BLESS=1` rewrites it from the binary.
const MAN_GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/taskyard.1");

#[test]
fn the_man_page_matches_its_golden_copy_and_formats_cleanly() {
    let page = generated(&["man"]);
    if std::env::var("TASKYARD_BLESS").as_deref() == Ok("1") {
        std::fs::write(MAN_GOLDEN, &page).expect("bless the golden copy");
    }
    let golden = std::fs::read(MAN_GOLDEN).unwrap_or_default();
    assert!(
        page == golden,
        "`taskyard man` differs from tests/golden/taskyard.1; if the change is intended, \
         run `TASKYARD_BLESS=1 cargo test --test cli man_page` and commit the file.\n{}",
        String::from_utf8_lossy(&page)
    );
    use common::external::{self, Package::Debian};
    if let Some(groff) = external::program(&["groff"], Debian("groff-base")) {
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("taskyard.1");
        std::fs::write(&file, &page).expect("write page");
        let output = Command::new(groff)
            .args(["-man", "-Tutf8", "-ww", "-z"])
            .arg(&file)
            .output()
            .expect("run groff");
        assert!(
            output.status.success() && output.stderr.is_empty(),
            "groff warns: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[test]
fn man_dir_writes_a_page_per_command() {
    let dir = tempfile::tempdir().expect("dir");
    let listed = String::from_utf8(generated(&[
        "man",
        "--dir",
        &dir.path().display().to_string(),
    ]))
    .expect("UTF-8");
    for page in ["taskyard.1", "taskyard-submit.1", "taskyard-completions.1"] {
        let path = dir.path().join(page);
        assert!(path.is_file(), "{page} written");
        assert!(listed.contains(&path.display().to_string()), "{listed}");
    }
}

#[test]
fn top_once_shows_counts_queues_and_workers_and_unreachable_exits_2() {
    let cluster = Cluster::start(1, 2);
    let addr = cluster.client_addr();
    let queued = ["submit", "resize", "--payload", "{}", "--priority", "high"];
    assert_eq!(taskyard(&addr, &queued).status.code(), Some(0));
    let output = taskyard(&addr, &["top", "--once"]);
    let frame = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(
        frame.starts_with(&format!("taskyard top  {addr}  ")),
        "{frame}"
    );
    assert!(frame.contains("jobs: 1 QUEUED, 0 RUNNING"), "{frame}");
    let resize = frame
        .lines()
        .find(|l| l.starts_with("resize ") && l.contains("NO WORKER"))
        .unwrap_or_else(|| panic!("a task-type row for resize: {frame}"));
    assert!(
        resize.split_whitespace().nth(1) == Some("1"),
        "one ready: {resize}"
    );
    assert!(frame.contains("worker-0"), "{frame}");
    assert!(
        frame.contains("1 worker(s), 2 of 2 slot(s) free"),
        "{frame}"
    );

    let closed = format!("127.0.0.1:{}", closed_port());
    let output = taskyard(&closed, &["top", "--once"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(output.stdout.is_empty());
}

/// The words after `taskyard` of the `more:` line, if `text` has one.
fn more_hint(text: &str) -> Option<Vec<String>> {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("more: taskyard "))?;
    Some(line.split_whitespace().map(str::to_string).collect())
}

#[test]
fn following_the_more_hints_pages_through_the_same_filtered_listing() {
    let cluster = Cluster::start(0, 1);
    let addr = cluster.client_addr();
    let mut client = cluster.client();
    let mut wanted = Vec::new();
    for i in 0..5 {
        let high = taskyard::protocol::SubmitRequest {
            priority: taskyard::protocol::Priority::High,
            ..jobs::request("thumb", serde_json::json!({ "n": i }))
        };
        wanted.push(jobs::submit(&mut client, high).to_string());
        jobs::submit(&mut client, jobs::request("thumb", serde_json::json!({})));
        jobs::submit(&mut client, jobs::request("other", serde_json::json!({})));
    }
    let first = ["list", "--state", "queued", "--type", "thumb"];
    let mut args: Vec<String> = first.iter().map(|a| a.to_string()).collect();
    args.extend(["--priority", "high", "--limit", "2", "--oldest-first"].map(String::from));
    let mut pages = Vec::new();
    let mut output = taskyard(&addr, &args.iter().map(String::as_str).collect::<Vec<_>>());
    loop {
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        let text = stdout(&output);
        let listed: Vec<String> = wanted
            .iter()
            .filter(|id| text.contains(id.as_str()))
            .cloned()
            .collect();
        pages.push(listed);
        let Some(hint) = more_hint(&text) else { break };
        for flag in [
            "--state",
            "--type",
            "--priority",
            "--limit",
            "--oldest-first",
        ] {
            assert!(hint.contains(&flag.to_string()), "{flag} kept in {hint:?}");
        }
        assert!(pages.len() < 4, "more pages than expected: {pages:?}");
        output = Command::new(env!("CARGO_BIN_EXE_taskyard"))
            .args(&hint)
            .env_remove("TASKYARD_COORDINATOR")
            .output()
            .expect("run the hint");
    }
    let json_page = taskyard(
        &addr,
        &["list", "--type", "other", "--limit", "1", "--json"],
    );
    let page: serde_json::Value =
        serde_json::from_slice(&json_page.stdout).expect("one JSON document");
    let next = page["next_cursor"].as_str().expect("a cursor");
    let stderr = String::from_utf8_lossy(&json_page.stderr);
    assert!(
        stderr.contains(&format!("more: taskyard --coordinator {addr} list --type other --limit 1 --cursor {next} --json")),
        "{stderr}"
    );
    assert_eq!(
        pages,
        vec![
            wanted[0..2].to_vec(),
            wanted[2..4].to_vec(),
            wanted[4..5].to_vec()
        ],
        "three pages of the high thumb jobs, oldest first"
    );
}

#[test]
fn schedule_update_of_one_option_keeps_the_zone_payload_and_the_rest() {
    let cluster = Cluster::start(0, 1);
    let addr = cluster.client_addr();
    let created = taskyard(
        &addr,
        &[
            "schedule",
            "create",
            "nightly",
            "report",
            "--cron",
            "0 3 * * *",
            "--tz",
            "Europe/Berlin",
            "--payload",
            r#"{"message":"custom"}"#,
            "--overlap",
            "buffer-one",
            "--priority",
            "high",
            "--jitter",
            "5s",
        ],
    );
    assert_eq!(created.status.code(), Some(0), "{created:?}");
    let show = |addr: &str| {
        let shown = taskyard(addr, &["schedule", "show", "nightly", "--json"]);
        assert_eq!(shown.status.code(), Some(0), "{shown:?}");
        let view: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("json");
        view["spec"].clone()
    };
    let before = show(&addr);

    let updated = taskyard(
        &addr,
        &["schedule", "update", "nightly", "--max-attempts", "2"],
    );
    assert_eq!(updated.status.code(), Some(0), "{updated:?}");
    let after = show(&addr);
    assert_eq!(after["max_attempts"], 2, "{after}");
    let mut expected = before.clone();
    expected["max_attempts"] = serde_json::json!(2);
    assert_eq!(after, expected, "only max_attempts changed");
    assert_eq!(after["tz"], "Europe/Berlin");
    assert_eq!(after["payload"]["message"], "custom");

    let replaced = taskyard(
        &addr,
        &[
            "schedule",
            "update",
            "nightly",
            "report",
            "--replace",
            "--every",
            "1m",
        ],
    );
    assert_eq!(replaced.status.code(), Some(0), "{replaced:?}");
    let after = show(&addr);
    assert_eq!(after["tz"], serde_json::Value::Null, "{after}");
    assert_eq!(after["overlap"], "skip", "{after}");
    assert_eq!(after["payload"], serde_json::json!({}), "{after}");

    let unknown = taskyard(&addr, &["schedule", "update", "nope", "--jitter", "1s"]);
    assert_eq!(unknown.status.code(), Some(5), "{unknown:?}");
}

#[test]
fn a_cron_field_out_of_range_is_refused_naming_the_field_and_value() {
    let cluster = Cluster::start(0, 1);
    let refused = taskyard(
        &cluster.client_addr(),
        &[
            "schedule",
            "create",
            "bad",
            "report",
            "--cron",
            "0 25 * * *",
        ],
    );
    assert_eq!(refused.status.code(), Some(3), "{refused:?}");
    assert_eq!(
        String::from_utf8_lossy(&refused.stderr),
        "taskyard: schedule refused: cron: hour: 25 is outside 0–23\n"
    );
}

/// `taskyard cluster` without --http, its output captured; TASKYARD_HTTP unset.
fn cluster_without_http(coordinator: &str, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_taskyard"))
        .args(["--coordinator", coordinator, "cluster"])
        .args(extra)
        .env_remove("TASKYARD_COORDINATOR")
        .env_remove("TASKYARD_HTTP")
        .output()
        .expect("run taskyard cluster")
}

#[test]
fn cluster_finds_the_http_listener_through_the_coordinator() {
    let cluster = Cluster::start(0, 1);
    let http = cluster
        .coordinator()
        .http_addr
        .expect("http on")
        .to_string();
    assert_eq!(
        cluster.client().coordinator_http(),
        Some(http.as_str()),
        "the coordinator's Hello names its HTTP listener"
    );
    let output = cluster_without_http(&cluster.client_addr(), &["--json"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let info: serde_json::Value = serde_json::from_slice(&output.stdout).expect("json");
    assert_eq!(info["store"], "sqlite", "{info}");
    let table = cluster_without_http(&cluster.client_addr(), &[]);
    assert!(stdout(&table).contains("answered by:"), "{table:?}");
}

#[test]
fn cluster_without_an_http_address_to_find_names_the_http_flag() {
    let cluster = Cluster::start_configured(|c| c.http_listen = String::new());
    let output = cluster_without_http(&cluster.client_addr(), &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the coordinator at {} names no HTTP address",
            cluster.client_addr()
        )) && stderr.contains("--http ADDR"),
        "{stderr}"
    );

    let nowhere = format!("127.0.0.1:{}", closed_port());
    let output = cluster_without_http(&nowhere, &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with("taskyard: cannot find the HTTP listener: cannot reach coordinator at")
            && stderr.contains("--http ADDR"),
        "{stderr}"
    );
}

#[test]
fn duration_flags_take_units_on_submit_and_wait() {
    let cluster = Cluster::start(0, 1);
    let addr = cluster.client_addr();
    let submitted = taskyard(
        &addr,
        &[
            "submit",
            "report",
            "--payload",
            "{}",
            "--timeout",
            "5m",
            "--json",
        ],
    );
    assert_eq!(submitted.status.code(), Some(0), "{submitted:?}");
    let answer: serde_json::Value = serde_json::from_slice(&submitted.stdout).expect("json");
    let id = answer["job_id"].as_str().expect("job id").to_string();
    let status = taskyard(&addr, &["status", &id, "--json"]);
    let view: serde_json::Value = serde_json::from_slice(&status.stdout).expect("json");
    assert_eq!(view["timeout_ms"], 300_000, "{view}");

    let old = taskyard(
        &addr,
        &[
            "submit",
            "report",
            "--payload",
            "{}",
            "--timeout-ms",
            "1500",
            "--json",
        ],
    );
    let answer: serde_json::Value = serde_json::from_slice(&old.stdout).expect("json");
    let old_id = answer["job_id"].as_str().expect("job id").to_string();
    let status = taskyard(&addr, &["status", &old_id, "--json"]);
    let view: serde_json::Value = serde_json::from_slice(&status.stdout).expect("json");
    assert_eq!(
        view["timeout_ms"], 1500,
        "the old flag counts milliseconds: {view}"
    );

    // Nothing runs `report` here: every wait times out, after the time asked.
    let waited = taskyard(&addr, &["wait", &id, "--timeout", "300ms"]);
    assert_eq!(waited.status.code(), Some(4), "{waited:?}");
    let stderr = String::from_utf8_lossy(&waited.stderr);
    assert!(
        stderr.contains("timed out after 300ms waiting for job"),
        "{stderr}"
    );
    let waited = taskyard(
        &addr,
        &[
            "submit",
            "report",
            "--payload",
            "{}",
            "--wait",
            "--wait-timeout",
            "200ms",
        ],
    );
    assert_eq!(waited.status.code(), Some(4), "{waited:?}");
    let stderr = String::from_utf8_lossy(&waited.stderr);
    assert!(stderr.contains("timed out after 200ms"), "{stderr}");
    let waited = taskyard(&addr, &["wait", &id, "--timeout-secs", "0"]);
    assert_eq!(
        waited.status.code(),
        Some(4),
        "the old flag still works: {waited:?}"
    );
}

/// True for `YYYY-MM-DDTHH:MM:SSZ` at the start of `text`.
fn starts_with_utc_second(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() >= 20
        && text[..20].char_indices().all(|(i, c)| match i {
            4 | 7 => c == '-',
            10 => c == 'T',
            13 | 16 => c == ':',
            19 => c == 'Z',
            _ => c.is_ascii_digit(),
        })
}

#[test]
fn times_for_people_are_rfc_3339_to_the_second_and_json_keeps_millis() {
    let cluster = Cluster::start(0, 1);
    let addr = cluster.client_addr();
    let submitted = taskyard(&addr, &["submit", "report", "--payload", "{}", "--json"]);
    let answer: serde_json::Value = serde_json::from_slice(&submitted.stdout).expect("json");
    let id = answer["job_id"].as_str().expect("job id").to_string();
    let status = stdout(&taskyard(&addr, &["status", &id]));
    let submitted_at = status
        .lines()
        .find_map(|l| l.strip_prefix("submitted"))
        .map(str::trim_start)
        .unwrap_or_else(|| panic!("no submitted line: {status}"));
    assert!(starts_with_utc_second(submitted_at), "{status}");
    assert_eq!(submitted_at.len(), 20, "no fraction: {status}");
    let json = taskyard(&addr, &["status", &id, "--json"]);
    let view: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    assert!(view["submitted_at"].is_i64(), "{view}");

    let args = [
        "schedule",
        "create",
        "nightly",
        "report",
        "--cron",
        "0 3 * * *",
    ];
    let created = taskyard(&addr, &[&args[..], &["--tz", "Europe/Berlin"]].concat());
    assert_eq!(created.status.code(), Some(0), "{created:?}");
    let shown = stdout(&taskyard(&addr, &["schedule", "show", "nightly"]));
    let next = shown
        .lines()
        .skip_while(|l| *l != "next fires:")
        .nth(1)
        .map(str::trim)
        .unwrap_or_else(|| panic!("no next fire: {shown}"));
    // 03:00 in Berlin, whichever offset daylight saving gives it that day.
    assert!(
        next.ends_with(" Europe/Berlin")
            && (next.contains("T03:00:00+01:00") || next.contains("T03:00:00+02:00")),
        "{shown}"
    );
}
