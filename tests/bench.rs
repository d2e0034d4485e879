//! `taskyard bench` end to end: the real binary, a tiny run, figures that
//! add up. No timing thresholds: only that the harness works.

use serde_json::Value;
use std::process::Command;

fn number(report: &Value, path: &[&str]) -> f64 {
    let mut v = report;
    for key in path {
        v = &v[*key];
    }
    v.as_f64()
        .unwrap_or_else(|| panic!("{} is not a number in {report}", path.join(".")))
}

#[test]
fn tiny_bench_drains_every_job_and_reports_consistent_figures() {
    let output = Command::new(env!("CARGO_BIN_EXE_taskyard"))
        .args([
            "bench",
            "--jobs",
            "500",
            "--latency-jobs",
            "20",
            "--recovery",
            "--json",
        ])
        .env_remove("TASKYARD_COORDINATOR")
        .output()
        .expect("taskyard runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "bench failed: {stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("one JSON document");

    assert_eq!(number(&report, &["throughput", "accepted"]), 500.0);
    assert_eq!(number(&report, &["throughput", "rejected"]), 0.0);
    assert_eq!(
        number(&report, &["throughput", "terminal"]),
        500.0,
        "every job terminal"
    );
    assert_eq!(number(&report, &["throughput", "succeeded"]), 500.0);
    assert!(number(&report, &["throughput", "submit_jobs_per_sec"]) > 0.0);
    assert!(number(&report, &["throughput", "drain_jobs_per_sec"]) > 0.0);
    assert!(number(&report, &["throughput", "drain_secs"]) > 0.0);

    let batches = number(&report, &["persistence", "batches"]);
    let rows = number(&report, &["persistence", "rows"]);
    assert!(batches >= 1.0, "{report}");
    // Each job is written at least once (submitted) and at most three
    // times (submitted, assigned, succeeded) in the phase.
    assert!((500.0..=1500.0).contains(&rows), "rows {rows}");
    let mean = number(&report, &["persistence", "mean_rows_per_batch"]);
    assert!((mean - rows / batches).abs() < 1e-6, "{report}");

    assert_eq!(
        number(&report, &["latency", "submit_to_start", "samples"]),
        20.0
    );
    assert_eq!(
        number(&report, &["latency", "submit_to_done", "samples"]),
        20.0
    );
    let start = &["latency", "submit_to_start"];
    let p50 = number(&report, &[start[0], start[1], "p50_ms"]);
    let p99 = number(&report, &[start[0], start[1], "p99_ms"]);
    let max = number(&report, &[start[0], start[1], "max_ms"]);
    assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{report}");

    // The restart loads every job of both phases.
    assert_eq!(number(&report, &["recovery", "rows"]), 520.0, "{report}");
}

mod common;

#[test]
fn bench_from_a_backlog_with_prefetching_workers_drains_every_job() {
    let report = bench_json(&[
        "--jobs",
        "300",
        "--latency-jobs",
        "0",
        "--backlog",
        "--prefetch",
        "16",
    ]);
    assert_eq!(report["setup"]["backlog"], true, "{report}");
    assert_eq!(number(&report, &["setup", "prefetch"]), 16.0, "{report}");
    assert_eq!(number(&report, &["throughput", "accepted"]), 300.0);
    assert_eq!(number(&report, &["throughput", "succeeded"]), 300.0);
    // From a backlog a job is written when submitted, assigned and
    // finished, and submission is over before the drain: every commit of
    // the phase carries assignments or results.
    let rows = number(&report, &["persistence", "rows"]);
    assert!((600.0..=900.0).contains(&rows), "rows {rows}: {report}");
}

#[test]
fn bench_with_concurrency_keys_and_a_limit_drains_every_job() {
    let report = bench_json(&[
        "--jobs",
        "300",
        "--latency-jobs",
        "0",
        "--concurrency-keys",
        "10",
        "--limit",
        "1",
    ]);
    assert_eq!(number(&report, &["setup", "concurrency_keys"]), 10.0);
    assert_eq!(number(&report, &["setup", "limit"]), 1.0);
    assert_eq!(
        number(&report, &["throughput", "succeeded"]),
        300.0,
        "{report}"
    );
}

/// `taskyard bench ... --json` with `args`: the report, or a panic with
/// stderr.
fn bench_json(args: &[&str]) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_taskyard"))
        .arg("bench")
        .args(args)
        .arg("--json")
        .env_remove("TASKYARD_COORDINATOR")
        .env_remove("TASKYARD_POSTGRES_URL")
        .output()
        .expect("taskyard runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "bench {args:?} failed: {stderr}");
    serde_json::from_slice(&output.stdout).expect("one JSON document")
}

#[test]
fn bench_store_postgres_drains_from_an_empty_schema_and_times_recovery_and_takeover() {
    let Some(pg) = common::postgres::start() else {
        return;
    };
    let url = pg.url();
    let drain = [
        "--store",
        "postgres",
        "--postgres-url",
        &url,
        "--jobs",
        "200",
        "--latency-jobs",
        "0",
        "--recovery",
    ];
    // Twice on one database: the second run starts from an empty schema,
    // so it holds (and recovers) its own 200 jobs only.
    for _ in 0..2 {
        let report = bench_json(&drain);
        assert_eq!(report["setup"]["store"], "postgres", "{report}");
        assert_eq!(number(&report, &["throughput", "succeeded"]), 200.0);
        assert!(number(&report, &["throughput", "drain_jobs_per_sec"]) > 0.0);
        assert!(number(&report, &["persistence", "batches"]) >= 1.0);
        assert_eq!(
            number(&report, &["settled", "jobs_in_memory"]),
            200.0,
            "{report}"
        );
        assert_eq!(number(&report, &["recovery", "rows"]), 200.0, "{report}");
    }

    let recovery = bench_json(&[
        "recovery",
        "--store",
        "postgres",
        "--postgres-url",
        &url,
        "--finished",
        "100",
        "--active",
        "50",
        "--runs",
        "1",
    ]);
    assert_eq!(number(&recovery, &["stored"]), 150.0, "{recovery}");
    assert_eq!(number(&recovery, &["loaded"]), 150.0, "{recovery}");
    assert!(number(&recovery, &["ready_median_ms"]) > 0.0);
    let store = recovery["store"].as_str().expect("store named");
    assert!(
        store.contains("PostgreSQL") && !store.contains(pg.password()),
        "{store}"
    );

    let takeover = bench_json(&[
        "takeover",
        "--store",
        "postgres",
        "--postgres-url",
        &url,
        "--runs",
        "1",
        "--lease-millis",
        "1000",
    ]);
    let times = takeover["takeover_ms"].as_array().expect("takeover_ms");
    assert_eq!(times.len(), 1, "{takeover}");
    assert_eq!(number(&takeover, &["lease_millis"]), 1000.0);
    // The standby cannot lead before the killed leader's lease expired:
    // renewed at most a third of the lease before the kill.
    let median = number(&takeover, &["takeover_median_ms"]);
    assert!(median >= 600.0, "{takeover}");
    let accepted = number(&takeover, &["accepted"]);
    assert!(accepted > 0.0, "{takeover}");
    assert_eq!(number(&takeover, &["succeeded"]), accepted, "{takeover}");

    // A schema a real coordinator checked in to is not dropped.
    let mut db = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    db.execute(
        "INSERT INTO taskyard.members (node, role, seen_at) VALUES ('prod-a', 'leader', now())",
        &[],
    )
    .expect("a member");
    let output = Command::new(env!("CARGO_BIN_EXE_taskyard"))
        .args(["bench", "--store", "postgres", "--postgres-url", &url])
        .args(["--jobs", "10", "--latency-jobs", "0"])
        .env_remove("TASKYARD_COORDINATOR")
        .output()
        .expect("taskyard runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("prod-a"), "{stderr}");
    let kept: i64 = db
        .query_one("SELECT count(*) FROM taskyard.jobs", &[])
        .expect("the schema is still there")
        .get(0);
    assert!(kept > 0, "the jobs of the last run are kept");
}

#[test]
fn bench_takeover_needs_postgres() {
    let output = Command::new(env!("CARGO_BIN_EXE_taskyard"))
        .args(["bench", "takeover"])
        .output()
        .expect("taskyard runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--store postgres"), "{stderr}");
}
