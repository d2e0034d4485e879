//! What an operator loads into Prometheus and Grafana from `docs/`: the
//! alert rules pass `promtool check rules` and their own unit tests
//! (`promtool test rules`), every Grafana query parses as PromQL, both use
//! only metrics a coordinator exports, and a live coordinator's `/metrics`
//! passes `promtool check metrics`. promtool comes from Debian's
//! `prometheus` package; without it the promtool tests skip (fail under
//! TASKYARD_REQUIRE_EXTERNAL=1, as in `.ci/run`).

mod common;

use common::external::{self, Package};
use common::{wait_until, Cluster};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn docs(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs")
        .join(file)
}

fn promtool() -> Option<PathBuf> {
    external::program(&["promtool"], Package::Debian("prometheus"))
}

/// Runs promtool with `args`, feeding it `stdin`; asserts it succeeded.
fn run(promtool: &Path, args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(promtool)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin)
        .expect("write to promtool");
    let out = child.wait_with_output().expect("promtool ends");
    assert!(
        out.status.success(),
        "promtool {args:?}: {}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn dashboard() -> Value {
    let text = std::fs::read_to_string(docs("grafana-dashboard.json")).expect("dashboard");
    serde_json::from_str(&text).expect("the dashboard is JSON")
}

/// Every PromQL expression of the dashboard: its panels' targets and its
/// query variables.
fn dashboard_queries(dashboard: &Value) -> Vec<String> {
    let panels = dashboard["panels"].as_array().expect("panels");
    let targets = panels
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["expr"].as_str().map(str::to_string));
    targets.collect()
}

/// A dashboard query with Grafana's variables filled in as Grafana would.
fn as_promql(query: &str) -> String {
    query
        .replace("$__rate_interval", "5m")
        .replace("$instance", ".*")
        .replace("$task_type", ".*")
}

/// The metric names a text mentions (`taskyard_…`, `process_…`).
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for prefix in ["taskyard_", "process_"] {
        for (at, _) in text.match_indices(prefix) {
            let preceded = text[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
            let name: String = text[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !preceded {
                names.insert(name);
            }
        }
    }
    names
}

/// Whether `name` is a series a coordinator exports: a family, or a
/// histogram family's `_bucket`, `_sum` or `_count`.
fn exported(name: &str) -> bool {
    let families: Vec<&str> = taskyard::http::metrics::FAMILIES
        .iter()
        .chain(&taskyard::http::process_metrics::PROCESS_FAMILIES)
        .copied()
        .collect();
    families.contains(&name)
        || ["_bucket", "_sum", "_count"]
            .iter()
            .any(|s| name.strip_suffix(s).is_some_and(|f| families.contains(&f)))
}

#[test]
fn the_dashboard_and_the_alerts_use_only_metrics_a_coordinator_exports() {
    let alerts = std::fs::read_to_string(docs("prometheus-alerts.yml")).expect("alert rules");
    let queries = dashboard_queries(&dashboard()).join("\n");
    assert!(queries.len() > 1000, "the dashboard has its queries");
    for (file, text) in [
        ("prometheus-alerts.yml", alerts),
        ("grafana-dashboard.json", queries),
    ] {
        let names = metric_names(&text);
        assert!(names.len() >= 5, "{file} names metrics: {names:?}");
        for name in names {
            assert!(exported(&name), "{file} uses {name}, which is not exported");
        }
    }
    for must in [
        "taskyard_queue_unserved_jobs",
        "taskyard_persistence_commit_failures_total",
    ] {
        assert!(
            metric_names(
                &std::fs::read_to_string(docs("prometheus-alerts.yml")).unwrap_or_default()
            )
            .contains(must),
            "an alert on {must}"
        );
    }
}

#[test]
fn the_dashboard_pulls_every_panel_from_the_chosen_datasource_and_has_unique_ids() {
    let d = dashboard();
    let panels = d["panels"].as_array().expect("panels");
    let ids: BTreeSet<u64> = panels.iter().filter_map(|p| p["id"].as_u64()).collect();
    assert_eq!(ids.len(), panels.len(), "one id per panel");
    for p in panels.iter().filter(|p| p["type"] != "row") {
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{}", p["title"]);
        assert!(p["gridPos"]["w"].as_u64().is_some_and(|w| w <= 24));
    }
    let variables: Vec<&str> = d["templating"]["list"]
        .as_array()
        .expect("variables")
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert_eq!(variables, ["datasource", "instance", "task_type"]);
}

#[test]
fn the_alert_rules_pass_promtool_and_their_unit_tests() {
    let Some(promtool) = promtool() else { return };
    let rules = docs("prometheus-alerts.yml");
    let checked = run(
        &promtool,
        &["check", "rules", &rules.to_string_lossy()],
        b"",
    );
    assert!(
        String::from_utf8_lossy(&checked.stdout).contains("SUCCESS: 7 rules found"),
        "{}",
        String::from_utf8_lossy(&checked.stdout)
    );
    let tests = docs("prometheus-alerts.test.yml");
    run(&promtool, &["test", "rules", &tests.to_string_lossy()], b"");
}

#[test]
fn every_dashboard_query_parses_as_promql() {
    let Some(promtool) = promtool() else { return };
    let queries = dashboard_queries(&dashboard());
    // As recording rules, so promtool parses each expression.
    let rules: Vec<Value> = queries
        .iter()
        .enumerate()
        .map(|(i, q)| json!({ "record": format!("dashboard:query_{i}"), "expr": as_promql(q) }))
        .collect();
    let file = json!({ "groups": [{ "name": "dashboard", "rules": rules }] });
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("dashboard-queries.yml");
    // JSON is YAML: promtool reads it as written.
    std::fs::write(&path, file.to_string()).expect("write");
    let out = run(&promtool, &["check", "rules", &path.to_string_lossy()], b"");
    let expected = format!("SUCCESS: {} rules found", queries.len());
    assert!(String::from_utf8_lossy(&out.stdout).contains(&expected));
}

#[test]
fn a_live_coordinator_s_metrics_pass_promtool_check_metrics() {
    let Some(promtool) = promtool() else { return };
    let cluster = Cluster::start(1, 2);
    let http = cluster.http();
    for (task_type, payload) in [
        ("echo", json!({ "message": "a" })),
        ("fail", json!({ "message": "no" })),
    ] {
        let body = json!({ "task_type": task_type, "payload": payload, "max_attempts": 1 });
        assert_eq!(http.post("/api/jobs", &body).status, 201);
    }
    let body = json!({ "task_type": "nobody-runs-this", "payload": {} });
    assert_eq!(http.post("/api/jobs", &body).status, 201);
    wait_until("both jobs finished", Duration::from_secs(15), || {
        let stats = http.get("/api/stats").json();
        stats["jobs"]["SUCCEEDED"] == 1 && stats["jobs"]["FAILED"] == 1
    });
    let metrics = http.get("/metrics");
    assert_eq!(metrics.status, 200);
    for series in [
        "taskyard_jobs_succeeded_total{task_type=\"echo\"} 1",
        "taskyard_queue_unserved_jobs{task_type=\"nobody-runs-this\"} 1",
        "process_resident_memory_bytes ",
    ] {
        assert!(
            metrics.body.contains(series),
            "{series} in\n{}",
            metrics.body
        );
    }
    let out = run(&promtool, &["check", "metrics"], metrics.body.as_bytes());
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.trim().is_empty(), "promtool's lint found: {said}");
}

/// The shape of a coordinator's `/metrics` that dashboards and alerts rely
/// on, checked in: every family's `# HELP` and `# TYPE` line, and each
/// sample without its value, with the open-ended label values (`task_type`,
/// `schedule`, `version`) written `*`; each distinct line once. So names,
/// types, label sets, the histograms' `le` bounds and the closed label
/// values (`state`, `priority`, `reason`) all show. After an intended change
/// rewrite it with `TASKYARD_BLESS=1 cargo test --test monitoring golden`
/// (and tell whoever keeps dashboards and alerts).
const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/metrics.txt");

/// The lines of `exposition` as [`GOLDEN`] holds them, in first-seen order.
fn shape(exposition: &str) -> Vec<String> {
    let mut seen = BTreeSet::new();
    exposition
        .lines()
        .filter(|line| !line.is_empty())
        .map(|line| match line.starts_with('#') {
            true => line.to_string(),
            false => sample_shape(line),
        })
        .filter(|line| seen.insert(line.clone()))
        .collect()
}

/// `name{key="value",…}` of one sample line: no value, open-ended label
/// values as `*`.
fn sample_shape(line: &str) -> String {
    let series = line.rsplit_once(' ').map_or(line, |(series, _)| series);
    let Some((name, labels)) = series.split_once('{') else {
        return series.to_string();
    };
    let pairs: Vec<String> = label_pairs(labels.strip_suffix('}').unwrap_or(labels))
        .into_iter()
        .map(|(key, value)| match key.as_str() {
            "task_type" | "schedule" | "version" => format!("{key}=\"*\""),
            _ => format!("{key}=\"{value}\""),
        })
        .collect();
    format!("{name}{{{}}}", pairs.join(","))
}

/// The `key="value"` pairs of a label list, values as written (escapes kept).
fn label_pairs(mut text: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    while let Some((key, after)) = text.split_once("=\"") {
        let mut value = String::new();
        let mut end = after.len();
        let mut chars = after.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    value.push(c);
                    value.extend(chars.next().map(|(_, escaped)| escaped));
                }
                '"' => {
                    end = i + 1;
                    break;
                }
                _ => value.push(c),
            }
        }
        pairs.push((key.trim_start_matches(',').to_string(), value));
        text = &after[end..];
    }
    pairs
}

#[test]
fn a_coordinator_exports_the_golden_families_labels_and_buckets() {
    let cluster = Cluster::start(1, 1);
    let http = cluster.http();
    let schedule = json!({
        "name": "nightly", "task_type": "echo", "cron": "0 3 * * *",
        "payload": { "message": "n" }, "paused": true,
    });
    let created = http.post("/api/schedules", &schedule);
    assert_eq!(created.status, 201, "{created:?}");
    let metrics = http.get("/metrics");
    assert_eq!(metrics.status, 200);
    let found = shape(&metrics.body);
    if std::env::var("TASKYARD_BLESS").as_deref() == Ok("1") {
        std::fs::write(GOLDEN, found.join("\n") + "\n").expect("write the golden list");
    }
    let golden = std::fs::read_to_string(GOLDEN).expect("tests/golden/metrics.txt");
    let golden: BTreeSet<&str> = golden.lines().collect();
    let found: BTreeSet<&str> = found.iter().map(String::as_str).collect();
    let missing: Vec<_> = golden.difference(&found).collect();
    let new: Vec<_> = found.difference(&golden).collect();
    assert!(
        missing.is_empty() && new.is_empty(),
        "/metrics no longer matches tests/golden/metrics.txt: gone {missing:#?}, new {new:#?}. \
         Dashboards and alerts depend on these names, types and labels; if the change is \
         intended, run `TASKYARD_BLESS=1 cargo test --test monitoring golden` and commit the file."
    );
}
