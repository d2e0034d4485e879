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
